"""The planner: PARD's feedback loop (DESIGN §3.5, paper §4), one implementation for every engine.

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
  ``w_P = sum_{i in P} rho_i d_i(b_i)`` (``rho_i`` the stage's measured busy fraction; the M/G/1
  argument is DESIGN §3.7's): ``w = sum d_i`` when every stage is busy, 0 when they idle.  It adds to ``q_i`` only
  where stage ``i`` was backlogged over the window; elsewhere ``q_i`` already holds that residual and the
  stage's wait is ``max(q_i, rho_i d_i)``.
* ``correct_durations``: ``d_i`` is scaled by ``s_i``, the measured / profiled batch-duration ratio of
  :mod:`pard.duration_scale` (count-weighted from the run's first batch, then running;
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
* ``demand_rate`` reports each stage's input as it would be were the stages above it not paced, and, with
  ``shed_demand``, an llm stage's were they not dropping on its behalf: at least ``min(in_rate,
  service_rate)`` of each stage above (what an autoscaler sizes for).

The arithmetic is C++ (``cpp/include/pard/sync_planner.hpp``, ``pard._core.SyncPlanner``): the simulator
hands it to ``Simulator.sync`` and runs each interval without Python; the live runtime and Ray call
:meth:`Planner.update` with the seconds their workers measured.  One sync costs tens of microseconds
for a five-stage chain, most of it the Monte Carlo of ``downstream="full"``: one draw of ``M`` indices
per stage that lies on a downstream path, each path's sum formed once (suffixes shared) and one O(M)
selection per path.  ``tests/planner_oracle.py`` holds the same arithmetic in NumPy as the tests'
reference.

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
import math
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from . import _core
from .duration_scale import HALF_LIFE_S, PRIOR_BATCHES, SCALE_MAX, SCALE_MIN, DriftWatch
from .errors import PardValueError, PardWarning
from .planner_config import MAX_SAMPLES
from .planner_types import PlannerStage, StageTerms
from .policies import PolicySpec, get_policy, paces

__all__ = ["PlannerStage", "StageTerms", "Planner", "window_for_cv", "MAX_SAMPLES", "PRECOLLECTED_WAIT"]

#: ``downstream="busy"``: a batch counts as backlogged (its requests waited for another batch to end)
#: when it waited, after its collection, longer than this share of its own duration.
PRECOLLECTED_WAIT = 0.1


def demand_below(pol: PolicySpec, stages: Sequence[PlannerStage], below: Sequence[Sequence[int]]) -> list[list[int]]:
    """Per stage, the stages below it whose published ``demand_rate`` is at least what it would forward
    (``min(in_rate, service_rate)``): every stage below a paced one (``pace``), and, with ``shed_demand`` and the
    pard rule, every llm stage below it -- whose queue the stages above read live and drop on, so that it
    receives only what they admitted (PolicySpec.shed_demand)."""
    shed = pol.shed_demand and pol.drop == "pard"
    return [list(b) if paces(pol.pace, st.paths) else [i for i in b if stages[i].llm] if shed else []
            for b, st in zip(below, stages)]


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
        PardValueError: ``cv`` negative or not finite.
    """
    if not math.isfinite(cv) or cv < 0:
        raise PardValueError(f"cv must be a finite number >= 0, got {cv!r}")
    return float(_core.window_for_cv(float(cv)))


class Planner:
    """PARD's planner (DESIGN §3.5): one object per pipeline run, called once per sync interval.

    Users set it through :class:`pard.PlannerConfig` (``simulate``, ``Runtime``, ``pard.ray.deploy`` and
    ``pard serve`` take one); these are its fields but the sync interval, which the caller keeps.

    Args:
        stages: one :class:`PlannerStage` per stage, in the pipeline's stage order.
        policy: a policy name or :class:`~pard.policies.PolicySpec`; selects the downstream mode and the
            options of the module doc.
        lam: the batch-wait quantile ``lambda`` in ``[0, 1]``; None (default): the policy's own
            (``PolicySpec.lam``), else the paper's 0.1.
        window_s: the initial (and, with ``adapt_window=False``, fixed) estimation window in seconds.
        adapt_window: resize the window by the input's CV (module doc).
        samples: Monte Carlo sample count ``M`` (default 10 000), an int in ``1 ..`` :data:`MAX_SAMPLES`.
        seed: seeds the Monte Carlo draws; same seed and same inputs give the same outputs.
        cv_history_s: how far back the CV of the input rate looks (s).
        min_cv_intervals: intervals seen before the window first follows the CV.

    Raises:
        PardValueError: a parameter out of range (the message names it and its value).
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
        if lam is not None and pol.downstream != "full":
            warnings.warn(f"lam={lam!r} has no effect under policy {pol.name!r}: only downstream='full' (the paper's "
                          f"Monte Carlo batch wait, e.g. pard-paper) reads a quantile; {pol.name!r} uses "
                          f"downstream={pol.downstream!r}", PardWarning, stacklevel=3)
        if lam is None:
            lam = pol.lam if pol.lam is not None else 0.1
        if not (0.0 <= lam <= 1.0):
            raise PardValueError(f"lam must be in [0, 1], got {lam!r}")
        if not (window_s >= 1e-3 and np.isfinite(window_s)):  # below ~1 ms, now - window rounds to now late in a run
            raise PardValueError(f"window_s must be a finite number of seconds >= 0.001, got {window_s!r}")
        if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or not 1 <= samples <= MAX_SAMPLES:
            raise PardValueError(f"samples must be an int in 1..{MAX_SAMPLES}, got {samples!r}")
        if not (cv_history_s > 0 and math.isfinite(cv_history_s)):
            raise PardValueError(f"cv_history_s must be a finite number of seconds > 0, got {cv_history_s!r}")
        if isinstance(min_cv_intervals, bool) or not isinstance(min_cv_intervals, (int, np.integer)) \
                or min_cv_intervals < 1:
            raise PardValueError(f"min_cv_intervals must be an int >= 1, got {min_cv_intervals!r}")
        n = len(stages)
        for k, st in enumerate(stages):
            for path in st.paths:
                if not path or any(not (0 <= i < n) or i == k for i in path):
                    raise PardValueError(f"stage {st.name!r}: bad downstream path {path!r} for {n} stages")
        self._stages = list(stages)
        self._policy = pol
        #: Warn (PardWarning) when a stage runs far from its profile (:class:`pard.duration_scale.DriftWatch`).
        #: A simulation whose executors run the profile itself turns it off: only its jitter can move them.
        self.warn_drift = True
        self._drift = DriftWatch(n)
        self._rng = np.random.default_rng(seed)
        below = [sorted({i for p in st.paths for i in p}) for st in stages]  # every stage under each
        self._core: Any = _core.SyncPlanner(
            paths=[[list(p) for p in st.paths] for st in stages],
            parallel=_parallel_branches(stages) if pol.coherent_branches else [[] for _ in stages],
            below=below if pol.coherent_paths else [[] for _ in stages],
            entry=[bool(st.entry) for st in stages],
            max_batch=[float(st.max_batch) for st in stages],
            full_d=[float(st.duration(float(st.max_batch))) for st in stages],
            d_table=[np.asarray(st.duration(np.arange(st.max_batch + 1.0)), dtype=np.float64).tolist()
                     for st in stages],
            pts_b=[st._points[0].tolist() for st in stages], pts_d=[st._points[1].tolist() for st in stages],
            drawn=sorted({i for st in stages for p in st.paths for i in p}) if pol.downstream == "full" else [],
            mode=pol.downstream, instant=pol.instant, correct_durations=pol.correct_durations,
            mu_at_capacity=pol.mu_at_capacity, adapt_window=bool(adapt_window), lam=float(lam),
            window_s=float(window_s), samples=int(samples), cv_history_s=float(cv_history_s),
            min_cv_intervals=int(min_cv_intervals), constants=[SCALE_MIN, SCALE_MAX, PRECOLLECTED_WAIT],
            generator=self._rng, idle_batch=pol.idle_batch, half_life_s=HALF_LIFE_S, prior_batches=PRIOR_BATCHES,
            pace_below=[b if paces(pol.pace, st.paths) else [] for b, st in zip(below, stages)],
            overload_upper=pol.overload_upper, mu_at_capacity_entry=pol.mu_at_capacity_entry,
            live_queue=[bool(pol.llm_live_queue and st.llm) for st in stages],
            demand_below=demand_below(pol, stages, below),
        )
        self._last_now: float | None = None
        self._terms: list[StageTerms] | None = None

    # ------------------------------------------------------------------ properties
    @property
    def window_s(self) -> float:
        """The current estimation window (s)."""
        return float(self._core.window_s)

    @property
    def policy(self) -> PolicySpec:
        """The policy whose planner options are applied."""
        return self._policy

    @property
    def lam(self) -> float:
        """The downstream quantile in force."""
        return float(self._core.lam)

    @property
    def native(self) -> Any:
        """The ``pard._core.SyncPlanner`` itself, for ``Simulator.sync`` (which runs whole intervals in C++;
        read its terms back with :meth:`native_terms`)."""
        return self._core

    @property
    def terms(self) -> list[StageTerms] | None:
        """The terms computed by the last :meth:`update` (None before the first)."""
        return self._terms

    def start(self, now_s: float) -> None:
        """Begin the first interval at ``now_s`` (s), not at clock 0 (a late first arrival would otherwise
        dilute the first window's rates). Raises PardValueError after the first update or for a non-finite time."""
        if self._last_now is not None or not math.isfinite(now_s):
            raise PardValueError(f"start must come before the first update (the last was at {self._last_now!r}) "
                                 f"with a finite time, got {now_s!r}")
        self._last_now = float(now_s)
        self._core.start(float(now_s))

    def prior_terms(self, now_s: float, workers: Sequence[int]) -> list[StageTerms]:
        """The terms one idle interval ending at ``now_s`` (s) would publish, computed on a copy (this
        planner's state and draws untouched): ``PolicySpec.prior_terms`` publishes them before the first
        sync, when the schedulers hold no downstream estimate and no service rate. With
        ``correct_durations`` their ``duration_scale`` is 0, "none measured yet": until the first sync each
        stage corrects these profile-based terms by its own measured / profiled ratio
        (``StageScheduler::effective_terms`` in cpp/include/pard/stage_scheduler.hpp). Raises as :meth:`update`."""
        self._check(now_s, [{} for _ in self._stages], workers)
        twin = self._core.copy(copy.deepcopy(self._rng))
        return self._wrap(twin.update_s(float(now_s), [{} for _ in self._stages], [int(w) for w in workers]))

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
            stats: per stage, the samples since the previous call, keyed as ``LivePipeline.take_stats``:
                ``arrival_s`` (arrival times), ``qdelay_s`` (queueing delay of each request taken into a
                batch), ``batch_size``, ``batch_wait_s`` and ``batch_duration_s`` (one row per batch), float
                seconds (``batch_size`` ints).  Missing keys count as no samples.
            workers: per stage, the workers serving now (>= 0).

        Returns:
            One :class:`StageTerms` per stage.

        Raises:
            PardValueError: lengths do not match the stages, ``now_s`` does not increase, or a statistic is
                not a finite number of seconds.
        """
        self._check(now_s, stats, workers)
        self._last_now = float(now_s)
        try:
            raw = self._core.update_s(float(now_s), [dict(s) for s in stats], [int(w) for w in workers])
        except ValueError as e:
            raise PardValueError(f"planner update at {now_s!r} s: {e}") from None
        self._terms = self._wrap(raw)
        if self._policy.correct_durations and self.warn_drift:  # after the terms are stored
            self.check_drift()
        return self._terms

    def native_terms(self) -> list[StageTerms]:
        """The terms of the last interval run by ``Simulator.sync`` on :attr:`native`."""
        self._terms = self._wrap(self._core.terms())
        return self._terms

    def check_drift(self) -> None:
        """A :class:`pard.PardWarning` for each stage newly found far from its profile (``correct_durations``)."""
        raw = self._core.terms()
        if raw:
            self._drift.observe([t[6] for t in raw], self._core.batch_counts())
            self._drift.warn_drifted([st.name for st in self._stages])

    def _check(self, now_s: float, stats: Sequence[Mapping[str, Any]], workers: Sequence[int]) -> None:
        n = len(self._stages)
        if len(stats) != n or len(workers) != n:
            raise PardValueError(f"stats and workers must have one entry per stage ({n}), "
                                 f"got {len(stats)} and {len(workers)}")
        if not math.isfinite(now_s):
            raise PardValueError(f"now_s must be a finite number of seconds, got {now_s!r}")
        if self._last_now is not None and not now_s > self._last_now:
            raise PardValueError(f"now_s must increase between updates: {now_s!r} after {self._last_now!r}")
        if any(w < 0 for w in workers):
            raise PardValueError(f"workers must be >= 0 per stage, got {list(workers)!r}")

    def _wrap(self, raw: list[tuple[float, ...]]) -> list[StageTerms]:
        win, lam = float(self._core.window_s), float(self._core.lam)
        return [StageTerms(downstream_s=t[0], mu=t[1], eps=t[2], queue_delay_s=t[3], admit_fraction=t[4],
                           in_rate=t[7], batch_size=t[13], wait_quantile_s=t[14], window_s=win,
                           service_rate=t[5], duration_scale=t[6], demand_rate=t[9], lam=lam, path_rate=t[8],
                           overload_downstream_s=t[10], floor_downstream_s=t[11], outrank_downstream_s=t[12])
                for t in raw]
