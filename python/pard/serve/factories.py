"""Stage executor factories for served-pipeline files (``executor: pard.serve.factories:NAME``).

* :func:`reference_model` -- one stage of pard's seeded NumPy reference networks
  (:func:`pard.models.reference_models`), in an :class:`pard.ArrayExecutor`;
* :func:`sleep_profile` -- a stage that takes exactly its profile's ``d(b)`` per batch (sleeping,
  so it uses no CPU) and returns its payloads: a stand-in model for tests and overhead benchmarks,
  where the runtime's and the HTTP front's costs must not hide behind model compute;
* :func:`profiled_llm` -- an llm stage's stand-in engine that sleeps its spec's step costs
  (:class:`pard.executors.ProfiledLlmEngine`, one per worker).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..config import resolve_pipeline
from ..errors import ConfigError
from ..executors import ArrayExecutor
from ..models import INPUT_SHAPE, reference_models
from .config import ServeConfigError, sample_payload

__all__ = ["profiled_llm", "reference_model", "sleep_profile", "warm_up"]

_MODELS: dict[tuple[str, float, int], dict[str, Any]] = {}
_MODELS_LOCK = threading.Lock()


def reference_model(*, stage: Any, pipeline: Any, scale: float = 1.0, seed: int = 0,
                    shaped_like: str | None = None) -> Any:
    """Stage ``stage`` of :func:`pard.models.reference_models` (``scale``, ``seed``) in an ArrayExecutor.

    The networks' widths follow the stages' relative costs in a pipeline's profile: by default the
    served pipeline's; ``shaped_like`` names another (a built-in such as ``"tm"``, or a spec file) with
    the same stages.  A file that serves a measured profile names the pipeline the measurement built
    its models from, so that it serves exactly the networks ``pard profile --pipeline NAME --models
    numpy`` timed (otherwise the measured profile reshapes the networks it describes).

    Entry stages declare :data:`pard.models.INPUT_SHAPE` as their payload shape; exit stages copy
    their outputs to the host.  The models of one pipeline are built once per ``(scale, seed)``.

    Raises: ConfigError when ``shaped_like`` is not a pipeline with the served pipeline's stages.
    """
    shape = pipeline
    if shaped_like is not None:
        shape = resolve_pipeline(shaped_like)
        if shape.stage_names != pipeline.stage_names:
            raise ConfigError(f"reference_model: shaped_like={shaped_like!r} has stages {shape.stage_names}, "
                              f"the served pipeline {pipeline.stage_names}")
    key = (str(shape.name) if shaped_like is None else f"shaped_like:{shaped_like}", float(scale), int(seed))
    with _MODELS_LOCK:
        models = _MODELS.get(key)
        if models is None:
            models = _MODELS[key] = reference_models(shape, scale=scale, seed=seed)
    entry = stage.name in pipeline.entry_stages()
    return ArrayExecutor(models[stage.name], payload_shape=INPUT_SHAPE if entry else None,
                         to_host=not stage.successors)


class _Sleeper:
    """Sleeps ``factor * d(b)`` for a batch of ``b`` and returns the payloads (see :func:`sleep_profile`)."""

    def __init__(self, stage: Any, factor: float) -> None:
        self.stage = stage
        self.factor = factor

    def __call__(self, payloads: list[Any]) -> list[Any]:
        time.sleep(self.factor * float(self.stage.duration(len(payloads))))
        return list(payloads)

    def __repr__(self) -> str:
        return f"sleep_profile({self.stage.name!r}, factor={self.factor})"


def sleep_profile(*, stage: Any, factor: float = 1.0) -> Any:
    """An executor that sleeps ``factor * d(b)`` (the stage's profile) per batch and echoes its payloads.

    Raises: ConfigError when ``factor`` is not a finite number >= 0.
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (math.isfinite(factor) and factor >= 0):
        raise ConfigError(f"sleep_profile: factor must be a finite number >= 0, got {factor!r}")
    return _Sleeper(stage, float(factor))


def profiled_llm(*, stage: Any) -> Any:
    """A factory of one :class:`pard.executors.ProfiledLlmEngine` per worker of llm stage ``stage`` (it
    sleeps the stage's prefill and decode costs and generates token 0).

    Raises: ConfigError when ``stage`` is not an llm stage.
    """
    from ..executors.llm_engine import profiled_llm as factory

    return factory(stage)


def warm_up(spec: Any, inputs: list[Any], executors: Mapping[str, Any], join: Any, source: str) -> dict[str, Any]:
    """Run one zero payload of ``inputs`` through every stage of ``spec`` in topological order (first calls
    are slow: caches, BLAS); returns each stage's output.  Skipped ({}) while the input shape is unknown;
    an llm stage, which runs only in the runtime's step loop, and the stages below it are not warmed.

    Raises: ServeConfigError naming the file ``source`` and the stage whose warm-up batch raised.
    """
    payload = sample_payload(inputs) if inputs else None
    if payload is None:
        return {}
    order = spec.topological_order()
    outs: dict[str, Any] = {}
    for name in order:
        preds = spec.predecessors(name)
        if spec.stage(name).kind == "llm" or any(p not in outs for p in preds):
            continue
        if not preds:
            x = payload
        elif len(preds) == 1:
            x = outs[preds[0]]
        else:
            x = (join or tuple)([outs[p] for p in sorted(preds, key=order.index)])
        try:
            outs[name] = list(executors[name]([x]))[0]
        except Exception as exc:  # a broken model or factory: say which stage, before serving
            raise ServeConfigError(f"{source}: stages.{name}: the warm-up batch raised "
                                   f"{type(exc).__name__}: {exc}") from exc
    return outs
