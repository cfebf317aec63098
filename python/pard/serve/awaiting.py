"""How a served request waits for the pipeline: until its answer, its client leaving, or its deadline plus the
server's grace (:func:`await_answer`), with the exceptions that say which ended the wait first.
:class:`pard.serve.service.ServedPipeline` turns each into its answer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..errors import Dropped, ExecutorError, Rejected
from ..outcomes import STATES
from ..runtime.aio import abandon, completed_error
from ..runtime.live import watch

if TYPE_CHECKING:  # pragma: no cover
    from ..runtime import Runtime
    from .connections import Lost

__all__ = ["QueueFull", "ClientClosed", "GaveUp", "await_answer"]


class QueueFull(Exception):
    """``queue.max_queue_size`` requests already wait at the entry stage."""

    def __init__(self, message: str, stage: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.stage = stage
        self.retry_after_s = retry_after_s


class ClientClosed(Exception):
    """The client disconnected before its answer was ready."""


class GaveUp(Exception):
    """The pipeline had not answered by the request's deadline plus ``server.answer_grace_s``."""


async def await_answer(rt: Runtime, fut: Any, lost: Lost | None, disconnected: Callable[[], Awaitable[Any]] | None,
                        give_up_in_s: float, orphaned: Callable[[str], None]) -> tuple[Any, str]:
    """``(output, state)`` of the request of ``fut`` (a :meth:`Runtime.submit` future), raising as
    :meth:`Runtime.infer_outcome`.  If the client disconnects first (``lost`` fires, else ``disconnected()``
    completes: :class:`ClientClosed`), or ``give_up_in_s`` seconds pass first (:class:`GaveUp`), the
    request is cancelled in the pipeline, and one that finishes anyway (its batch was already collected) is
    passed to ``orphaned`` with its state: the runtime counted it but no one was answered with it.

    A timer handle and a callback on the connection, not a task each: the wait costs the event loop one
    future per request."""
    out = watch(fut)
    why: list[type[Exception]] = []

    def stop(reason: type[Exception] = ClientClosed) -> None:
        if not out.done():
            why.append(reason)
            out.cancel()

    timer = out.get_loop().call_later(max(0.0, give_up_in_s), stop, GaveUp)
    gone = None
    if lost is not None:
        lost.add(stop)
    elif disconnected is not None:
        gone = asyncio.ensure_future(disconnected())
        gone.add_done_callback(lambda g: None if g.cancelled() else stop())
    try:
        result = await out
        return result, STATES[fut.outcome_state]
    except asyncio.CancelledError:
        abandon(fut, orphaned)
        if why:
            raise why[0] from None
        raise
    except (Dropped, Rejected, ExecutorError) as e:
        completed_error(rt, fut, e)
        raise
    finally:
        timer.cancel()
        if lost is not None:
            lost.discard(stop)
        if gone is not None:
            gone.cancel()
