"""Stages and their worker threads (DESIGN §3.1), around the C++ hot path.

Each stage has one ``pard._core.StageScheduler`` (ingress ring, double-ended priority queue, drop
rule; DESIGN §3.4) and ``workers`` threads.  Everything per request -- batch formation and its
drops, the hand-over to the successors, joins, the outcome accounting -- happens in the runtime's
``pard._core.LivePipeline`` (``cpp/include/pard/live_pipeline.hpp``); a worker thread enters Python
once per batch:

* ``live.next_batch(worker)`` waits with the GIL released until its stage has work, forms the batch
  (``now = t_e``, batch wait ``W = 0``) or takes the one it collected, marks it running (from then
  on ``cancel()`` fails) and, as it starts, collects the next batch with expected start
  ``t_e = now + d(b)``; it returns the batch's payloads;
* the worker calls the stage's executor on them;
* ``live.complete(worker, outputs, error, start, end)`` charges the compute, routes every output
  to the successors (or finishes the request at the exit) and resolves the futures of those that
  ended, in C++.

A worker survives whatever its executor raises (the batch fails).  Should one die anyway (an error
outside the executor call), its stage is marked dead and the requests that worker held, those
queued at the stage and those reaching it later end as ``failed``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ..errors import PardValueError
from .clock import RunClock
from .llm_workers import check_engine, serve_llm

__all__ = ["Stage", "WorkerPool", "BATCH_HISTORY", "purge_period_s"]

#: How many of each stage's most recent batches (``Runtime.batches()``) and queueing delays
#: (``Runtime.stage_stats()``) are kept (``LivePipeline::kRecent``).
BATCH_HISTORY = 10_000
#: Batch sizes whose d(b) a stage keeps in a table (larger ones are interpolated on each call).
D_TABLE_MAX = 4096


def purge_period_s(slo_s: float, sync_interval_s: float) -> float:
    """How often :meth:`WorkerPool.purge` runs (s): an eighth of the SLO, at least 2 ms apart, at most
    one sync interval -- so an infeasible request waits at most about that long to be dropped."""
    return min(sync_interval_s, max(0.002, slo_s / 8))


class Stage:
    """One stage's scheduler, executor, workers and wiring (its statistics live in the C++ pipeline)."""

    def __init__(self, index: int, spec: Any, sched: Any, executor: Any, workers: int,
                 max_queue: int, capacity_req_s: float) -> None:
        self.index = index
        self.name: str = spec.name
        self.spec = spec
        self.sched = sched
        self.executor = executor
        self.workers = workers
        self.max_batch = int(spec.batch_limit)  # the largest batch it forms
        #: the queue bound: a request arriving while this many live requests are queued is refused
        self.max_queue = max_queue
        #: workers x best b / d(b) (req/s): how fast the queue drains, for ``retry_after_s``
        self.capacity_req_s = capacity_req_s
        self.successors: list[int] = []
        self.preds: list[int] = []
        #: called by the workers with every batch's queueing delays and executed size (monitoring;
        #: ``Runtime.observe_stages``), or None
        self.observer: Any = None
        self.threads: list[threading.Thread] = []
        #: worker thread name -> when its running executor call began (runtime clock, s); absent
        #: outside one (close() names a stage hung from it)
        self.running_since: dict[str, float] = {}
        #: worker thread name -> when it can next start a new batch (runtime clock, s; from the
        #: profile), 0 while it is idle: the purge timer's expected start (Triton #7512)
        self.free_at: dict[str, float] = {}
        #: (thread name, exception) once one of this stage's workers died outside the executor call
        self.dead: tuple[str, BaseException] | None = None
        self._d_table = [float(spec.duration(b)) for b in range(1, min(self.max_batch, D_TABLE_MAX) + 1)]

    def duration(self, b: int) -> float:
        """The profiled ``d(b)`` (s): read from a table of the stage's batch sizes, since interpolating the
        profile costs tens of microseconds a call and a worker asks twice per batch, holding the GIL."""
        b = max(1, int(b))
        table = self._d_table
        return table[b - 1] if b <= len(table) else float(self.spec.duration(b))


class WorkerPool:
    """The worker threads of every stage of one runtime, and their batch loop."""

    def __init__(self, stages: Sequence[Stage], live: Any, clock: RunClock) -> None:
        self._stages = stages
        self._live = live
        self._clock = clock
        self.stopping = False
        #: the first stage whose worker died (``submit`` then raises)
        self.dead: Stage | None = None
        self._dead_lock = threading.Lock()

    def start(self) -> None:
        """Start ``workers`` threads per stage."""
        for st in self._stages:
            for w in range(st.workers):
                t = threading.Thread(target=self._worker, args=(st,), name=f"pard-{st.name}-{w}", daemon=True)
                t.start()
                st.threads.append(t)  # after start: one the OS refused is not joined by close

    def stop(self) -> None:
        """Ask every worker to return once its running batch ends."""
        self.stopping = True
        self._live.stop()

    def threads(self) -> list[threading.Thread]:
        """Every worker thread started."""
        return [t for st in self._stages for t in st.threads]

    def purge(self, now: float, clock: Any) -> None:
        """At every stage whose workers are all busy, drop now what even a batch of one starting when
        the first of them is free would miss (``LivePipeline.purge`` -> ``StageScheduler.purge``, the
        pard rule's low-end purge, DESIGN §3.2), not when the next batch forms (Triton #7512)."""
        for st in self._stages:
            free = list(st.free_at.values())
            if self.stopping or st.dead is not None or len(free) < st.workers or min(free) <= 0.0:
                continue  # an idle worker forms a batch as soon as a request arrives
            if self._live.queued(st.index) > 0:
                self._live.purge(st.index, now, max(now, min(free)))

    def _worker(self, st: Stage) -> None:
        """A worker thread's body: :meth:`_serve`, and if that ever raises, :meth:`_died`."""
        if st.spec.kind == "llm":  # steps an engine at token boundaries (runtime/llm_workers.py)
            lw = self._live.llm_worker(st.index, st.workers)
            try:
                serve_llm(st, lw, self._live, self._clock.now, check_engine(st.spec, st.executor()))
            except BaseException as e:  # noqa: BLE001 - never die silently: fail its sequences and the queue
                self._died(st, e, None, lw.running)
            return
        w = self._live.worker(st.index)
        try:
            self._serve(st, w)
        except BaseException as e:  # noqa: BLE001 - never die silently: fail what this worker held
            self._died(st, e, w)

    def _died(self, st: Stage, exc: BaseException, w: Any, running: Sequence[int] = ()) -> None:
        """A worker of ``st`` ended by an exception outside the executor call: mark the stage dead."""
        info = (threading.current_thread().name, exc)
        with self._dead_lock:
            if st.dead is None:
                st.dead = info
                self._live.mark_dead(st.index, info)
            if self.dead is None:
                self.dead = st
        for key in [*running, *self._live.held_at(st.index, w)]:
            self._live.fail_dead(key, st.index, st.dead)

    def _serve(self, st: Stage, w: Any) -> None:
        live = self._live
        now = self._clock.now
        ex = st.executor
        budget = bool(getattr(ex, "accepts_budget", False))  # e.g. a remote engine's client timeout
        name = st.name
        tname = threading.current_thread().name
        while True:
            if not w.next_size:
                st.free_at[tname] = 0.0  # idle, or forming a batch now
            payloads = live.next_batch(w)
            if payloads is None:
                return
            nxt = w.next_size  # the batch starts; the one collected next follows it
            st.free_at[tname] = now() + st.duration(len(payloads)) + (st.duration(nxt) if nxt else 0.0)
            obs = st.observer
            if obs is not None:
                delays = w.delays
                if delays:
                    obs.queue_delays(name, delays)
            err: BaseException | None = None
            outs: Any = ()
            start = now()
            st.running_since[tname] = start
            try:
                outs = ex(payloads, budget_s=w.max_deadline_s - start) if budget else ex(payloads)
                if len(outs) != len(payloads):
                    raise PardValueError(f"executor returned {len(outs)} outputs for a batch of {len(payloads)}")
            except BaseException as e:  # noqa: BLE001 - any executor error (SystemExit and
                err = e  # KeyboardInterrupt included) fails this batch only; the worker carries on
            end = now()
            st.running_since.pop(tname, None)
            if obs is not None:
                obs.batch(name, len(payloads))
            live.complete(w, outs, err, start, end)
