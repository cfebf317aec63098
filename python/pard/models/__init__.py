"""Stage models for the built-in pipelines: what ``pard run`` and ``pard profile`` execute.

Two kinds, one interface (a batch ``(B, *input_shape)`` in, ``(B, *output_shape)`` out, images and
feature maps channels-last, a join stage fed :func:`join_inputs` of its predecessors' outputs):

* :mod:`.reference` -- NumPy/CuPy networks written as array code (``pard run --models numpy``);
* :mod:`.onnx` -- small convolutional ONNX graphs of the stage's kind (detector backbone, classifier,
  recogniser), built with the ``onnx`` helper API, run by ONNX Runtime (``pard run`` by default;
  extra ``pard[onnx]``).

Weights are random (seeded): no weights can be downloaded, and pard measures cost, not accuracy.
"""

from __future__ import annotations

import importlib
from typing import Any

from .reference import INPUT_SHAPE, StageModel, array_module, join_inputs, reference_models, sample_inputs

__all__ = [
    "INPUT_SHAPE",
    "StageModel",
    "array_module",
    "reference_models",
    "sample_inputs",
    "join_inputs",
    "OnnxStageModel",
    "onnx_models",
    "ONNX_INPUT_SHAPE",
    "MODEL_KINDS",
]

_LAZY = {"OnnxStageModel": "pard.models.onnx", "onnx_models": "pard.models.onnx",
         "ONNX_INPUT_SHAPE": "pard.models.onnx"}

#: The model sets ``pard run --models`` accepts.
MODEL_KINDS = ("onnx", "numpy")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pard.models' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
