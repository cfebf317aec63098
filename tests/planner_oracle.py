"""The NumPy reference of pard's planner (cpp/include/pard/sync_planner.hpp), for tests only.

The package's planner is the C++ ``SyncPlanner`` (:class:`pard.planner.Planner` wraps it). This module is
the same arithmetic written in NumPy, operation for operation, from which the C++ code was transcribed:
``tests/test_planner_native.py`` feeds both the same statistics and requires equal bits, and other tests
use its pieces (the Monte Carlo quantile, the utilisation, the duration ratio) as independent references.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import deque
from typing import Any, Deque, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from pard.duration_scale import HALF_LIFE_S, PRIOR_BATCHES, SCALE_MAX, SCALE_MIN
from pard.errors import PardValueError
from pard.planner_types import PlannerStage, StageTerms
from pard.policies import PolicySpec, get_policy, paces

F64 = npt.NDArray[np.float64]



def window_for_cv(cv: float) -> float:
    if not np.isfinite(cv) or cv < 0:
        raise PardValueError(f"cv must be a finite number >= 0, got {cv!r}")
    if cv < 0.5:
        return 7.0 - 4.0 * cv
    if cv < 1.0:
        return 5.0 - 4.0 * (cv - 0.5)
    return max(1.0, 3.0 - 2.0 * (cv - 1.0))


def downstream_wait_quantile(
    waits: Sequence[F64], lam: float, rng: np.random.Generator, samples: int = 10_000
) -> float:
    """``w``: the ``lam``-quantile of the sum of one batch wait per downstream stage (DESIGN §3.2).

    Args:
        waits: per downstream stage, its observed batch waits (s), shape ``(n_i,)``, ``n_i >= 1``.
        lam: the quantile in ``[0, 1]``; 0 gives the sum of minima, 1 the sum of maxima.
        rng: the seeded generator the draws come from.
        samples: Monte Carlo sample count ``M``.

    Returns:
        ``w`` in seconds (0 when ``waits`` is empty).
    """
    if not waits:
        return 0.0
    total = np.zeros(samples, dtype=np.float64)
    for w in waits:
        total += w[rng.integers(0, w.size, size=samples)]
    return quantile(total, lam)


def quantile(x: F64, lam: float) -> float:
    """The ``lam``-quantile of ``x`` by nearest rank: the ``round(lam * (M - 1))``-th smallest, O(M).

    ``np.partition`` slows down by about ten times when one value fills much of ``x`` (batch waits are
    often exactly 0, so their sums often are), so the minimum is split off first: if it fills the first
    ``k + 1`` ranks it is the answer; if it fills a large share, the rest is partitioned alone.  The
    value returned is the same k-th smallest in every case.
    """
    k = int(round(lam * (x.size - 1)))
    low = x.min()
    ties = int(np.count_nonzero(x == low))
    if k < ties:
        return float(low)
    if 4 * ties >= x.size:
        rest = x[x != low]
        return float(np.partition(rest, k - ties)[k - ties])
    return float(np.partition(x, k)[k])


def path_total(path: tuple[int, ...], draws: dict[int, F64], memo: dict[tuple[int, ...], F64]) -> F64:
    """Monte Carlo samples of the summed batch waits along ``path`` (suffix sums shared via ``memo``).

    Iterative, from the longest suffix already in ``memo`` back to the path's start: a path may be
    a thousand stages long (issue 13), past Python's recursion limit.
    """
    start = 0
    while start < len(path) and path[start:] not in memo:
        start += 1
    acc = memo[path[start:]] if start < len(path) else None
    for j in range(start - 1, -1, -1):
        acc = draws[path[j]] if acc is None else draws[path[j]] + acc
        memo[path[j:]] = acc
    assert acc is not None, "paths are never empty"
    return acc


def utilisation(busy: F64, wt: F64, dts: F64, workers: F64) -> F64:
    """Each stage's busy fraction ``rho`` in [0, 1] over the planner's window.

    ``rho`` is the larger of the windowed ``sum_c wt_c busy_c / (workers * sum_c wt_c dt_c)`` and the last
    interval's ``busy / (workers * dt)``, so a burst raises it within one sync while a quiet interval does
    not hide a busy window.

    Args:
        busy: (n, T) measured batch-execution seconds per stage and interval of the window.
        wt, dts: (T,) the intervals' weights (the window's linear weights) and lengths (s).
        workers: (n,) serving workers now; a stage with none counts as busy (``rho = 1``).

    Returns:
        (n,) float64, clipped to [0, 1].
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        win = (wt * busy).sum(axis=-1) / (workers * (wt * dts).sum())
        last = busy[:, -1] / (workers * dts[-1])
        rho = np.where(workers > 0, np.maximum(win, last), 1.0)
    return np.clip(np.nan_to_num(rho, nan=1.0), 0.0, 1.0)


#: A batch waited for another batch to end when its batch wait (collection to start) exceeds this share of
#: its own duration.  A batch collected while another ran waits about that batch's whole duration; one
#: formed when its worker freed waits only the formation (0 in the simulator, microseconds live), so any
#: share well inside (0, 1) separates the two.
PRECOLLECTED_WAIT = 0.1


def busy_wait(q: F64, rho_d: F64, backlog: npt.NDArray[np.bool_]) -> F64:
    """Each downstream stage's budgeted wait for ``downstream="busy"`` (s): ``q + rho_d`` where the stage is
    backlogged (a request in the window waited, once collected, for another batch to end: a whole batch on
    top of its queue), else ``max(q, rho_d)`` (the measured queueing delay already holds the residual of
    the batch a request found running, whose upper end ``rho_d`` bounds).  A sweep row that showed it: a
    2-stage chain, the second stage (46.7–82.4 ms batches, one worker) busy back to back at batches of 2.4
    with every batch wait 0; ``q + rho_d`` budgeted it 28 + 54 ms on top of its 54 ms batch where requests
    met 82 ms at the mean and 108 at most, and ``pard`` served 44 req/s where ``pard-paper`` served 74
    (bench/RESULTS.md, issue 9, fourteenth round).

    Args:
        q, rho_d: (m,) the stages' queueing delays and ``rho_i d_i(b_i)`` (s).
        backlog: (m,) whether each stage was backlogged over the planner's window.

    Returns:
        (m,) float64.
    """
    return np.where(backlog, q + rho_d, np.maximum(q, rho_d))


def waited_requests(size: F64, wait_s: Any, duration_s: F64) -> float:
    """Requests in an interval's batches that waited, once collected, for another batch to end: the
    sizes of the batches whose batch wait (collection to start, s) exceeds ``PRECOLLECTED_WAIT`` of their
    own duration (s), summed; 0 when the waits are missing or do not match the batches.

    Args:
        size, wait_s, duration_s: (B,) per batch: its size, its batch wait and its measured duration.
    """
    bw = np.asarray(wait_s, dtype=np.float64)
    return float(size[bw > PRECOLLECTED_WAIT * duration_s].sum()) if bw.size == size.size else 0.0


class DurationScale:
    """Per-stage measured / profiled batch-duration ratio, updated once per planner interval.

    Args:
        n: number of stages.
        half_life_s: half-life of the running ratio (s, > 0).
        prior_batches: the pooled ratio's weight in batches (>= 0; 0: a stage that has run uses its own ratio alone).
    """

    def __init__(self, n: int, *, half_life_s: float = HALF_LIFE_S, prior_batches: float = PRIOR_BATCHES) -> None:
        self._m = np.zeros(n)  # decayed measured batch seconds
        self._p = np.zeros(n)  # decayed profiled batch seconds
        self._w = np.zeros(n)  # decayed batch count
        self._count = np.zeros(n, dtype=np.int64)  # batches ever seen
        self._r1 = np.zeros(n)  # decayed sums of the per-batch ratio and of its square (the spread)
        self._r2 = np.zeros(n)
        self._half_life = float(half_life_s)
        self._kappa = float(prior_batches)
        self._warned = np.zeros(n, dtype=bool)
        self._clipped = np.zeros(n, dtype=bool)  # warned at the clip (the correction's limit) too
        self.scale: F64 = np.ones(n)
        self.cv: F64 = np.zeros(n)

    def update(self, dt_s: float, measured_s: F64, profiled_s: F64, batches: F64,
               ratio_sums: tuple[F64, F64] | None = None) -> F64:
        """Add one interval's batches and return every stage's ratio ``s_k``, shape ``(n,)``.

        Args:
            dt_s: the interval's length (s).
            measured_s, profiled_s: per stage, the interval's summed measured and profiled ``d(b)`` (s).
            batches: per stage, the number of batches they sum.
            ratio_sums: per stage, the interval's sums of ``measured / profiled`` per batch and of its
                square; they set :attr:`cv`, the per-batch ratio's coefficient of variation (pooled over
                the stages like the ratio while a stage has few batches).
        """
        g = 0.5 ** (max(dt_s, 0.0) / self._half_life)
        self._m = self._m * g + measured_s
        self._p = self._p * g + profiled_s
        self._w = self._w * g + batches
        self._count += np.asarray(batches, dtype=np.int64)
        ptot = float(self._p.sum())
        pooled = float(self._m.sum()) / ptot if ptot > 0 else 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            own = np.where(self._p > 0, self._m / self._p, pooled)
        den = self._w + self._kappa
        s = np.where(den > 0, (self._w * own + self._kappa * pooled) / np.where(den > 0, den, 1.0), pooled)
        self.scale = np.minimum(np.maximum(s, SCALE_MIN), SCALE_MAX)
        if ratio_sums is not None:
            self._r1 = self._r1 * g + ratio_sums[0]
            self._r2 = self._r2 * g + ratio_sums[1]
            wt = float(self._w.sum())
            pooled_var = max(float(self._r2.sum()) / wt - (float(self._r1.sum()) / wt) ** 2, 0.0) if wt > 0 else 0.0
            with np.errstate(divide="ignore", invalid="ignore"):
                m1 = np.where(self._w > 0, self._r1 / self._w, 0.0)
                var = np.maximum(np.where(self._w > 0, self._r2 / self._w, 0.0) - m1 * m1, 0.0)
                var = np.where(den > 0, (self._w * var + self._kappa * pooled_var) / np.where(den > 0, den, 1.0),
                               pooled_var)
                self.cv = np.sqrt(var) / self.scale
        return self.scale

    @property
    def measured(self) -> bool:
        return bool(self._count.sum() > 0)

    @property
    def half_life_s(self) -> float:
        return self._half_life

    @property
    def prior_batches(self) -> float:
        return self._kappa


#: Largest accepted Monte Carlo sample count ``samples`` (DESIGN §3.2): each update draws ``samples``
#: float64 values per downstream stage, so 10^6 is already ~8 MB per array per sync.
MAX_SAMPLES = 1_000_000


F64 = npt.NDArray[np.float64]


def _parallel_branches(stages: Sequence[PlannerStage]) -> list[list[int]]:
    """Per stage, the stages on parallel DAG branches: neither one downstream of the other, and joined later
    (a common downstream stage).  ``coherent_branches`` orders a stage by the largest load factor among
    them: a request needs every branch, so when one branch is overloaded (HBF, purging the lowest-budget
    copies) its siblings must not spend compute on those same copies first (LBF)."""
    desc = [{i for p in st.paths for i in p} for st in stages]
    n = len(stages)
    return [[j for j in range(n) if j != k and j not in desc[k] and k not in desc[j] and desc[k] & desc[j]]
            for k in range(n)]


# Columns of one ingested interval's per-stage row (8): arrivals, sum and count of queueing delays, sum and
# count of batch sizes, sums of measured and of profiled batch durations, requests that waited for another
# batch (downstream="busy" only, else 0).


class Planner:
    """PARD's planner (DESIGN §3.5): one object per pipeline run, called once per sync interval.

    Args:
        stages: one :class:`PlannerStage` per stage, in the pipeline's stage order.
        policy: a policy name or :class:`~pard.policies.PolicySpec`; selects the downstream mode, ``eps``
            handling and Dagor's throttle.
        lam: the batch-wait quantile ``lambda`` in ``[0, 1]``; None (default): the policy's own
            (``PolicySpec.lam``), else the paper's 0.1.
        window_s: the initial (and, with ``adapt_window=False``, fixed) estimation window in seconds.
        adapt_window: resize the window by the input's CV (module doc).
        samples: Monte Carlo sample count ``M`` (default 10 000), an int in ``1 ..`` :data:`MAX_SAMPLES`.
        seed: seeds the Monte Carlo draws; same seed and same inputs give the same outputs.
        cv_history_s: how far back the CV of the input rate looks (s).

    Raises:
        ValueError: a parameter out of range (the message names it and its value).
    """

    def __init__(
        self,
        stages: Sequence[PlannerStage],
        *,
        policy: str | PolicySpec = "pard",
        lam: float | None = None,
        window_s: float = 5.0,
        adapt_window: bool = True,
        samples: int = 10_000,
        seed: int = 0,
        cv_history_s: float = 60.0,
        min_cv_intervals: int = 10,
    ) -> None:
        if not stages:
            raise PardValueError("stages must hold at least one PlannerStage, got an empty sequence")
        pol = get_policy(policy)
        if lam is None:
            lam = pol.lam if pol.lam is not None else 0.1
        if not (0.0 <= lam <= 1.0):
            raise PardValueError(f"lam must be in [0, 1], got {lam!r}")
        if not (window_s >= 1e-3 and np.isfinite(window_s)):  # below ~1 ms, now - window rounds to now late in a run
            raise PardValueError(f"window_s must be a finite number of seconds >= 0.001, got {window_s!r}")
        if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or not 1 <= samples <= MAX_SAMPLES:
            raise PardValueError(f"samples must be an int in 1..{MAX_SAMPLES}, got {samples!r}")
        n = len(stages)
        for k, st in enumerate(stages):
            for path in st.paths:
                if not path or any(not (0 <= i < n) or i == k for i in path):
                    raise PardValueError(f"stage {st.name!r}: bad downstream path {path!r} for {n} stages")
        self._stages = list(stages)
        self._policy = get_policy(policy)
        #: Warn (PardWarning) when a stage runs far from its profile (DurationScale.warn_drifted).  A
        #: simulation whose executors run the profile itself turns it off: only its jitter can move them.
        self.warn_drift = True
        self._lam = float(lam)
        self._window0 = float(window_s)
        self._window = float(window_s)
        self._adapt = bool(adapt_window)
        self._samples = int(samples)
        self._rng = np.random.default_rng(seed)
        self._cv_history_s = float(cv_history_s)
        self._min_cv_intervals = int(min_cv_intervals)
        # the window's intervals, oldest first: end (s), length (s), one (n, 8) row block, and the
        # batch waits of the stages the Monte Carlo draws from ({} unless the downstream mode is "full")
        self._ends: Deque[float] = deque()
        self._dts: Deque[float] = deque()
        self._rows: Deque[F64] = deque()
        self._waits: Deque[dict[int, F64]] = deque()
        self._last_batch = np.ones(n)
        self._max_batch = np.array([float(st.max_batch) for st in stages])
        # the stages on some downstream path, in index order (the order of the Monte Carlo draws)
        self._drawn = sorted({i for st in stages for p in st.paths for i in p}) \
            if self._policy.downstream == "full" else []
        self._busy = self._policy.downstream == "busy"
        self._entry = np.array([st.entry for st in stages])
        self._scale = DurationScale(n)
        self._paths = [[(tuple(p), np.asarray(p, dtype=np.intp)) for p in st.paths] for st in stages]
        self._parallel = _parallel_branches(stages) if self._policy.coherent_branches else [[] for _ in stages]
        below = [sorted({i for p in st.paths for i in p}) for st in stages]  # every stage under each
        # pace: the stages whose least service rate a paced stage publishes as path_rate ([]: not paced)
        self._pace_below = [b if paces(self._policy.pace, st.paths) else [] for b, st in zip(below, stages)]
        shed = self._policy.shed_demand and self._policy.drop == "pard"
        self._demand_below = [b if paces(self._policy.pace, st.paths) else [i for i in b if stages[i].llm] if shed
                              else [] for b, st in zip(below, stages)]
        self._below = below if self._policy.coherent_paths else [[] for _ in stages]
        self._d_memo: list[tuple[float, float]] = [(-1.0, 0.0)] * n  # (b, d(b)) last computed per stage
        self._full_d = np.array([float(st.duration(float(st.max_batch))) for st in stages])  # d_k(B), full batches
        self._d_table = [np.asarray(st.duration(np.arange(st.max_batch + 1.0))) for st in stages]  # d_k(0 .. B)
        self._entry_t: Deque[float] = deque()  # the CV history: interval ends (s), the entries' rate in each (req/s)
        self._entry_rates: Deque[float] = deque()
        self._last_now: float | None = None
        self._terms: list[StageTerms] | None = None

    # ------------------------------------------------------------------ properties
    @property
    def window_s(self) -> float:
        """The current estimation window (s)."""
        return self._window

    @property
    def policy(self) -> PolicySpec:
        """The policy whose planner options are applied."""
        return self._policy

    @property
    def lam(self) -> float:
        """The downstream quantile in force."""
        return self._lam

    @property
    def durations(self) -> DurationScale:
        """The online ``d(b)`` correction (:mod:`pard.duration_scale`): its ratio and warning."""
        return self._scale

    @property
    def terms(self) -> list[StageTerms] | None:
        """The terms computed by the last :meth:`update` (None before the first)."""
        return self._terms

    def start(self, now_s: float) -> None:
        """Begin the first interval at ``now_s`` (s), not at clock 0 (a late first arrival would otherwise
        dilute the first window's rates). Raises ValueError after the first update or for a non-finite time."""
        if self._last_now is not None or not math.isfinite(now_s):
            raise PardValueError(f"start must come before the first update (the last was at {self._last_now!r}) "
                                 f"with a finite time, got {now_s!r}")
        self._last_now = float(now_s)

    def prior_terms(self, now_s: float, workers: Sequence[int]) -> list[StageTerms]:
        """The terms one idle interval ending at ``now_s`` (s) would publish, computed on a copy (this
        planner's state and draws untouched): ``PolicySpec.prior_terms`` publishes them before the first
        sync, when the schedulers hold no downstream estimate and no service rate. With
        ``correct_durations`` their ``duration_scale`` is 0, "none measured yet": until the first sync each
        stage corrects these profile-based terms by its own measured / profiled ratio
        (``StageScheduler::effective_terms`` in cpp/include/pard/stage_scheduler.hpp). Raises as :meth:`update`."""
        terms = copy.deepcopy(self).update(now_s, [{} for _ in self._stages], workers)
        if self._policy.correct_durations:
            terms = [dataclasses.replace(t, duration_scale=0.0) for t in terms]
        return terms

    # ------------------------------------------------------------------ the update
    def update(
        self,
        now_s: float,
        stats: Sequence[Mapping[str, Any]],
        workers: Sequence[int],
    ) -> list[StageTerms]:
        """Ingest one interval's statistics and recompute every stage's terms.

        Args:
            now_s: the end of the interval (s, the clock the statistics use); must increase.
            stats: per stage, the samples since the previous call, keyed as ``Simulator.take_stats``:
                ``arrival_s`` (arrival times), ``qdelay_s`` (queueing delay of each request taken into a
                batch), ``batch_size`` and ``batch_wait_s`` (one row per batch).  Missing keys count as
                no samples.
            workers: per stage, the workers serving now (>= 0).

        Returns:
            One :class:`StageTerms` per stage.

        Raises:
            ValueError: lengths do not match the stages, or ``now_s`` does not increase.
        """
        n = len(self._stages)
        if len(stats) != n or len(workers) != n:
            raise PardValueError(f"stats and workers must have one entry per stage ({n}), "
                             f"got {len(stats)} and {len(workers)}")
        prev = self._last_now
        if prev is not None and not now_s > prev:
            raise PardValueError(f"now_s must increase between updates: {now_s!r} after {prev!r}")
        dt = (now_s - prev) if prev is not None else max(now_s, 1e-9)
        self._last_now = float(now_s)

        # 1. ingest this interval: one row per stage; batch waits only where the Monte Carlo reads them
        rows: list[tuple[float, ...]] = []
        waits_now: dict[int, F64] = {}
        drawn = self._drawn
        entry_rate = 0.0
        correct = self._policy.correct_durations
        for k, (st, s) in enumerate(zip(self._stages, stats)):
            n_arr = len(s.get("arrival_s", ()))
            q = np.asarray(s.get("qdelay_s", ()), dtype=np.float64)
            b = np.asarray(s.get("batch_size", ()), dtype=np.float64)
            dm = dp = waited = 0.0
            if (correct or self._busy) and b.size:
                bd = np.asarray(s.get("batch_duration_s", ()), dtype=np.float64)
                pr = self._profiled(k, s.get("batch_size", ()), b)
                dm, dp = float(bd.sum()), float(pr.sum())
                waited = waited_requests(b, s.get("batch_wait_s", ()), bd) if self._busy else 0.0
            rows.append((n_arr, q.sum(), q.size, b.sum(), b.size, dm, dp, waited))
            if drawn and k in drawn:
                waits_now[k] = np.array(s.get("batch_wait_s", ()), dtype=np.float64)
            if st.entry:
                entry_rate += n_arr / dt
        self._ends.append(float(now_s))
        self._dts.append(dt)
        self._rows.append(np.array(rows, dtype=np.float64))
        self._waits.append(waits_now)

        # 2. resize the window by the input's CV
        self._entry_t.append(now_s)
        self._entry_rates.append(entry_rate)
        while self._entry_t and self._entry_t[0] <= now_s - self._cv_history_s:
            self._entry_t.popleft()
            self._entry_rates.popleft()
        if self._adapt and len(self._entry_rates) >= self._min_cv_intervals:
            rates = np.fromiter(self._entry_rates, dtype=np.float64, count=len(self._entry_rates))
            mean = np.add.reduce(rates) / rates.size  # rates.mean() and rates.std() without their wrappers
            if mean > 0:
                self._window = window_for_cv(float(np.sqrt(np.add.reduce((rates - mean) ** 2) / rates.size) / mean))
        win = self._window
        start = now_s - win

        # 3. windowed statistics of every stage at once: arrays (n, T) over the T intervals in the window
        while self._ends[0] <= start:  # the interval just added always stays (its end is now_s)
            self._ends.popleft()
            self._dts.popleft()
            self._rows.popleft()
            self._waits.popleft()
        wt = (np.fromiter(self._ends, dtype=np.float64, count=len(self._ends)) - start) / win
        dts = np.fromiter(self._dts, dtype=np.float64, count=len(self._dts))
        m = np.stack(self._rows, axis=-1)  # (n, 8, T)
        na, qs, qn, bs, bn, m_dm, m_dp, m_wait = m.transpose(1, 0, 2)  # each (n, T)
        with np.errstate(divide="ignore", invalid="ignore"):
            wqn = (wt * qn).sum(axis=-1)
            q_i = np.where(wqn > 0, (wt * qs).sum(axis=-1) / wqn, 0.0)
            wbn = (wt * bn).sum(axis=-1)
            self._last_batch = np.where(wbn > 0, (wt * bs).sum(axis=-1) / wbn,
                                        1.0 if self._policy.idle_batch else self._last_batch)
            b_i = np.minimum(np.maximum(self._last_batch, 1.0), self._max_batch)
            d_i = np.array([self._duration(k, b) for k, b in enumerate(b_i.tolist())])
            rate_i = (wt * na).sum(axis=-1) / (wt * dts).sum()
            rates = na / dts
            rsum = rates.sum(axis=-1)
            if self._policy.instant:
                eps_i = np.zeros(n)
            else:
                smooth = np.add.accumulate(rates, axis=-1) / np.arange(1, dts.size + 1)  # np.cumsum
                eps_i = np.where(rsum > 0, np.abs(rates - smooth).sum(axis=-1) / rsum, 0.0)
            scale_i = self._scale.update(dt, m_dm[:, -1], m_dp[:, -1], bn[:, -1]) if correct else np.ones(n)
            d_i = d_i * scale_i
            w_arr = np.asarray(workers, dtype=np.float64)
            rho_i = None
            throughput = np.where(d_i > 0, w_arr * b_i / d_i, np.inf)
            mu_i = np.where(throughput > 0, rate_i / throughput, np.where(rate_i > 0, np.inf, 0.0))
            d_full = self._full_d * scale_i
            service = w_arr * self._max_batch / d_full
            if self._busy:
                rho_i = utilisation(m_dm, wt, dts, w_arr)
            if self._policy.mu_at_capacity:  # load against what the stage can do at full batches
                cap_mu = np.where(service > 0, rate_i / service, np.where(rate_i > 0, np.inf, 0.0))
                mu_i = cap_mu if self._policy.mu_at_capacity_entry else np.where(self._entry, mu_i, cap_mu)

        # 4. Monte Carlo draws of one batch wait per stage (shared by every path through it)
        mode = self._policy.downstream
        draws: dict[int, F64] = {}
        for i in drawn:
            seen = [w[i] for w in self._waits if w[i].size]
            if not seen:  # nothing observed yet: uniform on [0, d_i(b_i)]
                draws[i] = self._rng.uniform(0.0, d_i[i], size=self._samples)
            else:
                wi = seen[0] if len(seen) == 1 else np.concatenate(seen)
                draws[i] = wi.take(self._rng.integers(0, wi.size, size=self._samples, dtype=np.int32))

        # 5. downstream terms, maximised over paths (each path's sums computed once)
        totals: dict[tuple[int, ...], F64] = {}
        out: list[StageTerms] = []
        demand = rate_i.copy()
        for k, below in enumerate(self._demand_below):  # what a stage would forward unpaced, without drops for below
            demand[below] = np.maximum(demand[below], min(rate_i[k], service[k]))
        mu_l, eps_l, q_l, rate_l, b_l = mu_i.tolist(), eps_i.tolist(), q_i.tolist(), rate_i.tolist(), b_i.tolist()
        service_l, scale_l, demand_l = service.tolist(), scale_i.tolist(), demand.tolist()
        if correct and not self._scale.measured:  # no batch anywhere yet: publish "none measured yet" (0), so
            scale_l = [0.0] * n                   # each stage corrects by its own ratio (as before the first sync)
        hi_on = self._policy.overload_upper
        backlog = m_wait.sum(axis=-1) > 0  # a request in the window waited for another batch (busy_wait)
        for k in range(n):
            best = best_w = hi = lo = lm = 0.0
            if mode != "none":
                for path, idx in self._paths[k]:
                    sq = float(q_i[idx].sum())
                    sd = float(d_i[idx].sum())
                    wq = 0.0
                    if mode == "sf":
                        val = sd
                    elif mode == "lower":
                        val = sq + sd
                    elif mode == "upper":
                        val = sq + 2.0 * sd
                        wq = sd
                    elif mode == "busy":  # each stage's wait: busy_wait
                        assert rho_i is not None
                        val = sd + float(busy_wait(q_i[idx], rho_i[idx] * d_i[idx], backlog[idx]).sum())
                        wq = val - sd - sq
                    else:
                        wq = _quantile(path_total(path, draws, totals), self._lam)
                        val = sq + sd + wq
                    if val > best:
                        best, best_w = val, wq
                    if hi_on and sq + 2.0 * sd > hi:  # overload_upper: pard-upper's term, used while overloaded
                        hi = sq + 2.0 * sd
                    if mode == "busy":  # step 1b's floor (stage_scheduler.hpp); a tier served first's term
                        lo, lm = max(lo, sq + sd), max(lm, float(np.minimum(q_i[idx], 0.5 * d_i[idx]).sum()) + sd)
            # Dagor's (1 - alpha) admission throttle is applied by the C++ stage scheduler itself from
            # the published queue_delay_s.
            out.append(StageTerms(
                downstream_s=best, mu=max([mu_l[k], *(mu_l[j] for j in self._parallel[k]),
                                           *(mu_l[j] for j in self._below[k])]),
                eps=eps_l[k], queue_delay_s=q_l[k],
                admit_fraction=1.0, in_rate=rate_l[k], batch_size=b_l[k],
                wait_quantile_s=best_w, window_s=win, service_rate=service_l[k],
                duration_scale=scale_l[k], demand_rate=demand_l[k], lam=self._lam,
                path_rate=min((service_l[j] for j in self._pace_below[k]), default=0.0),
                overload_downstream_s=hi, floor_downstream_s=lo, outrank_downstream_s=lm,
            ))
        self._terms = out
        return out

    def _profiled(self, k: int, raw: Any, b: F64) -> F64:
        """Stage ``k``'s profiled ``d(b)`` (s) of each batch in ``b``: a lookup (PlannerStage.duration's values)."""
        table = self._d_table[k]
        if isinstance(raw, np.ndarray) and raw.dtype.kind in "iu" and raw.size and raw.max() < table.size:
            return table.take(raw.astype(np.intp, copy=False))
        return np.asarray(self._stages[k].duration(b))

    def _duration(self, k: int, b: float) -> float:
        """``d_k(b)`` (s), recomputed only when ``b`` differs from the stage's previous call."""
        last_b, last_d = self._d_memo[k]
        if b != last_b:
            st = self._stages[k]
            bs, ds = st._points
            # inside the profile's range d(b) is np.interp's value (PlannerStage.duration's own path)
            last_d = float(np.interp(b, bs, ds)) if bs.size > 1 and b <= bs[-1] else float(st.duration(b))
            self._d_memo[k] = (b, last_d)
        return last_d


_quantile = quantile  # the name tests import
