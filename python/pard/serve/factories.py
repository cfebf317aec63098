"""Stage executor factories for served-pipeline files (``executor: pard.serve.factories:NAME``).

* :func:`reference_model` -- one stage of pard's seeded NumPy reference networks
  (:func:`pard.models.reference_models`), in an :class:`pard.ArrayExecutor`;
* :func:`sleep_profile` -- a stage that takes exactly its profile's ``d(b)`` per batch (sleeping,
  so it uses no CPU) and returns its payloads: a stand-in model for tests and overhead benchmarks,
  where the runtime's and the HTTP front's costs must not hide behind model compute.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from ..config import resolve_pipeline
from ..errors import ConfigError
from ..executors import ArrayExecutor
from ..models import INPUT_SHAPE, reference_models

__all__ = ["reference_model", "sleep_profile"]

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
