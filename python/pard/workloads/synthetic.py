"""Seeded synthetic arrival processes: Poisson, bursty (MMPP), flash crowd and diurnal.

Every generator returns a sorted ``float64`` NumPy array of shape (n,): arrival times in seconds
inside ``[0, duration)``, where time 0 is the start of the generated window (not necessarily an
arrival).  The same arguments and seed give the same array.  Bad arguments raise ``ValueError``
naming the argument and value.  DESIGN §5: the bundled real trace is steady (CV of 10 s counts
about 0.27), so evaluations also run :func:`bursty`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import PardValueError, PardWarning

from ._common import MAX_ARRIVALS, F64, check_max_arrivals, check_nonnegative, check_positive, fmt_num, rng, show

__all__ = ["poisson", "bursty", "flash_crowd", "diurnal", "mmpp_parameters", "MMPP"]



#: :func:`bursty` warns when an on/off process (silent calm state) covers fewer cycles than this.
BURSTY_MIN_CYCLES = 3


def _piecewise_poisson(edges: F64, rates: F64, gen: np.random.Generator) -> F64:
    """A Poisson process with rate ``rates[i]`` on ``[edges[i], edges[i+1])``, sorted."""
    lengths = np.diff(edges)
    counts = gen.poisson(rates * lengths)
    starts = np.repeat(edges[:-1], counts)
    out = starts + gen.random(int(counts.sum())) * np.repeat(lengths, counts)
    out.sort(kind="stable")
    return out


def poisson(
    rate: float, duration: float, *, seed: int | np.random.Generator = 0, max_arrivals: float = MAX_ARRIVALS
) -> F64:
    """A homogeneous Poisson process of ``rate`` req/s over ``[0, duration)`` seconds.

    Returns: shape (n,), float64, sorted seconds; ``n`` is Poisson with mean ``rate*duration``.
    Raises: TypeError if ``rate`` or ``duration`` is not a real number (e.g. a str); ValueError if one
        is not finite and > 0;
        TooManyArrivalsError (a ValueError) if ``rate*duration`` exceeds ``max_arrivals``
        (default :data:`MAX_ARRIVALS`), before allocating anything.
    """
    r = check_positive("rate", rate)
    d = check_positive("duration", duration)
    check_max_arrivals(f"poisson(rate={fmt_num(r)}, duration={fmt_num(d)})", r * d, max_arrivals)
    return _piecewise_poisson(np.array([0.0, d]), np.array([r]), rng(seed))


class MMPP:
    """Parameters of a two-state Markov-modulated Poisson process (see :func:`mmpp_parameters`).

    Attributes: ``rate_high``, ``rate_low`` (req/s in the burst / calm state), ``mean_high_s``,
    ``mean_low_s`` (mean sojourn in each state, seconds; exponentially distributed).
    """

    __slots__ = ("rate_high", "rate_low", "mean_high_s", "mean_low_s")

    def __init__(self, rate_high: float, rate_low: float, mean_high_s: float, mean_low_s: float) -> None:
        self.rate_high = rate_high
        self.rate_low = rate_low
        self.mean_high_s = mean_high_s
        self.mean_low_s = mean_low_s

    @property
    def mean_rate(self) -> float:
        """Long-run mean rate, req/s."""
        p = self.mean_high_s / (self.mean_high_s + self.mean_low_s)
        return p * self.rate_high + (1 - p) * self.rate_low

    def count_cv(self, bin: float = 1.0) -> float:
        """Stationary coefficient of variation of the count in a window of ``bin`` seconds.

        ``Var N = m + (λH − λL)² p(1−p) · 2(κT − 1 + e^{−κT})/κ²`` with ``m = mean_rate·T``,
        ``p`` the share of time in the burst state and ``κ = 1/mean_high_s + 1/mean_low_s``.
        """
        t = float(bin)
        p = self.mean_high_s / (self.mean_high_s + self.mean_low_s)
        kappa = 1.0 / self.mean_high_s + 1.0 / self.mean_low_s
        m = self.mean_rate * t
        var = m + (self.rate_high - self.rate_low) ** 2 * p * (1 - p) * _g(kappa, t)
        return math.sqrt(var) / m

    def __repr__(self) -> str:
        return (
            f"MMPP(rate_high={self.rate_high:.4g}, rate_low={self.rate_low:.4g}, "
            f"mean_high_s={self.mean_high_s:.4g}, mean_low_s={self.mean_low_s:.4g})"
        )


def _g(kappa: float, t: float) -> float:
    """2(κT − 1 + e^{−κT})/κ²: the window-T variance factor of a two-state Markov rate."""
    x = kappa * t
    if x < 1e-6:
        return t * t  # series limit
    return 2.0 * (x - 1.0 + math.exp(-x)) / (kappa * kappa)


def mmpp_parameters(
    rate: float, cv: float, *, bin: float = 1.0, burst_s: float = 5.0, burst_share: float = 0.2
) -> MMPP:
    """Two-state MMPP whose mean rate is ``rate`` and whose count CV over ``bin`` s is ``cv``.

    Bursts last ``burst_s`` seconds on average and take ``burst_share`` of the time; the burst and
    calm rates are solved from the variance formula in :meth:`MMPP.count_cv`.  When that would
    need a negative calm rate, the calm state is silent (rate 0) and bursts become rarer (the
    share is solved by bisection) so the CV is still met.

    Raises:
        ValueError: an argument that is not finite and > 0, ``burst_share`` not in (0, 1), or
            ``cv`` below the Poisson floor ``1/sqrt(rate*bin)`` (no process with that mean is
            smoother than Poisson in this model).
    """
    r = check_positive("rate", rate)
    c = check_nonnegative("cv", cv)
    t = check_positive("bin", bin)
    h = check_positive("burst_s", burst_s)
    p0 = check_positive("burst_share", burst_share)
    if p0 >= 1.0:
        raise PardValueError(f"burst_share must lie in (0, 1), got {show(burst_share)}")
    m = r * t
    floor = 1.0 / math.sqrt(m)
    excess = (c * m) ** 2 - m
    if excess < -1e-12 * m:
        raise PardValueError(
            f"cv {show(cv)} is below the Poisson floor 1/sqrt(rate*bin) = {floor:.4g} for rate {show(rate)} "
            f"req/s and bin {show(bin)} s; ask for cv >= {floor:.4g} or use poisson()"
        )
    excess = max(excess, 0.0)

    def lows(p: float) -> float:
        return h * (1.0 - p) / p

    def kappa(p: float) -> float:
        return 1.0 / h + 1.0 / lows(p)

    delta = math.sqrt(excess / (p0 * (1 - p0) * _g(kappa(p0), t)))
    if r - p0 * delta >= 0.0:
        return MMPP(r + (1 - p0) * delta, r - p0 * delta, h, lows(p0))

    # On/off: rate_low = 0, rate_high = r/p; the excess variance r²(1−p)/p·g(κ(p)) falls with p.
    def excess_at(p: float) -> float:
        return r * r * (1 - p) / p * _g(kappa(p), t)

    lo, hi = 1e-9, p0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if excess_at(mid) > excess:
            lo = mid
        else:
            hi = mid
    p = math.sqrt(lo * hi)
    return MMPP(r / p, 0.0, h, lows(p))


def bursty(
    rate: float,
    duration: float,
    cv: float,
    *,
    bin: float = 1.0,
    burst_s: float = 5.0,
    burst_share: float = 0.2,
    exact_mean: bool = True,
    seed: int | np.random.Generator = 0,
    max_arrivals: float = MAX_ARRIVALS,
) -> F64:
    """A bursty arrival process: a two-state MMPP with mean ``rate`` req/s whose per-``bin``
    counts have coefficient of variation ``cv`` (stationary value; :func:`mmpp_parameters`).

    The process alternates calm and burst periods with exponential durations (mean burst
    ``burst_s`` s, ``burst_share`` of the time); arrivals are Poisson at the state's rate.  The
    initial state is drawn from the stationary distribution.  A finite run's measured CV scatters
    around ``cv`` (a few percent over thousands of seconds; more for short runs).

    The stationary MMPP has mean ``rate``, but one window's mean scatters widely around it: with
    5 s bursts at CV 1.5 the mean rate over 300 s has a CV of about 0.25 (``MMPP.count_cv(300)``),
    so a run asked for 1 200 req/s may bring 900 or 1 500.  With ``exact_mean`` (the default) the
    window's burst/calm path is drawn as above and then both state rates are scaled by one factor
    so that the rate integrates to ``rate * duration`` over the window: the expected count of
    every window is exactly ``rate * duration`` (only Poisson noise remains, ``±sqrt(n)``), and
    the burst/calm contrast inside the window, hence the per-bin CV, is unchanged.  A window that
    the path leaves entirely in a silent calm state (on/off regime, ``rate_low = 0``) cannot be
    scaled and stays empty.  ``exact_mean=False`` gives the plain stationary MMPP.

    Warns (:class:`pard.errors.PardWarning`): when the realized count is far from ``rate *
    duration`` (outside half to twice it, for an expected count of at least 10), and when the
    calm state is silent (``rate_low = 0``, high ``cv``) and the window is shorter than
    :data:`BURSTY_MIN_CYCLES` burst/calm cycles (``mean_high_s + mean_low_s``): such a window may
    be all silence or all burst, so its rate and CV can be far from the request.

    Returns: shape (n,), float64, sorted seconds in ``[0, duration)``.
    Raises: ValueError as :func:`mmpp_parameters`, or ``duration`` not finite and > 0;
        TooManyArrivalsError (a ValueError) if ``rate*duration`` exceeds ``max_arrivals``.
    """
    d = check_positive("duration", duration)
    mm = mmpp_parameters(rate, cv, bin=bin, burst_s=burst_s, burst_share=burst_share)
    check_max_arrivals(f"bursty(rate={fmt_num(rate)}, duration={fmt_num(d)}, cv={fmt_num(cv)})",
                       float(rate) * d, max_arrivals)
    gen = rng(seed)
    p = mm.mean_high_s / (mm.mean_high_s + mm.mean_low_s)
    high = bool(gen.random() < p)
    # Draw alternating sojourns until the window is covered (vectorised in chunks).
    n_guess = int(2 * d / (mm.mean_high_s + mm.mean_low_s)) + 8
    starts: list[F64] = []
    states: list[np.ndarray] = []
    t0 = 0.0
    while t0 < d:
        st = (np.arange(n_guess) % 2 == 0) == high
        means = np.where(st, mm.mean_high_s, mm.mean_low_s)
        lens = gen.exponential(means)
        ends = t0 + np.cumsum(lens)
        starts.append(np.concatenate(([t0], ends[:-1])))
        states.append(st)
        if n_guess % 2:
            high = not high
        t0 = float(ends[-1])
    begin = np.concatenate(starts)
    state = np.concatenate(states)
    keep = begin < d
    begin, state = begin[keep], state[keep]
    edges = np.append(begin, d)
    rates = np.where(state, mm.rate_high, mm.rate_low)
    if exact_mean:
        total = float((np.diff(edges) * rates).sum())  # the window's expected count before scaling
        if total > 0.0:
            rates = rates * (mm.mean_rate * d / total)
    out = _piecewise_poisson(edges, rates, gen)
    expected = mm.mean_rate * d
    what = f"bursty(rate={fmt_num(rate)}, duration={fmt_num(d)}, cv={fmt_num(cv)})"
    cycle = mm.mean_high_s + mm.mean_low_s
    short = mm.rate_low == 0.0 and d < BURSTY_MIN_CYCLES * cycle
    hint = (f"the duration covers {d / cycle:.2g} burst/calm cycles (mean cycle {cycle:.3g} s, calm state "
            f"silent); use duration >= {BURSTY_MIN_CYCLES * cycle:.0f} s or a lower cv")
    if expected >= 10 and not 0.5 * expected <= out.size <= 2.0 * expected:
        warnings.warn(f"{what} produced {out.size} arrivals ({out.size / d:.4g} req/s), far from the "
                      f"{expected:.0f} expected (rate x duration): the window is dominated by "
                      f"{'silence' if out.size < expected else 'bursts'}; "
                      + (hint if short else "use a longer duration or a lower cv"),
                      PardWarning, stacklevel=2)
    elif short:
        warnings.warn(f"{what}: the window's rate and cv can be far from the request: {hint}",
                      PardWarning, stacklevel=2)
    return out


def flash_crowd(
    base: float,
    factor: float,
    start: float,
    length: float,
    *,
    duration: float | None = None,
    seed: int | np.random.Generator = 0,
    max_arrivals: float = MAX_ARRIVALS,
) -> F64:
    """Poisson at ``base`` req/s, multiplied by ``factor`` during ``[start, start + length)``.

    ``duration`` (seconds) defaults to ``2*start + length`` (as much calm after the crowd as
    before).  The crowd is clipped to the window.

    Returns: shape (n,), float64, sorted seconds in ``[0, duration)``.
    Raises: ValueError if ``base``, ``factor``, ``length`` or ``duration`` is not finite and > 0,
        or ``start`` is not finite and >= 0, or ``start >= duration`` (the crowd would begin after the
        trace ends: plain Poisson traffic, no crowd); TooManyArrivalsError (a ValueError) if the expected
        count exceeds ``max_arrivals``.
    """
    b = check_positive("base", base)
    f = check_positive("factor", factor)
    s = check_nonnegative("start", start)
    ln = check_positive("length", length)
    d = 2 * s + ln if duration is None else check_positive("duration", duration)
    if s >= d:
        raise PardValueError(f"start must be < duration ({fmt_num(d)} s): the crowd at start={fmt_num(s)} s "
                             f"would begin after the trace ends, leaving no crowd")
    e0, e1 = min(s, d), min(s + ln, d)
    edges = np.array([0.0, e0, e1, d])
    rates = np.array([b, b * f, b])
    check_max_arrivals(f"flash_crowd(base={fmt_num(b)}, factor={fmt_num(f)}, duration={fmt_num(d)})",
                       float((np.diff(edges) * rates).sum()), max_arrivals)
    return _piecewise_poisson(edges, rates, rng(seed))


def diurnal(
    rate: float,
    duration: float,
    *,
    period: float = 86400.0,
    amplitude: float = 0.5,
    peak: float | None = None,
    seed: int | np.random.Generator = 0,
    max_arrivals: float = MAX_ARRIVALS,
) -> F64:
    """A non-homogeneous Poisson process with a daily (or any ``period``) cosine rate.

    ``rate(t) = rate * (1 + amplitude * cos(2π (t - peak) / period))``; ``peak`` (seconds)
    defaults to ``period / 2``.  Generated by thinning a Poisson process of rate
    ``rate * (1 + amplitude)``.  Over whole periods the mean rate is ``rate``.

    Returns: shape (n,), float64, sorted seconds in ``[0, duration)``.
    Raises: ValueError if ``rate``, ``duration`` or ``period`` is not finite and > 0,
        ``amplitude`` is outside [0, 1], or ``peak`` is not finite; TooManyArrivalsError (a
        ValueError) if ``rate * (1 + amplitude) * duration`` (the candidates drawn) exceeds
        ``max_arrivals``.
    """
    r = check_positive("rate", rate)
    d = check_positive("duration", duration)
    per = check_positive("period", period)
    a = check_nonnegative("amplitude", amplitude)
    if a > 1.0:
        raise PardValueError(f"amplitude must lie in [0, 1] (a rate cannot go negative), got {show(amplitude)}")
    pk = per / 2 if peak is None else float(peak)
    if not math.isfinite(pk):
        raise PardValueError(f"peak must be a finite time in seconds, got {show(peak)}")
    lam_max = r * (1 + a)
    check_max_arrivals(f"diurnal(rate={fmt_num(r)}, duration={fmt_num(d)})", lam_max * d, max_arrivals)
    gen = rng(seed)
    cand = _piecewise_poisson(np.array([0.0, d]), np.array([lam_max]), gen)
    lam = r * (1 + a * np.cos(2 * np.pi * (cand - pk) / per))
    keep = gen.random(cand.size) * lam_max < lam
    return np.ascontiguousarray(cand[keep])
