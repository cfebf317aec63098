"""What an LLM stage's engine is to pard (DESIGN §3.8), and an engine that costs what its spec says.

An LLM stage's worker does not call a batch executor: it steps an *engine* (:class:`LlmEngine`) between
step boundaries, ``engine.step(joins, stops)``, and pard decides at every boundary which sequences stop
and which join (``pard/live/llm_steps.hpp``, the simulator's step rule).  :class:`pard.executors.LlamaCppEngine`
is one (llama.cpp, a real model); :class:`ProfiledLlmEngine` is another: it sleeps its stage spec's
``prefill`` and ``decode`` cost per step, what a GPU engine costs the host (no CPU), for tests and for
comparing the live runtime with the simulator on the same cost model.

Neighbours: :mod:`.llama_cpp` (the real engine and :class:`StepResult`), :mod:`pard.runtime.llm_workers`
(the worker loop).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, Union, runtime_checkable

from ..errors import ConfigError, PardValueError, PromptRefused
from .llama_cpp import StepResult

__all__ = ["LlmEngine", "ProfiledLlmEngine", "is_llm_engine", "profiled_llm"]

#: One joiner: ``(request_id, prompt, max_new)``, the prompt a list of token ids or a token count.
Join = tuple[int, Union[Sequence[int], int], int]


@runtime_checkable
class LlmEngine(Protocol):
    """The LLM executor protocol: an engine that pard steps at token boundaries.

    ``max_seqs`` is the most sequences it runs together.  ``step(joins, stops)`` frees ``stops`` (request
    ids running in it) at once, admits ``joins`` (``(request_id, prompt, max_new)``: the joiner produces
    exactly ``max_new`` tokens, the first in this step), runs one step over every running sequence and
    returns one :class:`StepResult` per sequence that ran (``done`` at its ``max_new``-th token, when it
    leaves); ``[]`` when none runs.  A joiner it cannot take (a prompt it refuses) it leaves out and
    returns as :meth:`StepResult.refused` with the reason: pard ends that request ``failed`` with it and
    the step's other sequences carry on (a :class:`pard.errors.PromptRefused` reason's message is shown to
    a served client; another exception's only with ``server.error_detail``).  It may raise; pard then
    fails every sequence of the step.
    """

    @property
    def max_seqs(self) -> int: ...

    def step(self, joins: Iterable[Join] = (), stops: Iterable[int] = ()) -> list[StepResult]: ...

    def close(self) -> None: ...


def is_llm_engine(x: Any) -> bool:
    """True when ``x`` satisfies :class:`LlmEngine` (has ``max_seqs`` and ``step``)."""
    return isinstance(x, LlmEngine)


class ProfiledLlmEngine:
    """An :class:`LlmEngine` that sleeps each step's cost from an llm stage spec and produces token 0.

    A step with ``n`` sequences running after its joins lasts ``decode(n)`` plus each joiner's
    ``prefill.base + prefill.per_token * prompt tokens`` (s), the simulator's step cost without its
    jitter.  Thread-safe per instance (one lock); one instance per worker.

    Args:
        stage: a :class:`pard.StageSpec` of kind ``llm``.
    Raises:
        pard.ConfigError: ``stage`` is not an llm stage.
    """

    def __init__(self, stage: Any) -> None:
        if getattr(stage, "kind", None) != "llm" or not stage.decode or not stage.prefill:
            raise ConfigError(f"ProfiledLlmEngine: stage {getattr(stage, 'name', stage)!r} must be of kind 'llm' "
                              f"with prefill and decode, got kind={getattr(stage, 'kind', None)!r}")
        from .. import _core

        pts = sorted((int(b), float(d)) for b, d in stage.decode.items())
        self._decode = _core.Profile([b for b, _ in pts], [d for _, d in pts])
        self._base = float(stage.prefill["base"])
        self._per_token = float(stage.prefill["per_token"])
        self._max_seqs = int(stage.max_seqs)
        self._running: dict[int, list[int]] = {}  # id -> [generated, max_new]
        self._lock = threading.Lock()
        self.steps = 0  #: steps that ran (a decode over >= 1 sequence)

    @property
    def max_seqs(self) -> int:
        """The most sequences running together (the spec's ``max_seqs``)."""
        return self._max_seqs

    @property
    def running(self) -> list[int]:
        """Ids of the running sequences, in join order."""
        return list(self._running)

    def step(self, joins: Iterable[Join] = (), stops: Iterable[int] = ()) -> list[StepResult]:
        """Stop ``stops``, admit ``joins``, sleep the step's cost; one :class:`StepResult` per running sequence,
        then one :meth:`StepResult.refused` per joiner with ``max_new < 1`` or past ``max_seqs``.

        Raises:
            pard.errors.PardValueError: a stop that is not running, or a joiner already running (nothing
                changes then).
        """
        with self._lock:
            stops = list(stops)
            joins = list(joins)
            for rid in stops:
                if rid not in self._running:
                    raise PardValueError(f"ProfiledLlmEngine.step: stop {rid} is not running")
            left = len(self._running) - len(set(stops))
            prefill = 0.0
            admitted: list[tuple[int, int]] = []
            refused: list[StepResult] = []
            for rid, prompt, max_new in joins:
                if rid in self._running and rid not in stops:
                    raise PardValueError(f"ProfiledLlmEngine.step: joiner {rid} is already running")
                if int(max_new) < 1:
                    why = f"max_new={max_new!r} must be >= 1"
                elif left + len(admitted) >= self._max_seqs:
                    why = f"it would be sequence {left + len(admitted) + 1}, more than max_seqs={self._max_seqs}"
                else:
                    n_in = prompt if isinstance(prompt, int) else len(prompt)
                    prefill += self._base + self._per_token * n_in
                    admitted.append((rid, int(max_new)))
                    continue
                refused.append(StepResult.refused(rid, PromptRefused(f"ProfiledLlmEngine.step: the joiner: {why}")))
            for rid in stops:
                del self._running[rid]
            for rid, max_new in admitted:
                self._running[rid] = [0, max_new]
            if not self._running:
                return refused
            cost = self._decode.duration(len(self._running)) + prefill
            self.steps += 1
            out = []
            for rid, seq in list(self._running.items()):
                seq[0] += 1
                done = seq[0] >= seq[1]
                out.append(StepResult(rid, seq[0], done, 0))
                if done:
                    del self._running[rid]
        time.sleep(cost)
        return out + refused

    def close(self) -> None:
        """Forget every running sequence.  Idempotent."""
        with self._lock:
            self._running.clear()

    def __repr__(self) -> str:
        return f"ProfiledLlmEngine(max_seqs={self._max_seqs}, running={len(self._running)})"


def profiled_llm(stage: Any) -> Callable[[], ProfiledLlmEngine]:
    """A factory of one :class:`ProfiledLlmEngine` per worker of llm stage ``stage``: the stand-in an llm
    stage gets where the DNN stages get pard's reference models (no ``stages=`` given).

    Raises: pard.ConfigError when ``stage`` is not an llm stage with prefill and decode.
    """
    ProfiledLlmEngine(stage)  # refuses a stage that is not one now, not in a worker thread later
    return functools.partial(ProfiledLlmEngine, stage)
