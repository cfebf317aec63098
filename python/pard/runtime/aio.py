"""The asyncio face of the live runtime: ``await rt.infer(...)``, ``async with``, ``await rt.aclose()``.

:class:`AsyncRuntimeMixin` adds coroutines to :class:`pard.Runtime` and is built only on the
Runtime's public methods (``submit``, ``start``, ``close``, ``queued``, ``now``, ``pipeline``,
``workers``) and on the futures ``submit`` returns, so it holds no state of its own and does not
depend on how the runtime is laid out inside.  An event loop that serves requests (an HTTP front,
:mod:`pard.serve`) never blocks in it: submitting is a sub-millisecond call under the runtime's
lock, results arrive through :func:`pard.runtime.live.watch` (the C++ future hands the requests of a
finished batch to the loop's sink and wakes the loop once for all of them), and closing runs in a
worker thread.

Cancellation.  Cancelling the task that awaits :meth:`AsyncRuntimeMixin.infer` cancels the
request's future, which the runtime turns into a terminal *dropped* state with reason
``cancelled`` at once: the request leaves its queue's order (``queued()`` no longer counts it) and
never takes a place in a batch, so an abandoned request costs no compute (the failure Ray Serve
issue #44644 describes: cancelled requests that keep consuming capacity).

Retry hints.  :func:`retry_after_s` estimates when a retry could be served: the time the most
backlogged stage needs to work off what is queued there at its peak throughput (DESIGN §2,
``workers * b / d(b)`` at the best profiled batch size), and never less than one batch of the entry
stage.  ``infer`` puts it on the ``Dropped`` / ``Rejected`` it raises, unless the runtime already
gave one.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

from ..errors import Dropped, ExecutorError, PardError, Rejected
from ..outcomes import STATES
from .live import watch, wrap_future

if TYPE_CHECKING:  # pragma: no cover
    from .facade import Runtime

__all__ = ["AsyncRuntimeMixin", "abandon", "completed_error", "waited_out", "retry_after_s", "DeadlineError"]

# _NO_CYCLE: an exception raised to the caller keeps the frames it passed through (its traceback), and a frame
# that still holds the request's future, which holds the exception, makes a reference cycle per dropped
# request.  Refcounting cannot free those; the garbage collector's full passes do, and past a server's
# capacity, with many requests in flight, each pass pauses its event loop.  So a frame lets go of the future
# before the exception leaves it.


class DeadlineError(PardError, ValueError):
    """``deadline`` is not a finite number of seconds on the runtime's clock."""


def _peak_throughput(spec: Any, workers: int) -> float:
    """Requests/s one stage sustains at its best profiled batch size (``workers * max_b b/d(b)``)."""
    sizes = [b for b in spec.profile if b <= spec.max_batch] or [spec.max_batch]
    return float(workers * max(b / spec.duration(int(b)) for b in sizes))


def _report_orphan(fut: Any, on_orphan: Callable[[str], None]) -> None:
    """``on_orphan(state)`` for a request whose awaiting coroutine was cancelled but which still ended
    on time, late or failed (see :meth:`AsyncRuntime.infer_outcome`)."""
    if not fut.cancelled():
        state = STATES[fut.outcome_state]
        if state in ("on_time", "late", "failed"):
            on_orphan(state)


def abandon(fut: Any, on_orphan: Callable[[str], None] | None = None) -> None:
    """Nobody awaits ``fut`` any more: cancel its request, or, when its batch was already collected (it runs
    to its end), pass its final state to ``on_orphan`` (see :meth:`AsyncRuntimeMixin.infer_outcome`)."""
    if not fut.cancel() and on_orphan is not None:
        fut.add_done_callback(lambda f: _report_orphan(f, on_orphan))


def waited_out(rt: Runtime, fut: Any, e: BaseException, on_orphan: Callable[[str], None] | None = None) -> None:
    """The wait for ``fut`` raised ``e``: a cancelled wait abandons the request (:func:`abandon`), a
    request that ended badly gets its error filled in (:func:`completed_error`); anything else passes."""
    if isinstance(e, asyncio.CancelledError):
        abandon(fut, on_orphan)
    elif isinstance(e, (Dropped, Rejected, ExecutorError)):
        completed_error(rt, fut, e)


def completed_error(rt: Runtime, fut: Any, e: BaseException) -> None:
    """Fill in what the runtime left out of the error ``fut`` raised: the retry hint of a
    :class:`~pard.Dropped` (not a cancelled one) or :class:`~pard.Rejected` (:func:`retry_after_s`), and a
    rejection's or executor error's stage and request id."""
    if isinstance(e, Dropped):
        if e.retry_after_s is None and e.reason != "cancelled":
            e.retry_after_s = retry_after_s(rt)
    elif isinstance(e, Rejected):
        if e.retry_after_s is None:
            e.retry_after_s = retry_after_s(rt)
        if e.stage is None:
            e.stage = rt.pipeline.entry_stages()[0]
        if e.request_id is None:
            e.request_id = fut.request_id
    elif isinstance(e, ExecutorError) and e.request_id is None:
        e.request_id = fut.request_id


def retry_after_s(rt: Runtime) -> float:
    """Seconds after which the pipeline will have worked off what is queued now (a Retry-After hint).

    ``max(d_entry(1), max_k queued_k / throughput_k)``: for every stage ``k``, the requests waiting
    there (``rt.queued(k)``) over its peak throughput (its workers at the best profiled batch
    size); at least one batch of size 1 at the (first) entry stage, the least a retry takes.
    A hint, not a promise: arrivals meanwhile queue too.
    """
    spec = rt.pipeline
    workers = rt.workers
    entry = spec.stage(spec.entry_stages()[0])
    wait = float(entry.duration(1))
    for st in spec.stages:
        waiting = rt.queued(st.name)
        if waiting:
            wait = max(wait, waiting / _peak_throughput(st, int(workers[st.name])))
    return wait


class AsyncRuntimeMixin:
    """Coroutines for :class:`pard.Runtime`: ``infer``, ``aclose``, ``async with``.

    Mixed into the Runtime class; every method uses only the Runtime's public interface.
    """

    async def infer(self, payload: Any, slo: float | None = None, tier: int | str | None = None,
                    deadline: float | None = None) -> Any:
        """Serve one request: ``await rt.infer(x)`` returns the pipeline's output.

        The request is submitted when the coroutine starts, before its first suspension, so code
        that runs right before ``await rt.infer(...)`` in the same task (an admission check) sees
        the pipeline as the request finds it.

        Args:
            payload: the entry stage's input (as :meth:`Runtime.submit`).
            slo: end-to-end SLO in seconds, ``(0, 1e9]``; default the pipeline's ``slo``.
            tier: service tier, as :meth:`Runtime.submit`: the index of one of the pipeline's ``tiers``
                or its name (its weight, not the index, says what it is worth); default (None) 0.
            deadline: an absolute deadline on the runtime's clock (:meth:`Runtime.now`, s), e.g.
                a client's ``now() + timeout``.  The request's deadline is the earlier of
                ``send + slo`` and ``deadline``.  A deadline already past still submits the
                request (with a 1 ns SLO), so the scheduler drops it and it is counted.

        Returns:
            the output, whether the request finished on time or late (``counts()`` tells them apart).

        Raises:
            pard.Dropped: a stage's policy dropped it (``stage``, ``reason``, ``retry_after_s``).
            pard.Rejected: refused at admission (``stage``, ``reason``, ``retry_after_s``,
                ``request_id``).
            pard.ExecutorError: a stage's executor raised on its batch (``request_id``, ``__cause__``).
            asyncio.CancelledError: the awaiting task was cancelled; the request is then cancelled
                inside the pipeline (terminal at once, dropped with reason ``cancelled``).
            ValueError / TypeError / RuntimeError: bad arguments or a closed runtime, as
                :meth:`Runtime.submit` (counted nowhere); :class:`DeadlineError` for a bad ``deadline``.
        """
        # the body of infer_outcome, not a call to it: one coroutine per request, not two
        rt: Runtime = self  # type: ignore[assignment]
        fut = rt.submit(payload, slo=slo, tier=0 if tier is None else tier, deadline=deadline)
        try:
            return await watch(fut)
        except BaseException as e:
            waited_out(rt, fut, e)
            fut = None  # noqa: F841 -- see _NO_CYCLE
            raise

    async def infer_outcome(self, payload: Any, slo: float | None = None, tier: int | str | None = None,
                            deadline: float | None = None,
                            on_orphan: Callable[[str], None] | None = None) -> tuple[Any, str]:
        """As :meth:`infer`, and says whether the pipeline finished the request in time:
        ``(output, "on_time")`` or ``(output, "late")`` (the runtime's verdict, the one ``counts()``
        records: its finish against its deadline).  A server that answers after the event loop has
        caught up can compare its own answer time with the deadline (``pard serve`` does).

        ``on_orphan(state)``, when given, is called (from a runtime thread) if this coroutine is cancelled
        but the request cannot be: its batch was already collected, so it still ends ``"on_time"``,
        ``"late"`` or ``"failed"`` (its batch raised) in the runtime's counts, with no one awaiting the
        outcome (``pard serve`` then counts a client that hung up, or one answered 504, as dropped).

        Raises: as :meth:`infer`.
        """
        rt: Runtime = self  # type: ignore[assignment]
        fut = rt.submit(payload, slo=slo, tier=0 if tier is None else tier, deadline=deadline)
        try:
            out = await watch(fut)
        except BaseException as e:
            waited_out(rt, fut, e, on_orphan)
            fut = None  # noqa: F841 -- see _NO_CYCLE
            raise
        return out, STATES[fut.outcome_state]

    async def submit_async(self, payload: Any, *, slo: float | None = None, tier: int = 0, in_tokens: int = 0,
                           max_tokens: int = 0, max_new: int = 0) -> Any:
        """``await``-able form of :meth:`submit` (same arguments): returns the output or raises as
        ``future.result()``.

        Cancelling the awaiting task cancels the request (at an LLM stage, its sequence stops at the next step).
        """
        rt: Runtime = self  # type: ignore[assignment]
        fut = rt.submit(payload, slo=slo, tier=tier, in_tokens=in_tokens, max_tokens=max_tokens, max_new=max_new)
        try:
            waiter = wrap_future(fut)
        except BaseException:  # e.g. no running event loop: end the request rather than leak it
            fut.cancel()
            raise
        return await waiter

    async def aclose(self, drain: bool = True, *, timeout_s: float | None = None) -> None:
        """:meth:`Runtime.close` in a worker thread, so the event loop keeps running meanwhile.

        Same arguments and guarantees (every request terminal afterwards); raises as ``close``.
        """
        rt: Runtime = self  # type: ignore[assignment]
        await asyncio.to_thread(rt.close, drain, timeout_s=timeout_s)

    async def __aenter__(self) -> Any:
        rt: Runtime = self  # type: ignore[assignment]
        rt.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose(drain=True)
