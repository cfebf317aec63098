"""What-if simulation: replay arrivals against a pipeline's profiles under a policy (DESIGN §1, §5a).

:func:`simulate` builds the C++ discrete-event simulator (``pard._core.Simulator``) from a
:class:`pard.config.PipelineSpec`, then alternates between the two halves of PARD's control loop,
exactly as the live runtime will:

1. the simulator advances its virtual clock by one sync interval (every request event, batch and
   drop happens in C++, through the same ``StageScheduler`` objects the runtime uses);
2. the planner (:class:`pard.planner.Planner`, C++) reads the interval's per-stage statistics and publishes
   the new downstream terms, ``mu`` and ``eps`` to every stage (and, with autoscaling, the simulator
   resizes each stage's worker pool: ``ceil(rate / per-worker throughput * headroom)``, DESIGN §5a).

When every request has finished, been dropped or rejected, a :class:`pard.report.Report` is built.
:func:`compare` runs several policies on the same pipeline and arrivals.
"""

from __future__ import annotations

import collections.abc
import inspect
import math
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from . import _core
from ._checks import check_bool, check_float, fmt_bytes, fmt_num, real_array, show
from ._extras import require
from .config import MAX_TOTAL_WORKERS, MAX_WORKERS, resolve_pipeline
from .config.models import MAX_SLO_S, MIN_SLO_S
from .errors import PardTypeError, PardValueError, TooManyArrivalsError
from .planner import Planner, StageTerms
from .planner_config import MAX_SYNC_INTERVAL_S, MIN_SYNC_INTERVAL_S, PlannerConfig
from .policies import PolicySpec, get_policy
from .recorder import RunRecorder
from .report import Report, report_bins
from .sim_llm import bound_spec, llm_calibration, llm_tokens
from .wiring import core_stages, planner_stages
from .workloads.requests import Workload

if TYPE_CHECKING:  # pragma: no cover
    from .config import PipelineSpec

__all__ = ["simulate", "compare", "MAX_VISITS", "MIN_SYNC_INTERVAL_S", "MAX_SYNC_INTERVAL_S", "MAX_ARRIVAL_S",
           "MAX_SYNCS", "MAX_SEED", "AUTOSCALE_ON"]

F64 = npt.NDArray[np.float64]

#: Default limit of :func:`simulate`'s ``max_visits``: requests x stages (each visit holds
#: simulator state), and also seconds spanned x stages (per-second series).  2·10^8 visits need
#: roughly 10-20 GiB; above it simulate() refuses before building the C++ simulator.
MAX_VISITS = 200_000_000
#: Rough bytes of simulator and report state per request-stage visit (for the message).
_BYTES_PER_VISIT = 64
#: Latest accepted arrival time (s): the C++ core keeps times as int64 ns and refuses past 9e9 s.
MAX_ARRIVAL_S = 1e9
#: Default limit of :func:`simulate`'s ``max_syncs``: planner syncs over the arrivals' span
#: (``span / sync_interval_s``).  At roughly a millisecond of wall time per sync, 2·10^5 syncs are a few
#: minutes; a day-long trace at the default 1 s interval needs 86 400.
MAX_SYNCS = 200_000
#: What ``simulate(autoscale_on=...)`` sizes a stage on: its own input, or also the pipeline's offered rate.
AUTOSCALE_ON = ("stage", "pipeline")
#: Largest accepted ``seed``: the simulator's RNG takes an unsigned 64-bit seed.
MAX_SEED = 2**64 - 1

def _arrivals(arrivals: Any) -> F64:
    arr = real_array("arrivals", arrivals, "an array of float seconds")
    if arr.ndim != 1:
        raise PardValueError(f"arrivals must be one-dimensional (seconds), got shape {arr.shape}")
    if arr.size and not np.isfinite(arr).all():
        i = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise PardValueError(f"arrivals[{i}] = {show(arr[i])} is not finite")
    if arr.size and arr[0] < 0:
        raise PardValueError(f"arrivals must be >= 0 s, got arrivals[0] = {show(arr[0])}")
    if arr.size and arr.max() > MAX_ARRIVAL_S:
        i = int(np.argmax(arr))
        raise PardValueError(f"arrivals must be <= {MAX_ARRIVAL_S:g} s (MAX_ARRIVAL_S, the C++ core's time "
                             f"range), got arrivals[{i}] = {show(arr[i])}")
    if arr.size > 1:
        bad = np.flatnonzero(np.diff(arr) < 0)
        if bad.size:
            i = int(bad[0])
            raise PardValueError(f"arrivals must be sorted: arrivals[{i + 1}] = {show(arr[i + 1])} < "
                             f"arrivals[{i}] = {show(arr[i])}")
    return np.ascontiguousarray(arr)


def _check_size(n: int, span_s: float, ns: int, max_visits: float) -> None:
    """TooManyArrivalsError when ``n * ns`` or ``span_s * ns`` exceeds ``max_visits``."""
    limit = float(max_visits)
    if isinstance(max_visits, bool) or not limit > 0:
        raise PardValueError(f"max_visits must be a number > 0, got {max_visits!r}")
    if n * ns > limit:
        raise TooManyArrivalsError(
            f"simulate: {n} requests x {ns} stages = {n * ns:.3g} request-stage visits (~"
            f"{fmt_bytes(n * ns * _BYTES_PER_VISIT)} of memory), above the limit max_visits={fmt_num(limit)}; "
            f"simulate fewer requests (lower the rate or the duration) or raise max_visits",
            expected=float(n * ns), limit=limit)
    if span_s * ns > limit:
        raise TooManyArrivalsError(
            f"simulate: the arrivals span {span_s:.3g} s x {ns} stages of per-second series, above the limit "
            f"max_visits={fmt_num(limit)}; simulate a shorter span or raise max_visits",
            expected=float(span_s * ns), limit=limit)


def _check_syncs(span_s: float, sync: float, max_syncs: float) -> None:
    """ValueError when the arrivals' span needs more than ``max_syncs`` planner syncs of ``sync`` s."""
    limit = float(max_syncs)
    if isinstance(max_syncs, bool) or not limit >= 1:
        raise PardValueError(f"max_syncs must be a number >= 1, got {max_syncs!r}")
    count = math.floor(span_s / sync) + 1
    if count > limit:
        raise PardValueError(
            f"planner.sync_interval_s={show(sync)} needs {count} planner syncs over the arrivals' span of "
            f"{span_s:.6g} s, above the limit max_syncs={limit:.6g}; use a longer planner.sync_interval_s (the "
            f"paper's is 1 s) or raise max_syncs")


def _per_request(name: str, value: Any, n: int, default: float, dtype: Any, positive: bool) -> Any:
    if value is None:
        return np.full(n, default, dtype=dtype)
    arr = real_array(name, value, "a real number or an array of real numbers")
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise PardValueError(f"{name} must be a scalar or have one entry per arrival ({n}), got shape {arr.shape}")
    if not np.isfinite(arr).all() or (positive and (arr <= 0).any()) or (not positive and (arr < 0).any()):
        i = int(np.flatnonzero(~np.isfinite(arr) | ((arr <= 0) if positive else (arr < 0)))[0])
        raise PardValueError(f"{name}[{i}] = {show(arr[i])} must be {'> 0' if positive else '>= 0'} and finite")
    if dtype is np.int32:
        if (arr != np.round(arr)).any():
            raise PardValueError(f"{name} must hold whole numbers")
    return np.ascontiguousarray(arr.astype(dtype))


def _tiers(tiers: Any, n: int, spec: "PipelineSpec") -> npt.NDArray[np.int32]:
    """Per-request tier codes: an int (or whole float) ``0 .. len(spec.tiers) - 1`` (the index of a
    tier in ``spec.tiers``' order), or only 0 when the spec declares no tiers; a scalar or shape (n,)."""
    names = list(spec.tiers)
    valid = (f"0..{len(names) - 1} (indices of the spec's tiers {names!r})" if names
             else "0 (the pipeline declares no tiers)")
    if tiers is None:
        return np.zeros(n, dtype=np.int32)
    arr = real_array("tiers", tiers, "integer tier codes")
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise PardValueError(f"tiers must be a scalar or have one entry per arrival ({n}), got shape {arr.shape}")
    top = max(len(names) - 1, 0)
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > top) | (arr != np.round(arr))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        v = float(arr[i])
        shown = int(v) if math.isfinite(v) and v == round(v) else show(arr[i])  # a code reads as an int
        raise PardValueError(f"tiers[{i}] = {shown} is not a valid tier code for pipeline "
                         f"{spec.name!r}; valid: {valid}")
    return np.ascontiguousarray(arr.astype(np.int32))


class _Progress:
    """A rich progress bar over virtual time, shown only once a run has taken ``delay_s`` of wall time."""

    def __init__(self, enabled: bool, total_s: float, label: str, delay_s: float = 2.0) -> None:
        self._enabled = enabled
        self._total = max(total_s, 1e-9)
        self._label = label
        self._delay = delay_s
        self._start = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def update(self, t_s: float) -> None:
        if not self._enabled:
            return
        if self._bar is None:
            if time.monotonic() - self._start < self._delay:
                return
            rp = require("rich.progress", "cli", "progress bars")
            BarColumn, Progress, TextColumn, TimeRemainingColumn = (
                rp.BarColumn, rp.Progress, rp.TextColumn, rp.TimeRemainingColumn)
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.percentage:>3.0f}% of simulated time"),
                                 TimeRemainingColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self._label, total=self._total)
        self._bar.update(self._task, completed=min(t_s, self._total))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def simulate(
    pipeline: "PipelineSpec | str | os.PathLike[str]",
    arrivals: npt.ArrayLike,
    policy: str | PolicySpec = "pard",
    *,
    slo: float | npt.ArrayLike | None = None,
    tiers: npt.ArrayLike | None = None,
    jitter_cv: float = 0.1,
    autoscale: bool = False,
    cold_start_s: float = 10.0,
    headroom: float = 1.2,
    autoscale_on: str = "stage",
    workers: Sequence[int] | Mapping[str, int] | None = None,
    exec_scale: float | Sequence[float] = 1.0,
    planner: PlannerConfig | Mapping[str, Any] | None = None,
    seed: int = 0,
    progress: bool = False,
    max_visits: float = MAX_VISITS,
    max_syncs: float = MAX_SYNCS,
    on_sync: Callable[[float, list[StageTerms]], None] | None = None,
    in_tokens: npt.ArrayLike | None = None,
    out_tokens: npt.ArrayLike | None = None,
    max_tokens: npt.ArrayLike | None = None,
) -> Report:
    """Simulate ``pipeline`` serving ``arrivals`` under ``policy``; return the run's :class:`Report`.

    Args:
        pipeline: a PipelineSpec, a built-in name (``tm``, ``lv``, ``ga``, ``da``, ``rag``) or a spec file.
        arrivals: arrival times at the pipeline, float seconds, sorted, ``>= 0``, shape ``(n,)``; or a
            :class:`pard.workloads.Workload`, whose per-request SLOs and tiers are used unless ``slo`` /
            ``tiers`` are given (its tier names matched to the spec's ``tiers`` by name).
        policy: a name from :data:`pard.policies.POLICIES` or a PolicySpec.
        slo: end-to-end SLO in seconds, a scalar or one per request ``(n,)``; default the pipeline's.
        tiers: service tier code per request, a scalar or shape ``(n,)``: an int in ``0 ..
            len(spec.tiers) - 1`` (the tier's index in the spec's ``tiers``), or 0 when the spec has no
            tiers; default 0.  Tier-aware policies (``pard``) serve and shed by the tiers' weights; the
            report gives per-tier counts and the weighted goodput.
        jitter_cv: CV of the lognormal execution-time factor (mean 1), in [0, 10]; 0 = deterministic (§5a).
        autoscale: resize each stage's workers every sync to ``ceil(rate / per-worker throughput *
            headroom)`` (at least 1), new workers serving after ``cold_start_s``; otherwise fixed.  An llm
            stage's per-worker throughput is read at the run's mean input and output lengths (as an operator
            sizes on the traffic's history), not with every answer as long as ``max_output_tokens``.
        cold_start_s: seconds before an added worker serves, in ``[0, 1e9]``.
        headroom: autoscaling's over-provisioning factor (>= 1).
        autoscale_on: the rate each stage is sized on: ``"stage"`` (default), its own input -- what its
            upstream stages passed, after their drops; ``"pipeline"``, the larger of that and the
            pipeline's offered rate (every request visits every stage), so that a downstream stage is
            sized for the demand an upstream stage sheds and scales with the entry, not one cold
            start after it.
        workers: initial workers per stage, one int per stage in order or a mapping {stage name: workers}
            (stages it leaves out keep the spec's); default the spec's.
        exec_scale: the simulated executors' duration against the profile, a number in (0, 1000] or one
            per stage: a batch takes ``exec_scale * d_k(b)`` (times the jitter) while every policy still
            plans with the profile's ``d_k(b)``.  ``> 1``: slower than profiled (a profile measured on a
            quieter machine); ``< 1``: faster (measured on a busier one); 1 (default): as profiled.  The report's
            goodput bound counts the stages at their known speed, profile over ``exec_scale``.
        planner: the planner's settings, a :class:`pard.PlannerConfig` or a mapping of its fields
            (``sync_interval_s``, ``lam``, ``window_s``, ...); default the paper's (1 s syncs).
        seed: seeds execution jitter and, unless ``planner.seed`` is given, the planner's Monte Carlo (with
            ``seed + 1``); an int in ``0 ..`` :data:`MAX_SEED`; same seed => identical report.
        progress: show a progress bar (rich) when the run lasts more than 2 s of wall time.
        max_visits: refuse runs whose requests x stages, or seconds spanned x stages, exceed this
            (default :data:`MAX_VISITS`), before building the simulator.
        max_syncs: refuse runs needing more than this many planner syncs over the arrivals' span
            (``span / planner.sync_interval_s``; default :data:`MAX_SYNCS`), before building the simulator, and
            stop with an error a run whose requests are still in the pipeline this many syncs after the last
            arrival.
        on_sync: called after every sync with its time (s) and the terms the planner published to each
            stage (:class:`pard.planner.StageTerms`, stage order); not called for a policy that needs no
            planner (one whose stages read no published term, on fixed workers).
        in_tokens, out_tokens, max_tokens: per request, int shape ``(n,)``: input tokens (>= 0), the true
            output length (>= 1: where the simulated engine's end-of-sequence falls; no rule reads it) and the
            client's ``max_tokens`` hint (>= 0, 0 = none); default a Workload's fields of those names.  A
            pipeline with an llm stage needs ``in_tokens`` and ``out_tokens`` (DESIGN §3.8).

    Returns:
        The run's Report (conservation checked).

    Raises:
        ValueError / TypeError: a bad argument (the message names it and its value), e.g. a
            ``planner.sync_interval_s`` below 1 ms or one needing more than ``max_syncs`` syncs;
        pard.workloads.TooManyArrivalsError (a ValueError): the run exceeds ``max_visits``;
        pard.ConfigError: an invalid pipeline.
        pard.PardValueError: a pipeline with an llm stage and no token counts (the message names what is missing).
    """
    spec = resolve_pipeline(pipeline)
    pol = get_policy(policy)
    if isinstance(arrivals, Workload):  # its own SLOs, tiers and tokens, unless given here; tiers by name
        slo = arrivals.slo_s if slo is None else slo
        tiers = arrivals.tier_codes_for(spec.tiers) if tiers is None else tiers
        in_tokens = getattr(arrivals, "in_tokens", None) if in_tokens is None else in_tokens
        out_tokens = getattr(arrivals, "out_tokens", None) if out_tokens is None else out_tokens
        max_tokens = getattr(arrivals, "max_tokens", None) if max_tokens is None else max_tokens
        arrivals = arrivals.arrivals_s
    arr = _arrivals(arrivals)
    n = int(arr.size)
    jitter_cv = check_float("jitter_cv", jitter_cv, low=0.0, high=_core.MAX_JITTER_CV)
    cold_start_s = check_float("cold_start_s", cold_start_s, low=0.0, high=MAX_ARRIVAL_S)  # a C++ time too
    headroom = check_float("headroom", headroom, low=1.0)
    cfg = PlannerConfig.of(planner)
    sync = cfg.sync_interval_s
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise PardValueError(f"seed must be an int in 0..2**64-1, got {show(seed)}")
    autoscale = check_bool("autoscale", autoscale)
    if autoscale:
        pol = pol.for_autoscaling()  # pard paces forks on fixed pools only (PolicySpec.for_autoscaling)
    if autoscale_on not in AUTOSCALE_ON:
        raise PardValueError(f"autoscale_on must be one of {', '.join(AUTOSCALE_ON)}, got {show(autoscale_on)}")
    progress = check_bool("progress", progress)
    ns = len(spec.stages)
    if isinstance(workers, collections.abc.Mapping):  # {stage name: workers}, as Runtime takes; others keep the spec's
        names = [st.name for st in spec.stages]
        unknown = [k for k in workers if k not in names]
        if unknown:
            raise PardValueError(f"workers names no stage {unknown[0]!r}; the stages are {', '.join(names)}")
        workers = [workers.get(st.name, st.workers) for st in spec.stages]
    if workers is not None:
        if isinstance(workers, (str, bytes)) or not isinstance(workers, collections.abc.Iterable):
            raise PardTypeError(f"workers must be a sequence of one int per stage ({ns}), got "
                                f"{type(workers).__name__}: {show(workers)}")
        workers = list(workers)
        if len(workers) != ns or any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1
                                     or w > MAX_WORKERS for w in workers):
            raise PardValueError(f"workers must list one int in 1..{MAX_WORKERS} per stage ({ns}), got {workers!r}")
        if sum(int(w) for w in workers) > MAX_TOTAL_WORKERS:
            raise PardValueError(f"workers sum to {sum(int(w) for w in workers)}, more than MAX_TOTAL_WORKERS = "
                                 f"{MAX_TOTAL_WORKERS} (a spec's bound), got {workers!r}")
    _check_size(n, (float(arr[-1]) - math.floor(arr[0]) + 1) if n else 1.0, ns, max_visits)
    _check_syncs((float(arr[-1]) - math.floor(arr[0])) if n else 0.0, sync, max_syncs)
    slo_s = _per_request("slo", spec.slo if slo is None else slo, n, spec.slo, np.float64, positive=True)
    out_of_range = (slo_s < MIN_SLO_S) | (slo_s > MAX_SLO_S)  # the C++ core's ns clock: 1 ns .. 1e9 s
    if out_of_range.any():
        i = int(np.flatnonzero(out_of_range)[0])
        raise PardValueError(f"slo[{i}] = {show(slo_s[i])} must be a number of seconds in [{MIN_SLO_S:g}, {MAX_SLO_S:g}] "
                             f"(the C++ core's nanosecond clock)")
    tier = _tiers(tiers, n, spec)
    tokens = llm_tokens(spec, n, in_tokens=in_tokens, out_tokens=out_tokens, max_tokens=max_tokens)

    stages = core_stages(spec, workers)
    if isinstance(exec_scale, (int, float, np.number)):
        scales = [exec_scale] * ns
    elif isinstance(exec_scale, (str, bytes)) or not isinstance(exec_scale, collections.abc.Iterable):
        raise PardTypeError(f"exec_scale must be a number or one per stage ({ns}), got "
                            f"{type(exec_scale).__name__}: {show(exec_scale)}")
    else:
        scales = list(exec_scale)
    if len(scales) != ns:
        raise PardValueError(f"exec_scale must be a number or one per stage ({ns}), got {show(exec_scale)}")
    for k, st in enumerate(stages):
        st["exec_scale"] = check_float(f"exec_scale[{k}]", scales[k], low=0.0, low_open=True, high=1e3)
    tier_weights = [float(w) for w in spec.tiers.values()]
    sim = _core.Simulator(stages=stages, policy=pol.core(), arrivals_s=arr, slo_s=slo_s, tier=tier,
                          jitter_cv=jitter_cv, seed=int(seed), cold_start_s=cold_start_s, tier_weights=tier_weights,
                          **tokens)
    plan = Planner(planner_stages(spec), policy=pol, **cfg.planner_kwargs(int(seed) + 1))

    # per-second bookkeeping over the arrivals' horizon
    t0, nb = report_bins(arr)
    initial = [float(st.workers if workers is None else workers[k]) for k, st in enumerate(spec.stages)]
    recorder = RunRecorder(bound_spec(spec, tokens), origin_s=t0, workers=initial,
                           exec_scale=[st["exec_scale"] for st in stages])
    # what autoscaling sizes a worker at: its best batch; an llm stage's at the run's mean lengths (an operator
    # sizes on the traffic's history), not at every answer as long as max_output_tokens allows
    per_worker = np.array([st.batch_limit / st.duration(st.batch_limit) for st in bound_spec(spec, tokens).stages])
    end_arrivals = float(arr[-1]) if n else 0.0
    bar = _Progress(progress, end_arrivals - t0, f"{pol.name} on {spec.name}")

    # Policies whose stage schedulers read none of the published terms need the planner only to
    # drive autoscaling.
    needs_planner = autoscale or pol.uses_planner_terms
    # the first interval starts with the arrivals, not at clock 0 (a late first arrival would dilute it)
    plan.start(t0)
    if pol.prior_terms and pol.uses_planner_terms:
        prior = plan.prior_terms(t0 + sync, sim.serving())
        sim.publish_all([tuple(term.publish_kwargs().values()) for term in prior])
    core_recorder = recorder.native()
    core_planner = plan.native if needs_planner else None
    # A stage far from its profile is news only when the simulated executors are set off it (exec_scale):
    # otherwise they run the profile, and only the jitter (a large --jitter) can move the measured ratio.
    drift = needs_planner and pol.correct_durations and any(float(x) != 1.0 for x in scales)
    names = [st.name for st in spec.stages]
    entry_idx = [names.index(e) for e in spec.entry_stages()]
    t = t0
    drain_syncs = 0  # syncs after the last arrival: the requests still in the pipeline finishing
    try:
        while True:
            t_prev, t = t, t + sync
            # one interval in C++: the event loop, the recorder, the planner and the publish
            more = sim.sync(t_prev, t, core_recorder, core_planner)
            if drift:
                plan.check_drift()
            if on_sync is not None and core_planner is not None:
                on_sync(t, plan.native_terms())
            # demand_rate: the stage's input as it would be were no stage above it paced or dropping on its
            # behalf (PolicySpec.shed_demand)
            demand = [term[9] for term in core_planner.terms()] if autoscale else []
            if autoscale_on == "pipeline" and demand:
                offered = max(demand[e] for e in entry_idx)  # an entry receives every request
                demand = [max(rate, offered) for rate in demand]
            for k, rate in enumerate(demand):
                sim.set_workers(k, min(MAX_WORKERS, max(1, math.ceil(rate / per_worker[k] * headroom))))
            bar.update(t - t0)
            if not more and t >= end_arrivals:
                break
            if t >= end_arrivals:
                drain_syncs += 1
                if drain_syncs > max_syncs:
                    raise PardValueError(
                        f"simulate: requests were still in the pipeline {t - end_arrivals:.6g} s after the last "
                        f"arrival, past max_syncs={float(max_syncs):.6g} planner syncs of {show(sync)} s (the "
                        f"profiles' durations or the SLOs are longer than a simulation can step through); use a "
                        f"longer planner.sync_interval_s or raise max_syncs")
    finally:
        bar.close()
    out = sim.outcomes()
    out["send_s"] = arr
    out["tier"] = tier
    report = recorder.report(policy=pol.name, outcomes=out, t0_s=t0, n_bins=nb, slo_s=slo_s,
                             compute_split=sim.compute_split())
    report.llm_calibration = llm_calibration(spec, sim.llm_calibration())
    return report


def compare(
    pipeline: "PipelineSpec | str | os.PathLike[str]",
    arrivals: npt.ArrayLike,
    policies: Iterable[str | PolicySpec] = ("pard", "nexus", "clipper++", "triton", "ray-serve", "naive"),
    **params: Any,
) -> dict[str, Report]:
    """Simulate each policy on the same pipeline and arrivals; ``params`` as :func:`simulate`.

    ``tiers`` (in ``params``): per-request tier codes as in :func:`simulate`; tier-aware policies
    (``pard``) serve and shed by the tiers' weights, and every report has per-tier results.

    ``arrivals``: as :func:`simulate` -- an array of float seconds or a
    :class:`pard.workloads.Workload` (its per-request SLOs and tiers are used unless ``slo`` /
    ``tiers`` are given in ``params``).

    ``policies``: policy names or PolicySpecs (a single name or spec is one policy).  Returns policy
    name -> Report, in the order given.  Raises as :func:`simulate`; ValueError for an empty or
    duplicated policy list; TypeError when ``policies`` is not a name, PolicySpec or iterable, or
    for a keyword in ``params`` that :func:`simulate` does not take (``policy=``: use ``policies=``).
    """
    _check_compare_params(params)
    if isinstance(policies, (str, PolicySpec)):
        policies = [policies]
    if not isinstance(policies, collections.abc.Iterable):
        raise PardTypeError(f"policies must be a policy name, a PolicySpec or an iterable of them, got "
                        f"{type(policies).__name__}: {policies!r}")
    specs = [get_policy(p) for p in policies]
    if not specs:
        raise PardValueError("policies must name at least one policy, got none")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise PardValueError(f"policies must not repeat a name, got {names!r}")
    spec = resolve_pipeline(pipeline)
    arr = arrivals if isinstance(arrivals, Workload) else _arrivals(arrivals)  # simulate unpacks a Workload
    return {s.name: simulate(spec, arr, s, **params) for s in specs}


def _check_compare_params(params: Mapping[str, Any]) -> None:
    """PardTypeError for a keyword in :func:`compare`'s ``params`` that is not one of :func:`simulate`'s
    keyword-only parameters (``policy``: compare passes each of ``policies``), naming it and its value."""
    for key, value in params.items():
        if key == "policy":
            raise PardTypeError(f"compare() takes policies=, not policy= (got policy={show(value)}); "
                                f"use policies={show(value)}")
        if key not in _SIMULATE_KEYWORDS:
            raise PardTypeError(f"compare() got an unexpected keyword argument {key!r} (= {show(value)}); "
                                f"it takes simulate()'s keywords: {', '.join(_SIMULATE_KEYWORDS)}")


#: The keywords :func:`compare` passes on to :func:`simulate` (its keyword-only parameters).
_SIMULATE_KEYWORDS = tuple(name for name, p in inspect.signature(simulate).parameters.items()
                           if p.kind is inspect.Parameter.KEYWORD_ONLY)
