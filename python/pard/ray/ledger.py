"""Requests, their futures, the outcome table and the one terminal transition, in Python: the ledger
of :mod:`pard.ray`'s driver (the local :class:`pard.Runtime` keeps all of this in its C++
``LivePipeline``, ``cpp/include/pard/live_pipeline.hpp``).

A :class:`Ledger` owns request ids, the per-request outcome arrays (the form of
``pard._core.Simulator.outcomes()``), the counts by state and the in-flight count, all under one
lock.  :meth:`Ledger.finish` is the only way a request leaves ``pending``: the first caller wins,
the outcome is recorded, the request leaves the live set and its future is resolved (or, for
``future.cancel()``, left to be cancelled by the future itself).  Every request therefore ends in
exactly one terminal state (:mod:`pard.outcomes`), and ``submitted = pending + on_time + late +
dropped + rejected + failed`` holds at any moment.  Where the compute went (:mod:`pard.compute_split`)
is kept, under the same lock, by a ``pard._core.ComputeBook``: the C++ rule the local runtime applies,
told of each request's opening, batches (:meth:`Ledger.charge_batch`) and end.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _core
from ..outcomes import DROPPED, FAILED, LATE, ON_TIME, PENDING, REJECTED, STATES, reason_code

__all__ = ["Request", "RequestFuture", "OutcomeTable", "Ledger"]

CANCELLED = reason_code("cancelled")


class Request:
    """One request in flight: its keys, per-stage payloads and arrival times, and DAG join state."""

    __slots__ = ("id", "send_s", "deadline_s", "tier", "future", "state", "inputs", "arrival_s",
                 "queued", "stage", "parts", "outputs", "sinks_left", "running", "slo_s")

    def __init__(self, rid: int, send_s: float, deadline_s: float, tier: int, n_stages: int, sinks: int) -> None:
        self.id = rid
        self.send_s = send_s
        self.deadline_s = deadline_s
        self.tier = tier
        self.slo_s = deadline_s - send_s
        self.future: RequestFuture | None = None
        self.running = False  # in an executor call now (set under the ledger's lock): cancel() fails
        self.state = PENDING
        self.inputs: list[Any] = [None] * n_stages
        self.arrival_s: list[float] = [0.0] * n_stages
        self.queued: set[int] = set()  # stages whose queue holds it (not yet taken into a batch)
        self.stage = 0  # the stage it was last handed to
        self.parts: dict[int, dict[int, Any]] | None = None  # join stage -> predecessor -> output
        self.outputs: dict[int, Any] | None = None  # exit stage -> output (several exits)
        self.sinks_left = sinks


class RequestFuture(Future):  # type: ignore[type-arg]
    """A :class:`concurrent.futures.Future` for one request, with its id.

    ``result()`` returns the pipeline's output (for a pipeline with several exit stages, a dict
    ``{exit stage: output}``) or raises ``pard.Dropped`` / ``pard.Rejected`` / ``pard.ExecutorError``.
    ``cancel()`` succeeds while the request has not ended and is not being executed: the request
    becomes terminal at once (counted as dropped, reason ``cancelled``), leaves its queue's order
    immediately, and no executor is called on it afterwards.  While one of its stages' executors is
    running it (its batch has started), ``cancel()`` returns False, as for any running Future.
    """

    request_id: int
    #: the request's outcome once done (an index into pard.outcomes.STATES); PENDING before
    outcome_state: int = PENDING

    def __init__(self, ledger: Ledger, req: Request) -> None:
        super().__init__()
        self._ledger = ledger
        self._req: Request | None = req  # dropped once the request has ended (frees its payloads)
        self.request_id = req.id

    def cancel(self) -> bool:
        req = self._req
        if req is None or not self._ledger.cancel(req):
            return False
        self._req = None
        return super().cancel()


#: Slots of the cancelled mask (1 MiB): two queued requests share a slot only if one is still queued
#: after 2**20 newer requests were submitted; the worker then treats the stale one as a ghost.
CANCEL_SLOTS = 1 << 20


class OutcomeTable:
    """Per-request outcome arrays of the most recent ``history`` requests (the Simulator's outcomes()
    form), a ring indexed by ``id % history``.  Older requests are retired: their rows are reused,
    and only the counters of :class:`Ledger` remember them.  ``n`` counts every request ever."""

    _FILL = {"finish_s": np.nan, "drop_stage": -1, "reason": -1}
    _DTYPES = {"send_s": np.float64, "slo_s": np.float64, "tier": np.int32, "state": np.int8,
               "finish_s": np.float64, "drop_stage": np.int32, "reason": np.int32, "compute_s": np.float64}

    def __init__(self, history: int, capacity: int = 1024) -> None:
        self.n = 0
        self.history = history
        for name, dtype in self._DTYPES.items():
            setattr(self, name, np.full(min(capacity, history), self._FILL.get(name, 0), dtype=dtype))

    def holds(self, rid: int) -> bool:
        """True while request ``rid``'s row has not been reused by a newer request."""
        return rid >= self.n - self.history

    def append(self, send_s: float, slo_s: float, tier: int) -> int:
        """Add a request; returns its id (its row is ``id % history``)."""
        i = self.n
        size = self.send_s.size
        if i == size and size < self.history:  # grow until the ring reaches its size
            for name, dtype in self._DTYPES.items():
                old = getattr(self, name)
                new = np.full(min(size * 2, self.history), self._FILL.get(name, 0), dtype=dtype)
                new[:size] = old
                setattr(self, name, new)
        row = i % self.history
        for name in ("state", "finish_s", "drop_stage", "reason", "compute_s"):  # a reused row starts afresh
            getattr(self, name)[row] = self._FILL.get(name, 0)
        self.send_s[row] = send_s
        self.slo_s[row] = slo_s
        self.tier[row] = tier
        self.n = i + 1
        return i

    def copy(self) -> dict[str, np.ndarray]:
        """The held rows in request-id order, by name, plus ``request_id``: copies."""
        first = max(0, self.n - self.history)
        rows = np.arange(first, self.n) % self.history
        out = {name: getattr(self, name)[rows] for name in self._DTYPES}
        out["request_id"] = np.arange(first, self.n, dtype=np.int64)
        return out


class Ledger:
    """Request ids, outcomes, counts and the in-flight set, under one lock (see the module docstring)."""

    def __init__(self, n_stages: int, n_sinks: int, now: Callable[[], float], history: int) -> None:
        self.now = now  # the runtime clock every recorded time uses
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)  # notified when nothing is in flight
        self.live: dict[int, Request] = {}
        self.out = OutcomeTable(history)
        self.counts = [0] * len(STATES)
        #: dropped requests by (stage index, reason code), every request ever (monotonic)
        self.drops: dict[tuple[int, int], int] = {}
        #: the cancelled mask the stage schedulers read at batch formation (``form_batch(cancelled=)``):
        #: slot ``id % CANCEL_SLOTS`` is 1 once request ``id`` has ended, so a copy still queued anywhere
        #: is discarded in C++ (reason ``cancelled``) and takes no place in a batch
        self.gone = np.zeros(CANCEL_SLOTS, dtype=np.uint8)
        #: called (outside the lock) with the stages whose queue still held a request when it ended
        self.on_unqueued: Callable[[tuple[int, ...]], None] | None = None
        self.inflight = 0
        #: where the compute went (pard/compute_split.hpp's rule), every request ever
        self.compute = _core.ComputeBook(n_stages)
        self._n_stages = n_stages
        self._n_sinks = n_sinks

    def register_locked(self, send_s: float, slo_s: float, tier: int) -> Request:
        """A new request with the next id, in flight, with its future (caller holds :attr:`lock`)."""
        rid = self.out.append(send_s, slo_s, tier)
        self.gone[rid % CANCEL_SLOTS] = 0
        req = Request(rid, send_s, send_s + slo_s, tier, self._n_stages, self._n_sinks)
        req.future = RequestFuture(self, req)
        self.live[rid] = req
        self.compute.open(rid)
        self.inflight += 1
        self.counts[PENDING] += 1
        return req

    def unregister_locked(self, r: Request) -> None:
        """Undo :meth:`register_locked` for ``r``, which reached no queue (caller holds :attr:`lock`).

        ``r`` is the newest request (registration happens only under the lock), so its id is handed
        out again and the request is counted nowhere.
        """
        self.live.pop(r.id, None)
        self.compute.forget(r.id)
        self.inflight -= 1
        self.counts[PENDING] -= 1
        self.out.n -= 1
        fut, r.future = r.future, None
        r.state = FAILED  # never pending again: a stray lookup treats it as a ghost
        if fut is not None:
            fut._req = None
        if self.inflight == 0:
            self.idle.notify_all()

    def finish(self, r: Request, state: int, stage: int, reason: int, t: float,
               exc: BaseException | None = None, result: Any = None, *, unless_running: bool = False) -> bool:
        """Move ``r`` to terminal ``state`` (first caller wins) and resolve its future.  True if it did.

        ``stage`` is recorded for dropped, rejected and failed requests, ``reason`` for dropped and
        rejected ones.  The future gets ``exc``, or ``result`` when on time or late; with neither
        (``future.cancel()``) it is left for the future to cancel itself.
        """
        with self.lock:
            if r.state != PENDING or (unless_running and r.running):
                return False
            r.state = state
            o = self.out
            if o.holds(r.id):  # else retired: counted only
                row = r.id % o.history
                o.state[row] = state
                o.finish_s[row] = t
                if state in (DROPPED, REJECTED, FAILED):  # the stage it ended at (pard.report attributes it)
                    o.drop_stage[row] = stage
                if state in (DROPPED, REJECTED):
                    o.reason[row] = reason
            self.live.pop(r.id, None)
            self.compute.settle(r.id, state)
            self.gone[r.id % CANCEL_SLOTS] = 1
            unqueued = tuple(r.queued)
            self.counts[PENDING] -= 1
            self.counts[state] += 1
            if state == DROPPED:
                self.drops[(stage, reason)] = self.drops.get((stage, reason), 0) + 1
            self.inflight -= 1
            if self.inflight == 0:
                self.idle.notify_all()
            fut, r.future = r.future, None
            if fut is not None:
                fut._req = None
        r.queued.clear()
        if unqueued and self.on_unqueued is not None:
            self.on_unqueued(unqueued)
        r.parts = None
        r.outputs = None
        if fut is None:
            return True
        fut.outcome_state = state
        try:
            if exc is not None:
                fut.set_exception(exc)
            elif state in (ON_TIME, LATE):
                fut.set_result(result)
        except InvalidStateError:  # pragma: no cover - cancelled concurrently
            pass
        return True

    def charge_batch(self, stage: int, ids: list[int], duration_s: float) -> None:
        """Stage ``stage`` ran the batch ``ids`` (batch order) for ``duration_s``: each request's equal share
        to its row's ``compute_s`` (rows still held) and to :attr:`compute`.  The driver may hear of a
        batch after the end of a request in it (another stage's event came first): that share counts by
        the request's outcome, or as wasted once its row is no longer held; a drop heard of before every
        batch of its request counts as made before compute."""
        share = duration_s / len(ids) if ids else 0.0
        with self.lock:
            o = self.out
            states = []
            for rid in ids:
                held = o.holds(rid)
                if held:
                    o.compute_s[rid % o.history] += share
                states.append(PENDING if rid in self.live else int(o.state[rid % o.history]) if held else DROPPED)
            self.compute.charge_batch(stage, ids, duration_s, states)

    def cancel(self, r: Request) -> bool:
        """``future.cancel()``: ``r`` ends dropped with reason ``cancelled`` at the stage it is at,
        unless it is being executed (False then)."""
        return self.finish(r, DROPPED, r.stage, CANCELLED, self.now(), unless_running=True)
