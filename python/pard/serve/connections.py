"""Connection limits of ``pard serve``'s HTTP front: a header-read timeout and a cap on open connections.

uvicorn holds a connection for as long as its client takes to send a request's headers (its keep-alive
timer restarts on every byte), so clients that connect and stall -- a slowloris, or a crowd of broken
ones -- each hold a file descriptor until the process has none left; then every ``accept()`` fails, no
client gets in, and each failure is logged.  :func:`guarded_protocol` builds the uvicorn HTTP protocol
class that :func:`pard.serve.server.serve` passes as ``uvicorn.Config(http=...)``; per server:

* **header timeout** -- a connection must complete a request's headers within ``header_timeout_s`` of
  opening, or of its previous response completing (keep-alive), or it is closed.  Bytes trickling in do
  not extend it.
* **connection cap** -- at most ``max_connections`` open connections.  A new connection past the cap
  closes the connection that has waited longest for its headers (half-open, or idle between keep-alive
  requests: it holds no request); when every connection holds a request, the new one is answered 503
  and closed.
* **header size** -- more than :data:`MAX_HEADER_BYTES` of headers is answered 431 and closed (httptools
  does not bound a request line or its headers).
* **lost connections** -- each request's scope carries its connection's :class:`Lost` (key :data:`LOST`):
  a handler registers a callback there instead of running a task per request that waits for ASGI's
  ``http.disconnect``, and the callbacks run when the connection closes.

The default cap, :func:`default_max_connections`, stays below the process's open-file limit, which
:func:`raise_fd_limit` lifts to its hard limit at start: descriptors never run out, so ``accept()`` never
fails for want of one.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import resource
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from ..errors import PardValueError

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
else:
    try:  # the protocol uvicorn's http="auto" picks
        import httptools  # noqa: F401
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol as _Base

__all__ = ["BODY", "LOST", "Lost", "WHOLE", "MAX_HEADER_BYTES", "GuardedProtocol", "guarded_protocol", "default_max_connections", "raise_fd_limit"]

log = logging.getLogger("uvicorn.error")

#: The most bytes a request line and its headers may take (nginx's default buffers hold 32 KiB).
MAX_HEADER_BYTES = 64 * 1024
#: Descriptors left to the process besides connections: the listener, logs, the runtime's and the
#: event loop's own (a served pipeline uses a few dozen).
FD_HEADROOM = 100
#: The default cap's ceiling: each open connection costs memory and a place in the event loop's poll.
DEFAULT_MAX_CONNECTIONS = 10_000
#: How often (s) at most the cap's closes and refusals are logged: a flood must not flood the log.
LOG_EVERY_S = 10.0


#: The ASGI scope key of a request's :class:`Lost` (set by :class:`GuardedProtocol`; absent elsewhere).
LOST = "pard.lost"
#: The ASGI scope key of ``whole(build) -> bool``: answer the request with the one write of
#: ``build(keep_alive, default_headers)`` (a whole HTTP/1.1 response), completing it as uvicorn's ``send``
#: would (False: not now, send it as ASGI messages); set by :class:`GuardedProtocol` on the httptools
#: protocol, absent elsewhere.
WHOLE = "pard.whole"
#: The ASGI scope key of ``body() -> bytes | None``: the request's whole body once all of it has arrived
#: (taken: as one ASGI ``receive`` would give it), None while some is still to come; set by
#: :class:`GuardedProtocol` on the httptools protocol, absent elsewhere.  A small body arrives with its
#: headers, so the route takes it without a receive and a timer.
BODY = "pard.body"


class Lost:
    """The callbacks to run when one connection closes (:meth:`add`, :meth:`discard`); one per connection,
    shared by the requests it carries."""

    __slots__ = ("_callbacks", "gone")

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], None]] = []
        self.gone = False

    def add(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` when the connection closes (now if it has)."""
        if self.gone:
            fn()
        else:
            self._callbacks.append(fn)

    def discard(self, fn: Callable[[], None]) -> None:
        """Forget ``fn`` (its request was answered); harmless if it is not there."""
        try:
            self._callbacks.remove(fn)
        except ValueError:
            pass

    def fire(self) -> None:
        """The connection closed: run every callback once."""
        self.gone = True
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            fn()


def default_max_connections(fd_soft_limit: int) -> int:
    """``server.max_connections`` when the file leaves it null: ``min(10 000, soft limit - 100)``, at least 1."""
    return max(1, min(DEFAULT_MAX_CONNECTIONS, fd_soft_limit - FD_HEADROOM))


def raise_fd_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns ``(soft before, soft now, hard)``.  A hard
    limit of RLIM_INFINITY, or one the kernel refuses, leaves the soft limit where it is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            return soft, soft, hard
        return soft, hard, hard
    return soft, soft, hard


def _answer(status: str, error: str, extra: str = "") -> bytes:
    body = json.dumps({"error": error, "reason": "server_busy" if status.startswith("503") else "invalid"})
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}"
            f"connection: close\r\n\r\n{body}").encode("ascii")


#: How early the guard's timer may close a wait: the loop's clock counts whole milliseconds (uvloop), so a timer
#: set for a wait's end may fire a hair before it, and must not then set itself again for the same instant.
_EXPIRY_SLACK_S = 1e-3


class _Guard:
    """One server's limits, its door, and its connections waiting for headers, oldest first (each with the loop
    time its wait began).  One timer serves them all: it fires when the oldest wait runs out, closes every
    connection whose wait has, and is set again for the next oldest; a connection that starts or ends a wait
    only moves its entry (a timer handle per request cost the event loop more than the rest of the wait)."""

    def __init__(self, header_timeout_s: float, max_connections: int,
                 door: Callable[..., bytes | None] | None = None) -> None:
        self.door = door
        self.header_timeout_s = header_timeout_s
        self.max_connections = max_connections
        self.waiting: OrderedDict[GuardedProtocol, float] = OrderedDict()
        self._expiry: asyncio.TimerHandle | None = None
        self.busy = _answer("503 Service Unavailable", f"too many open connections (server.max_connections "
                            f"{max_connections}); try again", "retry-after: 1\r\n")
        self.too_long = _answer("431 Request Header Fields Too Large",
                                f"the request line and headers exceed {MAX_HEADER_BYTES} bytes")
        self.closed = self.refused = 0
        self._log_due: asyncio.TimerHandle | None = None

    def wait(self, protocol: GuardedProtocol, loop: asyncio.AbstractEventLoop) -> None:
        """``protocol`` starts waiting for a request's headers now (the newest wait)."""
        self.waiting[protocol] = loop.time()
        self.waiting.move_to_end(protocol)
        if self._expiry is None:
            self._expiry = loop.call_later(self.header_timeout_s, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the connections that have waited header_timeout_s for their headers; set the timer for the next."""
        self._expiry = None
        now = loop.time()
        while self.waiting:
            protocol, since = next(iter(self.waiting.items()))
            if now - since < self.header_timeout_s - _EXPIRY_SLACK_S:
                self._expiry = loop.call_at(since + self.header_timeout_s, self._expire, loop)
                return
            self.waiting.popitem(last=False)
            protocol.header_timeout()

    def make_room(self, connections: set[Any], loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a new connection may open: below the cap, or once the connection that has waited longest
        for its headers is closed."""
        if len(connections) < self.max_connections:
            return True
        while self.waiting:
            oldest, _ = self.waiting.popitem(last=False)
            oldest.stop_waiting()
            connections.discard(oldest)  # counted out now; its connection_lost comes on the next loop pass
            if not oldest.transport.is_closing():
                oldest.transport.close()
                self._note(loop, closed=1)
                return True
        self._note(loop, refused=1)
        return False

    def _note(self, loop: asyncio.AbstractEventLoop, closed: int = 0, refused: int = 0) -> None:
        self.closed += closed
        self.refused += refused
        if self._log_due is None:
            self._log_due = loop.call_later(LOG_EVERY_S, self._log)

    def _log(self) -> None:
        log.warning("server.max_connections %d reached: closed %d connections waiting for their headers and "
                    "refused %d new ones (503) in the last %.0f s", self.max_connections, self.closed,
                    self.refused, LOG_EVERY_S)
        self.closed = self.refused = 0
        self._log_due = None


class GuardedProtocol(_Base):
    """uvicorn's HTTP protocol with the header timeout, the header size bound and the connection cap (module
    docstring).  Use :func:`guarded_protocol`: each server needs its own class, which holds its own
    :class:`_Guard`."""

    guard: ClassVar[_Guard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting = False  # in guard.waiting: its next request's headers are due within header_timeout_s
        self._header_bytes = 0
        self._refused = False
        self._in_body = False  # between the end of a request's headers and the end of its body
        self._saw_body = False  # the chunk being parsed holds (part of) a body
        self._lost = Lost()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self.guard.make_room(self.connections, self.loop):
            self.transport, self._refused = transport, True  # never joins uvicorn's connections
            transport.write(self.guard.busy)
            transport.close()
            return
        super().connection_made(transport)
        self._wait_for_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_waiting()
        if not self._refused:  # a refused connection has none of uvicorn's per-connection state
            super().connection_lost(exc)
            self._lost.fire()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._saw_body = self._in_body
        if self._waiting and not self._in_body:
            # a request line and headers being read: a chunk that completes them counts up to their end
            # (httptools parses any size of header block in one chunk)
            end = data.find(b"\r\n\r\n")
            if self._header_bytes + (len(data) if end < 0 else end + 4) > MAX_HEADER_BYTES:
                self._too_long()
                return
        super().data_received(data)
        self._sync()
        # a chunk that holds a body's bytes (answered early or not) completed some headers: it is no header flood
        if not self._waiting or self._saw_body:
            return
        # still waiting: these bytes are (part of) the next request's line and headers
        self._header_bytes += len(data)
        if self._header_bytes > MAX_HEADER_BYTES:
            self._too_long()

    def _too_long(self) -> None:
        """431 and close: the request's line and headers pass MAX_HEADER_BYTES."""
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.more_body:  # not the tail of a body answered early (413)
            self.transport.write(self.guard.too_long)
        self.stop_waiting()
        self.transport.close()

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        # the door (pard.serve.door.protocol_door): a refused request is answered here with one write, before
        # an ASGI task exists; its body, if any follows, is skipped by uvicorn as that of an answered request
        door = self.guard.door
        raw = door(cycle.scope, cycle.keep_alive, cycle.default_headers) if door is not None else None
        if raw is None:
            cycle.scope[LOST] = self._lost
            # by weak reference: the scope belongs to the cycle, and a strong one would make each admitted
            # request a reference cycle, left to the garbage collector's full passes, which pause the event loop
            ref = weakref.ref(cycle)
            cycle.scope[WHOLE] = functools.partial(_write_whole, ref)
            cycle.scope[BODY] = functools.partial(_whole_body, ref)
            super()._start_asgi_task(cycle, app)
            return
        cycle.response_started = cycle.response_complete = True
        if self.transport.is_closing():  # closed under it (the connection cap, a reset): nothing to answer
            return
        self.transport.write(raw)
        if not cycle.keep_alive:
            self.transport.close()
            return
        self.on_response_complete()

    def on_headers_complete(self) -> None:
        self._in_body = self._saw_body = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        # uvicorn ignores the end of a body that was answered early (the door's 429, a 413); its bytes are
        # body, not header, and the next request's headers get a whole header_timeout_s from here
        self._in_body = False
        super().on_message_complete()
        if self._waiting and self.cycle is not None and self.cycle.response_complete:
            self.stop_waiting()
            self._wait_for_headers()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._sync()  # keep-alive: the next request's headers are due within the timeout

    def _sync(self) -> None:
        """Waiting for headers while the newest request (if any) has been answered; pipelined requests and
        requests still being read or served are not waiting."""
        waiting = (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing()
        if waiting and not self._waiting:
            self._wait_for_headers()
        elif not waiting and self._waiting:
            self.stop_waiting()

    def _wait_for_headers(self) -> None:
        self._header_bytes = 0
        self._waiting = True
        self.guard.wait(self, self.loop)

    def stop_waiting(self) -> None:
        """Leave the waiting list (the headers arrived, or the connection ends)."""
        if self._waiting:
            self._waiting = False
            self.guard.waiting.pop(self, None)

    def header_timeout(self) -> None:
        """The guard's timer: this connection waited header_timeout_s for headers (it has left the list)."""
        self._waiting = False
        if not self.transport.is_closing():
            self.transport.close()


def _whole_body(ref: Callable[[], Any]) -> bytes | None:
    """The request body of the cycle ``ref`` refers to if all of it has arrived (taken, as uvicorn's ``receive``
    takes it), else None (more to come, a ``100-continue`` not yet sent, or the client gone: ``receive`` says
    which).  The cycle lives as long as its ASGI task, which is the only caller."""
    cycle = ref()
    if cycle.more_body or cycle.disconnected or cycle.response_complete or cycle.waiting_for_100_continue:
        return None
    body = bytes(cycle.body)
    cycle.body = bytearray()
    cycle.message_event.clear()
    return body


def _write_whole(ref: Callable[[], Any], build: Callable[[bool, Any], bytes]) -> bool:
    """Answer the request of the cycle ``ref`` refers to with one write of ``build(keep_alive, default_headers)``
    and complete it the way uvicorn's ``send`` completes a response (a client already gone gets nothing, as
    there).  uvicorn's ``send`` writes a response's head and body apart: two system calls and, on a kept-alive
    connection, two segments per answer.  False (nothing done) while the connection's writes are paused: a
    client that does not read its answers is then waited for by uvicorn's ``send``, so its answers do not pile
    up here."""
    cycle = ref()
    if cycle.flow.write_paused and not cycle.disconnected:
        return False
    if cycle.response_started:
        return True
    cycle.response_started = cycle.response_complete = True
    if cycle.disconnected or cycle.transport.is_closing():
        return True  # the client is gone or going: nothing to write (and nothing left for uvicorn to answer)
    cycle.transport.write(build(cycle.keep_alive, cycle.default_headers))
    cycle.message_event.set()
    if not cycle.keep_alive:
        cycle.transport.close()
    cycle.on_response()
    return True


def guarded_protocol(header_timeout_s: float, max_connections: int,
                     door: Callable[..., bytes | None] | None = None) -> type[GuardedProtocol]:
    """A :class:`GuardedProtocol` class for one server, for ``uvicorn.Config(http=...)``.

    Args:
        header_timeout_s: the header-read timeout (s, > 0).
        max_connections: the cap on open connections (>= 1).
        door: ``door(scope, keep_alive, default_headers) -> bytes | None``: the raw answer to a request whose
            headers are parsed, or None to serve it (:func:`pard.serve.door.protocol_door`); with uvicorn's
            httptools protocol only (the h11 one leaves the door to the ASGI middleware).
    Raises: ValueError for a value out of range.
    """
    if not header_timeout_s > 0:
        raise PardValueError(f"header_timeout_s must be > 0, got {header_timeout_s!r}")
    if max_connections < 1:
        raise PardValueError(f"max_connections must be >= 1, got {max_connections!r}")
    return type("GuardedProtocol", (GuardedProtocol,), {"guard": _Guard(header_timeout_s, max_connections, door)})
