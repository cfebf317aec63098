"""Stage executors: what a worker of the live runtime calls to run one batch.

An *executor* is any object with ``__call__(payloads: list) -> Sequence`` that takes a batch's
payloads (one per request, in the batch's service order) and returns one output per request, in the
same order.  :class:`pard.Runtime` calls it from the stage's worker threads, one batch at a time per
worker, and treats an exception as the failure of that batch only: its requests end in state
``failed`` with the error, and the worker carries on with its next batch.

Executors shipped (pard decides every batch's members and drops; the executor only runs it):

* :class:`ArrayExecutor` (:mod:`.array`) -- NumPy/CuPy array models: stack, compute once, split;
  CuPy on a GPU with one CUDA stream per worker.
* :class:`CallableExecutor` (:mod:`.array`) -- any Python callable, batched or per request.
* :class:`OnnxExecutor` (:mod:`.onnx`, extra ``pard[onnx]``) -- an ONNX model under ONNX Runtime,
  one session per worker, CPU or CUDA execution provider.
* :class:`TritonExecutor` (:mod:`.triton`, extra ``pard[triton]``) -- a model on a Triton Inference
  Server over gRPC, the batch's remaining budget as the client timeout, shared-memory input when
  the server is local.
* :class:`LlamaCppEngine` (:mod:`.llama_cpp`, extra ``pard[llm]``) -- an LLM stage's engine, not a
  batch executor: llama.cpp stepped by the stage's worker, one batched decode per step, sequences
  joining and leaving (or stopped) at step boundaries.
* :class:`ProfiledLlmEngine` (:mod:`.llm_engine`) -- an LLM stage's engine that sleeps its spec's
  prefill/decode cost per step; :class:`LlmEngine` is the protocol both satisfy.

The engine-backed ones load their engine only when used, so ``import pard`` stays light.
"""

from __future__ import annotations

from .._lazy import lazy_attributes

from typing import Any

from .array import ArrayExecutor, CallableExecutor, Executor, _shape_arg, as_executor, gpu_available
from .base import BatchExecutor

__all__ = [
    "Executor",
    "BatchExecutor",
    "ArrayExecutor",
    "CallableExecutor",
    "OnnxExecutor",
    "TritonExecutor",
    "LlamaCppEngine",
    "LlmEngine",
    "ProfiledLlmEngine",
    "as_executor",
    "gpu_available",
]

# name -> submodule defining it, imported on first use (the engines are optional dependencies)
_LAZY = {"OnnxExecutor": "pard.executors.onnx", "TritonExecutor": "pard.executors.triton",
         "LlamaCppEngine": "pard.executors.llama_cpp", "LlmEngine": "pard.executors.llm_engine",
         "ProfiledLlmEngine": "pard.executors.llm_engine"}

_ = _shape_arg  # re-exported for pard.runtime (payload_shape validation)


__getattr__, __dir__ = lazy_attributes("pard.executors", _LAZY, globals())
