"""``POST /v2/models/{model}[/versions/{v}]/infer`` as a plain ASGI handler.

The inference route is the server's hot path: under load every request takes it, and the front's time
per request decides how much of its core is left (``pard serve`` shares its process with the pipeline).
Starlette's router, its request and response objects and its exception middleware cost more than the
rest of an admitted request's front work together, so this route is served here, straight from the ASGI
messages, by :class:`pard.serve.door.DoorMiddleware` after the door; every other route stays Starlette's.
The answers are those of :meth:`pard.serve.service.ServedPipeline.infer`, plus the route's own: 404 for a
version other than ``"1"``, 413 for a body past ``server.max_body_bytes`` (before it is read in full when
``Content-Length`` says so), 408 for a body that has not arrived by the request's deadline plus
``server.answer_grace_s``, and ``client_closed`` (499, written to no one) for a client that closed its
connection before its body had arrived.
"""

from __future__ import annotations

import asyncio
import sys
from http import HTTPStatus
from typing import Any

from ..runtime.door import Ticket
from .connections import BODY, LOST, WHOLE
from .params import ENVOY_TIMEOUT, TIER_HEADER, TIMEOUT_HEADER, body_wait_s
from .service import Answer, ServedPipeline, _error

__all__ = ["infer_path", "handle_infer", "raw_answer"]


#: The request headers the route and the service read (uvicorn gives header names in lower case).
HEADERS_READ = frozenset(name.encode("latin-1") for name in (
    "content-length", "inference-header-content-length", TIER_HEADER, TIMEOUT_HEADER, ENVOY_TIMEOUT))


def infer_path(path: str) -> tuple[str, str | None] | None:
    """``(model, version or None)`` of an inference path, None for any other path."""
    parts = path.split("/")
    if len(parts) == 5 and parts[1] == "v2" and parts[2] == "models" and parts[4] == "infer" and parts[3]:
        return parts[3], None
    if (len(parts) == 7 and parts[1] == "v2" and parts[2] == "models" and parts[4] == "versions"
            and parts[6] == "infer" and parts[3] and parts[5]):
        return parts[3], parts[5]
    return None


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    """The client closed its connection before its body had arrived."""


async def _read_body(receive: Any, declared: str | None, limit: int) -> bytes:
    """The body, refusing (``_TooLarge``) once it passes ``limit`` bytes."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away mid-body
            raise _Gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _within(aw: Any, seconds: float | None) -> Any:
    """``await aw``, raising asyncio.TimeoutError after ``seconds`` (None: no limit); without an extra task
    where the running Python has ``asyncio.timeout``."""
    if seconds is None:
        return await aw
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await aw
    return await asyncio.wait_for(aw, seconds)  # pragma: no cover - Python < 3.11


async def _disconnected(receive: Any) -> None:
    """Return once the client has gone (the ASGI ``http.disconnect`` after the body was read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


def _phrase(status: int) -> str:
    """The reason phrase of ``status``, empty for one HTTP does not name (499: the client closed first)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


#: Per status, its status line; and the server's default headers (uvicorn's date and server, a new list each
#: second) as text, kept for the list they were made from: both are the same for every answer in between.
_STATUS_LINES: dict[int, str] = {}
_DEFAULTS: tuple[Any, str] = (None, "")  # (the list, its text): replaced whole, so a reader never sees a mix


def raw_answer(answer: Answer, keep_alive: bool, default_headers: Any = ()) -> bytes:
    """``answer`` as the bytes of one HTTP/1.1 response (status line, the server's default headers -- date,
    server -- then the answer's, and its body)."""
    line = _STATUS_LINES.get(answer.status)
    if line is None:
        line = _STATUS_LINES[answer.status] = f"HTTP/1.1 {answer.status} {_phrase(answer.status)}\r\n"
    global _DEFAULTS
    made_from, defaults = _DEFAULTS
    if made_from is not default_headers:
        defaults = "".join(f"{k.decode('latin-1')}: {v.decode('latin-1')}\r\n" for k, v in default_headers)
        _DEFAULTS = (default_headers, defaults)
    head = "".join(f"{k}: {v}\r\n" for k, v in answer.headers.items())
    close = "" if keep_alive else "connection: close\r\n"
    return (f"{line}{defaults}{head}content-length: {len(answer.body)}\r\n{close}\r\n"
            ).encode("latin-1") + answer.body


async def _send(send: Any, answer: Answer, scope: Any = None) -> None:
    """Send ``answer``: in one write of its whole bytes where the protocol offers it (:data:`WHOLE`: headers
    and body in one segment, one system call), else as the two ASGI messages."""
    whole = scope.get(WHOLE) if scope is not None else None
    if whole is not None and whole(lambda keep_alive, default_headers: raw_answer(answer, keep_alive, default_headers)):
        return
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.items()]
    headers.append((b"content-length", str(len(answer.body)).encode("latin-1")))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


async def handle_infer(svc: ServedPipeline, scope: Any, receive: Any, send: Any, model: str,
                       version: str | None, arrived: float | None, ticket: Ticket | None) -> None:
    """Answer one inference request (module docstring); ``arrived`` and ``ticket`` are the door's."""
    if version not in (None, "1"):
        if model != svc.model_name:
            text = f"unknown model {model!r}; this server serves {svc.model_name!r}"
        else:
            text = f"model {model!r} has no version {version!r}; its versions: ['1']"
        await _send(send, svc.count(_error(404, "invalid", text)), scope)
        return
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k in HEADERS_READ}
    config = svc.config
    limit = config.server.max_body_bytes
    whole = scope.get(BODY)
    body = whole() if whole is not None else None  # all of it came with the headers: no receive, no timer
    try:
        if body is None:
            # the body's deadline as the headers give it, but never past the longer of header_timeout_s and
            # the default SLO plus grace: a client must not hold a request open for the 1e9 s its header asks
            wait_s = min(body_wait_s(headers, svc.default_slo_s, svc.answer_grace_s,
                                     config.queue.allow_timeout_override),
                         max(config.server.header_timeout_s, svc.default_slo_s + svc.answer_grace_s))
            left = None if arrived is None else max(0.0, arrived + wait_s - svc.runtime.now())  # None: not built
            body = await _within(_read_body(receive, headers.get("content-length"), limit), left)
        elif len(body) > limit:
            raise _TooLarge
    except asyncio.TimeoutError:
        answer = svc.count(_error(408, "body_timeout", f"the request body had not arrived {wait_s:.3f} s after "
                                  "the request (its deadline plus server.answer_grace_s); it is dropped",
                                  reason="body_timeout"))
    except _Gone:  # no one to answer: counted as a client that hung up before its answer
        svc.closed_mid_body += 1
        answer = svc.count(Answer(499, b"", {}, "client_closed"))
    except _TooLarge:
        answer = svc.count(_error(413, "invalid", f"the request body exceeds server.max_body_bytes ({limit} bytes)"))
    else:
        answer = await svc.infer(model, body, headers, lambda: _disconnected(receive), arrived_s=arrived,
                                 admitted=ticket, lost=scope.get(LOST))
    await _send(send, answer, scope)
