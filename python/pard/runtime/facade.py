"""The :class:`Runtime` façade: wires the parts of the live runtime together and delegates to them.

The C++ hot path ``pard._core.LivePipeline`` (ids, outcomes, the one terminal transition, routing
between stages, batch formation; built by :mod:`~pard.runtime.live`), :mod:`~pard.runtime.workers`
(stages, worker threads), :mod:`~pard.runtime.planner_loop` (planner thread, run recorder),
:mod:`~pard.runtime.clock`, and :mod:`~pard.runtime.setup` (building all of it from the
arguments).  See :mod:`pard.runtime`.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import finite_number, real_number, show
from .._extras import available, require
from ..config import resolve_pipeline
from ..errors import PardTypeError, PardValueError, RuntimeStateError
from ..planner import Planner
from ..planner_config import PlannerConfig
from ..policies import get_policy
from ..recorder import RunRecorder
from ..wiring import planner_stages
from . import lifecycle, live, results
from .aio import AsyncRuntimeMixin
from .clock import RunClock
from .monitor import MonitorMixin
from .planner_loop import PlannerLoop
from .replay import replay
from .future import RequestFuture
from .setup import (PayloadShape, build_stages, executors_arg, positive_seconds, queue_sizes,
                    ring_capacity_arg, worker_counts)
from .llm_workers import check_tokens
from .workers import WorkerPool, purge_period_s

if TYPE_CHECKING:  # pragma: no cover
    from ..config import PipelineSpec
    from ..report import Report

__all__ = ["Runtime"]

#: The largest SLO ``submit`` accepts (s): the C++ core caps times at 1e9 s (about 31.7 years).
_MAX_SLO_S = 1e9
#: Default ``history``: per-request outcome records kept (about 45 bytes each).
HISTORY = 100_000
#: Seconds of per-second report series kept (the last 6 h at least, 12 h at most): a server runs for days,
#: and unbounded they grow by about 11 MB a day for 5 stages (:class:`~pard.recorder.RunRecorder`'s keep_s).
SERIES_KEEP_S = 6 * 3600.0
#: Runtimes of this process, for the fork hook (weak: it keeps none alive).
_RUNTIMES: weakref.WeakSet[Runtime] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for rt in list(_RUNTIMES):
        rt._after_fork()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)

#: At interpreter exit, how long (s) each runtime still open waits for its threads (:func:`_close_at_exit`),
#: plus :data:`EXIT_JOIN_PER_THREAD_S` per thread: stopped threads end one by one on the cores there are
#: (3 000 idle workers took 0.5-14 s on 2 cores), and one still alive at finalization aborts the process.
EXIT_JOIN_S = 5.0
EXIT_JOIN_PER_THREAD_S = 0.01


def exit_join_s(n_threads: int) -> float:
    """How long (s) a runtime closing at exit, or after a failed start, waits for its ``n_threads`` threads."""
    return EXIT_JOIN_S + EXIT_JOIN_PER_THREAD_S * n_threads


def _close_at_exit() -> None:
    """Close every runtime still open when the interpreter exits: cancel what is in flight and join the
    threads for up to :func:`exit_join_s` s each.  Why: the interpreter's finalization kills daemon
    threads that are still running, and one killed inside the C++ core (waiting for a batch with the
    GIL released) aborts the whole process ("terminate called without an active exception", exit 134;
    a script that never called ``close`` hit it on every exit).  A thread still in a hung executor after
    the wait is left, as ``close(timeout_s=...)`` leaves it."""
    for rt in list(_RUNTIMES):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a hung stage: nothing left to warn at exit
                rt.close(drain=False, timeout_s=exit_join_s(len(rt._own_threads())))
        except Exception:  # noqa: BLE001 -- exit must go on for the other runtimes
            pass


atexit.register(_close_at_exit)


class Runtime(AsyncRuntimeMixin, MonitorMixin):
    """Serve a pipeline live: worker threads per stage around the C++ stage schedulers.

    Args:
        pipeline: a :class:`pard.config.PipelineSpec`, a built-in name (``"tm"``, ...) or a spec
            file.  Its profiles drive the schedulers' estimates (use a measured profile, see
            :mod:`pard.profiling`), its ``slo`` is the default SLO, its ``workers`` the default
            worker counts.
        stages: stage name -> executor (see :mod:`pard.executors` and docs/engines.md: ``bind`` is
            called here, ``accepts_budget`` ones get each batch's remaining budget), one per stage.
            ``None``: the reference models of :mod:`pard.models` (``scale`` and ``seed`` as
            ``model_options``) in ArrayExecutors.
        policy: a policy name (:data:`pard.policies.POLICIES`) or a ``PolicySpec``.
        workers: worker threads per stage, ``{stage: n}`` or a list in ``pipeline.stages`` order;
            default the spec's ``workers``.
        payload_shape: if given (a sequence of ints >= 0), ``submit`` checks every payload has this
            shape; default: the entry executor's ``payload_shape``, else the first payload's when an
            entry executor is an ArrayExecutor (see :class:`pard.runtime.setup.PayloadShape`).  A
            payload of another shape raises PardValueError at ``submit`` and is counted nowhere.
        join: for a stage with several predecessors, ``join(outputs) -> payload`` with the
            predecessors' outputs in topological order; default :func:`pard.models.join_inputs`
            when ``stages`` is None, else ``tuple``.
        ring_capacity: ingress ring slots per stage (a power of two in [2, 2**22]; a full entry ring rejects).
        blas_threads: limit BLAS to this many threads while the runtime runs (threadpoolctl, from the
            ``pard[cli]`` extra; the limit is process-wide, so one worker's BLAS call uses one
            core); ``None`` leaves it; ``"auto"`` (default): 1 when threadpoolctl is installed,
            else left as it is.
        planner: the planner's settings, a :class:`pard.PlannerConfig` or a mapping of its fields
            (``sync_interval_s``, ``lam``, ``window_s``, ``seed``, ...); default the paper's (1 s syncs).
        model_options: keyword arguments for :func:`pard.models.reference_models` (``stages=None``).
        max_queue_size: each stage's queue bound, an int or ``{stage: int}`` (ints >= 1); a request
            arriving at a full queue is refused (back-pressure): ``pard.Rejected`` at an entry stage,
            ``pard.Dropped`` (reason ``rejected``) downstream, both with ``retry_after_s`` = the queue's
            drain time at the stage's capacity.  Default ``ceil(10 * slo * capacity)`` per stage
            (:func:`pard.runtime.setup.queue_sizes`).
        history: per-request outcome records kept, the most recent ones (int >= 1, default 100 000):
            :meth:`outcomes` and :meth:`report` cover them; :meth:`counts` and :meth:`snapshot` count
            every request ever.  Memory stays flat in a long run.
        close_timeout_s: the ``timeout_s`` of the :meth:`close` that ``with Runtime(...)`` ends with
            (None: wait for every request, however long).
        start: start the threads now (default); otherwise call :meth:`start`.

    Raises:
        pard.ConfigError / pard.errors.PardValueError / PardTypeError: a bad argument (named, with
            its value); all are ``ValueError`` / ``TypeError`` too.
    """

    def __init__(
        self,
        pipeline: PipelineSpec | str,
        stages: Mapping[str, Any] | None = None,
        *,
        policy: Any = "pard",
        workers: Mapping[str, int] | Sequence[int] | None = None,
        payload_shape: Sequence[int] | None = None,
        join: Callable[[list[Any]], Any] | None = None,
        ring_capacity: int = 65536,
        blas_threads: int | str | None = "auto",
        planner: PlannerConfig | Mapping[str, Any] | None = None,
        model_options: Mapping[str, Any] | None = None,
        max_queue_size: int | Mapping[str, int] | None = None,
        history: int = HISTORY,
        close_timeout_s: float | None = None,
        start: bool = True,
    ) -> None:
        spec = resolve_pipeline(pipeline)
        self._spec = spec
        self._policy = get_policy(policy)
        cfg = PlannerConfig.of(planner)
        sync_s, ring = cfg.sync_interval_s, ring_capacity_arg(ring_capacity)
        if blas_threads == "auto":
            blas_threads = 1 if available("threadpoolctl") else None
        elif blas_threads is not None and (isinstance(blas_threads, bool) or not isinstance(blas_threads, int)
                                           or blas_threads < 1):
            raise PardValueError(f"blas_threads must be an int >= 1, None or 'auto', got {blas_threads!r}")
        self._blas_threads: int | None = blas_threads  # type: ignore[assignment]
        executors, join_fn = executors_arg(spec, stages, model_options, join)
        counts = worker_counts(spec, workers)
        if isinstance(history, bool) or not isinstance(history, (int, np.integer)) or history < 1:
            raise PardValueError(f"history must be an int >= 1 (requests), got {show(history)}")
        self._close_timeout_s = (None if close_timeout_s is None else
                                 positive_seconds("close_timeout_s", close_timeout_s, allow_zero=True))
        self._stages = build_stages(spec, self._policy, executors, counts, ring,
                                    queue_sizes(spec, counts, max_queue_size), self._blas_threads)
        index = {st.name: k for k, st in enumerate(spec.stages)}
        self._entries = [index[n] for n in spec.entry_stages()]
        exits = [index[n] for n in spec.exit_stages()]
        self._shape = PayloadShape(payload_shape, [executors[spec.stages[k].name] for k in self._entries])
        self._planner = Planner(planner_stages(spec), policy=self._policy, **cfg.planner_kwargs(0))

        self._clock = RunClock()
        self._live = live.build(self._stages, self._entries, exits, int(history), join_fn)
        self._pool = WorkerPool(self._stages, self._live, self._clock)
        recorder = RunRecorder(spec, origin_s=0.0, workers=counts, keep_s=SERIES_KEEP_S)
        purge = self._pool.purge if self._policy.drop == "pard" else None  # Triton #7512: busy stages purge
        self._loop = PlannerLoop(self._stages, self._planner, recorder, self._clock, sync_s, self._live, purge,
                                 purge_period_s(spec.slo, sync_s))
        self._shape_lock = threading.Lock()  # the first payload fixes the shape: one submit wins
        self._accepting = False
        self._started = False
        self._closed = False
        self._blas_ctx: Any = None
        self._pid = os.getpid()
        self._forked = False  # set in a forked child (os.register_at_fork): submit then refuses
        self._slo = float(spec.slo)
        self._top_tier = max(len(spec.tiers) - 1, 0)  # tier codes are indices of spec.tiers
        # an unreferenced, unclosed runtime cancels what is in flight and stops its threads (which
        # hold its parts, never the Runtime itself)
        self._finalizer = weakref.finalize(self, lifecycle.stop, self._live, self._pool, self._loop)
        _RUNTIMES.add(self)
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
    def policy_spec(self) -> Any:
        """The policy in force (:class:`pard.policies.PolicySpec`)."""
        return self._policy

    @property
    def workers(self) -> dict[str, int]:
        """Worker threads per stage."""
        return {st.name: st.workers for st in self._stages}

    @property
    def payload_shape(self) -> tuple[int, ...] | None:
        """The shape ``submit`` requires of a payload (given, declared or learnt), or None (no check)."""
        return self._shape.shape

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has begun (``submit`` then raises)."""
        return self._closed or (self._started and not self._accepting)

    @property
    def planner_errors(self) -> list[BaseException]:
        """The last 100 exceptions raised by planner updates, oldest first (the schedulers keep the last
        published terms); ``overhead()["planner_errors"]`` counts every one."""
        return list(self._loop.errors)

    @property
    def max_queue_size(self) -> dict[str, int]:
        """Each stage's queue bound (requests)."""
        return {st.name: st.max_queue for st in self._stages}

    @property
    def _planner_thread(self) -> threading.Thread | None:
        return self._loop.thread

    def _after_fork(self) -> None:
        """In a forked child: fresh locks (the parent's threads may have held them), no threads."""
        self._forked = True
        lifecycle.reinit_locks(self._stages, self._loop, self._clock)
        self._shape_lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the runtime was created (the clock every recorded time uses)."""
        return self._clock.now()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self._started else "not started")
        return (f"Runtime({self._spec.name!r}, policy={self.policy!r}, workers={self.workers}, "
                f"{state}, submitted={self._live.counts()[0]})")

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the worker and planner threads (idempotent).  Raises RuntimeStateError (a RuntimeError) once
        closed, or when the OS refuses a thread (too many workers; the threads started are joined first)."""
        if self._closed:
            raise RuntimeStateError("this Runtime is closed; create a new one")
        if self._started:
            return
        if self._blas_threads is not None:
            tp = require("threadpoolctl", "cli", "limiting BLAS threads (blas_threads)")
            self._blas_ctx = tp.threadpool_limits(limits=self._blas_threads, user_api="blas")
        self._clock.restart()
        self._live.set_origin(self._clock.t0)
        self._started = True
        self._accepting = True
        self._live.open_admission()
        try:
            self._pool.start()
            self._loop.start()
        except RuntimeError as exc:  # the OS refused a thread: stop and join those started, then say why
            self.close(drain=False, timeout_s=exit_join_s(len(self._own_threads())))
            n = sum(st.workers for st in self._stages)
            raise RuntimeStateError(f"Runtime.start: could not start the worker threads ({n} workers in all, one "
                                    f"thread each): {exc}; lower the workers") from exc

    def __enter__(self) -> Runtime:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(drain=True, timeout_s=self._close_timeout_s)

    def _own_threads(self) -> list[threading.Thread]:
        return self._pool.threads() + ([self._loop.thread] if self._loop.thread is not None else [])

    def close(self, drain: bool = True, *, timeout_s: float | None = None) -> None:
        """Stop accepting requests, end every in-flight request, stop the threads.

        Args:
            drain: wait until every in-flight request has finished, been dropped or failed (the
                workers keep serving under the policy).  ``False``: cancel every in-flight request
                at once (``pard.Dropped`` with reason ``"cancelled"``); batches already running finish
                but their results are discarded.
            timeout_s: bounds how long ``close`` blocks in all (s, >= 0; None: no limit).  With
                ``drain``, what has not ended by then is cancelled; then ``close`` waits for the
                threads until the same deadline (:mod:`~pard.runtime.lifecycle` splits it).  Python
                threads cannot be killed: one still running then is left behind as a daemon (its
                requests are terminal, what it returns is discarded); a :class:`RuntimeWarning` names
                a stage whose executor has run one batch past 4x its longest (a hung model), not a
                merely slow one.  Without ``timeout_s``, ``close``
                waits for running batches to end, however long that takes.

        After ``close`` every request submitted is in a terminal state (its future resolved), even
        when it returned on ``timeout_s`` with a worker stuck.  Idempotent.  Raises RuntimeError
        when called from one of the runtime's own threads (it would wait for itself),
        PardValueError for a negative or non-finite ``timeout_s``.
        """
        if threading.current_thread() in self._own_threads():
            raise RuntimeStateError("Runtime.close() must not be called from a worker or planner thread")
        if timeout_s is not None:
            positive_seconds("timeout_s", timeout_s, allow_zero=True)
        forked = os.getpid() != self._pid  # a forked child has none of the threads: nothing to wait for
        deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
        drain_until = None if deadline is None else deadline - lifecycle.join_reserve_s(self._stages, self._live, timeout_s)
        if self._closed:
            return
        self._accepting = False
        self._live.close_admission()  # a submit racing this one is in flight before it returns, or raises
        if drain and self._started and not forked:
            until = None if drain_until is None else self.now() + max(0.0, drain_until - time.monotonic())
            self._live.wait_idle(until)
        lifecycle.stop(self._live, self._pool, self._loop)  # cancels what is left
        stuck = [] if forked else lifecycle.join(self._own_threads(), self._stages, deadline, self._live, self.now)
        self._loop.flush()
        self._closed = True
        self._finalizer.detach()
        if self._blas_ctx is not None:
            self._blas_ctx.restore_original_limits()
            self._blas_ctx = None
        if stuck:  # a hung stage (lifecycle.join)
            warnings.warn(lifecycle.hung_message(timeout_s, stuck), RuntimeWarning, stacklevel=2)

    # ------------------------------------------------------------------ submit
    def submit(self, payload: Any, *, slo: float | None = None, tier: int | str | None = 0,
               deadline: float | None = None, in_tokens: int = 0, max_tokens: int = 0,
               max_new: int = 0) -> RequestFuture:
        """Submit one request; returns its future at once.

        Args:
            payload: the entry stage's input for this request (e.g. an array of ``payload_shape``).
            slo: end-to-end SLO in seconds, in ``(0, 1e9]`` (the C++ core caps times at 1e9 s);
                default the pipeline's ``slo``.  The deadline is ``send + slo`` with ``send`` the
                runtime clock at this call.
            deadline: an absolute deadline on the runtime's clock (:meth:`now`, s), e.g. fixed by a
                front when the request arrived: the request's deadline is the earlier of ``send + slo``
                and ``deadline``, handed to the C++ core as it is.  One already past still submits the
                request (its SLO is then 1 ns): the first stage drops it, counted.
            tier: service tier: the index of one of the pipeline's ``tiers`` (``0 .. len(tiers) - 1``;
                only 0 when it declares none), or its name (a key of ``tiers``, as the HTTP front's
                ``X-Pard-Tier`` and a trace's tier column give it), or None for tier 0; passed to the
                schedulers.
            in_tokens, max_tokens, max_new: for llm stages (DESIGN §3.8): prompt tokens, output cap hint, and
                the tokens the engine produces (a replay's true length); 0: unknown / none / the cap.

        Returns:
            a :class:`RequestFuture` resolving to the output, or raising ``pard.Dropped``,
            ``pard.Rejected`` (entry ring full) or ``pard.ExecutorError``.

        Raises (the request is then counted nowhere, and ``close()`` does not wait for it):
            PardValueError: ``slo`` not in ``(0, 1e9]`` or not finite; ``tier`` out of range or an
                unknown name; the payload's shape differs from the expected one (``payload_shape``,
                given or learnt, see :class:`Runtime`).
            PardTypeError: ``slo`` or ``tier`` of the wrong type.
            PardValueError: a token count not an int in ``[0, 2^31)``, or over an llm stage's ``kv_tokens``.
            DeadlineError (a PardValueError): ``deadline`` is not a finite number of seconds.
            RuntimeStateError (a PardError and a RuntimeError): the runtime is not started or is
                closed, or a stage is dead (one of its worker threads died outside the executor call;
                the message names the stage).
            Whatever the entry stage's C++ ``submit`` raises (not expected once the arguments
                passed the checks above): the registration is undone and the error propagates.  In a
                DAG with several entry stages, if the request already reached one entry queue when
                another raised, it cannot be unregistered: it ends as ``failed`` at once and the
                error propagates.
        """
        if self._forked:
            raise lifecycle.ForkedError(lifecycle.forked_message(self._pid))
        slo_s = self._slo if slo is None else _check_slo(slo)
        if deadline is not None and (deadline.__class__ is not float or not -_MAX_SLO_S <= deadline <= _MAX_SLO_S):
            deadline = _check_deadline(deadline)
        if tier.__class__ is not int or not 0 <= tier <= self._top_tier:  # the common case costs one test
            tier = _tier_code(tier, self._spec)
        sh = self._shape
        shape, learning = sh.check(payload) if sh.shape is not None or sh.learn else (None, False)
        if not self._accepting:
            raise RuntimeStateError("this Runtime is not accepting requests (not started, or closed)")
        if self._pool.dead is not None:
            raise RuntimeStateError(_dead_message(self._pool.dead))
        if learning:
            with self._shape_lock:
                self._shape.learn_locked(shape)
        # the C++ pipeline assigns the id, checks the queue bounds, pushes into every entry stage
        # and counts the request; a refusal ends it at once (its future raises pard.Rejected)
        if in_tokens or max_tokens or max_new:  # for the llm stages
            return self._live.submit(payload, slo_s, tier, deadline, *check_tokens(self._spec, in_tokens, max_tokens, max_new))
        return self._live.submit(payload, slo_s, tier, deadline)

    def replay(self, arrivals_s: Any, payloads: Sequence[Any], *,
               slo: float | None = None, progress: Callable[[float], None] | None = None) -> list[RequestFuture]:
        """Submit one request per arrival time, in wall-clock time, from the calling thread:
        :func:`pard.runtime.replay.replay` with :meth:`submit` (same arguments; a Workload's tokens too)."""
        return replay(self.submit, arrivals_s, payloads, slo=slo, progress=progress)

    # ------------------------------------------------------------------ results
    def counts(self) -> dict[str, int]:
        """Requests by state so far: ``submitted`` and each of :data:`STATES` (``pending`` = in flight).

        ``submitted == pending + on_time + late + dropped + rejected + failed`` at any moment.
        """
        return results.counts(self._live)

    def queued(self, stage: str | None = None) -> int:
        """Requests waiting in a stage's queue (not yet in a batch, not ended); all stages if None."""
        ks = range(len(self._stages)) if stage is None else [self._spec.index(stage)]
        return sum(int(self._live.queued(k)) for k in ks)

    def outcomes(self) -> dict[str, np.ndarray]:
        """Per request (index = request id): ``send_s``, ``slo_s``, ``tier``, ``state`` (int8, codes of
        :data:`STATES`), ``finish_s`` (NaN while pending), ``drop_stage`` (-1 unless dropped, rejected or
        failed), ``reason`` (-1 unless dropped/rejected), ``compute_s`` (compute charged to the request, s).  Same form as
        ``pard._core.Simulator.outcomes()`` plus the inputs.  Copies."""
        return self._live.outcomes()

    def batches(self) -> dict[str, np.ndarray]:
        """The most recent executed batches (up to :data:`~pard.runtime.workers.BATCH_HISTORY` per stage):
        ``stage`` (int32), ``start_s``, ``duration_s``, ``size`` (int64), ``wait_s`` (batch wait W), as
        ``pard._core.Simulator.batches()`` plus the wait; by start time."""
        return results.batches(self._live, self._stages)

    def overhead(self) -> dict[str, float]:
        """Time spent in the scheduler so far (s): ``scheduler_s`` (wall time inside the C++ hot path --
        submit, batch formation with its drops, marking batches running, routing outputs to the
        successors and finishing requests -- all threads), ``planner_s`` (planner updates with their
        ``publish`` calls, thread CPU time), ``planner_calls``, ``planner_errors`` (every planner update
        that raised)."""
        _, planner_s = self._clock.totals_s()
        sched_s = self._live.scheduler_s()
        return {"scheduler_s": sched_s, "planner_s": planner_s, "planner_calls": float(self._loop.calls),
                "planner_errors": float(self._loop.error_count)}

    def snapshot(self) -> dict[str, Any]:
        """The runtime now, without stopping it: ``counts`` (every request ever), ``in_flight``, ``queued``
        and ``max_queue_size`` per stage, ``goodput_recent`` and ``drop_rate_recent`` over the last
        ``window_s`` (10 s) of sends, ``now_s``, ``planner_calls`` (:func:`pard.runtime.results.snapshot`)."""
        return results.snapshot(self._live, self._stages, self._loop, self.now())

    def report(self, *, t0_s: float | None = None, duration_s: float | None = None,
               capacity_req_s: float | None = None) -> Report:
        """The run's :class:`pard.report.Report` (DESIGN §4), built by the same
        :class:`pard.recorder.RunRecorder` as ``pard simulate``'s; callable while the runtime runs.

        It covers the requests held (the last ``history``) that have ended -- all of them after
        :meth:`close`; when that is not every request, ``report.window`` says what it covers, with the
        whole run's totals (:class:`pard.report.Report`).  Per-second series start at ``t0_s``
        (default the first such send, rounded down); every rate is per ``duration_s`` seconds (default
        the real time the sends took, at least 1 s: :func:`pard.report.sending_time_s`).  The per-second
        queueing and worker series reach back :data:`SERIES_KEEP_S` (6 h) at least; earlier seconds read as no queueing samples.  The goodput
        bound (DESIGN §4) uses :meth:`bound_capacity`, or ``capacity_req_s`` (req/s, > 0) when given.

        Raises PardValueError for a bad ``capacity_req_s`` or ``duration_s``.
        """
        return results.report(self._live, self._loop, self._policy.name, t0_s=t0_s, duration_s=duration_s,
                              capacity_req_s=capacity_req_s, llm=(self._spec, self._stages) if self._closed else None)

    def bound_capacity(self) -> dict[str, Any]:
        """The pipeline capacity (req/s) the goodput bound of :meth:`report` uses, and how it was found.

        Per stage ``k``: ``workers_k * peak_k * max(1, speedup_k)``, where ``peak_k = max_b b / d_k(b)``
        (:func:`pard.profile.peak_throughput`) and ``speedup_k`` is the profiled over the measured
        duration of the batches this run executed at stage ``k`` (1 before any ran).  The minimum over
        stages.  A quieter machine runs batches faster than profiled; slower ones do not lower it (a
        bound must hold whatever the machine did).

        Returns ``req_s``, ``profile_req_s`` (without the speed-up), ``bottleneck`` and
        ``speedup_by_stage`` (stage -> the factor before clamping to >= 1, or None without batches).
        """
        return results.bound_capacity(self._stages, self._loop)


def _dead_message(st: Any) -> str:
    name, exc = st.dead
    return (f"stage {st.name!r} is dead: its worker thread {name} died of {type(exc).__name__}: {exc!r} "
            f"(outside the executor call); the Runtime cannot serve requests any more, close it")


def _tier_code(tier: Any, spec: PipelineSpec) -> int:
    """A submit's ``tier`` as the schedulers' code: None is 0, a name its index in ``spec.tiers``."""
    names = list(spec.tiers)
    if tier is None:
        return 0
    if isinstance(tier, str):
        if tier not in names:
            have = f"its tiers: {', '.join(names)}" if names else "it declares no tiers"
            raise PardValueError(f"tier = {tier!r} is not a tier of pipeline {spec.name!r} ({have})")
        return names.index(tier)
    if isinstance(tier, bool) or not isinstance(tier, (int, np.integer)):
        raise PardTypeError(f"tier must be an int code, a tier name or None, got {type(tier).__name__}: {tier!r}")
    if not 0 <= int(tier) <= max(len(names) - 1, 0):
        valid = (f"0..{len(names) - 1} (indices of the spec's tiers {names!r})" if names
                 else "0 (the pipeline declares no tiers)")
        raise PardValueError(f"tier = {tier!r} is not a valid tier code for pipeline {spec.name!r}; valid: {valid}")
    return int(tier)


def _check_deadline(deadline: Any) -> float:
    """``deadline`` as float seconds on the runtime's clock, or DeadlineError naming it."""
    from .aio import DeadlineError
    seconds = finite_number(deadline)
    if seconds is None:
        raise DeadlineError(f"deadline must be a finite number of seconds on the runtime's clock "
                            f"(Runtime.now()), got {show(deadline)}")
    # far past or far ahead: clamp to what the C++ core's int64 nanoseconds hold (the SLO still bounds it)
    return min(max(seconds, -_MAX_SLO_S), _MAX_SLO_S)


def _check_slo(slo: Any) -> float:
    v = real_number("slo", slo, f"of seconds in (0, {_MAX_SLO_S:g}]")  # 10**400 is inf: refused below
    if not (math.isfinite(v) and 0 < v <= _MAX_SLO_S):
        raise PardValueError(f"slo must be a number of seconds in (0, {_MAX_SLO_S:g}] (the C++ core caps "
                             f"times at 1e9 s), got {slo!r}")
    return v
