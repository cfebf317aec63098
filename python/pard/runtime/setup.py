"""Building a runtime from its arguments: executors, worker counts, stages with their C++ schedulers,
and the payload-shape check ``submit`` applies.  Every bad argument raises a
:class:`pard.errors.PardError` subclass naming the argument (or the stage) and the value."""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _core
from .._checks import show
from ..errors import ConfigError, PardTypeError, PardValueError, PardWarning
from ..executors import ArrayExecutor, _shape_arg, as_executor
from ..executors.llm_engine import profiled_llm
from ..profile import peak_throughput
from ..wiring import budget_fractions, core_profile, llm_arg
from .llm_workers import llm_engine_arg
from .workers import Stage

if TYPE_CHECKING:  # pragma: no cover
    from ..config import PipelineSpec
    from ..policies import PolicySpec

__all__ = ["options_arg", "executors_arg", "worker_counts", "ring_capacity_arg", "queue_sizes", "bind_executors",
           "build_stages", "PayloadShape", "positive_seconds", "QUEUE_SLOS", "MAX_RING_CAPACITY", "MAX_QUEUE_SIZE"]

#: Largest ingress ring a stage may have: the C++ ring allocates every slot up front (56 bytes
#: each, about 235 MB at this size), so a larger request is refused instead of failing in new[].
MAX_RING_CAPACITY = 1 << 22


def positive_seconds(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """``value`` as float seconds: finite and > 0 (>= 0 with ``allow_zero``); PardValueError naming ``name``."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
          and math.isfinite(float(value)) and (float(value) >= 0 if allow_zero else float(value) > 0))
    if not ok:
        raise PardValueError(f"{name} must be a finite number of seconds {'>=' if allow_zero else '>'} 0, "
                             f"got {show(value)}")
    return float(value)


def options_arg(options: Any, name: str, target: Callable[..., Any], *, skip: tuple[str, ...]) -> dict[str, Any]:
    """``options`` as keyword arguments of ``target``; PardTypeError naming ``name`` and any unknown key."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise PardTypeError(f"{name} must be a mapping of keyword arguments, got {type(options).__name__}: {options!r}")
    allowed = [p for p in inspect.signature(target).parameters if p not in skip]
    unknown = sorted(str(k) for k in options if k not in allowed)
    if unknown:
        raise PardTypeError(f"{name} has unknown option(s) {unknown} (in {dict(options)!r}); "
                            f"allowed: {', '.join(allowed)}")
    return dict(options)


def refuse_dnn_below_llm(spec: PipelineSpec) -> None:
    """The reference models stand in for DNN stages and :func:`pard.executors.llm_engine.profiled_llm` for
    llm stages; a DNN stage below an llm stage would get token ids where its reference network takes a
    fixed-shape tensor, so such a pipeline needs its own executors.  ConfigError naming the stages."""
    under: dict[str, bool] = {}  # stage -> an llm stage runs above it
    for name in spec.topological_order():
        under[name] = any(spec.stage(p).kind == "llm" or under[p] for p in spec.predecessors(name))
    below = [st.name for st in spec.stages if st.kind != "llm" and under[st.name]]
    if below:
        raise ConfigError(f"pipeline {spec.name!r}: stage(s) {below} run below an llm stage, and pard's reference "
                          f"models cannot take its token ids; give every stage an executor (stages=...)")


def executors_arg(spec: PipelineSpec, stages: Mapping[str, Any] | None, model_options: Any,
                  join: Callable[[list[Any]], Any] | None) -> tuple[dict[str, Any], Callable[[list[Any]], Any]]:
    """Stage name -> executor, and the join function (see :class:`pard.Runtime`'s ``stages``, ``join``)."""
    names = [st.name for st in spec.stages]
    if stages is None:
        from ..config import BUILTIN_NAMES
        from ..models import INPUT_SHAPE, join_inputs, reference_models  # the reference models load only here

        refuse_dnn_below_llm(spec)
        if spec.name not in BUILTIN_NAMES:  # a forgotten `stages=` would serve random networks in production
            warnings.warn(f"pard.Runtime({spec.name!r}) was given no `stages`: it serves pard's reference models "
                          f"(seeded random networks shaped like the profile) for {names}, not your models; pass "
                          f"stages={{name: executor}} (silence this with warnings.filterwarnings)", PardWarning,
                          stacklevel=3)

        models = reference_models(spec, **options_arg(model_options, "model_options", reference_models,
                                                      skip=("pipeline",)))
        entries = set(spec.entry_stages())
        executors = {
            n: (profiled_llm(spec.stage(n)) if spec.stage(n).kind == "llm" else
                ArrayExecutor(m, payload_shape=INPUT_SHAPE if n in entries else None,
                              to_host=not spec.stage(n).successors))
            for n, m in models.items()
        }
        return executors, join if join is not None else join_inputs
    if not isinstance(stages, Mapping):
        raise PardTypeError(f"stages must map stage names to executors, got {type(stages).__name__}")
    unknown = sorted(set(stages) - set(names))
    missing = [n for n in names if n not in stages]
    if unknown or missing:
        raise ConfigError(f"stages must give one executor per stage of {spec.name!r} {names}: "
                          f"missing {missing}, unknown {unknown}")
    executors = {}
    for n in names:
        if spec.stage(n).kind == "llm":  # an engine, or a factory of one per worker (runtime/llm_workers.py)
            executors[n] = stages[n]
            continue
        if not callable(stages[n]):
            raise PardTypeError(f"stages[{n!r}]: a stage executor must be callable (an ArrayExecutor, a "
                                f"CallableExecutor or a function list -> list), got "
                                f"{type(stages[n]).__name__}: {stages[n]!r}")
        executors[n] = as_executor(stages[n])
    return executors, join if join is not None else tuple


def worker_counts(spec: PipelineSpec, workers: Mapping[str, int] | Sequence[int] | None) -> list[int]:
    """Worker threads per stage in ``spec.stages`` order (default the spec's ``workers``).

    Each count is an int in ``1 ..`` :data:`pard.config.MAX_WORKERS` (1 024) and their sum at most
    :data:`~pard.config.models.MAX_TOTAL_WORKERS` (4 096), the bounds a spec's ``workers`` have: one
    thread per worker, and a count past them is a typo that would exhaust the OS's threads.

    Raises:
        ConfigError: an unknown stage name, a wrong length, or a count out of those bounds (named).
    """
    from ..config.models import MAX_TOTAL_WORKERS, MAX_WORKERS

    names = [st.name for st in spec.stages]
    if workers is None:
        counts = [int(st.workers) for st in spec.stages]
    elif isinstance(workers, Mapping):
        bad = sorted(set(workers) - set(names))
        if bad:
            raise ConfigError(f"workers names unknown stages {bad}; stages are {names}")
        counts = [workers.get(n, spec.stage(n).workers) for n in names]
    else:
        counts = list(workers)
        if len(counts) != len(names):
            raise ConfigError(f"workers must list one count per stage ({len(names)}), got {counts!r}")
    for n, c in zip(names, counts):
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 1 <= c <= MAX_WORKERS:
            raise ConfigError(f"workers for stage {n!r} must be an int in 1..{MAX_WORKERS} (MAX_WORKERS, one "
                              f"thread per worker: more is a typo, not a deployment), got {show(c)}")
    total = sum(int(c) for c in counts)
    if total > MAX_TOTAL_WORKERS:
        raise ConfigError(f"workers sum to {total} over the stages {dict(zip(names, (int(c) for c in counts)))}, "
                          f"more than MAX_TOTAL_WORKERS = {MAX_TOTAL_WORKERS} (one thread per worker)")
    return [int(c) for c in counts]


def ring_capacity_arg(value: Any) -> int:
    """``ring_capacity`` checked: an int, a power of two in ``[2, MAX_RING_CAPACITY]``.

    Raises:
        PardTypeError: not an int.  PardValueError: not a power of two, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise PardTypeError(f"ring_capacity must be an int, got {type(value).__name__}: {show(value)}")
    v = int(value)
    if not (2 <= v <= MAX_RING_CAPACITY) or v & (v - 1):
        raise PardValueError(f"ring_capacity must be a power of two in [2, {MAX_RING_CAPACITY}] "
                             f"(MAX_RING_CAPACITY: the ring allocates every slot up front), got {show(value)}")
    return v


#: The default queue bound of a stage is this many SLOs' worth of its capacity (see :func:`queue_sizes`).
QUEUE_SLOS = 10.0

#: Largest queue bound a stage may have (2^31 - 1 requests): every queued request holds its payload,
#: so a longer queue cannot fit in memory, and the C++ core keeps the bound in an int64.  The default
#: bound is capped here (a fast profile with a long SLO multiplies out past any integer); a larger
#: ``max_queue_size`` is refused.
MAX_QUEUE_SIZE = 2**31 - 1


def queue_sizes(spec: PipelineSpec, counts: Sequence[int], max_queue_size: Any) -> list[int]:
    """Each stage's queue bound: ``max_queue_size`` (an int >= 1 for every stage, or ``{stage: int}``
    for some), else ``ceil(QUEUE_SLOS * slo * capacity)`` with ``capacity = workers * max_b b / d(b)``,
    and at least one full batch per worker.  A request queued behind more than one SLO's worth of work
    cannot finish in time in FCFS order; the bound is ten times that, so that it only stops a runaway
    queue (naive at 10x overload) and never turns away the fresh requests a budget-ordered policy
    would serve first (pard purges its infeasible requests and keeps far less than that queued).
    The default is capped at :data:`MAX_QUEUE_SIZE`.

    Raises:
        ConfigError: ``max_queue_size`` names an unknown stage.  PardValueError: a bound that is not an
            int in ``1 .. MAX_QUEUE_SIZE`` (names the stage and the value)."""
    names = [st.name for st in spec.stages]
    given: dict[str, Any] = {}
    if isinstance(max_queue_size, Mapping):
        bad = sorted(set(max_queue_size) - set(names))
        if bad:
            raise ConfigError(f"max_queue_size names unknown stages {bad}; stages are {names}")
        given = dict(max_queue_size)
    elif max_queue_size is not None:
        given = {n: max_queue_size for n in names}
    out = []
    for st, w in zip(spec.stages, counts):
        q = given.get(st.name)
        if q is None:
            cap = w * peak_throughput(st.profile, st.max_batch)
            want = QUEUE_SLOS * spec.slo * cap  # float: finite for any valid spec, but may pass any int
            q = min(MAX_QUEUE_SIZE, max(w * st.batch_limit, math.ceil(min(want, float(MAX_QUEUE_SIZE)))))
        elif isinstance(q, bool) or not isinstance(q, (int, np.integer)) or not 1 <= q <= MAX_QUEUE_SIZE:
            raise PardValueError(f"max_queue_size for stage {st.name!r} must be an int in 1..{MAX_QUEUE_SIZE} "
                                 f"(MAX_QUEUE_SIZE), got {show(q)}")
        out.append(int(q))
    return out


def bind_executors(spec: PipelineSpec, executors: Mapping[str, Any], counts: Sequence[int],
                   threads: int | None) -> None:
    """Tell each executor that has a ``bind`` hook (:class:`pard.executors.BatchExecutor`) its stage,
    worker count and cores per worker (``threads``, the runtime's ``blas_threads``), before any batch.

    An engine executor creates its per-worker sessions here, or checks that its server's model config
    matches the stage (raising :class:`pard.ConfigError`).
    """
    for st, count in zip(spec.stages, counts):
        if st.kind == "llm":
            continue
        bind = getattr(executors[st.name], "bind", None)
        if callable(bind):
            bind(st, workers=int(count), threads=threads)


def build_stages(spec: PipelineSpec, policy: PolicySpec, executors: Mapping[str, Any], counts: Sequence[int],
                 ring_capacity: int, max_queue: Sequence[int], threads: int | None = None) -> list[Stage]:
    """One :class:`Stage` per spec stage, each with its C++ scheduler, linked to successors and predecessors;
    the executors bound first (:func:`bind_executors`, ``threads`` = cores per worker)."""
    bind_executors(spec, executors, counts, threads)
    core_policy = policy.core()
    fractions = budget_fractions(spec)
    index = {st.name: k for k, st in enumerate(spec.stages)}
    order = spec.topological_order()
    stages = []
    for k, st in enumerate(spec.stages):
        sched = _core.StageScheduler(stage=k, profile=core_profile(st), max_batch=int(st.batch_limit),
                                     policy=core_policy, budget_fraction=float(fractions[k]),
                                     ring_capacity=int(ring_capacity),
                                     tier_weights=[float(w) for w in spec.tiers.values()],
                                     entry=not spec.predecessors(st.name), llm=llm_arg(st))
        ex = llm_engine_arg(st, executors[st.name], int(counts[k])) if st.kind == "llm" else executors[st.name]
        stage = Stage(k, st, sched, ex, int(counts[k]), int(max_queue[k]),
                      counts[k] * peak_throughput(st.profile, st.max_batch))
        stage.successors = [index[s] for s in st.successors]
        stage.preds = [index[p] for p in sorted(spec.predecessors(st.name), key=order.index)]
        stages.append(stage)
    return stages


def shape_of(payload: Any) -> tuple[int, ...] | None:
    """A payload's array shape (its ``shape``, else ``np.shape``), or None when it has none (ragged)."""
    shape = getattr(payload, "shape", None)
    if type(shape) is tuple and all(type(d) is int for d in shape):  # an ndarray's: taken as it is
        return shape
    try:
        return tuple(int(d) for d in (np.shape(payload) if shape is None else shape))
    except Exception:  # ragged nested sequences, or a shape attribute that is not a tuple of ints
        return None


class PayloadShape:
    """The shape ``submit`` requires of a payload: given, declared by the entry executor, or learnt.

    An ArrayExecutor stacks a batch's payloads, so one payload of another shape would fail its whole
    batch: without a declared shape, the first payload submitted fixes it (when an entry stage's
    executor is an ArrayExecutor).  Other executors get no check unless a shape is given.
    """

    def __init__(self, given: Sequence[int] | None, entry_executors: Sequence[Any]) -> None:
        self.source = "given as payload_shape"
        if given is None:
            given = getattr(entry_executors[0], "payload_shape", None)
            self.source = "the entry executor's payload_shape"
        self.shape: tuple[int, ...] | None = None if given is None else _shape_arg(given, "payload_shape")
        self.learn = self.shape is None and any(isinstance(e, ArrayExecutor) for e in entry_executors)
        if self.learn:
            self.source = "learnt from the first payload submitted"

    def message(self, shape: tuple[int, ...] | None) -> str:
        return (f"payload shape {shape} does not match the entry stage's payload_shape {self.shape} "
                f"({self.source}); a payload of another shape would fail its whole batch")

    def check(self, payload: Any) -> tuple[tuple[int, ...] | None, bool]:
        """Check ``payload`` before registration: (its shape, True when it may fix the shape)."""
        if self.shape is None and not self.learn:
            return None, False
        shape = shape_of(payload)
        if self.shape is not None:
            if shape != self.shape:
                raise PardValueError(self.message(shape))
            return shape, False
        if shape is None:
            raise PardValueError(
                f"payload of type {type(payload).__name__} has no array shape, and the entry stage's "
                f"ArrayExecutor stacks a batch's payloads into one array; pass arrays of one shape")
        return shape, True

    def learn_locked(self, shape: tuple[int, ...] | None) -> None:
        """The first payload submitted fixes the shape (called under the ledger's lock: one wins)."""
        if self.shape is None:
            self.shape = shape
            self.learn = False
        elif shape != self.shape:
            raise PardValueError(self.message(shape))
