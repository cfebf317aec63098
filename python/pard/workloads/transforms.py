"""Transforms of arrival-time arrays: scale to a target mean rate, cut a window, measure burstiness.

Inputs are 1-D arrays of arrival times in seconds (finite, >= 0, time 0 = the trace's origin, as
the loaders and generators return them).  Outputs are sorted ``float64`` arrays.  Bad arguments
raise ``ValueError`` naming the argument and value.  DESIGN §5 explains why ``scale`` defaults to
``mode="amplify"``.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

import numpy as np
import numpy.typing as npt

from ..errors import PardValueError, PardWarning
from ._common import MAX_ARRIVALS, F64, as_arrivals, check_max_arrivals, check_nonnegative, check_positive, fmt_num, rng, show

__all__ = ["scale", "window", "cv", "bin_counts", "mean_rate"]


def bin_counts(arrivals: npt.ArrayLike, bin: float = 1.0) -> npt.NDArray[np.int64]:
    """Arrivals per bin ``[k*bin, (k+1)*bin)`` for ``k = 0 .. floor(max/bin)``.

    Returns: shape (floor(max(arrivals)/bin) + 1,), int64 (shape (0,) for no arrivals).
    Raises: ValueError for non-finite or negative times, or ``bin`` not finite and > 0.
    """
    a = as_arrivals(arrivals)
    b = check_positive("bin", bin)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    return np.bincount(np.floor(a / b).astype(np.int64)).astype(np.int64)


def mean_rate(arrivals: npt.ArrayLike) -> float:
    """Mean arrival rate, req/s: ``len(arrivals) / (max - min)``.

    Raises: ValueError with fewer than two arrivals or a zero span.
    """
    a = as_arrivals(arrivals)
    if a.size < 2 or a.max() == a.min():
        raise PardValueError(f"need at least two distinct arrival times for a rate, got {a.size} arrival(s)")
    return float(a.size / (a.max() - a.min()))


def cv(arrivals: npt.ArrayLike, bin: float = 1.0) -> float:
    """Coefficient of variation (population std / mean) of the per-bin arrival counts.

    Bins are ``[k*bin, (k+1)*bin)`` from time 0 through the bin holding the last arrival (see
    :func:`bin_counts`).  A Poisson process at ``λ`` req/s gives about ``1/sqrt(λ*bin)``.  The
    planner sizes its estimation window by the CV of per-second counts (DESIGN §3.5).

    Raises: ValueError for no arrivals, non-finite or negative times, or a bad ``bin``.
    """
    c = bin_counts(arrivals, bin)
    if c.size == 0:
        raise PardValueError("cv of an empty arrival array is undefined")
    return float(c.std() / c.mean())


def scale(
    arrivals: npt.ArrayLike,
    rate: float,
    *,
    mode: Literal["amplify", "compress"] = "amplify",
    bin: float = 10.0,
    seed: int | np.random.Generator = 0,
    max_arrivals: float = MAX_ARRIVALS,
) -> F64:
    """Scale a trace to a target mean rate ``rate`` (req/s), two ways (DESIGN §5).

    - ``"amplify"`` (default) keeps the trace's time scale.  It takes the rate envelope (the
      counts ``c_k`` in bins of ``bin`` seconds over ``[0, T)``, ``K`` bins through the last
      arrival), scales it to the target mean and draws a Poisson number of arrivals with mean
      ``c_k * rate * T / n`` in bin ``k``, at uniform times within the bin (seeded).  ``T`` is
      the trace's end: its last arrival plus its mean inter-arrival gap
      ``(max - min) / (n - 1)``, at most ``K*bin``.  So every bin but the last is ``bin`` seconds
      wide and the last one covers only ``[(K-1)*bin, T)``: a trace shorter than ``bin``, or
      one ending inside a bin, is not stretched to a whole bin.  Bursts keep their real length;
      the output's expected mean rate over ``[0, T)`` is ``rate``.  Structure shorter than
      ``bin`` is replaced by Poisson arrivals.
    - ``"compress"`` multiplies every time by ``mean_rate(arrivals) / rate`` (times are measured
      from the first arrival).  Deterministic; bursts shrink or stretch with the trace.

    Args:
        arrivals: shape (n,), seconds >= 0; at least two distinct times.
        rate: target mean rate, req/s, finite and > 0.
        mode: ``"amplify"`` or ``"compress"``.
        bin: envelope bin width in seconds (amplify only), finite and > 0.
        seed: int seed or numpy Generator (amplify only).
        max_arrivals: refuse (amplify only) when the expected output count ``rate * T``
            exceeds this (default :data:`~pard.workloads.MAX_ARRIVALS`).

    Returns: shape (m,), float64, sorted seconds (amplify: in ``[0, T)``; compress: from 0).
    Warns: :class:`pard.errors.PardWarning` when ``arrivals`` is not sorted (saying how many times were
        out of order); they are sorted first, as the CSV loaders do.
    Raises: ValueError for bad arguments or fewer than two distinct arrival times;
        TooManyArrivalsError (a ValueError) when amplifying would exceed ``max_arrivals``.
    """
    a = as_arrivals(arrivals)
    out_of_order = int(np.count_nonzero(np.diff(a) < 0))
    if out_of_order:
        warnings.warn(f"scale: {out_of_order} of {a.size} arrival times were earlier than the one before "
                      f"them; the arrivals were sorted (simulate() rejects unsorted arrivals)",
                      PardWarning, stacklevel=2)
        a = np.sort(a, kind="stable")
    r = check_positive("rate", rate)
    if a.size < 2 or a[-1] == a[0]:
        raise PardValueError(f"need at least two distinct arrival times to scale, got {a.size} arrival(s)")
    if mode == "compress":
        factor = mean_rate(a) / r
        return np.ascontiguousarray((a - a[0]) * factor, dtype=np.float64)
    if mode != "amplify":
        raise PardValueError(f"mode must be 'amplify' or 'compress', got {mode!r}")
    b = check_positive("bin", bin)
    k = math.floor(a[-1] / b) + 1  # bins through the last arrival (bin_counts' size)
    last_start = (k - 1) * b
    # the trace ends one mean gap after its last arrival, inside the last arrival's bin: a partial last
    # bin is only as wide as the time the trace spans there (a whole bin stretched the trace and, at the
    # same count, cut the rate of the bins before it)
    span = min(max(float(a[-1]) + float(a[-1] - a[0]) / (a.size - 1), last_start), k * b)
    check_max_arrivals(f"scale(rate={fmt_num(r)}, mode='amplify') over {fmt_num(span)} s", r * span, max_arrivals)
    counts = bin_counts(a, b)
    widths = np.full(counts.size, b)
    widths[-1] = span - last_start
    expected = counts * (r * span / a.size)
    gen = rng(seed)
    drawn = gen.poisson(expected)
    starts = np.repeat(np.arange(counts.size, dtype=np.float64) * b, drawn)
    out = starts + gen.random(int(drawn.sum())) * np.repeat(widths, drawn)
    np.minimum(out, np.nextafter(span, 0.0), out=out)  # rounding must not reach the end T
    out.sort(kind="stable")
    return out


def window(arrivals: npt.ArrayLike, start: float, duration: float) -> F64:
    """The arrivals in ``[start, start + duration)``, shifted so that ``start`` becomes 0.

    Returns: shape (m,), float64 seconds, in the input's order (sorted if the input was).
    Raises: ValueError for bad times, ``start`` not finite and >= 0, or ``duration`` not finite
        and > 0.
    """
    a = as_arrivals(arrivals)
    s = check_nonnegative("start", start)
    d = check_positive("duration", duration)
    end = s + d
    if not math.isfinite(end):
        raise PardValueError(f"start + duration overflows: {show(start)} + {show(duration)}")
    sel = a[(a >= s) & (a < end)]
    return np.ascontiguousarray(sel - s, dtype=np.float64)
