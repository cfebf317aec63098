"""Measuring an LLM stage's cost model on its engine (see :mod:`pard.profiling`; DESIGN §3.8).

An llm stage's spec models a step of iteration-level batching as ``decode(n) + sum over joiners of
(base + per_token * prompt tokens)``.  :func:`measure_llm` measures that model on an engine that pard
steps (:class:`pard.executors.LlmEngine`, e.g. :class:`pard.executors.LlamaCppEngine`):

* ``decode(n)``: with ``n`` sequences running, each holding ``context_tokens`` tokens (already
  prefilled), the median wall time of a step in which each emits one token, for n = 1, 2, 4, ... up to
  the engine's ``max_seqs``, made non-decreasing (a running maximum), as a stage spec's table must be.
  The context matters: llama.cpp's cache is shared by the sequences (one KV budget), and a step's
  attention spans the cells they all hold, so a step of ``n`` sequences of a thousand tokens costs
  many times one of ``n`` short ones;
* ``prefill``: the step time of one sequence of ``P`` prompt tokens joining ``max_seqs // 2`` running
  ones (the same context), minus ``decode`` of them all, fitted to ``base + per_token * P`` (see
  ``prompt_sample``), with the fit's error at each measured ``P`` and a quadratic fit beside it
  (attention makes prefill grow with ``P^2``, which the spec's linear form leaves out);
* two checks of the model: the batching gain ``n * decode(1) / decode(n)`` and additivity (a step with
  ``max_seqs - 1`` running and one joiner against ``decode(max_seqs) + prefill(P)``).

Times are wall seconds of ``engine.step``, Python included: what an LLM stage's worker pays per step.

:func:`tiny_llm_engine` is the engine ``pard profile`` and ``pard run`` serve a built-in pipeline's llm
stage with: the tiny random-weight llama of :mod:`pard.models.tiny_llama` on llama.cpp (extra
``pard[llm]``), its context sized to hold the stage's KV budget up to :data:`TINY_CONTEXT` tokens.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._cache import cache_dir
from ..errors import PardValueError

__all__ = ["measure_llm", "llm_stage_fields", "decode_counts", "default_prompts", "tiny_llm_engine", "TINY_CONTEXT",
           "DECODE_PROMPT"]

#: Prompt length of the sequences a decode measurement keeps running (prefilled before timing).
DECODE_PROMPT = 8
#: The tiny engine's largest context (KV cells shared by its sequences): it holds the bundled Azure
#: trace's longest prompt (14 050 tokens) with a 1 024-token answer, at a few MB of KV cache.
TINY_CONTEXT = 32768


def decode_counts(max_seqs: int) -> list[int]:
    """Running-sequence counts a decode table is measured at: ``16 -> [1, 2, 4, 8, 16]``, ``12 -> [1, 2, 4, 8, 12]``."""
    if isinstance(max_seqs, bool) or not isinstance(max_seqs, int) or max_seqs < 1:
        raise PardValueError(f"max_seqs must be an int >= 1, got {max_seqs!r}")
    out, n = [], 1
    while n < max_seqs:
        out.append(n)
        n *= 2
    return out + [max_seqs]


def default_prompts(context: int) -> list[int]:
    """Prompt lengths of the prefill fit: 128 to 4 096 tokens (the bulk of the bundled trace's prompts:
    median 1 020, p99 4 142; a shorter prefill is within the noise of the decode step it rides in),
    those that fit ``context`` with their one output token."""
    return [p for p in (128, 512, 1024, 2048, 4096) if p + 1 <= context] or [max(1, context - 1)]


def _admitted(results: Sequence[Any]) -> None:
    """Raise a refused joiner's error: every joiner here is sized to fit, and a step without it would be
    timed as one with it."""
    for r in results:
        if getattr(r, "error", None) is not None:
            raise r.error


def _join(engine: Any, joins: Sequence[Any]) -> None:
    _admitted(engine.step(joins))


def _timed_step(engine: Any, joins: Sequence[Any] = ()) -> float:
    start = time.perf_counter()
    out = engine.step(joins)
    took = time.perf_counter() - start
    _admitted(out)
    return took


def _decode_step_s(engine: Any, n: int, steps: int, repeats: int, next_id: list[int], held: int) -> float:
    """Median seconds of a step with ``n`` sequences of ``held`` tokens running and no joiner."""
    samples: list[float] = []
    for _ in range(repeats):
        ids = list(range(next_id[0], next_id[0] + n))
        next_id[0] += n
        # max_new keeps every sequence running through the prefill, one warm-up step and the timed steps
        _join(engine, [(rid, held, steps + 3) for rid in ids])
        engine.step()
        samples += [_timed_step(engine) for _ in range(steps)]
        engine.step(stops=ids)
    return statistics.median(samples)


def _join_step_s(engine: Any, prompt: int, repeats: int, next_id: list[int], running: int = 0,
                 held: int = DECODE_PROMPT, steps: int = 3) -> float:
    """Median seconds of a step in which one sequence of ``prompt`` tokens joins ``running`` others of
    ``held`` tokens."""
    samples: list[float] = []
    for _ in range(repeats):
        ids = list(range(next_id[0], next_id[0] + running))
        next_id[0] += running + 1
        if ids:
            _join(engine, [(rid, held, 2 * steps + 4) for rid in ids])
            engine.step()
        for _ in range(steps):
            samples.append(_timed_step(engine, [(next_id[0], prompt, 1)]))  # done in its prefill step
            next_id[0] += 1
        if ids:
            engine.step(stops=ids)
    return statistics.median(samples)


def _interp(table: dict[int, float], n: int) -> float:
    keys = sorted(table)
    return float(np.interp(n, keys, [table[k] for k in keys]))


def measure_llm(engine: Any, *, prompts: Sequence[int] | None = None, steps: int = 20,
                repeats: int = 3, prompt_sample: Any = None, context_tokens: int = DECODE_PROMPT) -> dict[str, Any]:
    """The cost model of ``engine`` in an llm stage spec's form, with the measurement behind it.

    Args:
        engine: an idle :class:`pard.executors.LlmEngine` with ``max_seqs`` and ``context`` (KV tokens).
        prompts: prompt lengths of the prefill fit (each + 1 within the context); default
            :func:`default_prompts` of the engine's context.
        steps: timed decode steps per repeat (>= 1).
        repeats: repeats per decode count and prompt length (>= 1).
        prompt_sample: the prompt lengths of the workload the stage will serve (array of token counts),
            or None.  Given (and three or more ``prompts``), the linear prefill is matched to the
            workload: ``base`` is the quadratic fit's intercept and ``per_token`` makes the mean of
            ``base + per_token * P`` over the sample equal the quadratic fit's mean over it, so the
            stage's prefill work in aggregate (its capacity) is right where the linear form cannot be
            right per prompt.  None: least squares on the relative error at ``prompts``.
        context_tokens: the tokens each running sequence holds while decode and prefill are timed
            (>= 1; e.g. the workload's mean prompt), cut so that ``max_seqs`` such sequences fit the
            context beside the longest prompt.

    Returns:
        ``{"prefill": {"base", "per_token"}, "decode": {n: s}, "max_seqs", "kv_tokens", "measured": {...},
        "checks": {...}}`` in seconds: ``measured`` holds the raw medians, ``prefill_fit_rel_error`` (fit
        over measured - 1, by prompt length) and ``prefill_quadratic``; ``checks`` the batching gain and
        additivity (see the module docstring).  The engine is left idle.

    Raises:
        pard.errors.PardValueError: ``steps`` or ``repeats`` < 1, or a prompt that does not fit.
    """
    for name, v in (("steps", steps), ("repeats", repeats)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise PardValueError(f"measure_llm: {name} must be an int >= 1, got {v!r}")
    context = int(getattr(engine, "context"))
    ps = default_prompts(context) if prompts is None else [int(p) for p in prompts]
    if not ps or any(p < 1 or p + 1 > context for p in ps):
        raise PardValueError(f"measure_llm: prompts must be ints in [1, {context - 1}] (the engine's context "
                             f"{context} less the one output token), got {list(ps)!r}")
    max_seqs = int(engine.max_seqs)
    # every sequence of a step fits the context: max_seqs of them, each with room for its decode steps
    held = max(1, min(int(context_tokens), (context - max(ps) - 1) // max_seqs - 2 * steps - 8))
    next_id = [0]
    _join(engine, [(next_id[0], DECODE_PROMPT, 4)])   # warm the engine's buffers up
    next_id[0] += 1
    while engine.step():
        pass
    raw = {n: _decode_step_s(engine, n, steps, repeats, next_id, held) for n in decode_counts(max_seqs)}
    decode, top = {}, 0.0
    for n, s in raw.items():
        top = max(top, s)
        decode[n] = top
    beside = max_seqs // 2
    prefill_raw = {p: _join_step_s(engine, p, repeats, next_id, running=beside, held=held)
                   - _interp(decode, beside + 1) for p in ps}
    xs = np.array(list(prefill_raw), dtype=float)
    ys = np.maximum(np.array(list(prefill_raw.values())), 1e-9)
    # least squares on the relative error, so the short prompts count as much as the long ones
    per_token, base = np.polyfit(xs, ys, 1, w=1.0 / ys) if len(xs) > 1 else (0.0, float(ys[0]))
    per_token, base = max(float(per_token), 0.0), max(float(base), 1e-6)
    quad = [float(c) for c in np.polyfit(xs, ys, 2, w=1.0 / ys)] if len(xs) > 2 else None
    fit = "relative least squares"
    if prompt_sample is not None and quad is not None:
        sample = np.asarray(prompt_sample, dtype=float)
        sample = sample[sample > 0]
        if sample.size:
            base = max(quad[2], 1e-6)
            mean_quad = float(np.mean(np.polyval(quad, sample)))
            per_token = max((mean_quad - base) / float(sample.mean()), 0.0)
            fit = f"matched to the mean over {sample.size} workload prompts (mean {sample.mean():.0f} tokens)"
    fit_err = {str(p): (base + per_token * p) / v - 1.0 for p, v in zip(prefill_raw, ys)}

    n_mid = max_seqs - 1
    p_mid = ps[len(ps) // 2]
    mixed = _join_step_s(engine, p_mid, repeats, next_id, running=n_mid, held=held)
    parts = _interp(decode, n_mid + 1) + prefill_raw[p_mid]
    return {
        "prefill": {"base": base, "per_token": per_token},
        "decode": decode,
        "max_seqs": max_seqs,
        "kv_tokens": context,
        "context_tokens": held,
        "measured": {"decode_s": {str(n): s for n, s in raw.items()},
                     "prefill_s": {str(p): v for p, v in prefill_raw.items()},
                     "prefill_fit": fit, "prefill_fit_rel_error": fit_err,
                     "prefill_quadratic": None if quad is None else
                     {"per_token2": quad[0], "per_token": quad[1], "base": quad[2]}},
        "checks": {
            "batching_gain": {str(n): n * decode[1] / s for n, s in decode.items()},
            "additivity": {"running": n_mid, "prompt": p_mid, "measured_s": mixed, "parts_s": parts,
                           "ratio": mixed / parts},
        },
    }


def llm_stage_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """The spec fields of an llm stage from :func:`measure_llm`'s result: ``prefill``, ``decode``
    (each step at least 1 µs, the spec's floor), ``max_seqs`` and ``kv_tokens``."""
    return {"prefill": dict(doc["prefill"]),
            "decode": {int(n): max(float(s), 1e-6) for n, s in doc["decode"].items()},
            "max_seqs": int(doc["max_seqs"]), "kv_tokens": int(doc["kv_tokens"])}


def tiny_llm_engine(stage: Any, *, threads: int = 1, seed: int = 0,
                    directory: Path | None = None) -> Callable[[], Any]:
    """A zero-argument factory of llama.cpp engines running the tiny random-weight llama for llm stage
    ``stage`` (one engine per worker, as :class:`pard.Runtime` takes an llm stage's executor).

    Each engine runs ``stage.max_seqs`` sequences over a context of ``min(stage.kv_tokens,``
    :data:`TINY_CONTEXT` ``)`` KV tokens with ``threads`` CPU threads.  The model file (2 layers, width 64,
    the 256 byte tokens; :func:`pard.models.tiny_llama.write_tiny_llama`) is written once to
    ``<directory or cache_dir()>/models/``.

    Raises:
        pard.errors.MissingExtraError (an ImportError): ``gguf`` or llama-cpp-python is missing
            (``pip install 'pard[llm]'``).
    """
    from .._extras import require
    from ..executors.llama_cpp import LlamaCppEngine
    from ..models.tiny_llama import write_tiny_llama

    require("llama_cpp", "llm", "the llama.cpp engine of an llm stage")
    context = min(int(stage.kv_tokens), TINY_CONTEXT)
    root = (directory if directory is not None else cache_dir()) / "models"
    path = root / f"tiny-llama-2x64-v256-c{TINY_CONTEXT}-s{seed}.gguf"
    if not path.is_file():
        root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.tmp{os.getpid()}.gguf")
        write_tiny_llama(tmp, context=TINY_CONTEXT, seed=seed)
        os.replace(tmp, path)
    max_seqs = int(stage.max_seqs)
    return lambda: LlamaCppEngine(path, max_seqs=max_seqs, context=context, threads=threads, seed=seed)
