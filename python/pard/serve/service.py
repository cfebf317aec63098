"""One served pipeline: the runtime it owns, admission, the answer to each request, drain, accounting.

:class:`ServedPipeline` sits between the HTTP routes (:mod:`pard.serve.app`) and the asyncio API
of :class:`pard.Runtime` (``await rt.infer``).  It turns one decoded v2 request into exactly one
:class:`Answer` and counts it under exactly one outcome:

===============  ======  ===================================================================
outcome          status  when
===============  ======  ===================================================================
on_time / late   200     the pipeline's output (the runtime tells on time from late)
dropped          503     a stage's policy dropped it (``Retry-After``; stage and reason)
dropped          504     no answer ``server.answer_grace_s`` past its deadline (a hung stage): cancelled
rejected         429     refused at admission: the entry ring was full, or ``max_queue_size``
                         requests already wait at the entry stage, or the event loop runs more than
                         ``server.max_loop_lag_s`` behind (refused before the body is read;
                         reason ``server_busy``) (``Retry-After``)
failed           500     a stage's executor raised on its batch
invalid          400     a malformed request (the field is named); 404 unknown model; 413 too large
unavailable      503     not ready yet, or draining after SIGTERM/SIGINT (``Retry-After``)
client_closed    --      the client disconnected first: the request is cancelled inside the
                         pipeline (the runtime counts it dropped, reason ``cancelled``); one whose
                         batch was already collected runs to its end, and the report counts it
                         dropped too (no answer went out)
===============  ======  ===================================================================

The runtime's own counts (``Runtime.counts()``) cover every request that reached it, so
``report()`` adds the server-side ones (invalid, unavailable, rejected by the queue limit) to them:
the HTTP answers by status then equal the report's outcomes exactly.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import Dropped, ExecutorError, PardError, PromptRefused, Rejected
from ..executors.llm_engine import profiled_llm
from ..models import INPUT_SHAPE, join_inputs
from ..runtime import Runtime
from ..runtime.aio import retry_after_s
from ..runtime.door import Door, Ticket
from ..runtime.setup import refuse_dnn_below_llm
from .awaiting import ClientClosed, GaveUp, QueueFull, await_answer
from .config import ServeConfig, ServeConfigError, TensorSpec, check_body_fits, check_warm_outputs
from .factories import reference_model, warm_up
from .failure_log import FailureLog
from .metrics import TIER_OUTCOMES, Observed
from .outcomes import answered_outcome, merged_outcomes, tier_outcome, tier_report
from .params import request_deadline, request_tier, request_tokens
from .protocol import InferRequest, ProtocolError, datatype_of, decode_request_async, encode_response
from .stall import StallWatch

if TYPE_CHECKING:  # pragma: no cover
    from .connections import Lost

__all__ = ["Answer", "ServedPipeline", "SERVER_OUTCOMES", "output_pairs", "retry_after_header", "serving"]

log = logging.getLogger("pard.serve")

#: Outcomes counted by the server itself (requests that never reached the runtime, or left early).
#: The metadata of an llm exit stage's output: the generated token ids.
LLM_OUTPUT = {"datatype": "INT64", "shape": [-1]}
SERVER_OUTCOMES = ("invalid", "unavailable", "queue_full", "busy", "client_closed", "output_error", "body_timeout")


@dataclass
class Answer:
    """One HTTP answer: status, body, headers, and the outcome it is counted under."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    outcome: str = ""
    tier: int | None = None  # the request's tier code, once decoded (per-tier counts)
    message: Any = None  # a gRPC answer's response message (the body is then empty)
    grpc_code: str | None = None  # a gRPC answer's status code name; None: an HTTP answer


def retry_after_header(seconds: float) -> str:
    """``Retry-After`` in whole seconds (RFC 9110 delta-seconds), rounded up, at least 1."""
    return str(max(1, math.ceil(seconds - 1e-9)))


def _error(status: int, outcome: str, message: str, **fields: Any) -> Answer:
    doc = {"error": message, **{k: v for k, v in fields.items() if v is not None}}
    headers = {"content-type": "application/json"}
    if fields.get("retry_after_s") is not None:
        headers["retry-after"] = retry_after_header(float(fields["retry_after_s"]))
    if fields.get("request_id") is not None:
        headers["x-pard-request-id"] = str(fields["request_id"])
    return Answer(status, json.dumps(doc).encode("utf-8"), headers, outcome)


def _failed(e: ExecutorError, detail: bool) -> Answer:
    """The answer to a request whose stage's executor raised: a 500 with the exception's text only with
    ``detail`` (``server.error_detail``: an executor's message may hold paths, inputs or credentials; the
    server log has it, :class:`FailureLog`), else the stage and the exception's type; a 400 with the reason
    when an llm stage refused the request's own prompt (:class:`~pard.errors.PromptRefused`: the client's
    error, and its message is for the client).  Either is counted ``failed``, as the runtime counts it."""
    if isinstance(e.cause, PromptRefused):
        return _error(400, "failed", str(e), request_id=e.request_id, stage=e.stage)
    if detail:
        return _error(500, "failed", str(e), request_id=e.request_id, stage=e.stage)
    cause = type(e.cause).__name__ if e.cause is not None else type(e).__name__
    where = f"stage {e.stage!r}" if e.stage else "the pipeline"
    return _error(500, "failed", f"{where} failed on this request's batch ({cause}); the server log has the "
                  "details (server.error_detail: true puts them here)", request_id=e.request_id,
                  stage=e.stage, error_type=cause)


def serving(svc: ServedPipeline) -> bool:
    """Whether ``svc`` takes requests: its pipeline is built, it is not draining and no stage is stalled
    (what the HTTP and gRPC readiness probes answer)."""
    return svc.ready and not svc.draining and not svc.stall.stalled


class ServedPipeline:
    """The pipeline behind ``pard serve``: builds and owns its Runtime, answers requests, drains.

    Args:
        config: the served-pipeline file, parsed (:func:`pard.serve.config.load_serve_config`).

    Call :meth:`start` (builds the executors, warms them, starts the runtime; ``ready`` after it),
    :meth:`infer` per request, :meth:`begin_drain` + :meth:`drain` to stop.
    """

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.spec = config.pipeline_spec()
        self._llm = any(st.kind == "llm" for st in self.spec.stages)  # requests carry tokens
        self.model_name: str = config.server.model_name or str(self.spec.name)
        self.runtime: Any = None
        self.inputs: list[TensorSpec] = list(config.inputs or [])
        self._declared: tuple[list[TensorSpec] | None, dict[str, TensorSpec]] = (None, {})  # payload_of's, by name
        self.outputs: list[TensorSpec] = list(config.outputs or [])
        self.ready = False
        self.draining = False
        self.forced = False  # a second signal: stop_now, and close without draining
        self.started_at = time.monotonic()
        self.counts: dict[str, int] = {k: 0 for k in SERVER_OUTCOMES}
        self.http: dict[int, int] = {}
        self.grpc: dict[str, int] = {}  # gRPC answers by status code name (pard.serve.grpc_front)
        self.late_answers = 0  # the pipeline's on_time answered after the deadline (Door.answered): late
        self.timely_answers = 0  # the pipeline's late (past its margin) answered by the deadline: on time
        self.closed_mid_body = 0  # client_closed before the body arrived: never reached the runtime
        # Requests whose client hung up (or was answered 504) after their batch was collected: the runtime
        # counts them on time, late or failed, but the client got 499 / 504, so the report counts them dropped.
        self.orphans = {"on_time": 0, "late": 0, "failed": 0}
        self.unencoded = {"on_time": 0, "late": 0}  # finished, but the output failed to encode (500): report()
        self._orphan_lock = threading.Lock()
        self.tier_counts: dict[tuple[int, str], int] = {}  # (tier code, outcome) of every decoded request
        # Every answer by outcome when it leaves (pard_requests_total): monotonic, unlike the report's
        # outcomes, which move a pipeline's on_time to late when its answer leaves after the deadline.
        self.answered: dict[str, int] = {}
        self.inflight = 0  # infer calls in progress (the HTTP answer not yet returned)
        self._drain_started: float | None = None
        self.default_slo_s = config.default_slo_s(self.spec)
        grace = config.server.answer_grace_s  # how long past a deadline the server waits for an answer (504)
        self.answer_grace_s = self.default_slo_s if grace is None else float(grace)
        lag = config.server.max_loop_lag_s
        self.max_loop_lag_s = 0.5 * self.default_slo_s if lag is None else float(lag)
        self.door: Door | None = None  # built with the runtime (prepare)
        self.default_tier = config.tier_of(None, self.spec.tiers)  # a request that names none
        self._failure_log = FailureLog(log)
        self.stall = StallWatch(lambda: self.runtime.counts() if self.runtime is not None else {})  # /ready
        #: the /metrics histograms, observed once per request and per batch
        self.observed = Observed(self.model_name, self.default_slo_s, [st.name for st in self.spec.stages],
                                 max(int(st.max_batch) for st in self.spec.stages))

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Start serving: :meth:`prepare` (in a thread) unless done, then the runtime's threads."""
        if self.runtime is None:
            await asyncio.to_thread(self.prepare)
        self.runtime.start()
        assert self.door is not None
        self.door.start()
        self.ready = True

    def prepare(self) -> None:
        """Build the executors, warm them (one request's worth through every stage) and build the
        runtime, not yet started.  ``pard serve`` calls it before it binds the port, so that a bad
        policy, worker count or factory is one error line, not a traceback from the server's startup.

        Raises: ServeConfigError naming the file and what is wrong (a bad factory, policy, worker count or
        planner option, a warm-up batch that raised or whose output breaks a declared output).
        """
        cfg = self.config
        try:
            executors, join = self._executors()
            for t in self.inputs:  # also the reference models' input, which the file did not declare
                check_body_fits(t, f"inputs ({t.name}, the input the stage models take)", cfg.server.max_body_bytes)
            warm = warm_up(self.spec, self.inputs, executors, join, cfg.source) if cfg.warmup else {}
            check_warm_outputs(cfg.outputs or [], warm, self.spec.exit_stages(), cfg.source)
            runtime = Runtime(
                self.spec, executors, policy=cfg.policy, workers=cfg.workers, planner=cfg.planner or None,
                payload_shape=self.inputs[0].shape if len(self.inputs) == 1 and self.inputs[0].fixed() else None,
                join=join, start=False,
            )
        except PardError as exc:  # name the file, once
            msg = str(exc)
            raise ServeConfigError(msg if msg.startswith(cfg.source) else f"{cfg.source}: {msg}") from exc
        runtime.observe_stages(self.observed)
        if not self.inputs:
            shape = runtime.payload_shape
            self.inputs = [TensorSpec(name="INPUT0", datatype="FP32", shape=None if shape is None else list(shape))]
        if not self.outputs:
            exits = self.spec.exit_stages()
            self.outputs = [TensorSpec(name=f"OUTPUT{i}", stage=s if len(exits) > 1 else None,
                                       **(LLM_OUTPUT if self.spec.stage(s).kind == "llm" else _described(warm.get(s))))
                            for i, s in enumerate(exits)]
        self.runtime = runtime
        self.door = Door(runtime, max_loop_lag_s=self.max_loop_lag_s)

    def _executors(self) -> tuple[dict[str, Any], Any]:
        built = self.config.build_executors(self.spec)
        if built is not None:
            return built, None
        if not self.inputs:  # the reference models take images of INPUT_SHAPE
            self.inputs = [TensorSpec(name="INPUT0", datatype="FP32", shape=list(INPUT_SHAPE))]
        opts = self.config.model_options.model_dump() if self.config.model_options is not None else {}
        refuse_dnn_below_llm(self.spec)
        return {st.name: profiled_llm(st) if st.kind == "llm" else reference_model(stage=st, pipeline=self.spec, **opts)
                for st in self.spec.stages}, join_inputs

    def begin_drain(self) -> None:
        """Stop admitting: readiness fails and new requests get 503 from now on (idempotent)."""
        if self._drain_started is None:
            self._drain_started = time.monotonic()
        self.draining = True
        self.ready = False

    async def drain(self, *, grace_s: float | None = None, timeout_s: float | None = None) -> None:
        """Finish in-flight work, then close the runtime; every request answered.

        Waits until ``grace_s`` (default ``server.drain_grace_s``: time for a load balancer to see
        readiness fail) has passed and no request is in flight, at most ``timeout_s`` (default
        ``server.drain_timeout_s``) in all; then closes the runtime (draining, bounded by what is
        left of ``timeout_s``: what has not ended by then is cancelled), and waits for the answers
        of the last requests to be handed back.
        """
        self.begin_drain()
        opts = self.config.server
        grace = opts.drain_grace_s if grace_s is None else grace_s
        limit = opts.drain_timeout_s if timeout_s is None else timeout_s
        assert self._drain_started is not None
        end = self._drain_started + limit
        while time.monotonic() < end and (self.inflight > 0 or time.monotonic() < self._drain_started + grace):
            await asyncio.sleep(0.02)
        if self.runtime is not None:
            await self.runtime.aclose(drain=True, timeout_s=max(0.0, end - time.monotonic()))
        while self.inflight > 0 and time.monotonic() < end + 1.0:
            await asyncio.sleep(0.01)

    def drain_left_s(self) -> float:
        """Seconds left of the drain's ``server.drain_timeout_s`` (the whole of it before the drain began)."""
        limit = self.config.server.drain_timeout_s
        return limit if self._drain_started is None else max(0.0, self._drain_started + limit - time.monotonic())

    async def aclose(self) -> None:
        """Close the runtime (lifespan shutdown, tests): draining, within drain_timeout_s; after stop_now, at once."""
        self.begin_drain()
        if self.door is not None:
            self.door.stop()
        if self.runtime is not None and not self.runtime.closed:
            forced = self.forced
            await self.runtime.aclose(drain=not forced, timeout_s=0.0 if forced else self.config.server.drain_timeout_s)

    async def stop_now(self, answer_within_s: float = 1.0) -> None:
        """The second signal: cancel every request in flight at once (answered 503, reason ``cancelled``; a
        running batch, a hung one too, is not waited for); their handlers get ``answer_within_s`` to answer."""
        self.forced = True
        self.begin_drain()
        if self.runtime is not None and not self.runtime.closed:
            await self.runtime.aclose(drain=False, timeout_s=0.0)
        end = time.monotonic() + answer_within_s
        while self.inflight > 0 and time.monotonic() < end:
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ requests
    async def infer(self, model: str, body: bytes, headers: Mapping[str, str],
                    disconnected: Callable[[], Awaitable[Any]] | None = None,
                    arrived_s: float | None = None, admitted: Ticket | None = None, lost: Lost | None = None) -> Answer:
        """Answer one v2 inference request (see the module docstring for the outcomes).

        ``lost``, if given, is the connection's :class:`pard.serve.connections.Lost`; else ``disconnected()``,
        if given, returns an awaitable that completes when the client has gone.  Either way the request is
        then cancelled inside the pipeline.  ``arrived_s`` (the runtime's clock,
        :meth:`arrival`) is when the HTTP route received the request; its SLO counts from then
        (default: now), so time spent before the pipeline saw it (reading and decoding the body, an
        event loop behind on other requests) is charged to its deadline.
        """
        self.inflight += 1
        try:
            answer = await self._answer(model, body, headers, disconnected, arrived_s, admitted, lost)
        except Exception as exc:  # a bug of ours must still be one answer, counted once  # noqa: BLE001
            answer = self.internal_error(exc)
        finally:
            self.inflight -= 1
        return self.count(answer)

    def internal_error(self, exc: Exception) -> Answer:
        """The 500 (``output_error``) of a bug of ours, logged: still one answer."""
        log.exception("pard serve: unexpected error answering a request")
        text = f": {exc}" if self.config.server.error_detail else " (the server log has the details)"
        return _error(500, "output_error", f"internal error: {type(exc).__name__}{text}")

    def count(self, answer: Answer) -> Answer:
        """Count an answer once as it leaves (report, status code, ``pard_requests_total``, its tier's):
        every infer answer, those the route gives before the body is read (429 busy, 404, 413) too."""
        if answer.outcome in self.counts:
            self.counts[answer.outcome] += 1
        if answer.grpc_code is None:
            self.http[answer.status] = self.http.get(answer.status, 0) + 1
        else:
            self.grpc[answer.grpc_code] = self.grpc.get(answer.grpc_code, 0) + 1
        outcome = tier_outcome(answer.outcome, answer.headers)
        total = answered_outcome(outcome)
        self.answered[total] = self.answered.get(total, 0) + 1
        if answer.tier is not None:
            self.tier_counts[(answer.tier, outcome)] = self.tier_counts.get((answer.tier, outcome), 0) + 1
        return answer

    def unavailable(self) -> Answer:
        """503 for a request that arrives while the pipeline is not ready or is draining."""
        why = "the server is draining (shutting down)" if self.draining else "the pipeline is not ready yet"
        return _error(503, "unavailable", why, reason="draining" if self.draining else "not_ready",
                      retry_after_s=self.config.server.drain_grace_s if self.draining else 1.0)

    def arrival(self) -> float | None:
        """The request's arrival on the runtime's clock (s), for :meth:`infer`'s ``arrived_s``: now, less what
        the event loop is behind (:meth:`pard.runtime.door.Door.arrival`); None before the runtime is built."""
        return self.door.arrival() if self.door is not None else None

    async def _answer(self, model: str, body: bytes, headers: Mapping[str, str],
                      disconnected: Callable[[], Awaitable[Any]] | None, arrived_s: float | None,
                      admitted: Ticket | None = None, lost: Lost | None = None) -> Answer:
        if model != self.model_name:
            return _error(404, "invalid", f"unknown model {model!r}; this server serves {self.model_name!r}")
        if not self.ready or self.draining:
            return self.unavailable()
        try:
            started = time.perf_counter()
            req = await _decode(body, headers)
            payload = self.payload_of(req)
            t0 = self.runtime.now() if arrived_s is None else arrived_s
            slo, deadline = self._deadline(req, headers, t0)
            tier = self._tier(req, headers)
        except ProtocolError as exc:
            return _error(400, "invalid", str(exc))
        if admitted is not None and self.door is not None:
            self.door.submitted(admitted, time.perf_counter() - started)
        answer = await self._served(req, payload, slo, tier, t0, deadline, disconnected, lost)
        answer.tier = tier
        return answer

    async def infer_decoded(self, req: InferRequest, payload: Any, slo: float, tier: int, t0: float, deadline: float,
                            encode: Callable[[InferRequest, Any], Answer]) -> Answer:
        """The answer, uncounted (the caller counts it once), to a request another front decoded and admitted
        (:mod:`.grpc_front`): ``encode(req, result)``, or why none.  Cancelling the task cancels the request."""
        self.inflight += 1
        try:
            answer = await self._served(req, payload, slo, tier, t0, deadline, None, None, encode)
        except Exception as exc:  # a bug of ours must still be one answer  # noqa: BLE001
            answer = self.internal_error(exc)
        finally:
            self.inflight -= 1
        answer.tier = tier
        return answer

    async def _served(self, req: InferRequest, payload: Any, slo: float, tier: int, t0: float, deadline: float,
                      disconnected: Callable[[], Awaitable[Any]] | None, lost: Lost | None = None,
                      encode: Callable[[InferRequest, Any], Answer] | None = None) -> Answer:
        """The answer to a decoded request: the pipeline's output, or why there is none."""
        try:
            give_up_s = deadline + self.answer_grace_s  # then 504: no client waits for a hung stage until shutdown
            fut = self._submit(req, payload, slo, tier, deadline)
            result, state = await await_answer(self.runtime, fut, lost, disconnected,
                                                give_up_s - self.runtime.now(), self._orphaned)
        except QueueFull as e:
            return _error(429, "queue_full", str(e), stage=e.stage, reason="queue_full",
                          retry_after_s=e.retry_after_s)
        except Dropped as e:
            # its traceback holds the frames that hold the future that holds it: a reference cycle per dropped
            # request, left to the garbage collector's full passes, which pause the event loop
            e.__traceback__ = None
            # no Retry-After for a request whose own SLO no retry can meet
            attainable = self.door is None or self.door.attainable(t0, deadline)
            return _error(503, "dropped", str(e), request_id=e.request_id, stage=e.stage, reason=e.reason,
                          retry_after_s=e.retry_after_s if attainable else None)
        except Rejected as e:
            e.__traceback__ = None  # as for Dropped
            return _error(429, "rejected", str(e), request_id=e.request_id, stage=e.stage, reason=e.reason,
                          retry_after_s=e.retry_after_s)
        except ExecutorError as e:
            self._failure_log.note(e)
            return _failed(e, self.config.server.error_detail)
        except ClientClosed:
            return Answer(499, b"", {}, "client_closed")
        except GaveUp:
            self.stall.gave_up()
            return _error(504, "dropped", f"no answer from the pipeline {give_up_s - deadline:.3f} s past the "
                          "request's deadline (a stage still in its executor?); the request is cancelled",
                          reason="deadline")
        except RuntimeError as e:  # the runtime closed between the check above and submit
            if self.draining:
                return self.unavailable()
            return _error(500, "output_error", f"the runtime refused the request: {e}")
        except (PardError, ValueError, TypeError) as e:  # a payload submit refused (shape, tier)
            return _error(400, "invalid", str(e))
        resumed = time.perf_counter()
        if encode is None:
            answer = _encode(self.model_name, self.outputs, bool(self.config.outputs), req, result)
        else:
            answer = encode(req, result)
        if answer.outcome == "output_error":  # the runtime counted it finished; the client got a 500
            self.unencoded[state] += 1
        return self._timed(answer, state, t0, deadline, resumed)

    def _timed(self, answer: Answer, state: str, t0: float, deadline: float, resumed: float) -> Answer:
        """Judge a 200 answer by when it leaves, not when the pipeline finished (:meth:`Door.answered`):
        the pipeline's ``on_time`` whose answer is ready only after the deadline is moved to ``late``
        (:meth:`report`).  The verdict goes to the client as ``X-Pard-Outcome``."""
        self.observed.request(self.runtime.now() - t0)
        assert self.door is not None
        judged = self.door.answered(state, deadline, resumed)
        if answer.status == 200:
            if judged == "late" and state == "on_time":
                self.late_answers += 1
            elif judged == "on_time" and state == "late":
                self.timely_answers += 1
            answer.headers["x-pard-outcome"] = judged
        return answer

    def _submit(self, req: InferRequest, payload: Any, slo: float, tier: int, deadline: float) -> Any:
        """``queue.max_queue_size`` checked, then the request submitted (its future), with its tokens where the
        pipeline has an llm stage (:func:`.params.request_tokens`): the check and the submit run in one step
        of the event loop, so no other request slips in between."""
        rt = self.runtime
        limit = self.config.queue.max_queue_size
        if limit:
            entry = self.spec.entry_stages()[0]
            if rt.queued(entry) >= limit:
                raise QueueFull(f"{limit} requests already wait at stage {entry!r} (queue.max_queue_size)",
                                 entry, retry_after_s(rt))
        assert self.door is not None
        if self._llm:
            in_tokens, max_tokens = request_tokens(req, payload)
            return rt.submit(payload, slo=slo, tier=tier, deadline=self.door.pipeline_deadline(deadline),
                             in_tokens=in_tokens, max_tokens=max_tokens)
        return rt.submit(payload, slo=slo, tier=tier, deadline=self.door.pipeline_deadline(deadline))

    def _orphaned(self, state: str) -> None:
        """A request that ended ``state`` (on_time / late / failed) in the runtime after its client hung up
        or was answered 504 (a runtime thread, or the event loop, calls this)."""
        with self._orphan_lock:
            self.orphans[state] += 1

    # ------------------------------------------------------------------ decoding
    def payload_of(self, req: InferRequest) -> Any:
        """A decoded request's payload (its one input, or name -> array); ProtocolError naming a bad field."""
        if self._declared[0] is not self.inputs:  # prepare() may fill in the inputs the file left out
            self._declared = (self.inputs, {t.name: t for t in self.inputs})
        declared = self._declared[1]
        if req.inputs.keys() != declared.keys():
            unknown = sorted(set(req.inputs) - set(declared))
            missing = sorted(set(declared) - set(req.inputs))
            raise ProtocolError(f"inputs: expected tensor(s) {sorted(declared)}, got {sorted(req.inputs)} "
                                f"(missing {missing}, unknown {unknown})")
        for i, (name, arr) in enumerate(req.inputs.items()):
            t = declared[name]
            if datatype_of(arr) != t.datatype:
                raise ProtocolError(f"inputs[{i}].datatype: {name!r} must be {t.datatype}, got {datatype_of(arr)}")
            if not t.matches(arr.shape):
                raise ProtocolError(f"inputs[{i}].shape: {name!r} must be {list(t.shape)}, got {list(arr.shape)}")
        if req.outputs:
            outs = {t.name for t in self.outputs}
            bad = [n for n in req.outputs if n not in outs]
            if bad:
                raise ProtocolError(f"outputs: unknown output(s) {bad}; this model has {sorted(outs)}")
        if len(req.inputs) == 1:
            return next(iter(req.inputs.values()))
        return dict(req.inputs)

    def _deadline(self, req: InferRequest, headers: Mapping[str, str], t0: float) -> tuple[float, float]:
        return request_deadline(req, headers, t0, self.default_slo_s, self.config.queue.allow_timeout_override)

    def _tier(self, req: InferRequest, headers: Mapping[str, str]) -> int:
        return request_tier(req, headers, self.spec.tiers, self.config)

    # ------------------------------------------------------------------ accounting
    def report(self) -> dict[str, Any]:
        """Outcome counts: the runtime's (every request that reached it) plus the server's own.

        ``outcomes`` merges them (``rejected`` includes ``queue_full``; ``dropped`` includes the
        runtime's ``cancelled`` drops of requests whose client disconnected, and those the pipeline finished
        just as their client disconnected, which the runtime counts on time or late:
        ``server.closed_after_collected``); ``http`` counts the answers by status code.
        """
        rt = self.runtime.counts() if self.runtime is not None else {}
        with self._orphan_lock:
            orphans = dict(self.orphans)
        merged = merged_outcomes(rt, self.counts, self.late_answers, orphans, self.unencoded,
                                 self.timely_answers, self.closed_mid_body)
        return {"pipeline": self.model_name, "runtime": rt, "tiers": self.tier_report(),
                "server": {**self.counts, "late_answers": self.late_answers, "timely_answers": self.timely_answers,
                           "closed_mid_body": self.closed_mid_body,
                           "closed_after_collected": sum(orphans.values())},
                "outcomes": merged, "http": {str(k): v for k, v in sorted(self.http.items())},
                "grpc": dict(sorted(self.grpc.items())),
                "door": self.door.report() if self.door is not None else None}

    def tier_report(self) -> dict[str, dict[str, float]]:
        """:func:`pard.serve.outcomes.tier_report` of this server's answers (``report()["tiers"]``)."""
        return tier_report(self.spec.tiers, self.tier_counts, TIER_OUTCOMES)


def _encode(model_name: str, outputs: list[TensorSpec], declared: bool, req: InferRequest, result: Any) -> Answer:
    """The 200 answer carrying ``result`` as the served ``outputs`` (checked against them when the file
    ``declared`` them), or a 500 ``output_error`` when it cannot be encoded."""
    try:
        body, headers = encode_response(model_name, req.id, output_pairs(outputs, declared, req, result), req)
    except (ProtocolError, KeyError, TypeError, ValueError) as exc:
        return _error(500, "output_error", f"the pipeline's output cannot be encoded: {exc}")
    return Answer(200, body, headers, "served")


async def _decode(body: bytes, headers: Mapping[str, str]) -> InferRequest:
    """The decoded request; a large body is decoded off the event loop (decode_request_async)."""
    raw = headers.get("inference-header-content-length")
    length = None
    if raw is not None:
        try:
            length = int(raw)
        except ValueError:
            raise ProtocolError(f"header Inference-Header-Content-Length must be an int, got {raw!r}") from None
    return await decode_request_async(body, length)


def output_pairs(outputs: list[TensorSpec], declared: bool, req: InferRequest,
                 result: Any) -> list[tuple[str, np.ndarray]]:
    """``result``'s ``outputs`` that ``req`` asks for, as (name, array), checked against them when the file
    ``declared`` them; ProtocolError, KeyError, TypeError or ValueError when they do not fit."""
    if len(outputs) == 1 and outputs[0].stage is None:
        pairs = [(outputs[0].name, np.asarray(result))]
    else:
        pairs = [(t.name, np.asarray(result[t.stage] if isinstance(result, Mapping) else result)) for t in outputs]
    if declared:  # declared in the file: the metadata clients rely on, not a warm-up's guess
        for t, (_, arr) in zip(outputs, pairs):
            t.check_output(arr)
    if req.outputs:
        pairs = [p for p in pairs if p[0] in req.outputs]
    return pairs


def _described(output: Any) -> dict[str, Any]:
    """Metadata (datatype, shape) of a warm-up output, {} when it is not an array v2 can carry."""
    if output is None:
        return {}
    try:
        arr = np.asarray(output)
        return {"datatype": datatype_of(arr), "shape": list(arr.shape)}
    except (ProtocolError, TypeError, ValueError):
        return {}
