"""``pard.ray.deploy``: put a pipeline on a Ray cluster -- stage actors, worker actors, one planner.

What runs where (docs/ray.md has the picture): the *driver* (the process that calls ``deploy``)
keeps the request table and decides every request's terminal state; each stage is one *stage actor*
holding that stage's C++ ``StageScheduler`` (``num_cpus=0``: it only schedules); each of the stage's
workers is a *worker actor* with the stage's resources and its own copy of the executor; one
*planner actor* runs :class:`pard.Planner`.  Ray places the actors on the cluster's nodes by their
resources; payloads move between them as object refs.

Requires the ``ray`` package (``pip install "pard[ray]"``) on every node, with pard installed there too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray

from ..errors import ConfigError, PardTypeError, PardValueError
from ..planner_config import PlannerConfig
from ..policies import get_policy
from ..config import resolve_pipeline
from ..runtime.setup import PayloadShape, executors_arg, positive_seconds, worker_counts
from ..wiring import planner_stages
from .clock import actor_offset
from .pipeline import RayPipeline
from .planner_actor import PlannerActor
from .stage import StageActor
from .worker import StageWorker

__all__ = ["deploy", "DEFAULT_WORKER_RESOURCES"]

#: A worker actor's Ray options when ``resources`` names none for its stage: one CPU.
DEFAULT_WORKER_RESOURCES: Mapping[str, Any] = {"num_cpus": 1}
_RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "scheduling_strategy")


def _resources(spec: Any, resources: Mapping[str, Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Each stage's worker actor options (``resources[stage]``, default :data:`DEFAULT_WORKER_RESOURCES`)."""
    names = [st.name for st in spec.stages]
    resources = resources or {}
    if not isinstance(resources, Mapping):
        raise PardTypeError(f"resources must map stage names to Ray actor options, got {type(resources).__name__}")
    bad = sorted(set(resources) - set(names))
    if bad:
        raise ConfigError(f"resources names unknown stages {bad}; stages are {names}")
    out = []
    for n in names:
        opts = resources.get(n, DEFAULT_WORKER_RESOURCES)
        if not isinstance(opts, Mapping):
            raise PardTypeError(f"resources[{n!r}] must be a mapping of Ray actor options, got {opts!r}")
        unknown = sorted(set(opts) - set(_RESOURCE_KEYS))
        if unknown:
            raise ConfigError(f"resources[{n!r}] has unknown option(s) {unknown}; allowed: {', '.join(_RESOURCE_KEYS)}")
        out.append(dict(opts))
    return out


def deploy(
    pipeline: Any,
    executors: Mapping[str, Any],
    *,
    policy: Any = "pard",
    workers: Mapping[str, int] | Sequence[int] | None = None,
    resources: Mapping[str, Mapping[str, Any]] | None = None,
    join: Callable[[list[Any]], Any] | None = None,
    payload_shape: Sequence[int] | None = None,
    ring_capacity: int = 65536,
    planner: PlannerConfig | Mapping[str, Any] | None = None,
    max_restarts: int = 3,
    planner_max_restarts: int = -1,
    ready_timeout_s: float = 120.0,
    clock_probes: int = 8,
) -> RayPipeline:
    """Deploy ``pipeline`` on the Ray cluster this process is connected to (``ray.init`` first).

    Args:
        pipeline: a :class:`pard.PipelineSpec`, a built-in name (``"tm"``, ...) or a spec file; its
            profiles drive the schedulers' estimates, its ``slo`` is the default SLO.
        executors: stage name -> executor, one per stage, as :class:`pard.Runtime` takes them (an
            ``ArrayExecutor``, a ``CallableExecutor`` or a callable ``list -> list``); each worker
            actor gets its own (pickled) copy, so it must pickle (``cloudpickle``).
        policy: a policy name (any of ``pard.POLICIES``) or a :class:`pard.PolicySpec`.
        workers: worker actors per stage, ``{stage: n}`` or a list; default the spec's ``workers``.
        resources: stage name -> Ray actor options of each of its workers (``num_cpus``, ``num_gpus``,
            ``memory``, ``resources`` for custom ones, ``accelerator_type``, ``scheduling_strategy``);
            default :data:`DEFAULT_WORKER_RESOURCES`.  Stage and planner actors take ``num_cpus=0``.
        join: for a stage with several predecessors, ``join(parts) -> payload`` (parts in topological
            order), run on that stage's workers; default ``tuple``.
        payload_shape: if given, ``submit`` checks every payload has this shape; default the entry
            executor's declared ``payload_shape``, else (an ``ArrayExecutor`` entry) the first payload's.
        ring_capacity: each stage's ingress ring slots (a power of two).
        planner: the planner's settings, a :class:`pard.PlannerConfig` or a mapping of its fields
            (``sync_interval_s``, ``lam``, ``window_s``, ``seed``, ...); default the paper's (1 s syncs).
        max_restarts: how often Ray restarts a worker actor that died (``-1``: always).
        planner_max_restarts: the same for the planner actor (default: always).
        ready_timeout_s: how long to wait for every actor to be placed and started (s).
        clock_probes: NTP-style probes per actor for its clock offset (:mod:`pard.ray.clock`).

    Returns:
        a running :class:`pard.ray.RayPipeline`.

    Raises:
        pard.ConfigError: unknown stages in ``executors``/``workers``/``resources``, bad counts or
            options, or actors Ray could not place within ``ready_timeout_s`` (the message names the
            stage and its resources).
        pard.errors.PardTypeError / PardValueError: arguments of the wrong type or out of range.
        RuntimeError: Ray is not initialised.
    """
    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialised: call ray.init() (or ray.init(address='auto') to join a "
                           "cluster started with `ray start --head`) before pard.ray.deploy")
    spec = resolve_pipeline(pipeline)
    pol = get_policy(policy)
    cfg = PlannerConfig.of(planner)
    positive_seconds("ready_timeout_s", ready_timeout_s)
    for name, v in (("max_restarts", max_restarts), ("planner_max_restarts", planner_max_restarts)):
        if isinstance(v, bool) or not isinstance(v, int) or v < -1:
            raise PardValueError(f"{name} must be an int >= -1, got {v!r}")
    if executors is None:
        raise PardTypeError("executors must map every stage to its executor (pard.ray ships each worker a copy)")
    counts = worker_counts(spec, workers)
    res = _resources(spec, resources)
    execs, default_join = executors_arg(spec, executors, None, join)
    names = [st.name for st in spec.stages]
    index = {n: k for k, n in enumerate(names)}
    shape = PayloadShape(payload_shape, [execs[n] for n in spec.entry_stages()])
    opts = cfg.planner_kwargs(0)
    epoch = time.time()

    stage_cls = ray.remote(StageActor)
    worker_cls = ray.remote(StageWorker)
    planner_cls = ray.remote(PlannerActor)
    stages = []
    for k in range(len(names)):
        stages.append(stage_cls.options(num_cpus=0, max_restarts=0, max_concurrency=1000).remote(
            spec, k, pol, int(ring_capacity), epoch))
    fleet: list[list[Any]] = []
    for k, st in enumerate(spec.stages):
        stage_join = default_join if len(spec.predecessors(st.name)) > 1 else None
        fleet.append([worker_cls.options(max_restarts=max_restarts, max_task_retries=0, max_concurrency=2, **res[k]).remote(
            st, execs[st.name], stage_join, epoch) for _ in range(counts[k])])
    actors = [(f"stage {n!r} (num_cpus=0)", s) for n, s in zip(names, stages)] + [
        (f"a worker of stage {names[k]!r} ({res[k]})", w) for k, ws in enumerate(fleet) for w in ws]
    _await_ready(actors, ready_timeout_s)
    offsets: dict[str, Any] = {}
    for label, a in actors:
        off = actor_offset(a, clock_probes)
        a.set_offset.remote(off.offset_s)
        offsets[label] = off
    successors = [[stages[index[s]] for s in st.successors] for st in spec.stages]
    ray.get([s.connect.remote(fleet[k], successors[k]) for k, s in enumerate(stages)], timeout=ready_timeout_s)
    plan = planner_cls.options(num_cpus=0, max_restarts=planner_max_restarts, max_task_retries=0).remote(
        planner_stages(spec), pol, opts, stages, counts, cfg.sync_interval_s, epoch)
    _await_ready([("the planner (num_cpus=0)", plan)], ready_timeout_s)
    off = actor_offset(plan, clock_probes)
    plan.set_offset.remote(off.offset_s)
    offsets["the planner"] = off
    return RayPipeline(spec=spec, policy=pol, epoch_s=epoch, stages=stages, workers=fleet, planner=plan,
                       shape=shape, offsets=offsets)


def _await_ready(actors: Sequence[tuple[str, Any]], timeout_s: float) -> None:
    """Wait until every actor is placed and constructed; else kill them all and say which were not."""
    refs = {a.__ray_ready__.remote(): label for label, a in actors}
    ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    try:
        ray.get(ready)
    except Exception:
        for _, a in actors:
            ray.kill(a, no_restart=True)
        raise
    if waiting:
        for _, a in actors:
            ray.kill(a, no_restart=True)
        missing = sorted({refs[r] for r in waiting})
        raise ConfigError(f"Ray could not start {len(waiting)} actor(s) within ready_timeout_s={timeout_s!r}: "
                          f"{missing}; the cluster lacks the resources they ask for (ray.cluster_resources() = "
                          f"{ray.cluster_resources()})")
