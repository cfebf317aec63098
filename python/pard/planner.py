"""The planner: PARD's feedback loop (DESIGN §3.5, paper §4).

Once per sync interval the planner receives, for every stage, the plain statistics its workers gathered
since the previous call (arrival times, queueing delays, one row per executed batch) and recomputes what
the C++ stage schedulers read on their hot path:

* ``downstream_s`` -- the downstream part of the end-to-end estimate of paper Eq. 3b,
  ``max over downstream paths P of (sum_{i in P} q_i + sum_{i in P} d_i(b_i) + w_P)`` (DESIGN §3.2), or
  the reduced form of an ablation (:data:`pard.policies.DOWNSTREAM_MODES`);
* ``mu`` -- the stage's load factor ``T_in / T_m`` with ``T_m = workers * b / d(b)`` (§3.3);
* ``eps`` -- the burstiness band ``sum_t |T_in(t) - T_s(t)| / sum_t T_in(t)`` (§3.3);
* ``queue_delay_s`` -- the stage's own recent queueing delay (Dagor reads it);
* ``service_rate`` -- requests/s the stage finishes with its serving workers at full batches
  (``workers * B / d(B)``, ``d`` corrected as below), the hot-path overload test's rate;
* ``duration_scale`` -- the measured / profiled batch-duration ratio (1 unless ``correct_durations``).
* ``path_rate`` -- with ``pace``, the least ``service_rate`` among the stages on a paced stage's downstream
  paths (0 where the policy does not pace): what an overloaded stage's output is held to.

What ``pard`` adds (DESIGN §3.7; each switched by a :class:`~pard.policies.PolicySpec` field):

* ``downstream="busy"``: the downstream batch wait is budgeted from each stage's measured utilisation,
  ``w_P = sum_{i in P} rho_i d_i(b_i)`` (:func:`pard.utilisation.utilisation` gives ``rho_i`` and the
  M/G/1 argument): ``w = sum d_i`` when every stage is busy, 0 when they idle.  It adds to ``q_i`` only
  where stage ``i`` was backlogged over the window; elsewhere ``q_i`` already holds that residual and the
  stage's wait is ``max(q_i, rho_i d_i)`` (:func:`pard.utilisation.busy_wait`).
* ``correct_durations``: ``d_i`` is scaled by ``s_i``, the measured / profiled batch-duration ratio of
  :class:`pard.duration_scale.DurationScale` (count-weighted from the run's first batch, then running;
  pooled over the stages while a stage has few batches); ``s_i`` is published so the C++ stage scales its
  own ``d_k(b)`` too, and a stage far from its profile raises a :class:`pard.PardWarning` once.
* ``mu_at_capacity``: the load factor is taken against the stage's throughput at *full* batches,
  ``mu = T_in / (workers * B / d(B))``, not at its current batch size ``b``.  A stage that keeps up batches
  just large enough to do so, so at its current ``b`` its throughput equals its input and the paper's
  ``mu`` sits near 1 whenever it is busy, even far below capacity; ``mu`` then crosses ``1 + eps`` on
  ordinary noise and the order flips to HBF, which starves the oldest requests a FCFS/LBF stage would
  still have served in time.  Against full batches ``mu > 1`` means the input exceeds what any batching
  can serve.
* ``mu_at_capacity_entry=False`` (with ``mu_at_capacity``): an entry stage keeps the paper's ``mu`` at its
  current batch size; only the stages below take it against full batches.  What HBF starves is the oldest
  requests, and what starving them wastes is the compute already spent on them: none at an entry, every
  stage above at a stage below.  So an entry that is merely busy (a burst of a second or two in a trace
  whose mean load is well below capacity) flips to HBF and admits requests with the slack to get through
  the stages below, where LBF would admit the thinnest-slack ones and leave them to die downstream; a
  stage below flips only when its input exceeds what full batches can serve (bench/RESULTS.md, issue 9,
  ninth round: +0.3 … +1.6 points on the real trace at a 1 s rate envelope, load 0.8, fixed workers).
* ``coherent_paths``: a stage publishes the largest load factor among itself and its downstream stages,
  so the stages before an overloaded one serve it HBF too: the requests they pass on are the ones with
  the budget to get through it, and the lowest-budget ones, which it would purge after they were paid for
  upstream, wait (and are dropped) before any more compute is spent on them.
* ``idle_batch``: a stage that ran no batch in the window is estimated at ``b_i = 1``.  The paper keeps
  its last batch size, often a drained backlog's full batch; after an idle gap the entry then budgets
  every downstream stage at that size, and where those ``d_i`` exceed the SLO it drops every request, so
  no downstream batch runs and the stale size never updates (a run stuck at zero goodput).
* ``coherent_branches``: in a DAG, a stage publishes the largest load factor among itself and the stages
  on parallel branches that join it later, so sibling branches switch to HBF together: a request needs
  every branch, and an overloaded branch purges the lowest-budget copies that an underloaded sibling in
  LBF would otherwise serve first (their compute then wasted).
* ``overload_upper``: every stage also publishes ``overload_downstream_s``, ``pard-upper``'s
  ``max over paths of (sum q_i + 2 sum d_i)``; the C++ stage's pop rule uses it instead of the published
  term when that batch's hot-path overload test holds and it is the larger (stage_scheduler.hpp step 2b).
* ``demand_rate`` reports each stage's input as it would be were the stages above it not paced (what an
  autoscaler sizes for).

It is deliberately independent of the simulator: the same object serves the live runtime, which hands it
the same statistics from real workers.  All the numerical work is NumPy, vectorised over the stages and
the window's intervals; one call costs about 0.3-0.5 ms for a five-stage chain, most of it the Monte
Carlo: one draw of ``M`` indices per stage that lies on a downstream path, each path's sum formed once
(suffixes shared) and one O(M) selection per path.

Windows.  Every statistic is a *linearly weighted moving average over sync intervals*: the intervals
whose end lies within the last ``window_s`` seconds are kept, interval ``c`` (ending at ``t_c``) weighs
``(t_c - (now - window_s)) / window_s``, so the newest interval weighs 1 and older ones linearly less;
a per-sample mean (queueing delay, batch size) weighs each interval's samples by that weight.

Window resizing (§3.5).  The window follows the burstiness of the pipeline's input: the coefficient of
variation ``CV`` of the entry stages' per-interval arrival rates over the last ``cv_history_s`` seconds
(per-second counts at the default 1 s sync) maps to

* ``CV < 0.5``:      ``window = 7 - 4 CV``          (7 s .. 5 s)
* ``0.5 <= CV < 1``: ``window = 5 - 4 (CV - 0.5)``  (5 s .. 3 s)
* ``CV >= 1``:       ``window = max(1, 3 - 2 (CV - 1))``  (3 s .. 1 s, 1 s from CV = 2 on)

a continuous, decreasing map that meets DESIGN's ranges.  Until ``min_cv_intervals`` intervals have been
seen the window stays at its initial value ``window_s``.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import deque
from typing import Any, Deque, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from .batch_wait import downstream_wait_quantile, path_total
from .batch_wait import quantile as _quantile
from .duration_scale import SCALE_MAX, SCALE_MIN, DurationScale
from .errors import PardValueError
from .planner_types import PlannerStage, StageTerms
from .policies import PolicySpec, get_policy, paces
from .utilisation import busy_wait, utilisation, waited_requests

__all__ = ["PlannerStage", "StageTerms", "Planner", "window_for_cv", "downstream_wait_quantile", "MAX_SAMPLES"]

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


def window_for_cv(cv: float) -> float:
    """The estimation window (s) for input burstiness ``cv`` (DESIGN §3.5; mapping in the module doc).

    Raises:
        ValueError: ``cv`` negative or not finite.
    """
    if not np.isfinite(cv) or cv < 0:
        raise PardValueError(f"cv must be a finite number >= 0, got {cv!r}")
    if cv < 0.5:
        return 7.0 - 4.0 * cv
    if cv < 1.0:
        return 5.0 - 4.0 * (cv - 0.5)
    return max(1.0, 3.0 - 2.0 * (cv - 1.0))


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
        for k, below in enumerate(self._pace_below):  # sized for what a paced stage would forward unpaced
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
        if correct and self.warn_drift:  # after the terms are stored: a warning raised as an error leaves them
            self._scale.warn_drifted([st.name for st in self._stages])
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
