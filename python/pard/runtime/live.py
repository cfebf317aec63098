"""The Python side of the C++ hot path (``pard._core.LivePipeline``, ``cpp/include/pard/live_pipeline.hpp``).

The C++ pipeline keeps every request in flight, its outcome, the counts and the routing between
stages, and resolves each request's future (``pard._core.LiveFuture``, behind the
:class:`~pard.runtime.future.RequestFuture` ``Runtime.submit`` returns) in C++.  What stays in
Python is built here: the exception a dropped, rejected or failed request's future raises -- made only when someone asks for it
(:func:`error_factory`) -- and the bridge of a future to asyncio (:func:`watch`, :func:`wrap_future`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from .. import _core
from ..errors import Dropped, ExecutorError, Rejected
from ..outcomes import REASONS, REJECTED

__all__ = ["error_factory", "watch", "wrap_future", "build", "KIND"]


#: EndKind codes of pard/live/types.hpp (why a request ended)
KIND = {"output": 0, "policy": 1, "cancel": 2, "closed": 3, "queue_full": 4, "ring_full": 5, "executor": 6,
        "failure": 7, "join": 8, "dead": 9}


def error_factory(names: Sequence[str], max_queue: Sequence[int]) -> Callable[..., BaseException]:
    """The function the C++ futures call to build the exception of a request that did not finish:
    ``(request_id, state, stage, reason, kind, raw, queued, retry_after_s) -> exception``."""

    def make(rid: int, state: int, stage: int, reason: int, kind: int, raw: Any, queued: int,
             retry_after_s: float) -> BaseException:
        name = names[stage]
        if kind == KIND["executor"]:
            return ExecutorError(f"stage {name!r}: executor raised {type(raw).__name__}: {raw}",
                                 request_id=rid, stage=name, cause=raw)
        if kind == KIND["join"]:
            return ExecutorError(f"join into stage {name!r} raised {type(raw).__name__}: {raw}",
                                 request_id=rid, stage=name, cause=raw)
        if kind == KIND["dead"]:
            thread, exc = raw
            return ExecutorError(f"stage {name!r}: worker thread {thread} died of {type(exc).__name__}: {exc}",
                                 request_id=rid, stage=name, cause=exc)
        if kind == KIND["failure"]:
            return ExecutorError(f"submit into entry stage failed: {type(raw).__name__}: {raw}",
                                 request_id=rid, stage=name, cause=raw)
        if kind in (KIND["queue_full"], KIND["ring_full"]):
            full = kind == KIND["queue_full"]
            why = f"its queue is full ({queued} queued, max_queue_size {max_queue[stage]})" if full \
                else "its ingress ring is full"
            if state == REJECTED:
                return Rejected("queue_full" if full else "ring_full", retry_after_s=retry_after_s, stage=name,
                                request_id=rid, detail=why)
            return Dropped(rid, name, "rejected", retry_after_s=retry_after_s)
        return Dropped(rid, name, REASONS[reason] if reason >= 0 else "unknown")

    return make


def build(stages: Sequence[Any], entries: Sequence[int], exits: Sequence[int], history: int,
          join: Callable[[list[Any]], Any]) -> Any:
    """The ``pard._core.LivePipeline`` of a runtime's stages (:class:`pard.runtime.workers.Stage`)."""
    names = [st.name for st in stages]
    return _core.LivePipeline(
        schedulers=[st.sched for st in stages], successors=[list(st.successors) for st in stages],
        preds=[list(st.preds) for st in stages], max_queue=[int(st.max_queue) for st in stages],
        capacity_req_s=[float(st.capacity_req_s) for st in stages], entries=list(entries), exits=list(exits),
        history=int(history), join=join, exit_names=[names[k] for k in exits],
        error_factory=error_factory(names, [int(st.max_queue) for st in stages]))


#: ``watch(fut)``: an asyncio future of the running loop that takes the outcome of ``fut`` (a
#: :class:`~pard.runtime.future.RequestFuture` not yet watched) when its request ends.  The runtime
#: hands ended requests to the loop's sink in C++ and wakes the loop once per batch of them
#: (``src/live_loop_sink.hpp``), not once per request.  Cancelling the returned future does not
#: cancel the request: the awaiting code does (:func:`~pard.runtime.aio.abandon`).  RuntimeError
#: without a running loop or when ``fut`` is pending and already watched; TypeError for what is not a
#: RequestFuture.
watch: Callable[[Any], asyncio.Future[Any]] = _core.watch


def wrap_future(fut: Any) -> asyncio.Future[Any]:
    """An asyncio future of the running loop that follows ``fut`` (as :func:`asyncio.wrap_future`
    does for a ``concurrent.futures.Future``); cancelling it cancels ``fut``.  Futures that finish
    together reach the loop together (:func:`watch`); a future already watched is followed through
    :func:`asyncio.wrap_future`."""
    try:
        out = watch(fut)
    except RuntimeError:
        asyncio.get_running_loop()  # no running loop: raise that
        return asyncio.wrap_future(fut)

    def forward_cancel(a: asyncio.Future[Any]) -> None:
        if a.cancelled():
            fut.cancel()

    out.add_done_callback(forward_cancel)
    return out
