"""The simulator's side of LLM stages (DESIGN §3.8): per-request token counts checked and handed to the C++
simulator, the goodput bound's reading of an LLM stage, and the report's calibration entry.

:func:`pard.sim.simulate` calls these; the engine itself is C++ (``cpp/include/pard/sim/llm_worker.hpp``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import numpy.typing as npt

from ._checks import real_array, show
from .config.llm import MAX_TOKENS, request_profile
from .errors import PardValueError

if TYPE_CHECKING:  # pragma: no cover
    from .config import PipelineSpec

__all__ = ["llm_tokens", "bound_spec", "llm_calibration", "output_caps"]

I32 = npt.NDArray[np.int32]


def _tokens(name: str, value: Any, n: int, low: int) -> I32:
    arr = real_array(name, value, "an array of whole token counts")
    if arr.shape != (n,):
        raise PardValueError(f"{name} must have one entry per arrival ({n}), got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < low) | (arr > MAX_TOKENS) | (arr != np.round(arr))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PardValueError(f"{name}[{i}] = {show(arr[i])} must be a whole number of tokens in {low}..{MAX_TOKENS}")
    return np.ascontiguousarray(arr.astype(np.int32))


def llm_tokens(spec: "PipelineSpec", n: int, *, in_tokens: Any, out_tokens: Any, max_tokens: Any) -> dict[str, Any]:
    """The ``in_tokens`` / ``out_tokens`` / ``max_tokens`` keywords of ``pard._core.Simulator`` (int32 ``(n,)``
    arrays or None), checked.

    Raises:
        PardValueError: a pipeline with an llm stage and no ``in_tokens`` or ``out_tokens`` (naming the missing
            one and the stage), or a count that is not a whole number in range (naming the index and value).
    """
    llm = [st.name for st in spec.stages if st.kind == "llm"]
    given = {"in_tokens": in_tokens, "out_tokens": out_tokens, "max_tokens": max_tokens}
    if llm:
        for name in ("in_tokens", "out_tokens"):
            if given[name] is None:
                raise PardValueError(
                    f"pipeline {spec.name!r} has an llm stage ({llm[0]!r}), which needs every request's {name}; the "
                    f"workload has none: pass {name}= to simulate, or a Workload with token counts (e.g. "
                    f"pard.workloads.azure_llm_conv(tokens=True), or pairs from pard.workloads.draw_tokens(n))")
    lows = {"in_tokens": 0, "out_tokens": 1, "max_tokens": 0}
    out = {name: None if v is None else _tokens(name, v, n, lows[name]) for name, v in given.items()}
    for st in spec.stages:
        if st.kind == "llm" and out["in_tokens"] is not None:
            _check_kv_fit(st, out["in_tokens"], out["max_tokens"])
    return out


def output_caps(st: Any, n: int, hints: Any = None) -> npt.NDArray[np.int64]:
    """Each of ``n`` requests' output cap at llm stage ``st`` (tokens, int64): its ``max_tokens`` hint where
    it gives one (> 0), within the stage's ``max_output_tokens``."""
    cap = np.full(n, int(st.max_output_tokens), dtype=np.int64)
    if hints is not None:
        hints = np.asarray(hints, dtype=np.int64)
        cap = np.where(hints > 0, np.minimum(hints, cap), cap)
    return cap


def _check_kv_fit(st: Any, ins: I32, hints: I32 | None) -> None:
    """PardValueError naming the first request whose KV reservation (prompt + its output cap) exceeds the
    llm stage's ``kv_tokens``: no engine of that size can ever run it, and it would wait at the head of the
    queue for ever (a real engine refuses such a prompt outright)."""
    cap = output_caps(st, ins.size, hints)
    need = ins.astype(np.int64) + cap
    bad = need > int(st.kv_tokens)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PardValueError(
            f"in_tokens[{i}] = {int(ins[i])} plus its output cap ({int(cap[i])} tokens) needs {int(need[i])} KV tokens, "
            f"more than llm stage {st.name!r}'s kv_tokens = {int(st.kv_tokens)}: no worker can ever run it "
            f"({int(bad.sum())} request(s) like it); raise kv_tokens, lower max_output_tokens or give a max_tokens hint, "
            f"or leave such prompts out")


def bound_spec(spec: "PipelineSpec", tokens: Mapping[str, Any]) -> "PipelineSpec":
    """``spec`` with each llm stage read at the run's mean input and output lengths (its true ones, capped by
    the stage and the hints): the goodput bound is an oracle, so it may know them.  ``spec`` itself
    when it has no llm stage or the run no token counts."""
    if tokens.get("out_tokens") is None or not any(st.kind == "llm" for st in spec.stages):
        return spec
    stages = []
    for st in spec.stages:
        if st.kind == "llm":
            assert st.prefill is not None and st.decode is not None and st.max_seqs and st.max_output_tokens
            cap = output_caps(st, tokens["out_tokens"].size, tokens.get("max_tokens"))
            mean_out = float(np.minimum(tokens["out_tokens"], cap).mean()) if cap.size else 1.0
            mean_in = float(tokens["in_tokens"].mean()) if tokens["in_tokens"].size else 0.0
            reserve = float((tokens["in_tokens"].astype(np.int64) + cap).mean()) if cap.size else 1.0
            st = st.model_copy(update={"profile": request_profile(st.prefill, st.decode, st.max_seqs, mean_in,
                                                                   max(mean_out, 1.0), st.kv_tokens / reserve)})
        stages.append(st)
    return spec.model_copy(update={"stages": stages})


def llm_calibration(spec: "PipelineSpec", raw: Mapping[int, Mapping[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """``Simulator.llm_calibration()`` by stage name: {quantile, token_aware, n, under_share}; None without an
    llm stage.  ``under_share`` is NaN before any request finished there."""
    if not raw:
        return None
    out: dict[str, dict[str, Any]] = {}
    for k, c in raw.items():
        n = int(c["n"])
        out[spec.stages[int(k)].name] = {"quantile": float(c["quantile"]), "token_aware": bool(c["token_aware"]),
                                         "n": n, "under_share": int(c["under"]) / n if n else float("nan")}
    return out
