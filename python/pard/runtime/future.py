"""The future ``Runtime.submit`` returns: a ``concurrent.futures.Future`` resolved in C++.

The C++ hot path resolves each request's ``pard._core.LiveFuture`` (``src/register_live.cpp``):
``result()`` waits with the GIL released, the exception of a dropped request is built only when
someone asks for it, and nothing runs in Python at resolution unless a callback was registered.
:class:`RequestFuture` puts that future behind the ``concurrent.futures.Future`` type so that
everything written for futures takes it: ``isinstance(f, concurrent.futures.Future)``,
``concurrent.futures.wait`` / ``as_completed`` and ``asyncio.wrap_future``.

Why lazily.  A real ``Future`` builds a ``threading.Condition`` (an ``RLock``) in its constructor,
about as much as the whole C++ submit costs; most requests are only ever asked ``result()``.  So a
:class:`RequestFuture` is one small Python object around the C++ future, and the part of the
``Future`` protocol that ``wait`` and ``as_completed`` use from outside -- the ``_condition`` they lock,
the ``_state`` they read under it, the ``_waiters`` they install -- is built the first time any of
the three is touched (:class:`_Sync`), with a done-callback on the C++ future that sets the state and
wakes the waiters under that condition, as ``Future.set_result`` does.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from concurrent.futures._base import CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from typing import Any, Callable

__all__ = ["RequestFuture"]

_LOGGER = logging.getLogger("concurrent.futures")  # where a failing Future callback is logged
_BUILD_LOCK = threading.Lock()  # taken only by the first protocol access of a future


class _Sync:
    """The ``Future`` protocol's shared state, built on first use: condition, state, waiters."""

    __slots__ = ("condition", "state", "waiters")

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.state = PENDING
        self.waiters: list[Any] = []


class RequestFuture(Future):  # type: ignore[type-arg]
    """A request's future: a ``concurrent.futures.Future`` that the C++ runtime resolves.

    ``result(timeout=None)`` returns the pipeline's output or raises ``pard.Dropped``,
    ``pard.Rejected``, ``pard.ExecutorError``, ``concurrent.futures.CancelledError``, or
    ``TimeoutError`` after ``timeout`` seconds; it waits with the GIL released.  ``exception``,
    ``done``, ``cancelled``, ``running``, ``cancel`` and ``add_done_callback`` behave as
    ``concurrent.futures.Future``'s (a callback gets this future; one that raises is logged on the
    ``concurrent.futures`` logger).  ``request_id`` is the runtime's id of the request.  Only the
    runtime resolves it: ``set_result``, ``set_exception`` and ``set_running_or_notify_cancel``
    raise ``RuntimeError``.
    """

    __slots__ = ("_live", "_sync")

    # No Future.__init__: the condition and waiter list are built only when used (module docstring).
    def __init__(self, live: Any) -> None:
        self._live = live
        self._sync: _Sync | None = None

    # ------------------------------------------------------------------ the caller's methods
    @property
    def request_id(self) -> int:
        """The runtime's id of this request (``Runtime.outcomes()`` index)."""
        return int(self._live.request_id)

    def result(self, timeout: float | None = None) -> Any:
        return self._live.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._live.exception(timeout)

    def done(self) -> bool:
        return bool(self._live.done())

    def cancelled(self) -> bool:
        return bool(self._live.cancelled())

    def running(self) -> bool:
        return bool(self._live.running())

    def cancel(self) -> bool:
        """Cancel the request unless it has ended or its batch has started (then ``False``)."""
        return bool(self._live.cancel())

    def add_done_callback(self, fn: Callable[[RequestFuture], object]) -> None:
        """Call ``fn(self)`` when the request ends (at once if it has); in the resolving thread."""

        def call(_live: Any) -> None:
            try:
                fn(self)
            except Exception:
                _LOGGER.exception("exception calling callback for %r", self)

        self._live.add_done_callback(call)

    def __repr__(self) -> str:
        return repr(self._live)

    # ------------------------------------------------------------------ resolved only by the runtime
    def set_result(self, result: Any) -> None:
        raise RuntimeError("a RequestFuture is resolved by its Runtime, not by set_result")

    def set_exception(self, exception: BaseException | None) -> None:
        raise RuntimeError("a RequestFuture is resolved by its Runtime, not by set_exception")

    def set_running_or_notify_cancel(self) -> bool:
        raise RuntimeError("a RequestFuture is run by its Runtime, not by an Executor")

    # ------------------------------------------------------------------ the protocol wait/as_completed use
    @property
    def _condition(self) -> threading.Condition:
        return self._built().condition

    @property
    def _state(self) -> str:
        return self._built().state

    @property
    def _waiters(self) -> list[Any]:
        return self._built().waiters

    def _built(self) -> _Sync:
        sync = self._sync
        if sync is not None:
            return sync
        with _BUILD_LOCK:
            if self._sync is None:
                self._sync = _Sync()
                # runs at once if the request has ended, else in the thread that resolves it
                self._live.add_done_callback(self._notify)
            return self._sync

    def _notify(self, live: Any) -> None:
        """The C++ future ended: set the state and wake the waiters, under the condition (as
        ``Future.set_result`` / ``set_exception`` / ``cancel`` do)."""
        sync = self._sync
        assert sync is not None
        with sync.condition:
            if live.cancelled():
                sync.state = CANCELLED_AND_NOTIFIED
                for w in sync.waiters:
                    w.add_cancelled(self)
            else:
                sync.state = FINISHED
                failed = live.exception(0) is not None
                for w in sync.waiters:
                    (w.add_exception if failed else w.add_result)(self)
            sync.condition.notify_all()
