"""The gRPC front of ``pard serve``: KServe v2's ``GRPCInferenceService`` on the same pipeline as the HTTP front.

Served on grpcio's asyncio server (``grpc.aio``) in the HTTP server's event loop, with the messages and the
servicer base that ``tritonclient`` ships (``tritonclient.grpc.service_pb2``, ``service_pb2_grpc``), so
``tritonclient.grpc`` works unchanged.  Off unless ``server.grpc_port`` is set (extra ``pard[grpc]``).

=========================  ==================================================================================
RPC                        answer
=========================  ==================================================================================
ServerLive                 live while the process serves
ServerReady, ModelReady    as ``/v2/health/ready``; ModelReady of another model or version: NOT_FOUND
ServerMetadata             name, version, :data:`EXTENSIONS`
ModelMetadata              the served model's inputs and outputs (``-1``: a dimension not known in advance)
ModelInfer                 the pipeline's output (raw contents), or a status (below)
=========================  ==================================================================================

ModelInfer meets the HTTP front's rules, in the same order: the deadline is the earliest of the call's own
(``grpc-timeout``), Triton's ``timeout`` parameter (µs) and the ``X-Request-Timeout-Ms`` metadata (those two
unless ``queue.allow_timeout_override`` is false), else the default SLO (:mod:`pard.serve.params`); the tier
is ``X-Pard-Tier`` metadata or the ``priority`` parameter; then the door (:class:`pard.runtime.door.Door`)
decides from the decoded message before any tensor is converted to NumPy.  Every request gets one status,
counted once in the server's report (``grpc``: by code) and in the same Prometheus counters as HTTP:

======================  ===========================================  ===============================
status                  when                                         HTTP's answer
======================  ===========================================  ===============================
OK                      the pipeline's output                        200
RESOURCE_EXHAUSTED      refused at the door or at the queue limit    429
UNAVAILABLE             dropped in the pipeline; not ready; draining 503
DEADLINE_EXCEEDED       no answer ``server.answer_grace_s`` past     504
                        the deadline, or the call's own deadline
                        passed while it waited
INVALID_ARGUMENT        a malformed request (the field is named)     400
NOT_FOUND               another model, or a version other than "1"   404
INTERNAL                a stage's executor raised; an output that    500
                        cannot be encoded
CANCELLED               the client cancelled: the request is         (499)
                        cancelled in the pipeline (no compute after)
======================  ===========================================  ===============================

Trailing metadata tells the rest: ``pard-outcome`` (on_time or late, on OK), ``pard-stage``, ``pard-reason``,
``pard-request-id``, and for a retry ``retry-after`` (whole seconds, as HTTP's header) and
``grpc-retry-pushback-ms`` (gRPC's own retry hint).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, NamedTuple

import grpc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc

from .._version import __version__
from ..runtime.door import Refusal, Ticket
from .grpc_codec import decode_infer, encode_infer, parameters_of
from .params import request_deadline, request_tier
from .protocol import InferRequest, ProtocolError
from .service import Answer, ServedPipeline, _error, output_pairs, serving

__all__ = ["EXTENSIONS", "InferenceService", "start_grpc"]

#: The protocol extensions the gRPC front honours (binary tensor data is HTTP's; gRPC carries raw contents).
EXTENSIONS: tuple[str, ...] = ()

_CODES = {200: grpc.StatusCode.OK, 400: grpc.StatusCode.INVALID_ARGUMENT, 404: grpc.StatusCode.NOT_FOUND,
          408: grpc.StatusCode.DEADLINE_EXCEEDED, 413: grpc.StatusCode.INVALID_ARGUMENT,
          429: grpc.StatusCode.RESOURCE_EXHAUSTED, 499: grpc.StatusCode.CANCELLED, 500: grpc.StatusCode.INTERNAL,
          503: grpc.StatusCode.UNAVAILABLE, 504: grpc.StatusCode.DEADLINE_EXCEEDED}
#: How close (s) to the call's own deadline a cancellation counts as that deadline passing, not the client's
#: cancel: grpcio cancels the handler a little before the deadline it reports.
_DEADLINE_SLACK_S = 0.01


class _Admitted(NamedTuple):
    """A call the door admitted and whose tensors were decoded: what the pipeline needs to serve it."""

    ticket: Ticket
    req: InferRequest
    payload: Any
    slo: float
    tier: int
    t0: float
    deadline: float


def _tensor(t: Any) -> Any:
    shape = list(t.shape) if t.shape is not None else [-1]
    return pb.ModelMetadataResponse.TensorMetadata(name=t.name, datatype=t.datatype, shape=shape)


def _trailer(answer: Answer, doc: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """An error answer's trailing metadata, from its JSON document and headers."""
    meta = [(f"pard-{k.replace('_', '-')}", str(doc[k])) for k in ("stage", "reason", "request_id") if k in doc]
    retry = doc.get("retry_after_s")
    if retry is not None and "retry-after" in answer.headers:
        meta += [("retry-after", answer.headers["retry-after"]),
                 ("grpc-retry-pushback-ms", str(max(1, round(float(retry) * 1000))))]
    return tuple(meta)


class InferenceService(pb_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
    """``GRPCInferenceService`` over one :class:`~pard.serve.service.ServedPipeline` (module docstring)."""

    def __init__(self, service: ServedPipeline) -> None:
        self.svc = service
        self._refusals: dict[Refusal, Answer] = {}
        # a refusal's answer (by id) -> (the answer, its status, details, trailer), built once
        self._replies: dict[int, tuple[Answer, grpc.StatusCode, str, tuple[tuple[str, str], ...]]] = {}

    # ------------------------------------------------------------------ health and metadata
    def _ready(self) -> bool:
        svc = self.svc
        return serving(svc)

    async def _model(self, name: str, version: str, context: Any) -> None:
        """Abort NOT_FOUND unless ``name`` / ``version`` is the served model."""
        svc = self.svc
        if name != svc.model_name:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"unknown model {name!r}; this server serves "
                                f"{svc.model_name!r}")
        if version not in ("", "1"):
            await context.abort(grpc.StatusCode.NOT_FOUND, f"model {name!r} has no version {version!r}; its "
                                "versions: ['1']")

    async def ServerLive(self, request: Any, context: Any) -> Any:  # noqa: N802 - the protocol's names
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: Any) -> Any:  # noqa: N802
        return pb.ServerReadyResponse(ready=self._ready())

    async def ModelReady(self, request: Any, context: Any) -> Any:  # noqa: N802
        await self._model(request.name, request.version, context)
        return pb.ModelReadyResponse(ready=self._ready())

    async def ServerMetadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        return pb.ServerMetadataResponse(name="pard", version=__version__, extensions=list(EXTENSIONS))

    async def ModelMetadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        await self._model(request.name, request.version, context)
        svc = self.svc
        return pb.ModelMetadataResponse(name=svc.model_name, versions=["1"], platform="pard",
                                        inputs=[_tensor(t) for t in svc.inputs],
                                        outputs=[_tensor(t) for t in svc.outputs])

    # ------------------------------------------------------------------ inference
    async def ModelInfer(self, request: Any, context: Any) -> Any:  # noqa: N802
        svc = self.svc
        arrived = svc.arrival()
        remaining = context.time_remaining()
        transport_at = None
        if arrived is not None and remaining is not None:
            transport_at = svc.runtime.now() + remaining
        ticket: Ticket | None = None
        try:
            try:
                before: Answer | _Admitted = self._before(request, context, arrived, transport_at)
            except Exception as exc:  # a bug of ours must still be one answer, counted once  # noqa: BLE001
                before = self._count(svc.internal_error(exc))
            if isinstance(before, Answer):
                answer = before
            else:
                ticket = before.ticket
                answer = await self._pipeline(before, transport_at)
        finally:
            if ticket is not None and svc.door is not None:
                svc.door.abandoned(ticket)  # settled already when it reached the pipeline: harmless
        return await self._reply(answer, context)

    def _before(self, request: Any, context: Any, arrived: float | None,
                transport_at: float | None) -> Answer | _Admitted:
        """The request's answer before the pipeline (unknown model, not ready, malformed, refused at the door),
        counted; else what the pipeline needs to serve it."""
        svc = self.svc
        model, version = request.model_name, request.model_version
        if model != svc.model_name:
            return self._count(_error(404, "invalid", f"unknown model {model!r}; this server serves "
                                      f"{svc.model_name!r}"))
        if version not in ("", "1"):
            return self._count(_error(404, "invalid", f"model {model!r} has no version {version!r}; its "
                                      "versions: ['1']"))
        if not svc.ready or svc.draining or arrived is None or svc.door is None:
            return self._count(svc.unavailable())
        headers = dict(context.invocation_metadata() or ())
        try:
            params = parameters_of(request.parameters)
            head = InferRequest(id=request.id, inputs={}, parameters=params)
            slo, deadline = request_deadline(head, headers, arrived, svc.default_slo_s,
                                             svc.config.queue.allow_timeout_override, transport_at)
            tier = request_tier(head, headers, svc.spec.tiers, svc.config)
        except ProtocolError as exc:
            return self._count(_error(400, "invalid", str(exc)))
        verdict = svc.door.check(arrived, deadline, tier)
        if not isinstance(verdict, Ticket):
            return self._refused(verdict)
        started = time.perf_counter()
        try:
            req = decode_infer(request, params)
            payload = svc.payload_of(req)
        except ProtocolError as exc:
            svc.door.abandoned(verdict)
            answer = _error(400, "invalid", str(exc))
            answer.tier = tier
            return self._count(answer)
        svc.door.submitted(verdict, time.perf_counter() - started)
        return _Admitted(verdict, req, payload, slo, tier, arrived, deadline)

    async def _pipeline(self, a: _Admitted, transport_at: float | None) -> Answer:
        svc = self.svc
        tier = a.tier
        try:
            answer = await svc.infer_decoded(a.req, a.payload, a.slo, tier, a.t0, a.deadline, self._encode)
        except asyncio.CancelledError:
            # the call ended first: its own deadline passed (the client already saw DEADLINE_EXCEEDED) or the
            # client cancelled; either way the request is cancelled in the pipeline and counted once here
            if transport_at is not None and svc.runtime.now() >= transport_at - _DEADLINE_SLACK_S:
                gone = _error(504, "dropped", "the call's deadline passed before the pipeline answered",
                              reason="deadline")
            else:
                gone = Answer(499, b"", {}, "client_closed")
            gone.tier = tier
            self._count(gone)
            raise
        return self._count(answer)

    def _encode(self, req: InferRequest, result: Any) -> Answer:
        """The OK answer carrying ``result`` (ServedPipeline.infer_decoded's ``encode``), or INTERNAL."""
        svc = self.svc
        try:
            pairs = output_pairs(svc.outputs, bool(svc.config.outputs), req, result)
            message = encode_infer(pb, svc.model_name, req.id, pairs)
        except (ProtocolError, KeyError, TypeError, ValueError) as exc:
            return _error(500, "output_error", f"the pipeline's output cannot be encoded: {exc}")
        return Answer(200, b"", {}, "served", message=message)

    def _count(self, answer: Answer) -> Answer:
        answer.grpc_code = _CODES.get(answer.status, grpc.StatusCode.UNKNOWN).name
        return self.svc.count(answer)

    def _refused(self, refusal: Refusal) -> Answer:
        """The door's refusal, counted; its answer, status and trailer built once per distinct refusal (past
        the server's capacity most requests are refused, and each costs the front)."""
        answer = self._refusals.get(refusal)
        if answer is None:
            answer = _error(429, "busy", refusal.message, reason=refusal.reason, retry_after_s=refusal.retry_after_s)
            if len(self._refusals) >= 256:
                self._refusals.clear()
                self._replies.clear()
            self._refusals[refusal] = answer
            self._replies[id(answer)] = (answer, grpc.StatusCode.RESOURCE_EXHAUSTED, refusal.message,
                                         _trailer(answer, json.loads(answer.body)))
        self.svc.count(Answer(answer.status, b"", answer.headers, answer.outcome,
                              grpc_code=grpc.StatusCode.RESOURCE_EXHAUSTED.name))
        return answer

    async def _reply(self, answer: Answer, context: Any) -> Any:
        if answer.status == 200:
            context.set_trailing_metadata((("pard-outcome", answer.headers.get("x-pard-outcome", "on_time")),))
            return answer.message
        hit = self._replies.get(id(answer))
        if hit is not None and hit[0] is answer:
            await context.abort(hit[1], hit[2], hit[3])
        doc = json.loads(answer.body) if answer.body else {"error": "the client cancelled the call"}
        await context.abort(_CODES.get(answer.status, grpc.StatusCode.UNKNOWN), doc.get("error", ""),
                            _trailer(answer, doc))
        raise AssertionError("unreachable: context.abort raises")  # pragma: no cover


async def start_grpc(service: ServedPipeline, host: str, port: int) -> tuple[Any, int]:
    """Start the gRPC front of ``service`` on ``host:port`` (0: any free port) in the running event loop;
    returns ``(server, port bound)``.  Stop it with ``await server.stop(grace_s)``.

    Raises: RuntimeError (grpcio's) when the port cannot be bound."""
    limit = service.config.server.max_body_bytes + 64 * 1024  # the tensors plus the message's own fields
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                      ("grpc.so_reuseport", 0)])
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(service), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise RuntimeError(f"the gRPC front cannot listen on {address} (is the port in use?): {exc}") from None
    if bound == 0:
        raise RuntimeError(f"the gRPC front cannot listen on {address} (is the port in use?)")
    await server.start()
    return server, bound
