"""LLM stages in a pipeline spec (DESIGN §3.8): the fields of a ``kind: llm`` stage and their checks.

An LLM stage batches at token boundaries: a request joins the running batch after its prefill and
leaves after its last token.  Its spec gives both phases instead of a ``profile``::

    kind: llm
    prefill: {base: 0.012, per_token: 0.00008}   # s: prefill(n) = base + per_token * n input tokens
    decode: {1: 0.011, 8: 0.012, 32: 0.015}      # s per decode step vs sequences running together
    max_seqs: 64                                 # most sequences running together (one worker)
    kv_tokens: 120000                            # KV budget per worker in tokens
    max_output_tokens: 1024                      # a request's output cap

The request-level helpers of :class:`pard.config.StageSpec` (``profile``, ``duration``, ``batch_limit``,
``throughput``: capacity, the goodput bound, SLO shares, autoscaling) read an LLM stage as a stage whose
"batch" of ``b`` requests runs together from their prefills to their last tokens:
``d(b) = b * prefill(mean_in) + mean_out * decode(b)``, with the spec's reading ``mean_in = 0`` and
``mean_out = max_output_tokens`` (every answer as long as allowed: a conservative capacity) unless a
run knows its token counts (:func:`request_profile` with the workload's means).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .. import profile as _profile
from ..errors import PardValueError
from .limits import MAX_BATCH, MAX_DURATION_S, MIN_DURATION_S

__all__ = ["LLM_FIELDS", "KINDS", "MAX_TOKENS", "check_prefill", "check_tokens", "request_profile", "fill_llm_stage",
           "lone_latency"]

#: The fields only an LLM stage takes.
LLM_FIELDS = ("prefill", "decode", "max_seqs", "kv_tokens", "max_output_tokens")
#: The stage kinds: ``dnn`` batches whole requests (``profile``, ``max_batch``), ``llm`` at token boundaries.
KINDS = ("dnn", "llm")
#: Largest token count a spec takes (the C++ core keeps token counts as int32).
MAX_TOKENS = 2**31 - 1


def check_prefill(v: Any) -> dict[str, float]:
    """``prefill`` as ``{base: s, per_token: s}``, both finite, ``>= 0``; PardValueError naming the key."""
    if not isinstance(v, Mapping):
        raise PardValueError(f"prefill must be a mapping {{base: seconds, per_token: seconds}}, got {v!r}")
    keys = set(v)
    if keys != {"base", "per_token"}:
        raise PardValueError(f"prefill must have exactly the keys base and per_token (seconds), got {sorted(map(str, keys))}")
    out: dict[str, float] = {}
    for key in ("base", "per_token"):
        x = v[key]
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise PardValueError(f"prefill.{key} must be a finite number of seconds >= 0, got {x!r}")
        if x > MAX_DURATION_S:
            raise PardValueError(f"prefill.{key} must be <= {MAX_DURATION_S:g} s (MAX_DURATION_S), got {x!r}")
        out[key] = float(x)
    if out["per_token"] > 1.0:
        raise PardValueError(f"prefill.per_token must be <= 1 s per token, got {out['per_token']!r}")
    return out


def check_tokens(field: str, v: Any, low: int = 1) -> int:
    """A token count (int in ``low .. MAX_TOKENS``); PardValueError naming ``field`` and the value."""
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= MAX_TOKENS:
        raise PardValueError(f"{field} must be an int in {low}..{MAX_TOKENS}, got {v!r}")
    return v


def request_profile(prefill: Mapping[str, float], decode: Mapping[int, float], max_seqs: int,
                    mean_in: float, mean_out: float, kv_seqs: float | None = None) -> dict[int, float]:
    """The request-level ``d(b)`` (s) of the module docstring at each decode point up to ``max_seqs``.

    ``kv_seqs``: how many sequences the KV budget holds at once (``kv_tokens`` over the mean reservation);
    past it the sequences run in turns, so ``d(b)`` grows in proportion to ``b`` and the throughput stays
    that of ``kv_seqs`` running together."""
    pre = prefill["base"] + prefill["per_token"] * mean_in
    pts = _profile.points(decode)
    limit = max_seqs if kv_seqs is None else max(1, min(max_seqs, int(kv_seqs)))
    bs = sorted(b for b in decode if b <= max_seqs) or [min(decode)]
    for extra in (limit, max_seqs):
        if extra not in bs and extra > bs[0]:
            bs.append(extra)
    bs.sort()

    def d(b: int) -> float:
        n = min(b, limit)
        return (b * pre + mean_out * float(_profile.duration(*pts, n))) * (b / n if b > n else 1.0)

    return {int(b): min(d(b), MAX_DURATION_S) for b in bs}


def _check_decode(v: Any) -> dict[int, float]:
    if not isinstance(v, Mapping) or not v:
        raise PardValueError(f"decode must be a non-empty mapping {{running sequences: seconds per step}}, got {v!r}")
    points: list[tuple[int, float]] = []
    for b, d in v.items():
        try:
            n = int(b)
        except (TypeError, ValueError):
            n = -1
        if isinstance(b, bool) or isinstance(d, bool) or n < 1 or n > MAX_BATCH or (isinstance(b, float) and b != n):
            raise PardValueError(f"decode keys must be ints in 1..{MAX_BATCH} (running sequences), got {b!r}")
        if not isinstance(d, (int, float)) or not math.isfinite(d) or not MIN_DURATION_S <= d <= MAX_DURATION_S:
            raise PardValueError(f"decode step duration at {n} = {d!r} s must be in [{MIN_DURATION_S:g}, {MAX_DURATION_S:g}]")
        points.append((n, float(d)))
    points.sort()
    for (b0, d0), (b1, d1) in zip(points, points[1:]):
        if d1 < d0:
            raise PardValueError(f"decode step durations must not decrease with running sequences: "
                                 f"decode({b1}) = {d1!r} s < decode({b0}) = {d0!r} s")
    return dict(points)


def _check_fits(data: dict[str, Any]) -> None:
    """An llm stage that can run a request: its KV budget holds one prompt token beside the output cap (a
    request reserves ``in_tokens + max_output_tokens`` without a hint), and no decode point lies past
    ``max_seqs`` (a worker never runs more sequences together: such a point would only bend the
    interpolation up to ``max_seqs``).  PardValueError naming the field and the value otherwise."""
    kv, cap, seqs = data["kv_tokens"], data["max_output_tokens"], data["max_seqs"]
    if kv < cap + 1:
        raise PardValueError(f"kv_tokens must be >= max_output_tokens + 1 = {cap + 1} (a request reserves its prompt, "
                             f"at least 1 token, plus its output cap), got kv_tokens={kv!r}")
    past = [b for b in data["decode"] if b > seqs]
    if past:
        raise PardValueError(f"decode has a step time at {past[0]} running sequences, past max_seqs={seqs!r}: a "
                             f"worker never runs more together (give decode points up to max_seqs, or raise max_seqs)")


def fill_llm_stage(data: Any) -> Any:
    """StageSpec's first check (pydantic ``mode="before"``): the fields a stage's kind takes.

    A ``dnn`` stage needs ``profile`` and ``max_batch`` and takes no LLM field; an ``llm`` stage needs every
    LLM field and gets ``profile`` (the request-level reading of the module docstring) and ``max_batch``
    (``max_seqs``) from them: given ones must equal those (a dumped spec read back).  PardValueError
    naming the field and the value otherwise.
    """
    if not isinstance(data, Mapping):
        return data
    data = dict(data)
    kind = data.get("kind", "dnn")
    if kind not in KINDS:
        raise PardValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "dnn":
        extra = [f for f in LLM_FIELDS if data.get(f) is not None]
        if extra:
            raise PardValueError(f"{extra[0]} is a field of an llm stage, but the stage's kind is 'dnn' (set kind: "
                                 f"llm, or give only a profile and max_batch)")
        for f in ("profile", "max_batch"):
            if f not in data:
                raise PardValueError(f"{f} is required for a dnn stage")
        return data
    missing = [f for f in LLM_FIELDS if data.get(f) is None]
    if missing:
        raise PardValueError(f"{missing[0]} is required for an llm stage (it takes {', '.join(LLM_FIELDS)})")
    data["prefill"] = check_prefill(data["prefill"])
    data["decode"] = _check_decode(data["decode"])
    data["max_seqs"] = check_tokens("max_seqs", data["max_seqs"])
    if data["max_seqs"] > MAX_BATCH:
        raise PardValueError(f"max_seqs must be <= {MAX_BATCH} (MAX_BATCH), got {data['max_seqs']!r}")
    data["kv_tokens"] = check_tokens("kv_tokens", data["kv_tokens"])
    data["max_output_tokens"] = check_tokens("max_output_tokens", data["max_output_tokens"])
    _check_fits(data)
    derived = {"profile": request_profile(data["prefill"], data["decode"], data["max_seqs"], 0.0,
                                          float(data["max_output_tokens"]),
                                          data["kv_tokens"] / data["max_output_tokens"]),
               "max_batch": data["max_seqs"]}
    for f, want in derived.items():
        given = data.get(f)
        if given is not None and given != want:
            raise PardValueError(f"an llm stage takes no {f} (it follows from prefill, decode and max_seqs), got {given!r}")
        data[f] = want
    return data


def lone_latency(st: Any) -> float:
    """The least time a lone request spends at stage ``st`` (s): ``d(1)`` for a dnn stage; for an llm stage
    its prefill of no input and one decode step (its answer may be a single token)."""
    if getattr(st, "kind", "dnn") != "llm":
        return float(st.duration(1))
    return float(st.prefill["base"] + _profile.duration(*_profile.points(st.decode), 1))
