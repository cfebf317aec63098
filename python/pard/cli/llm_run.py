"""``pard run`` on a pipeline with an llm stage: its requests' token counts, a record of what its engines
decoded, and the JSON block ``live.llm``.

Each request gets its token counts as ``pard simulate`` gives them (:mod:`.tokens`, seeded by ``--seed``):
from a trace file's token columns, rows drawn from the file (``pard run`` rescales the trace, so its requests
are new), else an (input, output) pair drawn from the bundled Azure LLM conversation trace.  The input is
its prompt, the output the length at which the engine ends it (its end of sequence; no rule reads it), a
file's ``max_tokens`` its cap hint.  A prompt that cannot fit an llm stage's KV budget beside the output cap
(``kv_tokens - max_output_tokens``) is cut to that length and counted (``prompts_capped``).  The llm stage's
engines are wrapped in :class:`StepLog`'s recorder, so the run can show that no request decoded after it was
dropped: the engine is told to stop a sequence at the step boundary after its drop, so a dropped request may
appear in at most the one step already decided.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..outcomes import DROPPED
from ..sim_llm import bound_spec
from ..workloads import Workload
from .tokens import TokenSource

__all__ = ["has_llm", "llm_capacity", "llm_workload", "StepLog", "llm_block"]

#: A request id inside an engine's key (``request id << 22 | slot``, pard/live/llm_steps.hpp).
_KEY_SHIFT = 22


def has_llm(spec: Any) -> bool:
    """Whether ``spec`` has an llm stage."""
    return any(st.kind == "llm" for st in spec.stages)


def llm_capacity(spec: Any, tokens: TokenSource, seed: int) -> float:
    """The pipeline's capacity (req/s) with its llm stages read at the mean lengths of ``tokens``' counts."""
    return float(bound_spec(spec, tokens.sample(seed)).capacity().pipeline)


def llm_workload(spec: Any, arrivals_s: np.ndarray, tokens: TokenSource, seed: int) -> tuple[Workload, int, int]:
    """``arrivals_s`` with token counts from ``tokens``: (the Workload, the longest prompt kept, how many
    prompts were cut to it)."""
    got = tokens.for_arrivals(int(arrivals_s.size), seed)
    ins, outs, hints = got["in_tokens"], got["out_tokens"], got["max_tokens"]
    longest = min(int(st.kv_tokens) - int(st.max_output_tokens) for st in spec.stages if st.kind == "llm")
    capped = int((ins > longest).sum())
    ins = np.minimum(ins, longest).astype(np.int32)
    return Workload(arrivals_s=arrivals_s, in_tokens=ins, out_tokens=np.asarray(outs).astype(np.int32),
                    max_tokens=None if hints is None else np.asarray(hints).astype(np.int32)), longest, capped


class _Recorded:
    """An LLM engine that logs, per step, its start (``time.perf_counter``) and the request ids that ran."""

    def __init__(self, inner: Any, log: StepLog) -> None:
        self._inner = inner
        self._log = log
        self.max_seqs = inner.max_seqs

    def step(self, joins: Iterable[Any] = (), stops: Iterable[int] = ()) -> list[Any]:
        t0 = time.perf_counter()
        out: list[Any] = self._inner.step(joins, stops)
        # a refused joiner never ran: it is no sequence of the step
        self._log.add(t0, time.perf_counter(), [int(r.request_id) >> _KEY_SHIFT for r in out
                                                if getattr(r, "error", None) is None])
        return out

    def close(self) -> None:
        self._inner.close()


class StepLog:
    """Every step of one run's llm engines: when it started and ended (``time.perf_counter``) and which
    requests ran in it.  Thread-safe; :meth:`wrap` puts the recorder around an engine factory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: list[tuple[float, float, list[int]]] = []

    def add(self, start: float, end: float, ids: list[int]) -> None:
        """Record one step."""
        with self._lock:
            self._steps.append((start, end, ids))

    def wrap(self, factory: Callable[[], Any]) -> Callable[[], Any]:
        """A factory of ``factory``'s engines, each recording its steps here."""
        return lambda: _Recorded(factory(), self)

    def check(self, outcomes: dict[str, np.ndarray], offset_s: float) -> dict[str, Any]:
        """What the engines did against the run's outcomes (``Runtime.outcomes()``; ``offset_s`` = the
        runtime clock minus ``time.perf_counter``): ``steps``, ``tokens`` (sequence-steps, one token each),
        ``step_s`` (mean), and for the dropped requests that had decoded, ``after_drop_steps_max``: the most
        steps one of them ran in that began after its drop (0 or 1: the boundary already decided)."""
        with self._lock:
            steps = list(self._steps)
        dropped = outcomes["state"] == DROPPED
        drop_at = {int(i): float(outcomes["finish_s"][i]) for i in np.flatnonzero(dropped)}
        after: dict[int, int] = {}
        decoded_dropped: set[int] = set()
        for start, _, ids in steps:
            for rid in ids:
                if rid in drop_at:
                    decoded_dropped.add(rid)
                    if start + offset_s > drop_at[rid]:
                        after[rid] = after.get(rid, 0) + 1
        return {"steps": len(steps), "tokens": int(sum(len(ids) for _, _, ids in steps)),
                "step_s": float(np.mean([e - s for s, e, _ in steps])) if steps else None,
                "dropped_while_decoding": len(decoded_dropped),
                "after_drop_steps_max": max(after.values(), default=0)}


def llm_block(spec: Any, workload: Workload, longest: int, capped: int, profile_fit: dict[str, Any],
              logs: dict[str, dict[str, Any]], simulated: dict[str, Any], source: str) -> dict[str, Any]:
    """The JSON block ``live.llm``: tokens, the prompt cap, the engines' steps per policy, and the
    output-length predictor's calibration the simulation of the same requests reached
    (``calibration_simulated``; the live one is each policy's ``llm_calibration``, as in ``pard simulate``)."""
    ins, outs = workload.in_tokens, workload.out_tokens
    assert ins is not None and outs is not None
    return {
        "stages": [st.name for st in spec.stages if st.kind == "llm"],
        "tokens": {"source": source,
                   "requests": int(ins.size), "in_mean": float(ins.mean()) if ins.size else None,
                   "out_mean": float(outs.mean()) if outs.size else None, "in_max": int(ins.max(initial=0)),
                   "longest_prompt_kept": longest, "prompts_capped": capped},
        "profile_fit": profile_fit,
        "engine": logs,
        "calibration_simulated": {name: rep.llm_calibration for name, rep in simulated.items()},
    }
