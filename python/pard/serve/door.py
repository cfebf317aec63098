"""The door of ``pard serve``: every inference request meets :meth:`ServedPipeline.at_door` before it is
routed and before its body is read (the rule: :class:`pard.runtime.door.Door`).

Two ways in, one decision:

* :func:`protocol_door` -- inside uvicorn's HTTP protocol (:mod:`pard.serve.connections`), as soon as a
  request's headers are parsed: a refusal is one ``transport.write`` of the whole answer, with no ASGI task,
  no middleware and no routing.  Past the server's capacity most requests are refused, so what a refusal
  costs decides how much of the front's one core is left for the requests it admits.
* :class:`DoorMiddleware` -- the same decision as ASGI middleware, for the app run by any other ASGI server
  (or a test client); it passes over a request the protocol already let in.

Either leaves the request's arrival time in its scope (:data:`ARRIVED`): its SLO counts from then.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from .service import Answer, ServedPipeline

__all__ = ["ARRIVED", "DoorMiddleware", "HeaderView", "protocol_door", "raw_answer"]

#: The ASGI scope key under which the door leaves a request's arrival time (s, the runtime's clock).
ARRIVED = "pard.arrived_s"


class HeaderView:
    """The few headers the door reads, found in an ASGI scope's raw header list without building a dict."""

    __slots__ = ("_raw",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._raw = raw

    def get(self, name: str, default: str | None = None) -> str | None:
        key = name.encode("latin-1")
        for k, v in self._raw:
            if k.lower() == key:
                return v.decode("latin-1")
        return default


def _is_infer(scope: Any) -> bool:
    return scope["method"] == "POST" and scope["path"].endswith("/infer")


def _decide(svc: ServedPipeline, scope: Any) -> Answer | None:
    arrived = svc.arrival()
    scope[ARRIVED] = arrived
    return svc.at_door(arrived, HeaderView(scope["headers"]))


def raw_answer(answer: Answer, keep_alive: bool) -> bytes:
    """``answer`` as the bytes of one HTTP/1.1 response (status line, headers, body)."""
    head = [f"HTTP/1.1 {answer.status} {HTTPStatus(answer.status).phrase}"]
    head += [f"{k}: {v}" for k, v in answer.headers.items()]
    head.append(f"content-length: {len(answer.body)}")
    if not keep_alive:
        head.append("connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + answer.body


def protocol_door(svc: ServedPipeline) -> Callable[[Any, bool], bytes | None]:
    """``door(scope, keep_alive)``: the raw refusal of an inference request whose headers are in ``scope``,
    or None to serve it (:class:`pard.serve.connections.GuardedProtocol` calls it before the ASGI task)."""

    def door(scope: Any, keep_alive: bool) -> bytes | None:
        if not _is_infer(scope):
            return None
        refused = _decide(svc, scope)
        return None if refused is None else raw_answer(refused, keep_alive)

    return door


class DoorMiddleware:
    """ASGI middleware: the door (module docstring) for a request the protocol has not already decided."""

    def __init__(self, app: Any, service: ServedPipeline) -> None:
        self.app = app
        self.svc = service

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and ARRIVED not in scope and _is_infer(scope):
            refused = _decide(self.svc, scope)
            if refused is not None:
                headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in refused.headers.items()]
                headers.append((b"content-length", str(len(refused.body)).encode("latin-1")))
                await send({"type": "http.response.start", "status": refused.status, "headers": headers})
                await send({"type": "http.response.body", "body": refused.body})
                return
        await self.app(scope, receive, send)
