"""An LLM stage's worker loop (DESIGN §3.8): the engine stepped between pard's step boundaries.

A worker of an ``llm`` stage enters C++ once per engine step: ``live.llm_step(worker, finished, error,
start, end)`` (``pard/live/llm_steps.hpp``) accounts the step that ended (its compute, the planner's
batch row, the finished sequences' outputs routed on or finished), and returns the sequences to stop
(their request ended, or under ``llm_stop`` they can no longer finish in time) and the joiners the
stage's scheduler admits; it waits with the GIL released while nothing runs and nothing is queued.
The worker then calls ``engine.step(joins, stops)`` (:class:`pard.executors.LlmEngine`).  A sequence's
output is the list of token ids it produced.

A joiner is refused on its own, never with the step: one whose payload of token ids contradicts its
``in_tokens`` (:func:`prompt_of`) is not handed to the engine, and one the engine refuses comes back as
:meth:`StepResult.refused`; both reach the next boundary as ``refused`` and end ``failed`` with their
reason (as a DNN executor's error ends its batch), while the step's other sequences run on.  An engine
that raises fails every sequence of its step.  With a stage observer (``Runtime.observe_stages``) the
worker reports each boundary's joiners' queueing delays and each step's running sequences as its batch.

The stage's executor is an engine (one worker) or a zero-argument factory of engines (one per worker).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ConfigError, PardValueError, PromptRefused
from ..executors.llm_engine import is_llm_engine

__all__ = ["check_engine", "check_tokens", "llm_engine_arg", "prompt_of", "serve_llm", "token_count"]


def llm_engine_arg(spec: Any, executor: Any, workers: int) -> Callable[[], Any]:
    """A factory of llm stage ``spec``'s per-worker engines from its executor: an :class:`LlmEngine` (one
    worker only: it is one engine) or a zero-argument callable returning one.

    Raises:
        pard.ConfigError: an engine shared by ``workers > 1``, one that cannot serve the stage
            (:func:`check_engine`), or neither an engine nor a factory.
    """
    name = spec.name
    if is_llm_engine(executor):
        check_engine(spec, executor)  # built already: checked now, not in its worker (a factory's are there)
        if workers != 1:
            raise ConfigError(f"stages[{name!r}]: one LLM engine cannot serve workers={workers}; pass a "
                              f"zero-argument factory that returns one engine per worker")
        return lambda: executor
    if callable(executor):
        return executor  # type: ignore[no-any-return]
    raise ConfigError(f"stages[{name!r}]: an llm stage needs an LLM engine (pard.executors.LlmEngine: max_seqs, "
                      f"step(joins, stops)) or a factory of one, got {type(executor).__name__}")


def check_engine(spec: Any, engine: Any) -> Any:
    """``engine`` for llm stage ``spec`` (a :class:`pard.StageSpec`), checked against what the stage admits:
    it must run the stage's ``max_seqs`` sequences together and, where it says its KV size (``context``, as
    :class:`pard.executors.LlamaCppEngine` does), hold the stage's ``kv_tokens``; else pard would hand it
    joiners it refuses, one failed request at a time.

    Raises:
        pard.ConfigError: naming the stage, the engine's figure and the stage's field.
    """
    runs = int(engine.max_seqs)
    if runs < int(spec.max_seqs):
        raise ConfigError(f"stages[{spec.name!r}]: the engine runs at most {runs} sequences together, the stage's "
                          f"max_seqs is {spec.max_seqs}; lower max_seqs to {runs} or give the engine more")
    context = getattr(engine, "context", None)
    if isinstance(context, int) and context < int(spec.kv_tokens):
        raise ConfigError(f"stages[{spec.name!r}]: the engine's KV cache holds {context} tokens, the stage's "
                          f"kv_tokens is {spec.kv_tokens}; lower kv_tokens to {context} or give the engine more")
    return engine


def check_tokens(spec: Any, in_tokens: Any, max_tokens: Any, max_new: Any) -> tuple[int, int, int]:
    """A request's ``(in_tokens, max_tokens, max_new)`` checked: ints in ``[0, 2^31)``, and the prompt plus
    the output cap (``max_tokens`` else the stage's ``max_output_tokens``, within it) fit each llm stage's
    ``kv_tokens`` (else it could never join).  PardValueError naming the field and value."""
    out = []
    for field, v in (("in_tokens", in_tokens), ("max_tokens", max_tokens), ("max_new", max_new)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= int(v) < 2**31:
            raise PardValueError(f"submit: {field}={v!r} must be an int in [0, 2^31)")
        out.append(int(v))
    for st in spec.stages:
        if st.kind != "llm":
            continue
        cap = min(out[1], st.max_output_tokens) if out[1] > 0 else st.max_output_tokens
        if out[0] + cap > st.kv_tokens:
            raise PardValueError(f"submit: in_tokens={out[0]} plus the output cap {cap} exceed stage {st.name!r}'s "
                                 f"kv_tokens={st.kv_tokens}: the request could never join")
    return out[0], out[1], out[2]


def token_count(payload: Any) -> int:
    """How many token ids ``payload`` holds when it is a flat, non-empty sequence of integers (what an llm
    stage's engine prefills as its prompt), else 0."""
    if isinstance(payload, (list, tuple, np.ndarray)) and len(payload) > 0:
        arr = np.asarray(payload)
        if arr.ndim == 1 and np.issubdtype(arr.dtype, np.integer):
            return int(arr.size)
    return 0


def prompt_of(payload: Any, in_tokens: int) -> Any:
    """What the engine prefills: the payload when it is a flat list of token ids, else ``in_tokens``
    synthetic tokens (at least 1).

    Raises:
        PromptRefused: the payload holds token ids and ``in_tokens`` (> 0: given) is another count: pard
            reserved the request's KV tokens and priced its prefill by ``in_tokens``.
    """
    n = token_count(payload)
    if n:
        if in_tokens and n != in_tokens:
            raise PromptRefused(f"in_tokens={in_tokens} contradicts the prompt's {n} token ids (the KV "
                                 f"reservation and the prefill's cost are read from in_tokens)")
        return [int(t) for t in np.asarray(payload)]
    return max(int(in_tokens), 1)


def serve_llm(st: Any, w: Any, live: Any, now: Callable[[], float], engine: Any) -> None:
    """Worker body of llm stage ``st`` (its ``LiveLlmWorker`` ``w``) over ``engine`` until the runtime stops."""
    tokens: dict[int, list[int]] = {}  # key -> token ids produced so far
    finished: list[tuple[int, list[int]]] = []
    refused: list[tuple[int, BaseException]] = []  # joiners never run: (key, why)
    err: BaseException | None = None
    unadmitted: set[int] = set()  # joiners of a step that raised: the engine never held them
    start = end = 0.0
    name = st.name
    while True:
        got = live.llm_step(w, finished, err, start, end, refused)
        if got is None:
            return
        stops, joins = got
        obs = st.observer
        if obs is not None and joins:  # the delays are the joiners' (set only when some join)
            obs.queue_delays(name, w.delays)
        for key in stops:
            tokens.pop(key, None)
        if unadmitted:
            stops = [k for k in stops if k not in unadmitted]
            unadmitted.clear()
        finished = []
        refused = []
        batch = []
        for key, payload, n_in, max_new in joins:
            try:
                batch.append((key, prompt_of(payload, n_in), max_new))
            except PromptRefused as e:
                refused.append((key, e))
        err = None
        start = now()
        try:
            results = engine.step(batch, stops)
        except BaseException as e:  # noqa: BLE001 - the step fails its sequences; the worker carries on
            err = e
            results = []
            unadmitted = {key for key, _, _ in batch}
        end = now()
        ran = 0
        for res in results:
            why = getattr(res, "error", None)
            if why is not None:
                refused.append((res.request_id, why))
                continue
            ran += 1
            produced = tokens.setdefault(res.request_id, [])
            produced.append(int(res.token))
            if res.done:
                finished.append((res.request_id, tokens.pop(res.request_id)))
        if obs is not None and ran:
            obs.batch(name, ran)
