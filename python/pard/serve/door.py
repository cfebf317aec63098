"""The door of ``pard serve``: every inference request meets :meth:`ServedPipeline.at_door` before it is
routed and before its body is read (the rule: :class:`pard.runtime.door.Door`).

Two ways in, one decision:

* :func:`protocol_door` -- inside uvicorn's HTTP protocol (:mod:`pard.serve.connections`), as soon as a
  request's headers are parsed: a refusal is one ``transport.write`` of the whole answer, with no ASGI task,
  no middleware and no routing.  Past the server's capacity most requests are refused, so what a refusal
  costs decides how much of the front's one core is left for the requests it admits.  The health probes
  are answered there too (:data:`HEALTH_PATHS`), so that they never wait behind inference work.
* :class:`DoorMiddleware` -- the same decision as ASGI middleware, for the app run by any other ASGI server
  (or a test client); it passes over a request the protocol already let in.

Either leaves the request's arrival time in its scope (:data:`ARRIVED`): its SLO counts from then.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ..runtime.door import Refusal, Ticket
from .infer_route import _send, handle_infer, infer_path, raw_answer
from .params import door_deadline
from .service import Answer, ServedPipeline, _error, serving

__all__ = ["ARRIVED", "HEALTH_PATHS", "TICKET", "DoorMiddleware", "HeaderView", "at_door", "protocol_door", "raw_answer", "settle"]

#: The ASGI scope key under which the door leaves a request's arrival time (s, the runtime's clock).
ARRIVED = "pard.arrived_s"
#: ... and the :class:`~pard.runtime.door.Ticket` of a request it admitted (settled when the request
#: reaches the pipeline, or by :func:`settle` when it is answered without it).
TICKET = "pard.ticket"


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
    return scope["method"] == "POST" and infer_path(scope["path"]) is not None


def at_door(svc: ServedPipeline, arrived_s: float | None, headers: Any) -> Answer | Ticket | None:
    """The door's refusal, counted, or None to read the request's body (:class:`pard.runtime.door.Door`):
    429 while the event loop runs more than ``server.max_loop_lag_s`` behind (reason ``server_busy``), or
    when the pipeline cannot answer by the deadline the headers give (reason ``infeasible``; no
    ``Retry-After`` when the request's own SLO is shorter than the pipeline's fastest path).  Decided from
    the headers alone, before the body is read; a deadline or tier in the body is judged by the stages once
    it is decoded.  A :class:`~pard.runtime.door.Ticket` when the door admitted the request: the request then
    reaches the pipeline (:meth:`ServedPipeline.infer` settles it) or :func:`settle` says it never will;
    None when the door does not decide (not ready, draining: the route answers that)."""
    door = svc.door
    if door is None or arrived_s is None or not svc.ready or svc.draining:
        return None
    deadline, tier = door_deadline(headers, arrived_s, svc.default_slo_s, svc.config.queue.allow_timeout_override,
                                   svc.spec.tiers, svc.default_tier)
    verdict = door.check(arrived_s, deadline, tier)
    if isinstance(verdict, Ticket):
        return verdict
    return svc.count(_refusal_answer(verdict))


_ANSWERS: dict[Refusal, Answer] = {}


def _refusal_answer(refusal: Refusal) -> Answer:
    """The 429 of a door refusal, built once per distinct refusal (the door reuses a few)."""
    answer = _ANSWERS.get(refusal)
    if answer is None:
        answer = _error(429, "busy", refusal.message, reason=refusal.reason, retry_after_s=refusal.retry_after_s)
        if len(_ANSWERS) >= 256:
            _ANSWERS.clear()
        _ANSWERS[refusal] = answer
    return answer


def settle(svc: ServedPipeline, ticket: Ticket | None) -> None:
    """A request the door admitted ended, reached the pipeline or not: the door stops counting it in front
    of the next ones (:meth:`pard.runtime.door.Door.abandoned`; harmless once it has been)."""
    if ticket is not None and svc.door is not None:
        svc.door.abandoned(ticket)


def _decide(svc: ServedPipeline, scope: Any) -> Answer | None:
    arrived = svc.arrival()
    scope[ARRIVED] = arrived
    verdict = at_door(svc, arrived, HeaderView(scope["headers"]))
    if isinstance(verdict, Ticket):
        scope[TICKET] = verdict
        return None
    return verdict


#: The health routes the protocol answers itself (GET): a probe must not queue behind the inference work
#: the event loop is busy with, and Kubernetes' default probe timeout is 1 s.
HEALTH_PATHS = ("/v2/health/live", "/v2/health/ready")
_UP, _DOWN = Answer(200, b"", {}), Answer(503, b"", {})


def protocol_door(svc: ServedPipeline) -> Callable[..., bytes | None]:
    """``door(scope, keep_alive, default_headers)``: the raw answer to a request whose headers are in
    ``scope`` and that needs no ASGI task -- a refused inference request, or a GET of a health route (as
    the app's routes answer it: live 200; ready 200 while the pipeline is ready, not draining and not
    stalled, else 503) -- or None to serve it through the app.
    :class:`pard.serve.connections.GuardedProtocol` calls it before the ASGI task."""

    # an answer (kept alive here) and the server's default headers (a new list each second: the date) -> its bytes
    raw: dict[tuple[int, bool], tuple[Answer, Any, bytes]] = {}

    def encoded(answer: Answer, keep_alive: bool, default_headers: Any) -> bytes:
        key = (id(answer), keep_alive)
        hit = raw.get(key)
        if hit is None or hit[0] is not answer or hit[1] is not default_headers:
            if len(raw) >= 256:
                raw.clear()
            hit = raw[key] = (answer, default_headers, raw_answer(answer, keep_alive, default_headers))
        return hit[2]

    def door(scope: Any, keep_alive: bool, default_headers: Any = ()) -> bytes | None:
        if scope["method"] == "GET" and scope["path"] in HEALTH_PATHS:
            up = scope["path"] == HEALTH_PATHS[0] or serving(svc)
            return encoded(_UP if up else _DOWN, keep_alive, default_headers)
        if not _is_infer(scope):
            return None
        refused = _decide(svc, scope)
        return None if refused is None else encoded(refused, keep_alive, default_headers)

    return door


class DoorMiddleware:
    """The outermost ASGI layer, in front of the Starlette app: every inference request meets the door (module
    docstring; unless the protocol already decided it) and, admitted, is served by
    :func:`pard.serve.infer_route.handle_infer`, outside Starlette's router; other requests pass on."""

    def __init__(self, app: Any, service: ServedPipeline) -> None:
        self.app = app
        self.svc = service

    def __getattr__(self, name: str) -> Any:
        # the wrapped app's attributes (Starlette's state, router, ...) read through this layer
        if name in ("app", "svc"):
            raise AttributeError(name)
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        route = infer_path(scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":  # answered as the router answers a method it does not serve
            body = json.dumps({"error": f"Method Not Allowed: {scope['method']} {scope['path']}"}).encode()
            await _send(send, Answer(405, body, {"content-type": "application/json", "allow": "POST"}))
            return
        if ARRIVED not in scope:
            refused = _decide(self.svc, scope)
            if refused is not None:
                await _send(send, refused)
                return
        ticket = scope.get(TICKET)
        try:
            await handle_infer(self.svc, scope, receive, send, route[0], route[1], scope.get(ARRIVED), ticket)
        finally:
            settle(self.svc, ticket)  # admitted by the door, answered without reaching the pipeline
