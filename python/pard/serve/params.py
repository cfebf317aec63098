"""A v2 request's own parameters, read from its headers and ``parameters``: its deadline and its tier.

* Deadline: ``X-Request-Timeout-Ms`` (ms) or the v2 ``parameters.timeout`` (µs, Triton's unit; with both,
  the smaller) replaces the default SLO, unless ``queue.allow_timeout_override`` is false; it counts from
  ``t0``, when the route received the request.  A deadline the transport sets -- Envoy's
  ``X-Envoy-Expected-Rq-Timeout-Ms`` (ms), a gRPC call's own deadline -- bounds it whatever
  ``allow_timeout_override`` says: past it no answer reaches the client, so the earliest of all wins.
* Tier: ``X-Pard-Tier`` (a tier's name, or its code: the index in the pipeline's ``tiers``), else the
  Triton priority level ``parameters.priority`` mapped by :meth:`pard.serve.config.ServeConfig.tier_of`.

Every bad value raises :class:`~pard.serve.protocol.ProtocolError` naming the field and the value (a 400).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..runtime.llm_workers import token_count
from .config import ServeConfig
from .protocol import InferRequest, ProtocolError

__all__ = ["request_deadline", "request_tier", "request_tokens", "body_wait_s", "door_deadline", "ENVOY_TIMEOUT", "TIER_HEADER",
           "TIMEOUT_HEADER"]

#: The request's tier, by name or number.
TIER_HEADER = "x-pard-tier"
#: The request's own budget (ms), when ``queue.allow_timeout_override`` allows it.
TIMEOUT_HEADER = "x-request-timeout-ms"
#: Envoy's header with the time (ms) the proxy waits for this request's answer before it answers 504 itself.
ENVOY_TIMEOUT = "x-envoy-expected-rq-timeout-ms"


def request_deadline(req: InferRequest, headers: Mapping[str, str], t0: float, default_slo_s: float,
                     allow_override: bool, transport_at: float | None = None) -> tuple[float, float]:
    """The request's SLO (s) and absolute deadline on the runtime's clock: ``t0`` plus its own timeout (or the
    default SLO), or an earlier transport deadline (Envoy's header; ``transport_at``, absolute: a gRPC call's)."""
    header = _header_timeout_s(headers)
    timeouts = [] if header is None else [header]
    if "timeout" in req.parameters:
        timeouts.append(_positive("parameters.timeout (microseconds)", req.parameters["timeout"], 1e-6))
    budget = min(timeouts) if timeouts and allow_override else default_slo_s
    envoy = _envoy_timeout_s(headers)
    if envoy is not None and envoy < budget:
        budget = envoy
    deadline = t0 + budget
    if transport_at is not None and transport_at < deadline:
        deadline = transport_at
        budget = max(deadline - t0, 1e-9)  # a transport deadline already past: the runtime drops it, counted
    return budget, deadline


def door_deadline(headers: Mapping[str, str], t0: float, default_slo_s: float, allow_override: bool,
                  tiers: Mapping[str, float], default_tier: int = 0) -> tuple[float, int]:
    """The request's deadline and tier code as far as its headers tell, for the door
    (:meth:`pard.serve.service.ServedPipeline.at_door`), before the body is read: ``X-Request-Timeout-Ms``
    (or the default SLO) from ``t0``, or Envoy's header when earlier, and ``X-Pard-Tier`` (or ``default_tier``).  A bad header value is
    passed over here (the request is answered 400 naming it once the body is read)."""
    budget = _header_budget_s(headers, default_slo_s, allow_override)
    tier = default_tier
    raw = headers.get(TIER_HEADER)
    if raw is not None:
        names = list(tiers)
        if raw in names:
            tier = names.index(raw)
        elif raw.isascii() and raw.isdigit() and len(raw) < 10 and int(raw) < max(len(names), 1):
            tier = int(raw)
    return t0 + budget, tier


def body_wait_s(headers: Mapping[str, str], default_slo_s: float, grace_s: float, allow_override: bool) -> float:
    """How long (s, from arrival) the route waits for a request's body: its deadline as far as the headers
    tell (``X-Request-Timeout-Ms`` or the default SLO, or Envoy's header when earlier; ``parameters.timeout`` is
    in the body) plus ``grace_s``.
    Why: the SLO counts from arrival, so a body still arriving then is doomed, and a client that never
    finishes its body would otherwise hold the request unanswered and uncounted (a slowloris)."""
    return _header_budget_s(headers, default_slo_s, allow_override) + grace_s


def _header_budget_s(headers: Mapping[str, str], default_slo_s: float, allow_override: bool) -> float:
    """The request's budget (s) as far as its headers tell; a bad value is passed over (answered 400 once the
    body is read)."""
    budget = default_slo_s
    try:
        header = _header_timeout_s(headers) if allow_override else None
    except ProtocolError:
        header = None
    if header is not None:
        budget = header
    try:
        envoy = _envoy_timeout_s(headers)
    except ProtocolError:
        envoy = None
    return budget if envoy is None else min(budget, envoy)


def _header_timeout_s(headers: Mapping[str, str]) -> float | None:
    """``X-Request-Timeout-Ms`` in seconds, None without it; ProtocolError for a bad value."""
    raw = headers.get(TIMEOUT_HEADER)
    return None if raw is None else _positive("header X-Request-Timeout-Ms", raw, 1e-3)


def _envoy_timeout_s(headers: Mapping[str, str]) -> float | None:
    """``X-Envoy-Expected-Rq-Timeout-Ms`` in seconds, None without it; ProtocolError for a bad value."""
    raw = headers.get(ENVOY_TIMEOUT)
    return None if raw is None else _positive("header X-Envoy-Expected-Rq-Timeout-Ms", raw, 1e-3)


def request_tier(req: InferRequest, headers: Mapping[str, str], tiers: Mapping[str, float],
                 config: ServeConfig) -> int:
    """The request's tier code (an index into ``tiers``, the pipeline's name -> weight)."""
    raw = headers.get(TIER_HEADER)
    names = list(tiers)
    if raw is not None:
        if raw in names:
            return names.index(raw)
        try:
            tier = int(raw)
        except ValueError:
            raise ProtocolError(f"header X-Pard-Tier must be one of the pipeline's tiers {names!r} or its "
                                f"code (an int), got {raw!r}") from None
        top = max(len(names) - 1, 0)
        if not 0 <= tier <= top:
            raise ProtocolError(f"header X-Pard-Tier must be a tier code in [0, {top}] (the pipeline's "
                                f"tiers: {names!r}), got {raw!r}")
        return tier
    prio = req.parameters.get("priority")
    if prio is None:
        return config.tier_of(None, tiers)
    levels = config.queue.priority_levels
    if isinstance(prio, bool) or not isinstance(prio, int) or not 0 <= prio <= max(levels, 2**31 - 1):
        raise ProtocolError(f"parameters.priority must be an int >= 0, got {prio!r}")
    if levels and prio > levels:
        raise ProtocolError(f"parameters.priority must be in [0, {levels}] (queue.priority_levels), got {prio}")
    return config.tier_of(prio, tiers)


def _positive(field_name: str, raw: Any, unit_s: float) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):  # an int past float's range: OverflowError
        raise ProtocolError(f"{field_name} must be a number > 0, got {str(raw)[:40]!r}") from None
    if isinstance(raw, bool) or not (math.isfinite(value) and value > 0) or value * unit_s > 1e9:
        raise ProtocolError(f"{field_name} must be a finite number > 0 (at most 1e9 s), got {raw!r}")
    return value * unit_s


def request_tokens(req: InferRequest, payload: Any) -> tuple[int, int]:
    """``(in_tokens, max_tokens)`` of a request to a pipeline with an llm stage (DESIGN §3.8), from its
    ``parameters``: ``in_tokens``, the prompt's length (default: the length of a flat integer input, which
    the engine takes as token ids; else 0, unknown), and ``max_tokens``, the cap on its output (absent: the
    stage's ``max_output_tokens``).  ProtocolError naming a value that is not an int in ``[0, 2^31)``
    (``[1, 2^31)`` for ``max_tokens``)."""
    params = req.parameters
    out = []
    for name, low in (("in_tokens", 0), ("max_tokens", 1)):  # max_tokens 0 would read as no cap
        value = params.get(name)
        if value is None:
            value = token_count(payload) if name == "in_tokens" else 0
        elif isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**31:
            raise ProtocolError(f"parameters.{name} must be an int in [{low}, 2^31), got {value!r}")
        out.append(value)
    return out[0], out[1]
