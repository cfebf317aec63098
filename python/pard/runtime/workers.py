"""Stages, their worker threads and batch formation (DESIGN §3.1), around the C++ stage schedulers.

Each stage has one ``pard._core.StageScheduler`` (ingress ring, double-ended priority queue, drop
rule; DESIGN §3.4) and ``workers`` threads.  A worker is idle, or runs one batch, and may hold the
*next* batch it collected:

* idle, queue empty: it blocks on its stage's condition variable (no spinning; the GIL is released
  while it waits) until a request arrives, then forms a batch at once (``now = t_e``, batch wait
  ``W = 0``) and starts it;
* when a batch *starts*, the worker first collects its next batch from the queue, with expected start
  ``t_e = now + d(b)`` (the running batch's profiled duration), then calls the executor; the
  collected batch is fixed and waits until the running one ends (``W = start - collected``);
* if the queue was empty when its batch started, it forms a fresh batch when the batch ends (``W = 0``).

Cancellation.  When a request ends (``future.cancel()``, its DAG sibling branch dropped, close),
the ledger sets its slot in the cancelled mask that every ``form_batch`` call passes to C++
(``cancelled=``): a copy still queued is discarded there when popped (reason ``cancelled``), so it
takes no place in a batch and no Python code runs per cancelled request.  Until then it is counted
in ``Stage.stale``, so back-pressure (``max_queue_size``) counts only live requests and a cancelled
request's place is free at once.

A worker survives whatever its executor raises (the batch fails).  Should one die anyway (an error
outside the executor call), its stage is marked dead and the requests that worker held, those
queued at the stage and those reaching it later end as ``failed``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from ..errors import Dropped, ExecutorError, PardValueError
from ..outcomes import DROPPED, FAILED, PENDING, REASONS
from .clock import RunClock, ThreadClock
from .requests import Ledger, Request
from .routing import Router

__all__ = ["Stage", "WorkerPool", "BATCH_HISTORY", "purge_period_s"]

#: How many of each stage's most recent batches (``Runtime.batches()``) and queueing delays
#: (``Runtime.stage_stats()``) are kept.
BATCH_HISTORY = 10_000


def purge_period_s(slo_s: float, sync_interval_s: float) -> float:
    """How often :meth:`WorkerPool.purge` runs (s): an eighth of the SLO, at least 2 ms apart, at most
    one sync interval -- so an infeasible request waits at most about that long to be dropped."""
    return min(sync_interval_s, max(0.002, slo_s / 8))


class Stage:
    """One stage's scheduler, executor, workers and statistics logs."""

    def __init__(self, index: int, spec: Any, sched: Any, executor: Any, workers: int,
                 max_queue: int, capacity_req_s: float) -> None:
        self.index = index
        self.name: str = spec.name
        self.spec = spec
        self.sched = sched
        self.executor = executor
        self.workers = workers
        self.max_batch = int(spec.max_batch)
        self.cond = threading.Condition(threading.Lock())
        self.pending = 0  # requests pushed into the scheduler and not yet returned by form_batch
        #: of those, how many had ended (cancelled) while queued: still in the C++ queue, discarded at
        #: the next formation; back-pressure does not count them.  Updated without the ledger's lock,
        #: so exact once quiet; reset whenever the queue is drained empty
        self.stale = 0
        #: the queue bound: a request arriving while ``pending`` is this high is refused
        self.max_queue = max_queue
        #: workers x best b / d(b) (req/s): how fast the queue drains, for ``retry_after_s``
        self.capacity_req_s = capacity_req_s
        self.successors: list[int] = []
        self.preds: list[int] = []
        # logs appended to by the workers (list.append is atomic under the GIL) and emptied by the
        # planner loop each sync interval (it alone deletes the prefix it has taken)
        self.arrivals: list[float] = []
        self.queue_delays: list[tuple[float, float]] = []  # (taken into a batch at, queueing delay)
        self.batches: list[tuple[float, float, int, float]] = []  # (start, duration, size, wait)
        #: the most recent batches and queueing delays, for ``Runtime.batches()`` and monitoring (bounded)
        self.recent: deque[tuple[float, float, int, float]] = deque(maxlen=BATCH_HISTORY)
        self.recent_delays: deque[float] = deque(maxlen=BATCH_HISTORY)
        self.drops = 0
        #: called by the workers with every batch's queueing delays and executed size (monitoring;
        #: ``Runtime.observe_stages``), or None
        self.observer: Any = None
        self.threads: list[threading.Thread] = []
        #: per worker: when it can next start a new batch (runtime clock, s; from the profile), 0 while
        #: it is idle -- the purge timer's expected start while every worker is busy (Triton #7512)
        self.free_at: list[float] = [0.0] * workers
        #: per worker: when its running executor call began (runtime clock, s), 0 outside one
        #: (close() names a stage hung from it)
        self.running_since: list[float] = [0.0] * workers
        #: (thread name, exception) once one of this stage's workers died outside the executor call
        self.dead: tuple[str, BaseException] | None = None

    def duration(self, b: int) -> float:
        """The profiled ``d(b)`` (s)."""
        return float(self.spec.duration(max(1, int(b))))

    def queued_live(self) -> int:
        """Requests queued here that have not ended (what ``max_queue_size`` bounds)."""
        return max(0, self.pending - self.stale)

    def retry_after_s(self) -> float:
        """How long the queue ahead of a new request takes to drain at this stage's capacity (s)."""
        return (self.queued_live() + 1) / self.capacity_req_s


class WorkerPool:
    """The worker threads of every stage of one runtime, and their batch loop."""

    def __init__(self, stages: Sequence[Stage], ledger: Ledger, router: Router, clock: RunClock) -> None:
        self._stages = stages
        self._ledger = ledger
        self._router = router
        self._clock = clock
        self.stopping = False
        #: the first stage whose worker died (``submit`` then raises)
        self.dead: Stage | None = None
        ledger.on_unqueued = self._unqueued

    def _unqueued(self, ks: tuple[int, ...]) -> None:
        """A request ended while queued at stages ``ks``: its place there is free at once."""
        for k in ks:
            st = self._stages[k]
            with st.cond:
                st.stale += 1

    def start(self) -> None:
        """Start ``workers`` threads per stage."""
        for st in self._stages:
            for w in range(st.workers):
                t = threading.Thread(target=self._worker, args=(st, w), name=f"pard-{st.name}-{w}", daemon=True)
                st.threads.append(t)
                t.start()

    def stop(self) -> None:
        """Ask every worker to return once its running batch ends."""
        self.stopping = True
        for st in self._stages:
            with st.cond:
                st.cond.notify_all()

    def threads(self) -> list[threading.Thread]:
        """Every worker thread started."""
        return [t for st in self._stages for t in st.threads]

    # ------------------------------------------------------------------ batch formation
    def _drop(self, st: Stage, dropped: Any, reasons: Any, now: float) -> int:
        """End the requests ``form_batch`` dropped; returns how many had ended already (cancelled)."""
        k = st.index
        stale = 0
        for rid, code in zip(dropped.tolist(), reasons.tolist()):
            r = self._ledger.live.get(rid)
            if r is None:
                stale += 1
                continue
            st.drops += 1
            r.inputs[k] = None
            r.queued.discard(k)
            self._ledger.finish(r, DROPPED, k, int(code), now, Dropped(rid, st.name, REASONS[int(code)]))
        return stale

    def _form(self, st: Stage, now: float, t_e: float, clock: ThreadClock) -> list[Request]:
        """One ``form_batch`` (ended requests discarded in C++); handles its drops; returns the batch."""
        k = st.index
        t = time.thread_time_ns()
        ids, dropped, reasons = st.sched.form_batch(now, t_e, self._ledger.gone)
        clock.sched_ns += time.thread_time_ns() - t
        stale = self._drop(st, dropped, reasons, now) if len(dropped) else 0
        batch: list[Request] = []
        for rid in ids.tolist():
            r = self._ledger.live.get(rid)
            if r is None or r.state != PENDING:  # ended meanwhile, or a stale mask slot (CANCEL_SLOTS)
                stale += 1
                continue
            r.queued.discard(k)
            batch.append(r)
        taken = len(ids) + len(dropped)
        if taken:
            with st.cond:
                st.pending -= taken
                st.stale = max(0, st.stale - stale) if st.pending > 0 else 0
        delays = [now - r.arrival_s[k] for r in batch]
        for d in delays:
            st.queue_delays.append((now, d))
            st.recent_delays.append(d)
        if st.observer is not None and delays:
            st.observer.queue_delays(st.name, delays)
        return batch

    def purge(self, now: float, clock: ThreadClock) -> None:
        """At every stage whose workers are all busy, drop now what even a batch of one starting when
        the first of them is free would miss (``StageScheduler.purge``; the pard rule's low-end purge,
        DESIGN §3.2), instead of when the next batch forms (Triton #7512).  Called from a timer."""
        for st in self._stages:
            if self.stopping or st.pending <= 0 or st.dead is not None:
                continue
            first_free = min(st.free_at)
            if first_free <= 0.0:  # an idle worker forms a batch as soon as a request arrives
                continue
            t = time.thread_time_ns()
            dropped, reasons = st.sched.purge(now, max(now, first_free), self._ledger.gone)
            clock.sched_ns += time.thread_time_ns() - t
            if not len(dropped):
                continue
            stale = self._drop(st, dropped, reasons, now)
            with st.cond:
                st.pending -= len(dropped)
                st.stale = max(0, st.stale - stale) if st.pending > 0 else 0

    # ------------------------------------------------------------------ the worker thread
    def _worker(self, st: Stage, w: int) -> None:
        """A worker thread's body: :meth:`_serve`, and if that ever raises, :meth:`_died`."""
        hand: list[list[Request]] = [[], []]  # the batch running, the batch collected next
        try:
            self._serve(st, hand, w)
        except BaseException as e:  # noqa: BLE001 - never die silently: fail what this worker held
            self._died(st, e, hand)

    def _died(self, st: Stage, exc: BaseException, hand: list[list[Request]]) -> None:
        """A worker of ``st`` ended by an exception outside the executor call: mark the stage dead."""
        name = threading.current_thread().name
        with self._ledger.lock:
            if st.dead is None:
                st.dead = (name, exc)
            if self.dead is None:
                self.dead = st
        end = self._clock.now()
        held = [r for b in hand for r in b]
        queued = [r for r in list(self._ledger.live.values()) if st.index in r.queued]
        for r in held + queued:
            self._router.fail_dead(r, st, end)

    def _next_batch(self, st: Stage, nxt: list[Request] | None, nxt_t: float,
                    clock: ThreadClock) -> tuple[list[Request], float] | None:
        """The batch to run now and when it was collected; None to stop, [] when there is none."""
        if nxt is not None:
            return [r for r in nxt if r.state == PENDING], nxt_t
        with st.cond:
            while st.pending <= 0 and not self.stopping:
                st.cond.wait()
        if self.stopping:
            return None
        now = self._clock.now()
        return self._form(st, now, now, clock), now

    def _run(self, st: Stage, batch: list[Request]) -> tuple[Sequence[Any], BaseException | None, float, float]:
        """Call the executor on ``batch``: (outputs, the error it raised or None, start, end)."""
        payloads = [r.inputs[st.index] for r in batch]
        start = self._clock.now()
        err: BaseException | None = None
        outs: Sequence[Any] = ()
        try:
            if getattr(st.executor, "accepts_budget", False):  # e.g. a remote engine's client timeout
                outs = st.executor(payloads, budget_s=max(r.deadline_s for r in batch) - start)
            else:
                outs = st.executor(payloads)
            if len(outs) != len(batch):
                raise PardValueError(f"executor returned {len(outs)} outputs for a batch of {len(batch)}")
        except BaseException as e:  # noqa: BLE001 - any executor error (SystemExit and
            err = e  # KeyboardInterrupt included) fails this batch only; the worker carries on
        return outs, err, start, self._clock.now()

    def _serve(self, st: Stage, hand: list[list[Request]], w: int) -> None:
        clock = self._clock.mine()
        k = st.index
        nxt: list[Request] | None = None
        nxt_t = 0.0
        while True:
            hand[0] = hand[1] = []
            if nxt is None:
                st.free_at[w] = 0.0  # idle (or forming a batch now)
            got = self._next_batch(st, nxt, nxt_t, clock)
            if got is None:
                return
            batch, t_b = got
            nxt = None
            batch = self._ledger.start_batch(batch)  # from here on cancel() fails and the batch runs
            if not batch:
                continue
            # DESIGN §3.1: as this batch starts, collect the next one (expected start: this one's end)
            hand[0] = batch
            t_form = self._clock.now()
            free = t_form + st.duration(len(batch))
            if st.pending > 0 and not self.stopping:
                nb = self._form(st, t_form, free, clock)
                if nb:
                    nxt, nxt_t = nb, t_form
                    hand[1] = nb
                    free += st.duration(len(nb))
            st.free_at[w] = free
            st.running_since[w] = self._clock.now()
            outs, err, start, end = self._run(st, batch)
            st.running_since[w] = 0.0
            self._ledger.end_batch(batch)
            row = (start, end - start, len(batch), start - t_b)
            st.batches.append(row)
            st.recent.append(row)
            if st.observer is not None:
                st.observer.batch(st.name, len(batch))
            self._ledger.add_compute(batch, (end - start) / len(batch))
            for r in batch:
                r.inputs[k] = None
            if err is not None:
                for r in batch:
                    failure = ExecutorError(f"stage {st.name!r}: executor raised {type(err).__name__}: {err}",
                                            request_id=r.id, stage=st.name, cause=err)
                    self._ledger.finish(r, FAILED, k, -1, end, failure)
                continue
            pushed: dict[int, int] = {}
            for r, o in zip(batch, outs):
                if r.state == PENDING:
                    self._router.advance(r, st, o, end, clock, pushed)
            if pushed:
                self._router.wake(pushed)
