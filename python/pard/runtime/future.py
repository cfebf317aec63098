"""The future ``Runtime.submit`` returns: a ``concurrent.futures.Future`` resolved in C++.

:class:`RequestFuture` is the C++ future of the live hot path (``pard._core.LiveFuture``,
``src/live_future.hpp``): ``result()`` waits with the GIL released, the exception of a dropped
request is built only when someone asks for it, and nothing runs in Python at resolution unless a
callback was registered.  This module makes it a ``concurrent.futures.Future`` too, so that
everything written for futures takes it: ``isinstance(f, concurrent.futures.Future)``,
``concurrent.futures.wait`` / ``as_completed`` and ``asyncio.wrap_future``.

How, and why so.  pybind11 only lets a bound class derive from other bound C++ classes, so
``Future`` is appended to the class's ``__bases__`` here, once, at import (CPython allows it: a
``Future`` instance adds no C-level fields; checked on CPython 3.9, 3.11, 3.12 and 3.13).  Its own C++
methods (``result``, ``exception``, ``done``, ``cancelled``, ``running``, ``cancel``,
``add_done_callback``, and ``set_result`` / ``set_exception`` / ``set_running_or_notify_cancel``,
which refuse: only the runtime resolves it) come first in the MRO, so a call costs what it did.
``Future.__init__`` never runs: it builds a ``threading.Condition`` per future (≈ 1.9 µs, about as
much as the whole C++ submit), and most requests are only ever asked ``result()``.  The part of the
protocol that ``wait`` and ``as_completed`` use from outside -- the ``_condition`` they lock, the
``_state`` they read under it, the ``_waiters`` they install -- is built the first time one of the
three is touched (:class:`_Sync`), with a done-callback that sets the state and wakes the waiters
under that condition, as ``Future.set_result`` does.
"""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import Future
from concurrent.futures._base import CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from typing import Any

from .. import _core
from ..errors import PardWarning

__all__ = ["RequestFuture"]

#: A request's future (``pard.RequestFuture``): ``result(timeout=None)``, ``exception(timeout=None)``,
#: ``done()``, ``cancelled()``, ``running()``, ``cancel()``, ``add_done_callback(fn)``, ``request_id``,
#: ``outcome_state`` (an index into ``pard.outcomes.STATES`` once done, 0 before); a
#: ``concurrent.futures.Future`` (module docstring).
RequestFuture = _core.LiveFuture

_BUILD_LOCK = threading.Lock()  # taken only by the first protocol access of a future


class _Sync:
    """The ``Future`` protocol's shared state, built on first use: condition, state, waiters."""

    __slots__ = ("condition", "state", "waiters")

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.state = PENDING
        self.waiters: list[Any] = []


def _built(fut: Any) -> _Sync:
    sync = fut._sync
    if sync is not None:
        return sync
    with _BUILD_LOCK:
        if fut._sync is None:
            fut._sync = _Sync()
            # runs at once if the request has ended, else in the thread that resolves it
            fut.add_done_callback(_notify)
        return fut._sync


def _notify(fut: Any) -> None:
    """The request ended: set the state and wake the waiters, under the condition (as
    ``Future.set_result`` / ``set_exception`` / ``cancel`` do)."""
    sync = fut._sync
    with sync.condition:
        if fut.cancelled():
            sync.state = CANCELLED_AND_NOTIFIED
            for w in sync.waiters:
                w.add_cancelled(fut)
        else:
            sync.state = FINISHED
            failed = fut.exception(0) is not None
            for w in sync.waiters:
                (w.add_exception if failed else w.add_result)(fut)
        sync.condition.notify_all()


def _install(cls: type) -> None:
    """Make ``cls`` a ``concurrent.futures.Future`` with the lazily built protocol state."""
    if not issubclass(cls, Future):
        try:
            cls.__bases__ = (*cls.__bases__, Future)
        except TypeError as exc:  # an interpreter that refuses: the C++ methods still work
            warnings.warn(f"pard.RequestFuture cannot be a concurrent.futures.Future on this interpreter "
                          f"({exc}); concurrent.futures.wait/as_completed and asyncio.wrap_future will not take it",
                          PardWarning, stacklevel=2)
            return
    cls._condition = property(lambda f: _built(f).condition)  # type: ignore[attr-defined]
    cls._state = property(lambda f: _built(f).state)  # type: ignore[attr-defined]
    cls._waiters = property(lambda f: _built(f).waiters)  # type: ignore[attr-defined]


_install(RequestFuture)
