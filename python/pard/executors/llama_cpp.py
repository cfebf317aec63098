"""A llama.cpp engine that pard drives one decode step at a time (extra ``pard[llm]``).

:class:`LlamaCppEngine` is the real counterpart of the simulator's LLM engine (DESIGN §3.8):
iteration-level ("continuous") batching over llama-cpp-python's low-level API.  The caller, an LLM
stage's worker, owns the schedule; the engine only runs it.  Each :meth:`LlamaCppEngine.step`

1. stops the sequences the caller asks to stop (their KV cells are freed at once, they never
   decode again: pard's decode-time drop);
2. admits the joiners, each with its whole prompt;
3. runs ONE ``llama_decode`` over a batch holding every running sequence's next token and every
   joiner's prompt (prefill and decode in the same batch, as the design's step cost
   ``decode(n) + sum of the joiners' prefill`` assumes);
4. samples one token per running sequence (joiners included: their first token comes from their
   prefill) and retires a sequence, freeing its KV, at the step that yields its ``max_new``-th token.

Random-weight models never emit an end-of-sequence token that means anything, so a sequence ends
exactly at ``max_new`` tokens: the simulator's ``out_tokens``.  pard's workloads carry token counts,
not text, so a prompt may be given as a count: that many synthetic byte tokens, seeded by the
engine's seed and the request id.

KV accounting follows the design's reservation rule with no preemption: a joining sequence
reserves ``prompt tokens + max_new`` cells until it leaves, and a joiner that does not fit beside the
running sequences and the joiners before it is refused alone (:meth:`StepResult.refused`), as is one
whose prompt the model cannot take; the others run.  All sequences share one KV cache of
``context`` cells (llama.cpp's unified cache), so a long prompt may use what short ones leave.

Measured cost model (``bench/llm_engine.py``, the tiny model of :mod:`pard.models.tiny_llama` on
one core): a step's time is a base plus a term per running sequence that grows much slower than the
count (the weights are read once per step for every sequence), and a joiner adds a term linear in
its prompt tokens.  ``bench/llm_engine.py`` prints it as a stage spec's ``prefill:``/``decode:``.

One engine is used by one thread at a time (a stage worker); llama.cpp releases the GIL while it
decodes.  Neighbours: :mod:`pard.models.tiny_llama` writes the model; :mod:`.base` holds the
batch executors of DNN stages, which this engine does not replace.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Union

import numpy as np

from .._extras import require
from ..errors import ConfigError, ExecutorError, PardTypeError, PardValueError, PromptRefused, RuntimeStateError

__all__ = ["LlamaCppEngine", "StepResult", "Join", "llama_cpp_available"]

#: One joiner of :meth:`LlamaCppEngine.step`: ``(request_id, prompt, max_new)``, the prompt a list
#: of token ids or a count of synthetic tokens.
Join = tuple[int, Union[Sequence[int], int], int]
# the most sequences llama.cpp's context accepts (LLAMA_MAX_SEQ); newer builds report theirs
_MAX_SEQ_FALLBACK = 64
# synthetic prompt tokens are drawn from the byte tokens every pard tiny model has
_SYNTHETIC_VOCAB = 256


class StepResult(NamedTuple):
    """What one step did to one running sequence (:meth:`LlamaCppEngine.step` returns one per sequence),
    or to one joiner the engine refused.

    Attributes:
        request_id: the caller's id of the sequence.
        tokens_generated: tokens it has produced so far, this step's included (>= 1; 0 when refused).
        done: True at the step that produced its ``max_new``-th token; it has left the engine and
            its KV cells are free.  True for a refused joiner.
        token: the token id this step produced for it (-1 when refused).
        error: None, or why the engine refused this joiner (a :class:`pard.errors.PromptRefused` naming
            the field and value): it never ran and holds nothing; the step's other sequences ran as usual.
    """

    request_id: int
    tokens_generated: int
    done: bool
    token: int
    error: BaseException | None = None

    @classmethod
    def refused(cls, request_id: int, error: BaseException) -> StepResult:
        """The result of a joiner the engine refused with ``error``."""
        return cls(request_id, 0, True, -1, error)


class _Seq:
    """A running sequence: its llama.cpp sequence id, where its next token goes, what it reserved."""

    __slots__ = ("request_id", "slot", "n_past", "generated", "max_new", "reserved", "last_token")

    def __init__(self, request_id: int, slot: int, prompt_len: int, max_new: int) -> None:
        self.request_id = request_id
        self.slot = slot
        self.n_past = 0            # tokens already in the KV cache (positions 0 .. n_past-1)
        self.generated = 0
        self.max_new = max_new
        self.reserved = prompt_len + max_new
        self.last_token = -1       # the token sampled last step, fed at position n_past next step


def _llama() -> Any:
    return require("llama_cpp", "llm", "LlamaCppEngine")


# ggml_log_level of the llama.cpp that llama-cpp-python >= 0.3.36 vendors (ggml.h); 5 continues the
# previous line.  llama-cpp-python's own log callback still maps the older enum (a warning shows as an
# error, an error as debug), so the engine installs this one.
_GGML_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_GGML_CONT = 5
_log = logging.getLogger("pard.llama_cpp")
_log_state: dict[str, Any] = {"callback": None, "verbose": False, "last": logging.DEBUG}


def _route_log(lib: Any, verbose: bool) -> None:
    """Send llama.cpp's log to the logger ``"pard.llama_cpp"``: every line when ``verbose``, else
    errors only (a tiny model's load warns about its tokenizer, which the engine never uses)."""
    _log_state["verbose"] = verbose
    if _log_state["callback"] is not None:
        return

    def forward(level: int, text: bytes, _user: Any) -> None:
        lvl = _log_state["last"] if level == _GGML_CONT else _GGML_LEVELS.get(level, logging.INFO)
        _log_state["last"] = lvl
        if _log_state["verbose"] or lvl >= logging.ERROR:
            _log.log(lvl, "%s", text.decode("utf-8", "replace").rstrip("\n"))

    _log_state["callback"] = lib.llama_log_callback(forward)   # kept alive: llama.cpp holds the pointer
    lib.llama_log_set(_log_state["callback"], ctypes.c_void_p(0))


def llama_cpp_available() -> bool:
    """True when llama-cpp-python imports (its shared library included)."""
    try:
        _llama()
    except ImportError:
        return False
    return True


def _int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise PardTypeError(f"LlamaCppEngine: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise PardValueError(f"LlamaCppEngine: {name} must be {bound}, got {value!r}")
    return int(value)


class _Memory:
    """The per-sequence KV calls of the installed llama-cpp-python (the memory API, or the older
    KV-cache one it replaced)."""

    def __init__(self, lib: Any, ctx: Any) -> None:
        if hasattr(lib, "llama_memory_seq_rm"):
            handle, prefix = lib.llama_get_memory(ctx), "llama_memory"
        elif hasattr(lib, "llama_kv_self_seq_rm"):
            handle, prefix = ctx, "llama_kv_self"
        else:
            handle, prefix = ctx, "llama_kv_cache"
        self._handle = handle
        self._rm = getattr(lib, f"{prefix}_seq_rm")
        self._pos_max = getattr(lib, f"{prefix}_seq_pos_max")

    def remove(self, slot: int, start: int = -1) -> None:
        """Drop the sequence's cells from position ``start`` on (-1: all of them, which never fails)."""
        self._rm(self._handle, slot, start, -1)

    def tokens(self, slot: int) -> int:
        """Cells the sequence holds: positions are contiguous from 0, so the highest one plus 1."""
        return int(self._pos_max(self._handle, slot)) + 1


class _Batch:
    """A ``llama_batch`` over caller-owned NumPy arrays, filled with vector writes (no per-token ctypes
    call, so a step's measured cost is llama.cpp's); every token belongs to one sequence."""

    def __init__(self, lib: Any, capacity: int) -> None:
        self.token = np.zeros(capacity, np.int32)
        self.pos = np.zeros(capacity, np.int32)
        self.n_seq_id = np.ones(capacity, np.int32)
        self.seq = np.zeros(capacity, np.int32)
        self.logits = np.zeros(capacity, np.int8)
        # seq_id[i] points at seq[i]: llama_batch wants one id list per token
        self.seq_ptrs = self.seq.ctypes.data + 4 * np.arange(capacity, dtype=np.uint64)
        i32 = ctypes.POINTER(ctypes.c_int32)
        self.struct = lib.llama_batch(
            n_tokens=0, token=self.token.ctypes.data_as(i32), embd=None,
            pos=self.pos.ctypes.data_as(i32), n_seq_id=self.n_seq_id.ctypes.data_as(i32),
            seq_id=ctypes.cast(self.seq_ptrs.ctypes.data, ctypes.POINTER(i32)),
            logits=self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)))


class LlamaCppEngine:
    """A llama.cpp model serving up to ``max_seqs`` sequences with one batched decode per step.

    Args:
        model_path: a GGUF model file (e.g. :func:`pard.models.tiny_llama.write_tiny_llama`'s).
        max_seqs: most sequences running together (the stage's ``max_seqs``), 1 .. llama.cpp's limit.
        context: KV cache size in tokens, shared by the running sequences (the stage's
            ``kv_tokens`` for one worker); also the most tokens one sequence may reserve.
        threads: CPU threads llama.cpp uses for a step (>= 1).
        seed: seeds the synthetic prompts (with the request id) and sampling when ``temperature > 0``.
        temperature: 0 (default) samples the most likely token (greedy); > 0 samples from the
            softmax of logits / temperature with a seeded generator.
        verbose: pass llama.cpp's whole log (loading, buffer sizes, warnings) to the logger
            ``"pard.llama_cpp"``; False passes its errors only.  llama.cpp has one log for the
            process, so the last engine made decides (see :func:`_route_log`).

    Raises:
        pard.ConfigError: ``model_path`` is missing or llama.cpp cannot load it or make a context.
        pard.errors.PardValueError / PardTypeError: a bad option (the message names it).
        pard.errors.MissingExtraError: llama-cpp-python is not installed (``pip install 'pard[llm]'``).
    """

    def __init__(self, model_path: str | os.PathLike[str], *, max_seqs: int = 8, context: int = 2048,
                 threads: int = 1, seed: int = 0, temperature: float = 0.0, verbose: bool = False) -> None:
        self._model = self._ctx = None
        path = Path(model_path)
        context = _int("context", context, 16, 1 << 22)
        threads = _int("threads", threads, 1, 1024)
        self._seed = _int("seed", seed, 0)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
                math.isfinite(temperature) and temperature >= 0):
            raise PardValueError(f"LlamaCppEngine: temperature must be a finite number >= 0, got {temperature!r}")
        if not path.is_file():
            raise ConfigError(f"LlamaCppEngine: model file {str(path)!r} does not exist")
        lib = self._lib = _llama()
        _route_log(lib, bool(verbose))
        limit = int(lib.llama_max_parallel_sequences()) if hasattr(lib, "llama_max_parallel_sequences") \
            else _MAX_SEQ_FALLBACK
        self._max_seqs = _int("max_seqs", max_seqs, 1, limit)
        self._context = context
        self._temperature = float(temperature)
        self._rng = np.random.default_rng(self._seed)

        lib.llama_backend_init()
        mparams = lib.llama_model_default_params()
        mparams.n_gpu_layers = 0  # the CPU engine: its cost model is measured on the cores it gets
        self._model = lib.llama_model_load_from_file(str(path).encode(), mparams)
        if not self._model:
            raise ConfigError(f"LlamaCppEngine: llama.cpp could not load {str(path)!r} as a GGUF model")
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = context
        cparams.n_batch = context    # a step holds at most what the running sequences reserved
        cparams.n_seq_max = self._max_seqs
        cparams.n_threads = cparams.n_threads_batch = threads
        cparams.no_perf = True
        if hasattr(cparams, "kv_unified"):
            cparams.kv_unified = True  # one cache shared by all sequences, like a KV budget in tokens
        self._ctx = lib.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            self.close()
            raise ConfigError(f"LlamaCppEngine: llama.cpp could not make a context of {context} tokens "
                              f"for {self._max_seqs} sequences from {str(path)!r}")
        self._n_vocab = int(lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self._model)))
        self._memory = _Memory(lib, self._ctx)
        self._batch = _Batch(lib, context)
        self._running: dict[int, _Seq] = {}   # request id -> sequence, in join order
        self._free_slots = list(range(self._max_seqs - 1, -1, -1))  # pop() gives the lowest id
        self._decode_calls = 0
        self._last_step_s = 0.0
        self._path = path

    # ---- read-only state ----
    @property
    def max_seqs(self) -> int:
        """Most sequences running together."""
        return self._max_seqs

    @property
    def context(self) -> int:
        """KV cache size in tokens, shared by the running sequences."""
        return self._context

    @property
    def n_vocab(self) -> int:
        """The model's vocabulary size; prompt token ids are in ``[0, n_vocab)``."""
        return self._n_vocab

    @property
    def decode_calls(self) -> int:
        """``llama_decode`` calls made so far: one per step that had a sequence to run."""
        return self._decode_calls

    @property
    def last_step_s(self) -> float:
        """Wall seconds of the last step's decode and sampling (0.0 before the first step)."""
        return self._last_step_s

    def running(self) -> list[int]:
        """The request ids of the running sequences, in the order they joined."""
        return list(self._running)

    def kv_tokens_used(self) -> int:
        """KV cells the running sequences hold now, as llama.cpp's cache reports them (tokens)."""
        self._check_open()
        return sum(self._memory.tokens(s.slot) for s in self._running.values())

    def kv_tokens_reserved(self) -> int:
        """Tokens the running sequences reserved (prompt + max_new each); at most :attr:`context`."""
        return sum(s.reserved for s in self._running.values())

    def __repr__(self) -> str:
        state = "closed" if self._ctx is None else f"running={len(self._running)}/{self._max_seqs}"
        return (f"LlamaCppEngine({self._path.name!r}, context={self._context}, {state}, "
                f"decode_calls={self._decode_calls})")

    # ---- the step ----
    def step(self, joins: Iterable[Join] = (), stops: Iterable[int] = ()) -> list[StepResult]:
        """Stop ``stops``, admit ``joins`` and run one decode step over every running sequence.

        Args:
            joins: ``(request_id, prompt, max_new)`` per joiner: ``prompt`` a list of token ids in
                ``[0, n_vocab)`` or an int, that many synthetic byte tokens (>= 1 either way);
                ``max_new`` the tokens it will produce (>= 1), the first in this step.
            stops: request ids of running sequences to abort now: their KV is freed before the
                decode, and they are never returned again.

        Returns:
            One :class:`StepResult` per sequence that ran this step (the running ones in join
            order, then the admitted joiners in the given order), then one per refused joiner
            (:meth:`StepResult.refused` with a :class:`~pard.errors.PromptRefused`, in the given order);
            ``[]`` when none runs and none was
            refused (no decode is made).  A joiner is refused, and the others still run, when its
            ``max_new`` is not an int >= 1, its prompt is empty, has a token id outside
            ``[0, n_vocab)`` or is not a flat list of ints, its ``prompt + max_new`` exceeds
            ``context``, or it does not fit beside the sequences admitted before it (``max_seqs``
            sequences, ``context`` KV tokens reserved).

        Raises:
            pard.errors.PardValueError: an id in ``stops`` that is not running or listed twice; a
                joiner id already running (after the stops) or listed twice.  Nothing changes then.
            pard.errors.PardTypeError: an id that is not an int, or a join that is not a triple.
            pard.errors.RuntimeStateError: the engine is closed.
            pard.ExecutorError: llama.cpp's decode failed (the joiners are not admitted, the running
                sequences are as before the step; the stops stand).
        """
        self._check_open()
        stop_ids = self._check_stops(stops)
        joiners, refused = self._check_joins(joins, stop_ids)
        for rid in stop_ids:
            self._release(self._running.pop(rid))
        if not self._running and not joiners:
            self._last_step_s = 0.0
            return refused
        start = time.perf_counter()
        batch, n = self._batch, 0
        outputs: list[tuple[_Seq, int]] = []
        for seq in self._running.values():
            batch.token[n], batch.pos[n], batch.seq[n], batch.logits[n] = seq.last_token, seq.n_past, seq.slot, 1
            outputs.append((seq, n))
            n += 1
        new: list[_Seq] = []
        for rid, prompt, max_new in joiners:
            seq = _Seq(rid, self._free_slots.pop(), len(prompt), max_new)
            k = len(prompt)
            batch.token[n:n + k] = prompt
            batch.pos[n:n + k] = np.arange(k, dtype=np.int32)
            batch.seq[n:n + k] = seq.slot
            batch.logits[n:n + k - 1] = 0
            batch.logits[n + k - 1] = 1
            n += k
            seq.n_past = k - 1   # the step below adds the one token every sequence feeds
            new.append(seq)
            outputs.append((seq, n - 1))
        batch.struct.n_tokens = n
        self._decode_calls += 1
        rc = self._lib.llama_decode(self._ctx, batch.struct)
        if rc != 0:
            for seq in new:
                self._release(seq)
            # a fatal or aborted decode keeps the ubatches it finished: cut the running sequences back
            # to the cells the engine counts, so the next step's positions continue them
            for seq in self._running.values():
                self._memory.remove(seq.slot, seq.n_past)
            raise ExecutorError(f"LlamaCppEngine: llama_decode returned {rc} for a step of {n} tokens "
                                f"({len(self._running)} running, {len(new)} joining)")
        for seq in new:
            self._running[seq.request_id] = seq
        results = [self._advance(seq, index) for seq, index in outputs]
        self._last_step_s = time.perf_counter() - start
        return results + refused

    def _advance(self, seq: _Seq, index: int) -> StepResult:
        """Sample the sequence's next token from its logits at batch row ``index``; retire it when done."""
        row = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self._ctx, index), shape=(self._n_vocab,))
        if self._temperature == 0.0:
            token = int(np.argmax(row))
        else:
            z = row.astype(np.float64) / self._temperature
            p = np.exp(z - z.max())
            token = int(self._rng.choice(self._n_vocab, p=p / p.sum()))
        seq.n_past += 1
        seq.generated += 1
        seq.last_token = token
        done = seq.generated >= seq.max_new
        if done:
            self._release(self._running.pop(seq.request_id))
        return StepResult(seq.request_id, seq.generated, done, token)

    def _release(self, seq: _Seq) -> None:
        self._memory.remove(seq.slot)
        self._free_slots.append(seq.slot)
        self._free_slots.sort(reverse=True)

    def _check_stops(self, stops: Iterable[int]) -> list[int]:
        ids: list[int] = []
        for rid in stops:
            rid = _int("stops: request id", rid, -(1 << 63))
            if rid not in self._running:
                raise PardValueError(f"LlamaCppEngine.step: stops names request {rid}, which is not running "
                                     f"(running: {sorted(self._running)})")
            if rid in ids:
                raise PardValueError(f"LlamaCppEngine.step: stops lists request {rid} twice")
            ids.append(rid)
        return ids

    def _check_joins(self, joins: Iterable[Join], stop_ids: list[int]
                     ) -> tuple[list[tuple[int, np.ndarray, int]], list[StepResult]]:
        """The joiners to admit, and a refusal per joiner the engine cannot take (see :meth:`step`)."""
        out: list[tuple[int, np.ndarray, int]] = []
        refused: list[StepResult] = []
        seen: set[int] = set()
        reserved = self.kv_tokens_reserved() - sum(self._running[r].reserved for r in stop_ids)
        running = len(self._running) - len(stop_ids)
        for item in joins:
            if not isinstance(item, (tuple, list)) or len(item) != 3:
                raise PardTypeError(f"LlamaCppEngine.step: a join must be (request_id, prompt, max_new), got {item!r}")
            rid = _int("join: request id", item[0], -(1 << 63))
            if rid in seen or (rid in self._running and rid not in stop_ids):
                raise PardValueError(f"LlamaCppEngine.step: request {rid} joins twice (it is running or "
                                     f"listed twice in joins)")
            seen.add(rid)
            try:
                max_new = _int(f"join {rid}: max_new", item[2], 1)
                prompt = self._prompt(rid, item[1])
                need = len(prompt) + max_new
                if need > self._context:
                    raise PardValueError(f"LlamaCppEngine.step: request {rid}'s prompt of {len(prompt)} tokens + "
                                         f"max_new {max_new} exceeds the context of {self._context} tokens")
                if running + 1 > self._max_seqs:
                    raise PardValueError(f"LlamaCppEngine.step: request {rid} would be sequence {running + 1} "
                                         f"running together, more than max_seqs {self._max_seqs}")
                if reserved + need > self._context:
                    raise PardValueError(f"LlamaCppEngine.step: request {rid} reserves {need} KV tokens (prompt + "
                                         f"max_new) beside {reserved} reserved, more than the context of "
                                         f"{self._context}")
            except (PardValueError, PardTypeError) as e:
                # the result carries rid; the reason reads without it (under pard it is an internal key, not
                # the request id a client sees)
                why = str(e).replace(f"request {rid}", "the request").replace(f"join {rid}", "the join")
                refused.append(StepResult.refused(rid, PromptRefused(why)))
                continue
            reserved += need
            running += 1
            out.append((rid, prompt, max_new))
        return out, refused

    def _prompt(self, rid: int, prompt: Any) -> np.ndarray:
        """The joiner's prompt token ids: the given list, checked, or ``prompt`` synthetic byte tokens."""
        if isinstance(prompt, (int, np.integer)) and not isinstance(prompt, bool):
            n = _int(f"join {rid}: prompt length", prompt, 1, self._context)
            gen = np.random.default_rng([self._seed, rid & ((1 << 63) - 1)])
            return gen.integers(0, min(_SYNTHETIC_VOCAB, self._n_vocab), n, dtype=np.int32)
        try:
            tokens = np.asarray(prompt)
        except (TypeError, ValueError) as exc:
            raise PardTypeError(f"LlamaCppEngine.step: join {rid}'s prompt must be a list of token ids or a "
                                f"count, got {type(prompt).__name__}") from exc
        if tokens.ndim != 1 or not (tokens.size == 0 or np.issubdtype(tokens.dtype, np.integer)):
            raise PardTypeError(f"LlamaCppEngine.step: join {rid}'s prompt must be a flat list of int token "
                                f"ids or a count, got {prompt!r:.80}")
        if tokens.size == 0:
            raise PardValueError(f"LlamaCppEngine.step: join {rid}'s prompt is empty (it needs >= 1 token)")
        bad = (tokens < 0) | (tokens >= self._n_vocab)
        if bad.any():
            raise PardValueError(f"LlamaCppEngine.step: join {rid}'s prompt has token id {int(tokens[bad][0])}, "
                                 f"outside the vocabulary [0, {self._n_vocab})")
        return tokens.astype(np.int32)

    # ---- lifetime ----
    def _check_open(self) -> None:
        if self._ctx is None:
            raise RuntimeStateError("LlamaCppEngine is closed")

    def close(self) -> None:
        """Free the context and the model (idempotent); the engine cannot step afterwards."""
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        if self._ctx is not None:
            lib.llama_free(self._ctx)
            self._ctx = None
        if self._model is not None:
            lib.llama_model_free(self._model)
            self._model = None
        self._running = {}

    def __enter__(self) -> LlamaCppEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown may have torn down llama_cpp already
            pass
