"""Stage models for the built-in pipelines: what ``pard run`` and ``pard profile`` execute.

Two kinds, one interface (a batch ``(B, *input_shape)`` in, ``(B, *output_shape)`` out, images and
feature maps channels-last, a join stage fed :func:`join_inputs` of its predecessors' outputs):

* :mod:`.reference` -- NumPy/CuPy networks written as array code (``pard run --models numpy``);
* :mod:`.onnx` -- small convolutional ONNX graphs of the stage's kind (detector backbone, classifier,
  recogniser), built with the ``onnx`` helper API, run by ONNX Runtime (``pard run`` by default;
  extra ``pard[onnx]``);
* :mod:`.tiny_llama` -- a small llama written as a GGUF file for the LLM stage's llama.cpp engine
  (:func:`write_tiny_llama`; extra ``pard[llm]``), outside this interface: it decodes token by token.

Weights are random (seeded): no weights can be downloaded, and pard measures cost, not accuracy.
"""

from __future__ import annotations

from .._lazy import lazy_attributes

from dataclasses import dataclass
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
    "StageSet",
    "stage_set",
    "engine_description",
    "onnx_installed",
    "write_tiny_llama",
]

_LAZY = {"OnnxStageModel": "pard.models.onnx", "onnx_models": "pard.models.onnx",
         "ONNX_INPUT_SHAPE": "pard.models.onnx", "write_tiny_llama": "pard.models.tiny_llama"}

#: The model sets ``pard run --models`` accepts.
MODEL_KINDS = ("onnx", "numpy")


@dataclass
class StageSet:
    """A pipeline's stage executors of one model kind, ready for :class:`pard.Runtime` and the profiler.

    Attributes:
        kind: ``"onnx"`` or ``"numpy"`` (:data:`MODEL_KINDS`).
        executors: stage name -> executor.
        input_shapes: stage name -> one request's input shape at that stage.
        join: the DAG join (:func:`join_inputs`).
        engine: what runs the models, in words (for ``pard run``'s sizing line).
    """

    kind: str
    executors: dict[str, Any]
    input_shapes: dict[str, tuple[int, ...]]
    join: Any
    engine: str

    @property
    def entry_shape(self) -> tuple[int, ...]:
        """The input shape of the first stage (a request's payload)."""
        return next(iter(self.input_shapes.values()))


def onnx_installed() -> bool:
    """True when the ONNX stage models can be built and run (onnx and onnxruntime import)."""
    from .._extras import available

    return available("onnx") and available("onnxruntime")


def engine_description(kind: str) -> str:
    """What runs the built-in models of ``kind`` on this machine, in words (``pard run``'s sizing line)."""
    if kind == "onnx":
        from ..executors.onnx import cuda_provider_available

        where = "with the CUDA provider" if cuda_provider_available() else "on the CPU"
        return f"ONNX Runtime {where}, one session per worker"
    from ..executors import gpu_available

    return "CuPy on the GPU, one CUDA stream per worker" if gpu_available() else "NumPy on the CPU"


def stage_set(pipeline: Any, kind: str = "onnx", *, scale: float = 1.0, seed: int = 0) -> StageSet:
    """The built-in stage models of ``kind`` for ``pipeline``, each in its executor.

    ``"onnx"``: :func:`onnx_models` in :class:`pard.executors.OnnxExecutor` (CUDA provider where
    present); ``"numpy"``: :func:`reference_models` in :class:`pard.executors.ArrayExecutor` (CuPy
    on a GPU).  ``pipeline`` is a PipelineSpec or a built-in name; an exit stage's outputs come
    back to the host.  An llm stage gets a factory of llama.cpp engines running the tiny llama
    (:func:`pard.profiling.llm.tiny_llm_engine`, extra ``pard[llm]``), one engine per worker.

    Raises:
        pard.ConfigError: ``kind`` is not one of :data:`MODEL_KINDS`, or a bad ``scale``.
        ImportError: ``"onnx"`` without the onnx/onnxruntime packages (``pip install 'pard[onnx]'``), or
            an llm stage without llama-cpp-python and gguf (``pip install 'pard[llm]'``).
    """
    from ..errors import ConfigError

    if kind not in MODEL_KINDS:
        raise ConfigError(f"models must be one of {', '.join(MODEL_KINDS)}, got {kind!r}")
    if isinstance(pipeline, str):
        from ..config import builtin

        pipeline = builtin(pipeline)
    if kind == "onnx":
        from ..executors.onnx import OnnxExecutor
        from .onnx import onnx_models

        models = onnx_models(pipeline, scale=scale, seed=seed)
        executors: dict[str, Any] = {n: OnnxExecutor(m.path, payload_shape=m.input_shape, name=n)
                                     for n, m in models.items()}
        shapes = {n: tuple(m.input_shape) for n, m in models.items()}
    else:
        from ..executors import ArrayExecutor

        ref = reference_models(pipeline, scale=scale, seed=seed)
        entries = set(pipeline.entry_stages())
        executors = {n: ArrayExecutor(m, payload_shape=m.input_shape if n in entries else None,
                                      to_host=not pipeline.stage(n).successors) for n, m in ref.items()}
        shapes = {n: tuple(m.input_shape) for n, m in ref.items()}
    for st in pipeline.stages:  # an llm stage steps an engine at token boundaries, not a batch model
        if getattr(st, "kind", "dnn") == "llm":
            from ..profiling.llm import tiny_llm_engine

            executors[st.name] = tiny_llm_engine(st, seed=seed)
    return StageSet(kind, executors, shapes, join_inputs, engine_description(kind))


__getattr__, __dir__ = lazy_attributes("pard.models", _LAZY, globals())
