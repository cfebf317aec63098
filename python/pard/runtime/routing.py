"""Routing between stages: a request handed into a stage's scheduler, an output handed on to the
successors (joined at a stage with several predecessors), or the request finished at the exit.

The requests of one upstream batch are pushed together and their stage's workers woken once
(:meth:`Router.wake`), as DESIGN §3.1 has them arrive together.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import Dropped, ExecutorError
from ..outcomes import DROPPED, FAILED, LATE, ON_TIME, PENDING, reason_code
from .requests import Ledger, Request

if TYPE_CHECKING:  # pragma: no cover
    from .clock import ThreadClock
    from .workers import Stage

__all__ = ["Router"]

_REJECTED_CODE = reason_code("rejected")


class Router:
    """Moves requests between the stages of one runtime (see the module docstring)."""

    def __init__(self, stages: Sequence[Stage], ledger: Ledger, exits: Sequence[int],
                 join: Callable[[list[Any]], Any]) -> None:
        self._stages = stages
        self._ledger = ledger
        self._single_exit = len(exits) == 1
        self._join = join

    def enqueue(self, st: Stage, r: Request, arrival_s: float, payload: Any, clock: ThreadClock,
                pushed: dict[int, int] | None = None) -> str | None:
        """Push ``r`` into stage ``st`` arriving at ``arrival_s``; None, or why it was refused: the
        stage's queue is at ``max_queue_size`` (back-pressure), or its ingress ring is full.

        With ``pushed``, the stage's workers are not woken here: the count is added to
        ``pushed[stage]`` and :meth:`wake` wakes them once for the whole upstream batch.
        """
        queued = st.queued_live()  # read without the lock: a bound to within the concurrent pushes
        if queued >= st.max_queue:
            return f"its queue is full ({queued} queued, max_queue_size {st.max_queue})"
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
            return "its ingress ring is full"
        st.arrivals.append(arrival_s)
        if pushed is not None:
            pushed[k] = pushed.get(k, 0) + 1
            return None
        with st.cond:
            st.pending += 1
            st.cond.notify()
        return None

    def enter(self, entries: Sequence[int], req: Request, send: float, payload: Any,
              clock: ThreadClock) -> tuple[int, str | None, BaseException | None]:
        """Push a new ``req`` into every entry stage (caller holds the ledger's lock).

        Returns (the entry stage that refused it, or -1; why; the error a later push raised, or None).
        An error at the first push unregisters the request and propagates (it reached no queue).
        """
        pushed = 0  # entry queues it reached (a worker may already have taken it from them)
        try:
            for k in entries:
                refused = self.enqueue(self._stages[k], req, send, payload, clock)
                if refused is not None:
                    return k, refused, None
                pushed += 1
        except BaseException as e:
            if pushed == 0:
                self._ledger.unregister_locked(req)
                raise
            return -1, None, e
        return -1, None, None

    def wake(self, pushed: dict[int, int]) -> None:
        """Count the requests of one upstream batch into their stages and wake that many workers."""
        for k, n in pushed.items():
            st = self._stages[k]
            with st.cond:
                st.pending += n
                st.cond.notify(n)

    def fail_dead(self, r: Request, st: Stage, t: float) -> None:
        """End ``r`` as failed because stage ``st`` has a dead worker."""
        assert st.dead is not None
        name, exc = st.dead
        err = ExecutorError(f"stage {st.name!r}: worker thread {name} died of {type(exc).__name__}: {exc}",
                            request_id=r.id, stage=st.name, cause=exc)
        r.queued.discard(st.index)
        self._ledger.finish(r, FAILED, st.index, -1, t, err)

    def _fail(self, r: Request, stage: int, t: float, what: str, e: BaseException) -> None:
        err = ExecutorError(f"{what} raised {type(e).__name__}: {e}", request_id=r.id,
                            stage=self._stages[stage].name, cause=e)
        self._ledger.finish(r, FAILED, stage, -1, t, err)

    def _finish_exit(self, r: Request, st: Stage, out: Any, end: float) -> None:
        """``r`` left exit stage ``st``: finish it once every exit stage has produced its output."""
        if self._single_exit:
            result = out
        else:
            with self._ledger.lock:
                if r.outputs is None:
                    r.outputs = {}
                r.outputs[st.index] = out
                r.sinks_left -= 1
                if r.sinks_left > 0:
                    return
                result = {self._stages[i].name: v for i, v in sorted(r.outputs.items())}
        self._ledger.finish(r, ON_TIME if end <= r.deadline_s else LATE, st.index, -1, end, result=result)

    def _joined(self, r: Request, st: Stage, nxt: Stage, out: Any) -> list[Any] | None:
        """The predecessors' outputs for join stage ``nxt`` once all have arrived, else None."""
        with self._ledger.lock:
            if r.parts is None:
                r.parts = {}
            parts = r.parts.setdefault(nxt.index, {})
            parts[st.index] = out
            if len(parts) < len(nxt.preds):
                return None
            del r.parts[nxt.index]
            return [parts[p] for p in nxt.preds]

    def advance(self, r: Request, st: Stage, out: Any, end: float, clock: ThreadClock,
                pushed: dict[int, int]) -> None:
        """Hand stage ``st``'s output for ``r`` on: to its successors, or finish ``r`` at the exit."""
        if not st.successors:
            self._finish_exit(r, st, out, end)
            return
        for s in st.successors:
            nxt = self._stages[s]
            payload = out
            if len(nxt.preds) > 1:
                parts = self._joined(r, st, nxt, out)
                if parts is None:
                    continue
                try:
                    payload = self._join(parts)
                except BaseException as e:  # noqa: BLE001 - a failing join fails the request
                    self._fail(r, s, end, f"join into stage {nxt.name!r}", e)
                    return
            if r.state != PENDING:  # ended meanwhile (dropped in a sibling branch, cancelled)
                return
            if nxt.dead is not None:
                self.fail_dead(r, nxt, end)
                return
            try:
                refused = self.enqueue(nxt, r, end, payload, clock, pushed)
            except BaseException as e:  # noqa: BLE001 - fail the request, keep the worker alive
                self._fail(r, s, end, f"handing over to stage {nxt.name!r}", e)
                return
            if refused is not None:
                self._ledger.finish(r, DROPPED, s, _REJECTED_CODE, end,
                                    Dropped(r.id, nxt.name, "rejected", retry_after_s=nxt.retry_after_s()))
                return
            if nxt.dead is not None:  # it died while r was handed over: the dying worker may have missed r
                self.fail_dead(r, nxt, end)
                return
