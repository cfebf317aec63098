"""The live runtime: worker threads around the C++ stage schedulers, on a real monotonic clock.

:class:`Runtime` serves one pipeline (:class:`pard.config.PipelineSpec`).  Each stage has one
``pard._core.StageScheduler`` (ingress ring, double-ended priority queue, drop rule; DESIGN §3.4)
and ``workers`` worker threads that form batches from it and run them through the stage's executor
(:mod:`pard.executors`).  A planner thread runs :class:`pard.planner.Planner` every sync interval,
unchanged from the simulator, and publishes its terms to the schedulers (DESIGN §3.5).

Request life cycle.  ``submit(payload)`` validates its arguments, assigns the next request id,
pushes the request into the entry stage's ring and returns a :class:`RequestFuture`.  A worker
forms a batch (the scheduler drops what its policy drops, with a reason), runs the executor, and
hands each output to the next stage (arrival time = the batch's end) or, at the exit, resolves the
future with the output.  Every request ends in exactly one terminal state:

=========  ==================================================================================
on_time    finished at or before its deadline (``send + slo``); the future holds the output
late       finished after its deadline; the future still holds the output
dropped    a stage's policy dropped it (``pard.Dropped(request_id, stage, reason)``), or it was
           cancelled: by ``future.cancel()`` (the future is then *cancelled*) or by
           ``close()`` (``Dropped`` with reason ``"cancelled"``); reason code ``cancelled``
rejected   the entry ring was full (back-pressure): ``pard.Rejected``
failed     the stage's executor raised on its batch -- any exception, ``SystemExit`` and
           ``KeyboardInterrupt`` included; the worker carries on -- or a worker of a stage it
           was queued at or would reach died: ``pard.ExecutorError`` (``__cause__`` is the
           original exception)
=========  ==================================================================================

A worker thread survives whatever its executor raises.  Should one die anyway (an error outside
the executor call), the runtime notices: its stage is marked dead, the requests that worker held,
those queued at the stage and those reaching it later end as ``failed``, and ``submit`` raises
RuntimeError naming the dead stage.

so that ``submitted = on_time + late + dropped + rejected + failed`` holds exactly once every
request has ended (``close()`` ensures that).  Cancellations are counted as drops with reason
``cancelled`` -- the same reason code the C++ schedulers use for discarded sibling branches -- so
the identity of DESIGN §4 needs no sixth term.  Bad ``submit`` arguments raise at once and are
counted nowhere (no id is assigned, ``close()`` does not wait for them); an error raised after
registration (the C++ ``submit`` raising) undoes the registration the same way.

Batching (DESIGN §3.1) with one executor thread per worker.  A worker is idle, or runs one batch,
and may hold the *next* batch it collected:

* idle, queue empty: it blocks on its stage's condition variable (no spinning; the GIL is
  released while it waits) until a request arrives, then forms a batch at once (``now = t_e``,
  batch wait ``W = 0``) and starts it;
* when a batch *starts*, the worker first collects its next batch from the queue, with expected
  start ``t_e = now + d(b)`` (the running batch's profiled duration), then calls the executor; the
  collected batch is fixed and waits until the running one ends (``W = start - collected``);
* if the queue was empty when its batch started, the worker forms a fresh batch when the batch
  ends (``W = 0``).

Forming the next batch takes microseconds inside C++ (the GIL is released), so collecting it
just before the executor call is, to the clock's resolution, collecting it as the batch starts.

Cancellation.  ``StageScheduler`` has no erase-by-id, so a cancelled request stays in the C++ queue
as a *ghost*: it is terminal at once (its future done, its place in :meth:`Runtime.queued` freed at
once), and when a worker's ``form_batch`` pops it the worker discards it and tops the batch up with
another ``form_batch`` (any surplus goes back into the ring with its original keys), so the ghost
takes no place in a batch.  The same path discards a DAG request's sibling branch once the request
was dropped in another branch.

Timing.  All times are float seconds since the runtime started (``time.perf_counter``, monotonic).
The scheduler's own cost is accumulated for :meth:`Runtime.overhead`: around each ``form_batch``
call and each planner update (with its ``publish`` calls) as the calling thread's CPU time
(``time.thread_time_ns``), so that waiting for the GIL after the call (which releases it) is not
charged to the scheduler; around each ``submit`` (which keeps the GIL and takes a fraction of a
microsecond) as wall time (``time.perf_counter_ns``), which costs far less to read than the
thread CPU clock.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _core
from .errors import ConfigError, Dropped, ExecutorError, Rejected
from .executors import _shape_arg, as_executor

if TYPE_CHECKING:  # pragma: no cover
    from .config import PipelineSpec
    from .report import Report

__all__ = ["Runtime", "RequestFuture", "STATES"]

#: Outcome state codes, as ``pard._core.Simulator.outcomes()["state"]`` and ``pard.report.STATES``.
STATES = ("pending", "on_time", "late", "dropped", "rejected", "failed")
_PENDING, _ON_TIME, _LATE, _DROPPED, _REJECTED, _FAILED = range(6)
_REASONS: list[str] = list(_core.REASONS)
_CANCELLED = _REASONS.index("cancelled")
_REJECTED_CODE = _REASONS.index("rejected")
_INT32_MAX = 2**31 - 1
#: The largest SLO ``submit`` accepts (s): the C++ core caps times at 1e9 s (about 31.7 years).
_MAX_SLO_S = 1e9


def _shape_of(payload: Any) -> tuple[int, ...] | None:
    """A payload's array shape (its ``shape``, else ``np.shape``), or None when it has none (ragged)."""
    shape = getattr(payload, "shape", None)
    try:
        return tuple(int(d) for d in (np.shape(payload) if shape is None else shape))
    except Exception:  # ragged nested sequences, or a shape attribute that is not a tuple of ints
        return None


def _options_arg(options: Any, name: str, target: Callable[..., Any], *, skip: tuple[str, ...]) -> dict[str, Any]:
    """``options`` as keyword arguments of ``target``; TypeError naming ``name`` and any unknown key."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"{name} must be a mapping of keyword arguments, got {type(options).__name__}: {options!r}")
    import inspect

    allowed = [p for p in inspect.signature(target).parameters if p not in skip]
    unknown = sorted(str(k) for k in options if k not in allowed)
    if unknown:
        raise TypeError(f"{name} has unknown option(s) {unknown} (in {dict(options)!r}); "
                        f"allowed: {', '.join(allowed)}")
    return dict(options)


class RequestFuture(Future):  # type: ignore[type-arg]
    """A :class:`concurrent.futures.Future` for one request, with its id.

    ``result()`` returns the pipeline's output (for a pipeline with several exit stages, a dict
    ``{exit stage: output}``) or raises ``pard.Dropped`` / ``pard.Rejected`` / ``pard.ExecutorError``.
    ``cancel()`` succeeds while the request has not ended: the request becomes terminal at once
    (counted as dropped, reason ``cancelled``) and leaves its queue's order immediately.
    """

    request_id: int

    def __init__(self, runtime: Runtime, req: _Request) -> None:
        super().__init__()
        self._runtime = runtime
        self._req: _Request | None = req  # dropped once the request has ended (frees its payloads)
        self.request_id = req.id

    def cancel(self) -> bool:
        req = self._req
        if req is None or not self._runtime._cancel(req):
            return False
        self._req = None
        return super().cancel()


class _Request:
    __slots__ = ("id", "send_s", "deadline_s", "tier", "future", "state", "inputs", "arrival_s",
                 "queued", "stage", "parts", "outputs", "sinks_left")

    def __init__(self, rid: int, send_s: float, deadline_s: float, tier: int, n_stages: int, sinks: int) -> None:
        self.id = rid
        self.send_s = send_s
        self.deadline_s = deadline_s
        self.tier = tier
        self.future: RequestFuture | None = None
        self.state = _PENDING
        self.inputs: list[Any] = [None] * n_stages
        self.arrival_s: list[float] = [0.0] * n_stages
        self.queued: set[int] = set()
        self.stage = 0
        self.parts: dict[int, dict[int, Any]] | None = None
        self.outputs: dict[int, Any] | None = None
        self.sinks_left = sinks


class _Outcomes:
    """Growable per-request outcome arrays, indexed by request id (the Simulator's outcomes() form)."""

    def __init__(self) -> None:
        self.n = 0
        cap = 1024
        self.send_s = np.zeros(cap)
        self.slo_s = np.zeros(cap)
        self.tier = np.zeros(cap, dtype=np.int32)
        self.state = np.zeros(cap, dtype=np.int8)
        self.finish_s = np.full(cap, np.nan)
        self.drop_stage = np.full(cap, -1, dtype=np.int32)
        self.reason = np.full(cap, -1, dtype=np.int32)
        self.compute_s = np.zeros(cap)

    def append(self, send_s: float, slo_s: float, tier: int) -> int:
        i = self.n
        if i == self.send_s.size:
            for name in ("send_s", "slo_s", "tier", "state", "finish_s", "drop_stage", "reason", "compute_s"):
                old = getattr(self, name)
                fill = np.nan if name == "finish_s" else (-1 if name in ("drop_stage", "reason") else 0)
                new = np.full(old.size * 2, fill, dtype=old.dtype)
                new[: old.size] = old
                setattr(self, name, new)
        self.send_s[i] = send_s
        self.slo_s[i] = slo_s
        self.tier[i] = tier
        self.n = i + 1
        return i


class _Stage:
    """One stage's scheduler, executor, workers and statistics logs."""

    def __init__(self, index: int, spec: Any, sched: Any, executor: Any, workers: int) -> None:
        self.index = index
        self.name: str = spec.name
        self.spec = spec
        self.sched = sched
        self.executor = executor
        self.workers = workers
        self.max_batch = int(spec.max_batch)
        self.profile = {int(b): float(d) for b, d in spec.profile.items()}
        self.cond = threading.Condition(threading.Lock())
        self.pending = 0  # requests pushed into the scheduler and not yet returned by form_batch
        self.successors: list[int] = []
        self.preds: list[int] = []
        # append-only logs (list.append is atomic under the GIL); the planner reads them by index
        self.arrivals: list[float] = []
        self.q_t: list[float] = []
        self.q_s: list[float] = []
        self.batches: list[tuple[float, float, int, float]] = []  # (start, duration, size, wait)
        self.drops = 0
        self.threads: list[threading.Thread] = []
        #: (thread name, exception) once one of this stage's workers died outside the executor call
        self.dead: tuple[str, BaseException] | None = None

    def duration(self, b: int) -> float:
        return float(self.spec.duration(max(1, int(b))))


class _Clock:
    """Per-thread accumulators of the time spent in the scheduler (ns), summed on demand."""

    def __init__(self) -> None:
        self.sched_ns = 0
        self.planner_ns = 0


class Runtime:
    """Serve a pipeline live: worker threads per stage around the C++ stage schedulers.

    Args:
        pipeline: a :class:`pard.config.PipelineSpec`, a built-in name (``"tm"``, ...) or a spec
            file.  Its profiles drive the schedulers' estimates (use a measured profile, see
            :mod:`pard.profiling`), its ``slo`` is the default SLO, its ``workers`` the default
            worker counts.
        stages: stage name -> executor (an :class:`~pard.executors.ArrayExecutor`, a
            :class:`~pard.executors.CallableExecutor` or any callable ``list -> list``, see
            :func:`pard.executors.as_executor`), one per stage.  ``None``: the reference models of
            :mod:`pard.models` (``scale`` and ``seed`` as ``model_options``) in ArrayExecutors.
        policy: a policy name (:data:`pard.policies.POLICIES`) or a ``PolicySpec``.
        workers: worker threads per stage, ``{stage: n}`` or a list in ``pipeline.stages`` order;
            default the spec's ``workers``.
        sync_interval_s: the planner's period (s, > 0; default 1 s as the paper and the simulator).
        payload_shape: if given (a sequence of ints >= 0), ``submit`` checks every payload has this
            shape; default: the entry executor's ``payload_shape`` when it declares one
            (ArrayExecutors of reference models do); else, when an entry stage's executor is an
            :class:`~pard.executors.ArrayExecutor` (which stacks a batch's payloads, so one odd
            shape fails the whole batch), the shape of the first payload submitted.  A payload of
            another shape then raises ValueError at ``submit`` and is counted nowhere.  Other
            executors (callables) get no check unless ``payload_shape`` is given.
        join: for a stage with several predecessors, ``join(outputs) -> payload`` with the
            predecessors' outputs in topological order; default :func:`pard.models.join_inputs`
            when ``stages`` is None, else ``tuple``.
        ring_capacity: each stage's ingress ring slots (a power of two; a full entry ring rejects).
        blas_threads: limit BLAS to this many threads while the runtime runs (threadpoolctl; the
            limit is process-wide, so one worker's BLAS call uses one core); ``None`` leaves it.
        planner_options: keyword arguments for :class:`pard.planner.Planner` (``lam``, ``window_s``,
            ``adapt_window``, ``samples``, ``seed``).
        model_options: keyword arguments for :func:`pard.models.reference_models` (``stages=None``).
        start: start the threads now (default); otherwise call :meth:`start`.

    Raises:
        pard.ConfigError / ValueError / TypeError: a bad argument (named, with its value).
    """

    def __init__(
        self,
        pipeline: PipelineSpec | str,
        stages: Mapping[str, Any] | None = None,
        *,
        policy: Any = "pard",
        workers: Mapping[str, int] | Sequence[int] | None = None,
        sync_interval_s: float = 1.0,
        payload_shape: Sequence[int] | None = None,
        join: Callable[[list[Any]], Any] | None = None,
        ring_capacity: int = 65536,
        blas_threads: int | None = 1,
        planner_options: Mapping[str, Any] | None = None,
        model_options: Mapping[str, Any] | None = None,
        start: bool = True,
    ) -> None:
        from .planner import Planner
        from .policies import get_policy
        from .sim import budget_fractions, planner_stages, resolve_pipeline

        spec = resolve_pipeline(pipeline)
        self._spec = spec
        self._policy = get_policy(policy)
        if isinstance(sync_interval_s, bool) or not isinstance(sync_interval_s, (int, float)) or not (
            math.isfinite(sync_interval_s) and sync_interval_s > 0
        ):
            raise ValueError(f"sync_interval_s must be a finite number of seconds > 0, got {sync_interval_s!r}")
        self._sync_s = float(sync_interval_s)
        if blas_threads is not None and (isinstance(blas_threads, bool) or not isinstance(blas_threads, int)
                                         or blas_threads < 1):
            raise ValueError(f"blas_threads must be an int >= 1 or None, got {blas_threads!r}")
        self._blas_threads = blas_threads
        names = [st.name for st in spec.stages]
        index = {n: k for k, n in enumerate(names)}

        # executors
        if stages is None:
            from .executors import ArrayExecutor
            from .models import INPUT_SHAPE, join_inputs, reference_models

            models = reference_models(spec, **_options_arg(model_options, "model_options", reference_models,
                                                           skip=("pipeline",)))
            entries = set(spec.entry_stages())
            executors = {
                n: ArrayExecutor(m, payload_shape=INPUT_SHAPE if n in entries else None, to_host=not spec.stage(n).successors)
                for n, m in models.items()
            }
            if join is None:
                join = join_inputs
        else:
            if not isinstance(stages, Mapping):
                raise TypeError(f"stages must map stage names to executors, got {type(stages).__name__}")
            unknown = sorted(set(stages) - set(names))
            missing = [n for n in names if n not in stages]
            if unknown or missing:
                raise ConfigError(
                    f"stages must give one executor per stage of {spec.name!r} {names}: "
                    f"missing {missing}, unknown {unknown}"
                )
            executors = {}
            for n in names:
                if not callable(stages[n]):
                    raise TypeError(f"stages[{n!r}]: a stage executor must be callable (an ArrayExecutor, a "
                                    f"CallableExecutor or a function list -> list), got "
                                    f"{type(stages[n]).__name__}: {stages[n]!r}")
                executors[n] = as_executor(stages[n])
        self._join: Callable[[list[Any]], Any] = join if join is not None else tuple

        # workers
        if workers is None:
            counts = [int(st.workers) for st in spec.stages]
        elif isinstance(workers, Mapping):
            bad = sorted(set(workers) - set(names))
            if bad:
                raise ConfigError(f"workers names unknown stages {bad}; stages are {names}")
            counts = [int(workers.get(n, spec.stage(n).workers)) for n in names]
        else:
            counts = list(workers)
            if len(counts) != len(names):
                raise ConfigError(f"workers must list one count per stage ({len(names)}), got {counts!r}")
        for n, c in zip(names, counts):
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1:
                raise ConfigError(f"workers for stage {n!r} must be an int >= 1, got {c!r}")

        # schedulers
        core_policy = self._policy.core()
        fractions = budget_fractions(spec)
        self._stages: list[_Stage] = []
        for k, st in enumerate(spec.stages):
            pts = sorted(st.profile.items())
            sched = _core.StageScheduler(
                stage=k, profile=_core.Profile([int(b) for b, _ in pts], [float(d) for _, d in pts]),
                max_batch=int(st.max_batch), policy=core_policy, budget_fraction=float(fractions[k]),
                ring_capacity=int(ring_capacity),
            )
            self._stages.append(_Stage(k, st, sched, executors[st.name], int(counts[k])))
        for k, st in enumerate(spec.stages):
            self._stages[k].successors = [index[s] for s in st.successors]
            self._stages[k].preds = [index[p] for p in sorted(spec.predecessors(st.name),
                                                                key=spec.topological_order().index)]
        self._entries = [index[n] for n in spec.entry_stages()]
        self._exits = [index[n] for n in spec.exit_stages()]

        from .executors import ArrayExecutor as _ArrayExecutor

        self._shape_source = "given as payload_shape"
        if payload_shape is None:
            payload_shape = getattr(executors[names[self._entries[0]]], "payload_shape", None)
            self._shape_source = "the entry executor's payload_shape"
        self._payload_shape: tuple[int, ...] | None = (
            None if payload_shape is None else _shape_arg(payload_shape, "payload_shape"))
        # An ArrayExecutor stacks a batch's payloads, so one payload of another shape would fail
        # its whole batch: without a declared shape, the first payload submitted fixes it.
        self._learn_shape = self._payload_shape is None and any(
            isinstance(executors[names[k]], _ArrayExecutor) for k in self._entries)
        if self._learn_shape:
            self._shape_source = "learnt from the first payload submitted"
        self._entry_set = frozenset(self._entries)

        opts = _options_arg(planner_options, "planner_options", Planner.__init__, skip=("self", "stages", "policy"))
        self._planner = Planner(planner_stages(spec), policy=self._policy, **opts)

        self._lock = threading.Lock()  # guards request ids, outcomes, terminal transitions
        self._idle = threading.Condition(self._lock)
        self._live: dict[int, _Request] = {}
        self._dead: _Stage | None = None  # the first stage whose worker died (submit then raises)
        self._out = _Outcomes()
        self._counts = [0] * 6
        self._inflight = 0
        self._accepting = False
        self._started = False
        self._closed = False
        self._stop = False
        self._stop_event = threading.Event()
        self._clocks: list[_Clock] = []
        self._local = threading.local()
        self._t0 = time.perf_counter()
        self._planner_thread: threading.Thread | None = None
        self._planner_calls = 0
        self._blas_ctx: Any = None
        self._terms_log: list[tuple[float, list[Any]]] = []
        #: Exceptions raised by planner updates (the schedulers keep the last published terms).
        self.planner_errors: list[BaseException] = []
        if start:
            self.start()

    # ------------------------------------------------------------------ properties
    @property
    def pipeline(self) -> PipelineSpec:
        """The pipeline served."""
        return self._spec

    @property
    def policy(self) -> str:
        """The policy's name."""
        return self._policy.name

    @property
    def workers(self) -> dict[str, int]:
        """Worker threads per stage."""
        return {st.name: st.workers for st in self._stages}

    @property
    def payload_shape(self) -> tuple[int, ...] | None:
        """The shape ``submit`` requires of a payload (given, declared or learnt), or None (no check)."""
        return self._payload_shape

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has begun (``submit`` then raises)."""
        return self._closed or (self._started and not self._accepting)

    def now(self) -> float:
        """Seconds since the runtime was created (the clock every recorded time uses)."""
        return time.perf_counter() - self._t0

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self._started else "not started")
        return (f"Runtime({self._spec.name!r}, policy={self.policy!r}, workers={self.workers}, "
                f"{state}, submitted={self._out.n})")

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the worker and planner threads (idempotent).  Raises RuntimeError once closed."""
        if self._closed:
            raise RuntimeError("this Runtime is closed; create a new one")
        if self._started:
            return
        if self._blas_threads is not None:
            from threadpoolctl import threadpool_limits

            self._blas_ctx = threadpool_limits(limits=self._blas_threads, user_api="blas")
        self._t0 = time.perf_counter()
        self._started = True
        self._accepting = True
        for st in self._stages:
            for w in range(st.workers):
                t = threading.Thread(target=self._worker, args=(st,), name=f"pard-{st.name}-{w}", daemon=True)
                st.threads.append(t)
                t.start()
        self._planner_thread = threading.Thread(target=self._plan_loop, name="pard-planner", daemon=True)
        self._planner_thread.start()

    def __enter__(self) -> Runtime:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(drain=True)

    def close(self, drain: bool = True, *, timeout_s: float | None = None) -> None:
        """Stop accepting requests, end every in-flight request, stop the threads.

        Args:
            drain: wait until every in-flight request has finished, been dropped or failed (the
                workers keep serving under the policy).  ``False``: cancel every in-flight request
                at once (``pard.Dropped`` with reason ``"cancelled"``); batches already running finish
                but their results are discarded.
            timeout_s: bounds how long ``close`` blocks in all (s, >= 0; None: no limit).  With
                ``drain``, what has not ended by then is cancelled; then ``close`` waits for the
                threads until the same deadline.  Python threads cannot be killed: a worker whose
                executor is still running a batch then (a hung model) is left behind as a daemon
                thread -- its requests are already terminal, and whatever it returns is discarded
                -- and a :class:`RuntimeWarning` names its stage.  Without ``timeout_s``, ``close``
                waits for running batches to end, however long that takes.

        After ``close`` every request submitted is in a terminal state (its future resolved), even
        when it returned on ``timeout_s`` with a worker stuck.  Idempotent.  Raises RuntimeError
        when called from one of the runtime's own threads (it would wait for itself), ValueError
        for a negative or non-finite ``timeout_s``.
        """
        if threading.current_thread() in self._own_threads():
            raise RuntimeError("Runtime.close() must not be called from a worker or planner thread")
        if timeout_s is not None and (
            isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float, np.integer, np.floating))
            or not (math.isfinite(float(timeout_s)) and float(timeout_s) >= 0)
        ):
            raise ValueError(f"timeout_s must be a finite number of seconds >= 0 or None, got {timeout_s!r}")
        deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
        with self._lock:
            if self._closed:
                return
            self._accepting = False
            if drain and self._started:
                while self._inflight > 0:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    self._idle.wait(timeout=left)
        # cancel whatever is left (everything, with drain=False)
        for r in list(self._live.values()):
            self._terminal(r, _DROPPED, r.stage, _CANCELLED, self.now(),
                           Dropped(r.id, self._stages[r.stage].name, "cancelled"))
        self._stop = True
        self._stop_event.set()
        for st in self._stages:
            with st.cond:
                st.cond.notify_all()
        stuck: list[str] = []
        for t in self._own_threads():
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                stuck.append(t.name)
        self._closed = True
        if self._blas_ctx is not None:
            self._blas_ctx.restore_original_limits()
            self._blas_ctx = None
        if stuck:
            import warnings

            stages = sorted({st.name for st in self._stages for t in st.threads if t.name in stuck})
            what = f"stage(s) {stages}" if stages else "the planner"
            warnings.warn(
                f"Runtime.close(timeout_s={timeout_s!r}): thread(s) {stuck} of {what} still running after "
                f"the timeout (a hung executor?); left behind as daemon thread(s). Every request has ended; "
                f"whatever they return is discarded.",
                RuntimeWarning, stacklevel=2)

    def _own_threads(self) -> list[threading.Thread]:
        ts = [t for st in self._stages for t in st.threads]
        if self._planner_thread is not None:
            ts.append(self._planner_thread)
        return ts

    # ------------------------------------------------------------------ submit
    def submit(self, payload: Any, *, slo: float | None = None, tier: int = 0) -> RequestFuture:
        """Submit one request; returns its future at once.

        Args:
            payload: the entry stage's input for this request (e.g. an array of ``payload_shape``).
            slo: end-to-end SLO in seconds, in ``(0, 1e9]`` (the C++ core caps times at 1e9 s);
                default the pipeline's ``slo``.  The deadline is ``send + slo`` with ``send`` the
                runtime clock at this call.
            tier: service tier (int in [0, 2**31)), passed to the schedulers.

        Returns:
            a :class:`RequestFuture` resolving to the output, or raising ``pard.Dropped``,
            ``pard.Rejected`` (entry ring full) or ``pard.ExecutorError``.

        Raises (the request is then counted nowhere, and ``close()`` does not wait for it):
            ValueError: ``slo`` not in ``(0, 1e9]`` or not finite; ``tier`` out of range; the
                payload's shape differs from the expected one (``payload_shape``, given or learnt,
                see :class:`Runtime`).
            TypeError: ``slo`` or ``tier`` of the wrong type.
            RuntimeError: the runtime is not started or is closed, or a stage is dead (one of its
                worker threads died outside the executor call; the message names the stage).
            Whatever the entry stage's C++ ``submit`` raises (not expected once the arguments
            passed the checks above): the registration is undone and the error propagates.  In a
            DAG with several entry stages, if the request already reached one entry queue when
            another raised, it cannot be unregistered: it ends as ``failed`` at once and the error
            propagates.
        """
        slo_s = self._spec.slo if slo is None else self._check_slo(slo)
        if isinstance(tier, bool) or not isinstance(tier, (int, np.integer)):
            raise TypeError(f"tier must be an int, got {type(tier).__name__}: {tier!r}")
        if not 0 <= int(tier) <= _INT32_MAX:
            raise ValueError(f"tier must be in [0, 2**31), got {tier!r}")
        shape: tuple[int, ...] | None = None
        learning = False
        if self._payload_shape is not None or self._learn_shape:
            shape = _shape_of(payload)
            if self._payload_shape is not None:
                if shape != self._payload_shape:
                    raise ValueError(self._shape_message(shape))
            else:
                learning = True
                if shape is None:
                    raise ValueError(
                        f"payload of type {type(payload).__name__} has no array shape, and the entry stage's "
                        f"ArrayExecutor stacks a batch's payloads into one array; pass arrays of one shape")
        clock = self._clock()
        rejected_at = -1
        with self._lock:
            if not self._accepting:
                raise RuntimeError("this Runtime is not accepting requests (not started, or closed)")
            if self._dead is not None:
                raise RuntimeError(self._dead_message(self._dead))
            if learning:  # the first payload submitted fixes the shape (under the lock: one wins)
                if self._payload_shape is None:
                    self._payload_shape = shape
                    self._learn_shape = False
                elif shape != self._payload_shape:
                    raise ValueError(self._shape_message(shape))
            # Registration and the entry pushes happen under the lock, so that no other request is
            # registered in between: if the first push raises, the request is unregistered and its
            # id is reused (counted nowhere).  Lock order: self._lock, then a stage's cond.
            send = self.now()
            rid = self._out.append(send, slo_s, int(tier))
            req = _Request(rid, send, send + slo_s, int(tier), len(self._stages), len(self._exits))
            fut = RequestFuture(self, req)
            req.future = fut
            self._live[rid] = req
            self._inflight += 1
            self._counts[_PENDING] += 1
            failure: BaseException | None = None
            pushed = 0  # entry queues it reached (a worker may already have taken it from them)
            try:
                for k in self._entries:
                    if not self._enqueue(self._stages[k], req, send, payload, clock):
                        rejected_at = k
                        break
                    pushed += 1
            except BaseException as e:
                if pushed == 0:  # it reached no queue: unwind the registration completely
                    self._unregister_locked(req)
                    raise
                failure = e
        if failure is not None:
            # pushed into some entry stage(s) before the error: the id is in a queue and cannot be
            # reused, so the request ends as failed (never left in flight) and the error propagates
            err = ExecutorError(f"submit into entry stage failed: {type(failure).__name__}: {failure}")
            err.__cause__ = failure
            self._terminal(req, _FAILED, req.stage, -1, send, err)
            raise failure
        if rejected_at >= 0:
            self._terminal(req, _REJECTED, rejected_at, _REJECTED_CODE, send,
                           Rejected(f"stage {self._stages[rejected_at].name!r}'s ingress ring is full"))
        return fut

    def _shape_message(self, shape: tuple[int, ...] | None) -> str:
        return (f"payload shape {shape} does not match the entry stage's payload_shape {self._payload_shape} "
                f"({self._shape_source}); a payload of another shape would fail its whole batch")

    @staticmethod
    def _dead_message(st: _Stage) -> str:
        assert st.dead is not None
        name, exc = st.dead
        return (f"stage {st.name!r} is dead: its worker thread {name} died of {type(exc).__name__}: {exc!r} "
                f"(outside the executor call); the Runtime cannot serve requests any more, close it")

    async def submit_async(self, payload: Any, *, slo: float | None = None, tier: int = 0) -> Any:
        """``await``-able form of :meth:`submit`: returns the output or raises as ``future.result()``.

        Cancelling the awaiting task cancels the request.
        """
        fut = self.submit(payload, slo=slo, tier=tier)
        try:
            waiter = asyncio.wrap_future(fut)
        except BaseException:  # e.g. no running event loop: end the request rather than leak it
            fut.cancel()
            raise
        return await waiter

    def replay(
        self,
        arrivals_s: Sequence[float] | np.ndarray,
        payloads: Sequence[Any],
        *,
        slo: float | None = None,
        progress: Callable[[float], None] | None = None,
    ) -> list[RequestFuture]:
        """Submit one request per arrival time, in wall-clock time, from the calling thread.

        Args:
            arrivals_s: arrival offsets (s, sorted, >= 0) from the moment of this call.
            payloads: request ``i`` gets ``payloads[i % len(payloads)]``.
            slo: as :meth:`submit`.
            progress: called with the elapsed replay time (s) about every 0.1 s.

        Returns:
            the futures, in arrival order.  A request is sent when its time has come (the thread
            sleeps in between); when the caller falls behind, the late ones are sent at once.

        Raises:
            ValueError: unsorted, negative or non-finite arrivals, or no payloads.
        """
        arr = np.asarray(arrivals_s, dtype=np.float64)
        if arr.ndim != 1 or (arr.size and (not np.isfinite(arr).all() or arr[0] < 0 or (np.diff(arr) < 0).any())):
            raise ValueError("arrivals_s must be a sorted 1-D array of finite seconds >= 0")
        if len(payloads) == 0:
            raise ValueError("payloads must hold at least one payload")
        futures: list[RequestFuture] = []
        start = time.perf_counter()
        last_tick = 0.0
        n_pay = len(payloads)
        for i, t in enumerate(arr.tolist()):
            now = time.perf_counter() - start
            if t > now:
                time.sleep(t - now)
                now = t
            futures.append(self.submit(payloads[i % n_pay], slo=slo))
            if progress is not None and now - last_tick >= 0.1:
                last_tick = now
                progress(now)
        if progress is not None:
            progress(time.perf_counter() - start)
        return futures

    @staticmethod
    def _check_slo(slo: Any) -> float:
        if isinstance(slo, bool) or not isinstance(slo, (int, float, np.integer, np.floating)):
            raise TypeError(f"slo must be a number of seconds, got {type(slo).__name__}: {slo!r}")
        v = float(slo)
        if not (math.isfinite(v) and 0 < v <= _MAX_SLO_S):
            raise ValueError(f"slo must be a number of seconds in (0, {_MAX_SLO_S:g}] (the C++ core caps "
                             f"times at 1e9 s), got {slo!r}")
        return v

    # ------------------------------------------------------------------ internals
    def _clock(self) -> _Clock:
        c: _Clock | None = getattr(self._local, "clock", None)
        if c is None:
            c = _Clock()
            self._local.clock = c
            with self._lock:
                self._clocks.append(c)
        return c

    def _enqueue(self, st: _Stage, r: _Request, arrival_s: float, payload: Any, clock: _Clock,
                 pushed: dict[int, int] | None = None) -> bool:
        """Push ``r`` into stage ``st`` arriving at ``arrival_s``; False when the ring is full.

        With ``pushed``, the stage's workers are not woken here: the count is added to
        ``pushed[stage]`` and :meth:`_wake` wakes them once for the whole upstream batch.
        """
        k = st.index
        r.inputs[k] = payload
        r.arrival_s[k] = arrival_s
        r.stage = k
        r.queued.add(k)
        ok = False
        t = time.perf_counter_ns()
        try:
            ok = st.sched.submit(r.id, r.send_s, r.deadline_s, arrival_s, r.tier)
        finally:
            clock.sched_ns += time.perf_counter_ns() - t
            if not ok:  # not in this stage's queue (full ring, or the call raised)
                r.queued.discard(k)
                r.inputs[k] = None
        if not ok:
            return False
        st.arrivals.append(arrival_s)
        if pushed is not None:
            pushed[k] = pushed.get(k, 0) + 1
            return True
        with st.cond:
            st.pending += 1
            st.cond.notify()
        return True

    def _wake(self, pushed: dict[int, int]) -> None:
        """Count the requests of one upstream batch into their stages and wake that many workers."""
        for k, n in pushed.items():
            st = self._stages[k]
            with st.cond:
                st.pending += n
                st.cond.notify(n)

    def _unregister_locked(self, r: _Request) -> None:
        """Undo ``submit``'s registration of ``r``, which reached no queue (caller holds ``self._lock``).

        ``r`` is the newest request (registration happens only under the lock), so its id is
        handed out again and the request is counted nowhere.
        """
        self._live.pop(r.id, None)
        self._inflight -= 1
        self._counts[_PENDING] -= 1
        self._out.n -= 1
        fut = r.future
        r.future = None
        r.state = _FAILED  # never pending again: a stray lookup treats it as a ghost
        if fut is not None:
            fut._req = None
        if self._inflight == 0:
            self._idle.notify_all()

    def _terminal(self, r: _Request, state: int, stage: int, reason: int, t: float,
                  exc: BaseException | None = None, result: Any = None) -> bool:
        """Move ``r`` to a terminal state (first caller wins); resolve its future.  True if it did."""
        with self._lock:
            if r.state != _PENDING:
                return False
            r.state = state
            o = self._out
            o.state[r.id] = state
            o.finish_s[r.id] = t
            if state in (_DROPPED, _REJECTED, _FAILED):  # the stage it ended at (pard.report attributes it)
                o.drop_stage[r.id] = stage
            if state in (_DROPPED, _REJECTED):
                o.reason[r.id] = reason
            self._live.pop(r.id, None)
            self._counts[_PENDING] -= 1
            self._counts[state] += 1
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.notify_all()
            fut = r.future
            r.future = None
            if fut is not None:
                fut._req = None
        r.queued.clear()
        r.parts = None
        r.outputs = None
        if fut is None:
            return True
        try:
            if exc is not None:
                fut.set_exception(exc)
            elif state in (_ON_TIME, _LATE):
                fut.set_result(result)
        except InvalidStateError:  # pragma: no cover - cancelled concurrently
            pass
        return True

    def _cancel(self, r: _Request) -> bool:
        """Terminal transition for ``future.cancel()``: dropped with reason ``cancelled``."""
        with self._lock:
            if r.state != _PENDING:
                return False
            r.state = _DROPPED
            o = self._out
            o.state[r.id] = _DROPPED
            o.finish_s[r.id] = self.now()
            o.drop_stage[r.id] = r.stage
            o.reason[r.id] = _CANCELLED
            self._live.pop(r.id, None)
            self._counts[_PENDING] -= 1
            self._counts[_DROPPED] += 1
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.notify_all()
            r.future = None
        r.queued.clear()
        return True

    def _form(self, st: _Stage, now: float, t_e: float, clock: _Clock) -> list[_Request]:
        """One ``form_batch``; handles its drops; returns the live requests of the batch (ghosts out).

        A ghost (a request already terminal: cancelled, or dropped in a sibling branch) is discarded
        and the batch topped up by further ``form_batch`` calls; a top-up's surplus goes back into
        the ring with its original keys, so it keeps its place in the queue's order.
        """
        k = st.index
        batch: list[_Request] = []
        for _ in range(4):  # the first call, then top-ups while ghosts took places
            t = time.thread_time_ns()
            ids, dropped, reasons = st.sched.form_batch(now, t_e)
            clock.sched_ns += time.thread_time_ns() - t
            taken = len(ids) + len(dropped)
            if taken:
                with st.cond:
                    st.pending -= taken
            if len(dropped):
                st.drops += len(dropped)
                for rid, code in zip(dropped.tolist(), reasons.tolist()):
                    r = self._live.get(rid)
                    if r is not None:
                        r.inputs[k] = None
                        r.queued.discard(k)
                        self._terminal(r, _DROPPED, k, int(code), now,
                                       Dropped(rid, st.name, _REASONS[int(code)]))
            ghosts = 0
            for rid in ids.tolist():
                r = self._live.get(rid)
                if r is None or r.state != _PENDING:
                    ghosts += 1
                    continue
                r.queued.discard(k)
                if len(batch) < st.max_batch:
                    batch.append(r)
                else:  # surplus of a top-up: back into the queue with its original keys
                    r.queued.add(k)
                    t = time.perf_counter_ns()
                    ok = st.sched.submit(r.id, r.send_s, r.deadline_s, r.arrival_s[k], r.tier)
                    clock.sched_ns += time.perf_counter_ns() - t
                    if ok:
                        with st.cond:
                            st.pending += 1
                    else:  # pragma: no cover - the ring was just drained; full only under extreme load
                        r.queued.discard(k)
                        self._terminal(r, _DROPPED, k, _REJECTED_CODE, now, Dropped(rid, st.name, "rejected"))
            if not ghosts or len(batch) >= st.max_batch or st.pending <= 0:
                break
        for r in batch:
            st.q_t.append(now)
            st.q_s.append(now - r.arrival_s[k])
        return batch

    def _worker(self, st: _Stage) -> None:
        """A worker thread's body: :meth:`_serve`, and if that ever raises, :meth:`_worker_died`."""
        hand: list[list[_Request]] = [[], []]  # the batch running, the batch collected next
        try:
            self._serve(st, hand)
        except BaseException as e:  # noqa: BLE001 - never die silently: fail what this worker held
            self._worker_died(st, e, hand)

    def _worker_died(self, st: _Stage, exc: BaseException, hand: list[list[_Request]]) -> None:
        """A worker of ``st`` ended by an exception outside the executor call: mark the stage dead.

        The stage is marked dead (``submit`` then raises RuntimeError naming it), and every request
        this worker held, every request queued at the stage and every request that later reaches it
        ends as ``failed`` with an ExecutorError whose ``__cause__`` is ``exc``.
        """
        name = threading.current_thread().name
        with self._lock:
            if st.dead is None:
                st.dead = (name, exc)
            if self._dead is None:
                self._dead = st
        end = self.now()
        held = [r for b in hand for r in b]
        queued = [r for r in list(self._live.values()) if st.index in r.queued]
        for r in held + queued:
            self._fail_dead(r, st, end)

    def _fail_dead(self, r: _Request, st: _Stage, t: float) -> None:
        """End ``r`` as failed because stage ``st`` has a dead worker."""
        assert st.dead is not None
        name, exc = st.dead
        err = ExecutorError(f"stage {st.name!r}: worker thread {name} died of {type(exc).__name__}: {exc}")
        err.__cause__ = exc
        r.queued.discard(st.index)
        self._terminal(r, _FAILED, st.index, -1, t, err)

    def _serve(self, st: _Stage, hand: list[list[_Request]]) -> None:
        clock = self._clock()
        k = st.index
        nxt: list[_Request] | None = None
        nxt_t = 0.0
        while True:
            hand[0] = hand[1] = []
            if nxt is None:
                with st.cond:
                    while st.pending <= 0 and not self._stop:
                        st.cond.wait()
                if self._stop:
                    return
                now = self.now()
                batch = self._form(st, now, now, clock)
                t_b = now
                if not batch:
                    continue
            else:
                batch = [r for r in nxt if r.state == _PENDING]
                t_b = nxt_t
                nxt = None
                if not batch:
                    continue
            # DESIGN §3.1: as this batch starts, collect the next one (expected start: this one's end)
            t_form = self.now()
            hand[0] = batch
            if st.pending > 0 and not self._stop:
                nb = self._form(st, t_form, t_form + st.duration(len(batch)), clock)
                if nb:
                    nxt, nxt_t = nb, t_form
                    hand[1] = nb
            payloads = [r.inputs[k] for r in batch]
            start = self.now()
            err: BaseException | None = None
            outs: Sequence[Any] = ()
            try:
                outs = st.executor(payloads)
                if len(outs) != len(batch):
                    raise ValueError(f"executor returned {len(outs)} outputs for a batch of {len(batch)}")
            except BaseException as e:  # noqa: BLE001 - any executor error (SystemExit and
                err = e  # KeyboardInterrupt included) fails this batch only; the worker carries on
            end = self.now()
            dur = end - start
            st.batches.append((start, dur, len(batch), start - t_b))
            share = dur / len(batch)
            with self._lock:
                cs = self._out.compute_s
                for r in batch:
                    cs[r.id] += share
            for r in batch:
                r.inputs[k] = None
            if err is not None:
                for r in batch:
                    failure = ExecutorError(f"stage {st.name!r}: executor raised {type(err).__name__}: {err}")
                    failure.__cause__ = err
                    self._terminal(r, _FAILED, k, -1, end, failure)
                continue
            pushed: dict[int, int] = {}
            for r, o in zip(batch, outs):
                if r.state == _PENDING:
                    self._advance(r, st, o, end, clock, pushed)
            if pushed:
                self._wake(pushed)

    def _advance(self, r: _Request, st: _Stage, out: Any, end: float, clock: _Clock,
                 pushed: dict[int, int]) -> None:
        """Hand stage ``st``'s output for ``r`` on: to its successors, or finish ``r`` at the exit."""
        if not st.successors:
            if len(self._exits) == 1:
                result = out
            else:
                with self._lock:
                    if r.outputs is None:
                        r.outputs = {}
                    r.outputs[st.index] = out
                    r.sinks_left -= 1
                    if r.sinks_left > 0:
                        return
                    result = {self._stages[i].name: v for i, v in sorted(r.outputs.items())}
            state = _ON_TIME if end <= r.deadline_s else _LATE
            self._terminal(r, state, st.index, -1, end, result=result)
            return
        for s in st.successors:
            nxt = self._stages[s]
            if len(nxt.preds) > 1:
                with self._lock:
                    if r.parts is None:
                        r.parts = {}
                    parts = r.parts.setdefault(s, {})
                    parts[st.index] = out
                    if len(parts) < len(nxt.preds):
                        continue
                    payload_parts = [parts[p] for p in nxt.preds]
                    del r.parts[s]
                try:
                    payload = self._join(payload_parts)
                except BaseException as e:  # noqa: BLE001 - a failing join fails the request
                    err = ExecutorError(f"join into stage {nxt.name!r} raised {type(e).__name__}: {e}")
                    err.__cause__ = e
                    self._terminal(r, _FAILED, s, -1, end, err)
                    return
            else:
                payload = out
            if r.state != _PENDING:
                return
            if nxt.dead is not None:
                self._fail_dead(r, nxt, end)
                return
            try:
                ok = self._enqueue(nxt, r, end, payload, clock, pushed)
            except BaseException as e:  # noqa: BLE001 - fail the request, keep the worker alive
                err = ExecutorError(f"handing over to stage {nxt.name!r} raised {type(e).__name__}: {e}")
                err.__cause__ = e
                self._terminal(r, _FAILED, s, -1, end, err)
                return
            if not ok:
                self._terminal(r, _DROPPED, s, _REJECTED_CODE, end, Dropped(r.id, nxt.name, "rejected"))
                return
            if nxt.dead is not None:  # it died while r was handed over: _worker_died may have missed r
                self._fail_dead(r, nxt, end)
                return

    # ------------------------------------------------------------------ planner
    def _plan_loop(self) -> None:
        clock = self._clock()
        cursors = [[0, 0, 0] for _ in self._stages]  # arrivals, qdelays, batches already handed over
        while True:
            # every sync interval on the runtime clock (t = 1, 2, ... x sync_interval_s), as the simulator
            due = self._sync_s * (self._planner_calls + 1)
            if self._stop_event.wait(max(0.0, due - self.now())):
                return
            self._planner_calls += 1
            t0 = time.thread_time_ns()
            now = self.now()
            stats = []
            for st, cur in zip(self._stages, cursors):
                na, nq, nb = len(st.arrivals), len(st.q_s), len(st.batches)
                rows = st.batches[cur[2]:nb]
                stats.append({
                    "arrival_s": np.asarray(st.arrivals[cur[0]:na], dtype=np.float64),
                    "qdelay_t_s": np.asarray(st.q_t[cur[1]:nq], dtype=np.float64),
                    "qdelay_s": np.asarray(st.q_s[cur[1]:nq], dtype=np.float64),
                    "batch_start_s": np.asarray([b[0] for b in rows], dtype=np.float64),
                    "batch_duration_s": np.asarray([b[1] for b in rows], dtype=np.float64),
                    "batch_size": np.asarray([b[2] for b in rows], dtype=np.int64),
                    "batch_wait_s": np.asarray([b[3] for b in rows], dtype=np.float64),
                })
                cur[0], cur[1], cur[2] = na, nq, nb
            try:
                terms = self._planner.update(now, stats, [st.workers for st in self._stages])
                for st, term in zip(self._stages, terms):
                    st.sched.publish(**term.publish_kwargs())
                self._terms_log.append((now, terms))
            except BaseException as e:  # noqa: BLE001 - keep serving with the last published terms (SystemExit too)
                self.planner_errors.append(e)
            clock.planner_ns += time.thread_time_ns() - t0

    # ------------------------------------------------------------------ results
    def counts(self) -> dict[str, int]:
        """Requests by state so far: ``submitted`` and each of :data:`STATES` (``pending`` = in flight).

        ``submitted == pending + on_time + late + dropped + rejected + failed`` at any moment.
        """
        with self._lock:
            c = dict(zip(STATES, self._counts))
            c["submitted"] = self._out.n
        return c

    def queued(self, stage: str | None = None) -> int:
        """Requests waiting in a stage's queue (not yet in a batch, not ended); all stages if None."""
        ks = range(len(self._stages)) if stage is None else [self._spec.index(stage)]
        live = list(self._live.values())
        return sum(1 for r in live for k in ks if k in r.queued)

    def outcomes(self) -> dict[str, np.ndarray]:
        """Per request (index = request id): ``send_s``, ``slo_s``, ``tier``, ``state`` (int8, codes of
        :data:`STATES`), ``finish_s`` (NaN while pending), ``drop_stage`` (-1 unless dropped, rejected or
        failed), ``reason`` (-1 unless dropped/rejected), ``compute_s`` (compute charged to the request, s).  Same form as
        ``pard._core.Simulator.outcomes()`` plus the inputs.  Copies."""
        with self._lock:
            n = self._out.n
            o = self._out
            return {
                "send_s": o.send_s[:n].copy(), "slo_s": o.slo_s[:n].copy(), "tier": o.tier[:n].copy(),
                "state": o.state[:n].copy(), "finish_s": o.finish_s[:n].copy(),
                "drop_stage": o.drop_stage[:n].copy(), "reason": o.reason[:n].copy(),
                "compute_s": o.compute_s[:n].copy(),
            }

    def batches(self) -> dict[str, np.ndarray]:
        """One row per executed batch: ``stage`` (int32), ``start_s``, ``duration_s``, ``size`` (int64),
        ``wait_s`` (batch wait W), as ``pard._core.Simulator.batches()`` plus the wait; by start time."""
        rows = [(st.index, *b) for st in self._stages for b in list(st.batches)]
        rows.sort(key=lambda r: r[1])
        return {
            "stage": np.asarray([r[0] for r in rows], dtype=np.int32),
            "start_s": np.asarray([r[1] for r in rows], dtype=np.float64),
            "duration_s": np.asarray([r[2] for r in rows], dtype=np.float64),
            "size": np.asarray([r[3] for r in rows], dtype=np.int64),
            "wait_s": np.asarray([r[4] for r in rows], dtype=np.float64),
        }

    def overhead(self) -> dict[str, float]:
        """Time spent in the scheduler so far (s).

        ``scheduler_s``: inside the C++ ``submit`` (wall time) and ``form_batch`` (thread CPU time)
        calls, binding conversions included; ``planner_s``: planner updates with their ``publish``
        calls (thread CPU time); ``planner_calls``.
        """
        with self._lock:
            clocks = list(self._clocks)
        return {
            "scheduler_s": sum(c.sched_ns for c in clocks) * 1e-9,
            "planner_s": sum(c.planner_ns for c in clocks) * 1e-9,
            "planner_calls": float(self._planner_calls),
        }

    def report(self, *, t0_s: float | None = None, duration_s: float | None = None,
               capacity_req_s: float | None = None) -> Report:
        """The run's :class:`pard.report.Report` (DESIGN §4), the same class ``pard simulate`` builds.

        Call after :meth:`close` (every request must have ended).  Per-second series start at
        ``t0_s`` (default: the first request's send time, floored to a whole second) and cover
        ``duration_s`` seconds, rounded up (default: up to the last send time); goodput is per
        second of that span.

        The goodput bound (DESIGN §4; the fluid bound of :class:`pard.report.Report`, with each
        request's SLO) uses :meth:`bound_capacity` -- the profile's capacity, scaled up where this
        run's batches ran faster than profiled, as ``pard simulate`` does for execution jitter --
        or ``capacity_req_s`` (req/s, finite, > 0) when given.

        Raises ValueError while requests are still in flight, or for a bad ``capacity_req_s``.
        """
        from .report import Report

        if capacity_req_s is not None and (
            isinstance(capacity_req_s, bool) or not isinstance(capacity_req_s, (int, float, np.number))
            or not (math.isfinite(float(capacity_req_s)) and float(capacity_req_s) > 0)
        ):
            raise ValueError(f"capacity_req_s must be a finite number of req/s > 0, got {capacity_req_s!r}")
        out = self.outcomes()
        n = out["send_s"].size
        if (out["state"] == _PENDING).any():
            raise ValueError("report() needs every request ended: call close() first")
        ns = len(self._stages)
        send = out["send_s"]
        if t0_s is not None:
            t0 = float(t0_s)
        else:
            t0 = float(math.floor(send[0])) if n else 0.0
        if duration_s is not None:
            nb = max(1, int(math.ceil(float(duration_s) - 1e-9)))
        else:
            horizon = float(send[-1]) if n else t0
            nb = int(math.floor(horizon - t0)) + 1
        qsum = np.zeros((ns, nb))
        qcnt = np.zeros((ns, nb))
        submitted = np.zeros(ns, dtype=np.int64)
        executed = np.zeros(ns, dtype=np.int64)
        compute = np.zeros(ns)
        for k, st in enumerate(self._stages):
            submitted[k] = len(st.arrivals)
            executed[k] = sum(b[2] for b in st.batches)
            compute[k] = sum(b[1] for b in st.batches)
            if st.q_t:
                idx = np.floor(np.asarray(st.q_t) - t0).astype(np.int64)
                ok = (idx >= 0) & (idx < nb)
                q = np.asarray(st.q_s)
                qsum[k] = np.bincount(idx[ok], weights=q[ok], minlength=nb)
                qcnt[k] = np.bincount(idx[ok], minlength=nb)
        workers = np.array([[float(st.workers)] * nb for st in self._stages]).reshape(ns, nb)
        if capacity_req_s is None:
            capacity = np.full(nb, self.bound_capacity()["req_s"])
        else:
            capacity = np.full(nb, float(capacity_req_s))
        return Report(
            policy=self._policy.name, pipeline=self._spec.name, stage_names=[st.name for st in self._stages],
            send_s=send, state=out["state"], finish_s=out["finish_s"], drop_stage=out["drop_stage"],
            reason=out["reason"], compute_s=out["compute_s"], reasons=list(_REASONS),
            stage_submitted=submitted, stage_executed=executed, stage_compute_s=compute,
            t0_s=t0, qdelay_sum_s=qsum, qdelay_count=qcnt, workers=workers, capacity=capacity,
            slo_s=out["slo_s"],
        )

    def bound_capacity(self) -> dict[str, Any]:
        """The pipeline capacity (req/s) the goodput bound of :meth:`report` uses, and how it was found.

        Per stage ``k``: ``workers_k * peak_k * max(1, speedup_k)``, where ``peak_k = max_b b / d_k(b)``
        over the profile's batch sizes up to ``max_batch`` (a worker's best throughput) and
        ``speedup_k`` is the profiled duration of the batches this run executed at stage ``k``
        over their measured duration (1 before any batch ran).  The pipeline capacity is the
        minimum over stages.  The profile is measured beside co-load at capacity; on a machine
        that is quieter during the run, batches run faster than profiled, and the profile alone
        would understate the capacity (live goodput could then read above 100 % of the bound).
        Slower batches do not lower it: a bound must hold whatever the machine did.

        Returns:
            ``req_s`` (the capacity), ``profile_req_s`` (the same without the speed-up),
            ``bottleneck`` (the stage with the smallest capacity), ``speedup_by_stage``
            (stage -> the measured factor before clamping to >= 1, or None without batches).
        """
        rates: list[float] = []
        plain: list[float] = []
        speedups: dict[str, float | None] = {}
        for st in self._stages:
            cands = [b for b in st.profile if b <= st.max_batch] + [st.max_batch]
            peak = st.workers * max(b / st.duration(b) for b in cands)
            rows = list(st.batches)
            actual = sum(r[1] for r in rows)
            nominal = sum(st.duration(r[2]) for r in rows)
            speedup = nominal / actual if rows and actual > 0 else None
            speedups[st.name] = speedup
            plain.append(peak)
            rates.append(peak * max(1.0, speedup or 1.0))
        k = int(np.argmin(rates))
        return {"req_s": float(rates[k]), "profile_req_s": float(min(plain)), "bottleneck": self._stages[k].name,
                "speedup_by_stage": speedups}
