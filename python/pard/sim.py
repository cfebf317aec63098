"""What-if simulation: replay arrivals against a pipeline's profiles under a policy (DESIGN §1, §5a).

:func:`simulate` builds the C++ discrete-event simulator (``pard._core.Simulator``) from a
:class:`pard.config.PipelineSpec`, then alternates between the two halves of PARD's control loop,
exactly as the live runtime will:

1. the simulator advances its virtual clock by one sync interval (every request event, batch and
   drop happens in C++, through the same ``StageScheduler`` objects the runtime uses);
2. the Python :class:`pard.planner.Planner` reads the interval's per-stage statistics and publishes
   the new downstream terms, ``mu`` and ``eps`` to every stage (and, with autoscaling, the simulator
   resizes each stage's worker pool: ``ceil(rate / per-worker throughput * headroom)``, DESIGN §5a).

When every request has finished, been dropped or rejected, a :class:`pard.report.Report` is built.
:func:`compare` runs several policies on the same pipeline and arrivals.
"""

from __future__ import annotations

import collections.abc
import math
import os
import time
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from .config import MAX_WORKERS
from .planner import MAX_SAMPLES, Planner, PlannerStage
from .policies import PolicySpec, get_policy
from .report import Report

if TYPE_CHECKING:  # pragma: no cover
    from .config import PipelineSpec

__all__ = ["simulate", "compare", "resolve_pipeline", "core_stages", "planner_stages", "budget_fractions",
           "MAX_VISITS", "MIN_SYNC_INTERVAL_S", "MAX_SYNCS", "MAX_SAMPLES", "MAX_SEED"]

F64 = npt.NDArray[np.float64]

#: Default limit of :func:`simulate`'s ``max_visits``: requests x stages (each visit holds
#: simulator state), and also seconds spanned x stages (per-second series).  2·10^8 visits need
#: roughly 10-20 GiB; above it simulate() refuses before building the C++ simulator.
MAX_VISITS = 200_000_000
#: Rough bytes of simulator and report state per request-stage visit (for the message).
_BYTES_PER_VISIT = 64
#: Smallest accepted ``sync_interval_s`` (1 ms).  Every sync runs one planner update in Python (about a
#: millisecond of wall time with the default ``samples``), so shorter intervals cost more wall time than
#: they simulate, and each interval then holds too few per-stage samples (queueing delays, batch waits)
#: for the planner's estimates to mean anything.  The paper syncs every 1 s (DESIGN §3.5).
MIN_SYNC_INTERVAL_S = 1e-3
#: Default limit of :func:`simulate`'s ``max_syncs``: planner syncs over the arrivals' span
#: (``span / sync_interval_s``).  At roughly a millisecond of wall time per sync, 2·10^5 syncs are a few
#: minutes; a day-long trace at the default 1 s interval needs 86 400.
MAX_SYNCS = 200_000
#: Largest accepted ``seed``: the simulator's RNG takes an unsigned 64-bit seed.
MAX_SEED = 2**64 - 1


def resolve_pipeline(pipeline: "PipelineSpec | str | os.PathLike[str]") -> "PipelineSpec":
    """A PipelineSpec from a spec, a built-in name (``tm``, ``lv``, ``ga``, ``da``) or a file path.

    Raises:
        pard.ConfigError: an unknown name or an invalid file.
        TypeError: anything else.
    """
    from . import config

    if isinstance(pipeline, config.PipelineSpec):
        return pipeline
    if isinstance(pipeline, (str, os.PathLike)):
        return config.load(os.fspath(pipeline))
    raise TypeError(f"pipeline must be a PipelineSpec, a built-in name or a path, got {type(pipeline).__name__}")


def budget_fractions(spec: "PipelineSpec") -> list[float]:
    """Each stage's share of the SLO for clipper++ / nexus: ``d_k(max batch) / longest path duration``.

    The longest entry-to-exit path at max batch sizes is the denominator, so along that path the
    shares sum to 1 (DESIGN §3.6, ``slo_k = slo * d_k / sum d``).
    """
    total = spec.longest_path_duration()
    return [st.duration(st.max_batch) / total for st in spec.stages]


def core_stages(spec: "PipelineSpec", workers: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """The stage dicts ``pard._core.Simulator`` takes, in ``spec.stages`` order (DESIGN §6)."""
    from . import _core

    index = {st.name: k for k, st in enumerate(spec.stages)}
    fractions = budget_fractions(spec)
    out = []
    for k, st in enumerate(spec.stages):
        pts = sorted(st.profile.items())
        out.append({
            "name": st.name,
            "profile": _core.Profile([int(b) for b, _ in pts], [float(d) for _, d in pts]),
            "max_batch": int(st.max_batch),
            "workers": int(st.workers if workers is None else workers[k]),
            "successors": [index[s] for s in st.successors],
            "budget_fraction": float(fractions[k]),
        })
    return out


def planner_stages(spec: "PipelineSpec") -> list[PlannerStage]:
    """The planner's view of ``spec``: profiles, max batches, downstream paths as stage indices."""
    index = {st.name: k for k, st in enumerate(spec.stages)}
    entries = set(spec.entry_stages())
    return [
        PlannerStage.from_profile(
            st.name, st.profile, st.max_batch,
            paths=[[index[n] for n in path] for path in spec.downstream_paths(st.name)],
            entry=st.name in entries,
        )
        for st in spec.stages
    ]


def _show(x: Any) -> str:
    """``repr`` of a value for a message, with NumPy scalars shown as plain numbers."""
    if isinstance(x, np.generic):
        return repr(x.item())
    return repr(x)


def _check_float(name: str, value: Any, *, low: float, low_open: bool = False, high: float = math.inf) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}: {_show(value)}")
    v = float(value)
    ok = (v > low if low_open else v >= low) and v <= high and math.isfinite(v)
    if not ok:
        bound = f"{'>' if low_open else '>='} {low}" + (f" and <= {high}" if math.isfinite(high) else "")
        raise ValueError(f"{name} must be a finite number {bound}, got {_show(value)}")
    return v


def _real_array(name: str, value: Any, what: str) -> F64:
    """``value`` as a float64 array; TypeError naming ``name`` for strings, complex numbers, booleans or
    other non-real entries (never a silent cast: NumPy would drop an imaginary part with a warning)."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}") from exc
    kind = raw.dtype.kind
    if kind in "iuf":
        return raw.astype(np.float64, copy=False)
    if kind == "O":
        flat = raw.reshape(-1)
        for i, x in enumerate(flat):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                where = f"{name}[{i}]" if raw.ndim else name
                raise TypeError(f"{name} must be {what}; {where} is {type(x).__name__}: {_show(x)}")
        return raw.astype(np.float64)
    desc = {"c": "complex", "b": "bool", "U": "str", "S": "bytes", "M": "datetime64", "m": "timedelta64"}
    sample = f": {_show(raw.reshape(-1)[0])}" if raw.size else ""
    raise TypeError(f"{name} must be {what}, got {desc.get(kind, str(raw.dtype))} values{sample}")


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}: {_show(value)}")
    return bool(value)


def _arrivals(arrivals: Any) -> F64:
    arr = _real_array("arrivals", arrivals, "an array of float seconds")
    if arr.ndim != 1:
        raise ValueError(f"arrivals must be one-dimensional (seconds), got shape {arr.shape}")
    if arr.size and not np.isfinite(arr).all():
        i = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"arrivals[{i}] = {_show(arr[i])} is not finite")
    if arr.size and arr[0] < 0:
        raise ValueError(f"arrivals must be >= 0 s, got arrivals[0] = {_show(arr[0])}")
    if arr.size > 1:
        bad = np.flatnonzero(np.diff(arr) < 0)
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"arrivals must be sorted: arrivals[{i + 1}] = {_show(arr[i + 1])} < "
                             f"arrivals[{i}] = {_show(arr[i])}")
    return np.ascontiguousarray(arr)


def _peak_throughput(st: Any) -> float:
    """A worker's largest throughput ``max_b b / d(b)`` over batch sizes ``1 .. max_batch`` (req/s).

    ``d`` is piecewise linear between profiled points, where ``b / d(b)`` is monotone, so the profiled
    points up to ``max_batch`` and ``max_batch`` itself are the only candidates.
    """
    cands = [b for b in st.profile if b <= st.max_batch] + [st.max_batch]
    return float(max(b / st.duration(int(b)) for b in cands))


def _check_size(n: int, span_s: float, ns: int, max_visits: float) -> None:
    """TooManyArrivalsError when ``n * ns`` or ``span_s * ns`` exceeds ``max_visits``."""
    from .workloads._common import TooManyArrivalsError, fmt_bytes, fmt_num

    limit = float(max_visits)
    if isinstance(max_visits, bool) or not limit > 0:
        raise ValueError(f"max_visits must be a number > 0, got {max_visits!r}")
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
        raise ValueError(f"max_syncs must be a number >= 1, got {max_syncs!r}")
    count = math.floor(span_s / sync) + 1
    if count > limit:
        raise ValueError(
            f"sync_interval_s={_show(sync)} needs {count} planner syncs over the arrivals' span of "
            f"{span_s:.6g} s, above the limit max_syncs={limit:.6g}; use a longer sync_interval_s (the "
            f"paper's is 1 s) or raise max_syncs")


def _per_request(name: str, value: Any, n: int, default: float, dtype: Any, positive: bool) -> Any:
    if value is None:
        return np.full(n, default, dtype=dtype)
    arr = _real_array(name, value, "a real number or an array of real numbers")
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name} must be a scalar or have one entry per arrival ({n}), got shape {arr.shape}")
    if not np.isfinite(arr).all() or (positive and (arr <= 0).any()) or (not positive and (arr < 0).any()):
        i = int(np.flatnonzero(~np.isfinite(arr) | ((arr <= 0) if positive else (arr < 0)))[0])
        raise ValueError(f"{name}[{i}] = {_show(arr[i])} must be {'> 0' if positive else '>= 0'} and finite")
    if dtype is np.int32:
        if (arr != np.round(arr)).any():
            raise ValueError(f"{name} must hold whole numbers")
    return np.ascontiguousarray(arr.astype(dtype))


def _tiers(tiers: Any, n: int, spec: "PipelineSpec") -> npt.NDArray[np.int32]:
    """Per-request tier codes: an int (or whole float) ``0 .. len(spec.tiers) - 1`` (the index of a
    tier in ``spec.tiers``' order), or only 0 when the spec declares no tiers; a scalar or shape (n,)."""
    names = list(spec.tiers)
    valid = (f"0..{len(names) - 1} (indices of the spec's tiers {names!r})" if names
             else "0 (the pipeline declares no tiers)")
    if tiers is None:
        return np.zeros(n, dtype=np.int32)
    arr = _real_array("tiers", tiers, "integer tier codes")
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"tiers must be a scalar or have one entry per arrival ({n}), got shape {arr.shape}")
    top = max(len(names) - 1, 0)
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > top) | (arr != np.round(arr))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"tiers[{i}] = {_show(arr[i])} is not a valid tier code for pipeline "
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
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

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
    workers: Sequence[int] | None = None,
    sync_interval_s: float = 1.0,
    lam: float | None = None,
    window_s: float = 5.0,
    adapt_window: bool = True,
    samples: int = 10_000,
    seed: int = 0,
    progress: bool = False,
    max_visits: float = MAX_VISITS,
    max_syncs: float = MAX_SYNCS,
) -> Report:
    """Simulate ``pipeline`` serving ``arrivals`` under ``policy``; return the run's :class:`Report`.

    Args:
        pipeline: a PipelineSpec, a built-in name (``tm``, ``lv``, ``ga``, ``da``) or a spec file.
        arrivals: arrival times at the pipeline, float seconds, sorted, ``>= 0``, shape ``(n,)``.
        policy: a name from :data:`pard.policies.POLICIES` or a PolicySpec.
        slo: end-to-end SLO in seconds, a scalar or one per request ``(n,)``; default the pipeline's.
        tiers: service tier code per request, a scalar or shape ``(n,)``: an int in ``0 ..
            len(spec.tiers) - 1`` (the tier's index in the spec's ``tiers``), or 0 when the spec has no
            tiers; default 0.  Tiers are validated and carried into the simulator, but they do **not yet
            influence drop decisions or the report** (no tier-weighted goodput): today every tier is
            treated alike.
        jitter_cv: CV of the lognormal execution-time factor (mean 1); 0 = deterministic (§5a).
        autoscale: resize each stage's workers every sync to ``ceil(rate / per-worker throughput *
            headroom)`` (at least 1), new workers serving after ``cold_start_s``; otherwise fixed.
        cold_start_s: seconds before an added worker serves.
        headroom: autoscaling's over-provisioning factor (>= 1).
        workers: initial workers per stage (default: the spec's).
        sync_interval_s: planner period (s), at least :data:`MIN_SYNC_INTERVAL_S` (1 ms); the paper's
            default is 1 s.
        lam, window_s, adapt_window, samples: the planner's parameters (:class:`pard.planner.Planner`);
            ``samples`` is an int in ``1 ..`` :data:`MAX_SAMPLES`.
        seed: seeds execution jitter and the planner's Monte Carlo; an int in ``0 ..`` :data:`MAX_SEED`;
            same seed => identical report.
        progress: show a progress bar (rich) when the run lasts more than 2 s of wall time.
        max_visits: refuse runs whose requests x stages, or seconds spanned x stages, exceed this
            (default :data:`MAX_VISITS`), before building the simulator.
        max_syncs: refuse runs needing more than this many planner syncs over the arrivals' span
            (``span / sync_interval_s``; default :data:`MAX_SYNCS`), before building the simulator.

    Returns:
        The run's Report (conservation checked).

    Raises:
        ValueError / TypeError: a bad argument (the message names it and its value), e.g. a
            ``sync_interval_s`` below 1 ms or one needing more than ``max_syncs`` syncs;
        pard.workloads.TooManyArrivalsError (a ValueError): the run exceeds ``max_visits``;
        pard.ConfigError: an invalid pipeline.
    """
    from . import _core

    spec = resolve_pipeline(pipeline)
    pol = get_policy(policy)
    arr = _arrivals(arrivals)
    n = int(arr.size)
    jitter_cv = _check_float("jitter_cv", jitter_cv, low=0.0)
    cold_start_s = _check_float("cold_start_s", cold_start_s, low=0.0)
    headroom = _check_float("headroom", headroom, low=1.0)
    sync = _check_float("sync_interval_s", sync_interval_s, low=MIN_SYNC_INTERVAL_S)
    lam = None if lam is None else _check_float("lam", lam, low=0.0, high=1.0)
    window_s = _check_float("window_s", window_s, low=0.0, low_open=True)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an int in 0..2**64-1, got {_show(seed)}")
    if (isinstance(samples, (bool, np.bool_)) or not isinstance(samples, (int, np.integer))
            or not 1 <= samples <= MAX_SAMPLES):
        raise ValueError(f"samples must be an int in 1..{MAX_SAMPLES}, got {_show(samples)}")
    autoscale = _check_bool("autoscale", autoscale)
    adapt_window = _check_bool("adapt_window", adapt_window)
    progress = _check_bool("progress", progress)
    ns = len(spec.stages)
    if workers is not None:
        workers = list(workers)
        if len(workers) != ns or any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1
                                     or w > MAX_WORKERS for w in workers):
            raise ValueError(f"workers must list one int in 1..{MAX_WORKERS} per stage ({ns}), got {workers!r}")
    _check_size(n, (float(arr[-1]) - math.floor(arr[0]) + 1) if n else 1.0, ns, max_visits)
    _check_syncs((float(arr[-1]) - math.floor(arr[0])) if n else 0.0, sync, max_syncs)
    slo_s = _per_request("slo", spec.slo if slo is None else slo, n, spec.slo, np.float64, positive=True)
    tier = _tiers(tiers, n, spec)

    stages = core_stages(spec, workers)
    tier_weights = [float(w) for w in spec.tiers.values()]
    sim = _core.Simulator(stages=stages, policy=pol.core(), arrivals_s=arr, slo_s=slo_s, tier=tier,
                          jitter_cv=jitter_cv, seed=int(seed), cold_start_s=cold_start_s, tier_weights=tier_weights)
    planner = Planner(planner_stages(spec), policy=pol, lam=lam, window_s=window_s,
                      adapt_window=adapt_window, samples=int(samples), seed=int(seed) + 1)

    # per-second bookkeeping over the arrivals' horizon
    t0 = math.floor(arr[0]) if n else 0.0
    nb = int(math.floor(arr[-1] - t0)) + 1 if n else 1
    qsum = np.zeros((ns, nb))
    qcnt = np.zeros((ns, nb))
    wsum = np.zeros((ns, nb))
    wdt = np.zeros(nb)
    submitted = np.zeros(ns, dtype=np.int64)
    executed = np.zeros(ns, dtype=np.int64)
    compute = np.zeros(ns)
    per_worker = np.array([st.max_batch / st.duration(st.max_batch) for st in spec.stages])
    peak = np.array([_peak_throughput(st) for st in spec.stages])
    nominal = np.zeros(ns)  # profiled d(b) of the executed batches, summed (jitter's speed-up below)
    end_arrivals = float(arr[-1]) if n else 0.0
    bar = _Progress(progress, end_arrivals - t0, f"{pol.name} on {spec.name}")

    # Policies whose stage schedulers read none of the published terms (FCFS order with the naive,
    # clipper or nexus rule) need the planner only to drive autoscaling.
    needs_planner = autoscale or pol.order == "adaptive" or pol.drop in ("pard", "dagor")
    t = t0
    try:
        while True:
            t_prev, t = t, t + sync
            more = sim.run_until(t)
            stats = sim.take_stats()
            serving = [sim.workers(k) for k in range(ns)]
            for k, s in enumerate(stats):
                submitted[k] += len(s["arrival_s"])
                executed[k] += int(np.asarray(s["batch_size"]).sum())
                compute[k] += float(np.asarray(s["batch_duration_s"]).sum())
                bsz = np.asarray(s["batch_size"], dtype=np.int64)
                if bsz.size:
                    sizes, cnt = np.unique(bsz, return_counts=True)
                    nominal[k] += sum(c * spec.stages[k].duration(int(b)) for b, c in zip(sizes, cnt))
                tq = np.asarray(s["qdelay_t_s"], dtype=np.float64)
                if tq.size:  # per-second sums over the few seconds this interval touches, not all nb
                    idx = np.floor(tq - t0).astype(np.int64)
                    q = np.asarray(s["qdelay_s"], dtype=np.float64)
                    imin, imax = int(idx.min()), int(idx.max())
                    lo, hi = max(imin, 0), min(imax, nb - 1)
                    if lo <= hi:
                        if lo > imin or hi < imax:
                            ok = (idx >= lo) & (idx <= hi)
                            idx, q = idx[ok], q[ok]
                        idx -= lo
                        qsum[k, lo:hi + 1] += np.bincount(idx, weights=q, minlength=hi - lo + 1)
                        qcnt[k, lo:hi + 1] += np.bincount(idx, minlength=hi - lo + 1)
            b = int(math.floor(0.5 * (t_prev + t) - t0))
            if 0 <= b < nb:
                wsum[:, b] += np.asarray(serving, dtype=np.float64) * sync
                wdt[b] += sync
            if needs_planner:
                terms = planner.update(t, stats, serving)
                for k, term in enumerate(terms):
                    sim.publish(k, **term.publish_kwargs())
                if autoscale:
                    for k, term in enumerate(terms):
                        # demand_rate: the stage's input without rate-aware shedding at the entry (= in_rate
                        # otherwise), so that shedding for a short stage does not stop it being scaled up
                        sim.set_workers(k, min(MAX_WORKERS, max(1, math.ceil(term.demand_rate / per_worker[k] * headroom))))
            bar.update(t - t0)
            if not more and t >= end_arrivals:
                break
    finally:
        bar.close()

    # workers serving per second (seconds no sync point fell into take the previous second's value)
    workers_s = np.zeros((ns, nb))
    last = np.array([float(st.workers if workers is None else workers[k]) for k, st in enumerate(spec.stages)])
    for b in range(nb):
        if wdt[b] > 0:
            last = wsum[:, b] / wdt[b]
        workers_s[:, b] = last
    # The bound's capacity: each stage at its best batch size (max b/d(b)), sped up by the factor the
    # execution jitter made its batches faster than profiled over the run (>= 1; 1 without jitter).
    speedup = np.where(compute > 0, nominal / np.where(compute > 0, compute, 1.0), 1.0)
    capacity = (workers_s * (peak * np.maximum(speedup, 1.0))[:, None]).min(axis=0)

    out = sim.outcomes()
    return Report(
        policy=pol.name, pipeline=spec.name, stage_names=[st.name for st in spec.stages],
        send_s=arr, state=out["state"], finish_s=out["finish_s"], drop_stage=out["drop_stage"],
        reason=out["reason"], compute_s=out["compute_s"], reasons=list(_core.REASONS),
        stage_submitted=submitted, stage_executed=executed, stage_compute_s=compute,
        t0_s=t0, qdelay_sum_s=qsum, qdelay_count=qcnt, workers=workers_s, capacity=capacity, slo_s=slo_s,
        tier=tier, tier_names=list(spec.tiers), tier_weights=tier_weights,
    )


def compare(
    pipeline: "PipelineSpec | str | os.PathLike[str]",
    arrivals: npt.ArrayLike,
    policies: Iterable[str | PolicySpec] = ("pard", "nexus", "clipper++", "naive"),
    **params: Any,
) -> dict[str, Report]:
    """Simulate each policy on the same pipeline and arrivals; ``params`` as :func:`simulate`.

    ``tiers`` (in ``params``): per-request tier codes as in :func:`simulate`; tier-aware policies
    (``pard``) serve and shed by the tiers' weights, and every report has per-tier results.

    ``policies``: policy names or PolicySpecs (a single name or spec is one policy).  Returns policy
    name -> Report, in the order given.  Raises as :func:`simulate`; ValueError for an empty or
    duplicated policy list; TypeError when ``policies`` is not a name, PolicySpec or iterable.
    """
    if isinstance(policies, (str, PolicySpec)):
        policies = [policies]
    if not isinstance(policies, collections.abc.Iterable):
        raise TypeError(f"policies must be a policy name, a PolicySpec or an iterable of them, got "
                        f"{type(policies).__name__}: {policies!r}")
    specs = [get_policy(p) for p in policies]
    if not specs:
        raise ValueError("policies must name at least one policy, got none")
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"policies must not repeat a name, got {names!r}")
    spec = resolve_pipeline(pipeline)
    arr = _arrivals(arrivals)
    return {s.name: simulate(spec, arr, s, **params) for s in specs}
