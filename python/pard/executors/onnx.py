"""ONNX Runtime executor: run an ONNX model on each batch pard forms (extra ``pard[onnx]``).

:class:`OnnxExecutor` holds one ``onnxruntime.InferenceSession`` per worker thread (a worker binds
to its session on its first batch; sessions are created ahead for the workers the stage has, see
:meth:`OnnxExecutor.bind`), so workers never contend for one session's locks and each session's
thread count is the cores pard gives one worker.  The execution provider is CUDA where
onnxruntime-gpu sees a device, else the CPU.  A batch's payloads are stacked into one
``(B, *payload_shape)`` array, the session runs once, and the ``(B, ...)`` output is split into
``B`` rows.

Neighbours: :mod:`.base` (hooks, stacking); :mod:`pard.models` builds the ONNX stage models
of the built-in pipelines that ``pard run`` uses by default.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ..errors import ConfigError, PardTypeError
from .base import BatchExecutor, split_rows, stack_payloads

__all__ = ["OnnxExecutor", "onnx_available", "cuda_provider_available"]

_CUDA = "CUDAExecutionProvider"
_CPU = "CPUExecutionProvider"
# ONNX tensor element types (onnx.TensorProto codes, as onnxruntime names them) -> NumPy
_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def _ort() -> Any:
    return require("onnxruntime", "onnx", "OnnxExecutor (or onnxruntime-gpu for the CUDA provider)")


def onnx_available() -> bool:
    """True when onnxruntime imports."""
    try:
        _ort()
    except ImportError:
        return False
    return True


def cuda_provider_available() -> bool:
    """True when onnxruntime offers the CUDA execution provider (onnxruntime-gpu with a CUDA device)."""
    return onnx_available() and _CUDA in _ort().get_available_providers()


def _model_bytes(model: Any) -> tuple[bytes, str]:
    """The serialized model and a name for messages; ``model`` is a path, bytes or an onnx.ModelProto."""
    if isinstance(model, (bytes, bytearray)):
        return bytes(model), "<bytes>"
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            raise ConfigError(f"OnnxExecutor: model file {str(path)!r} does not exist")
        return path.read_bytes(), path.name
    if hasattr(model, "SerializeToString"):
        name = getattr(getattr(model, "graph", None), "name", "") or "<ModelProto>"
        return bytes(model.SerializeToString()), name
    raise PardTypeError(f"OnnxExecutor: model must be a path, bytes or an onnx.ModelProto, got {type(model).__name__}")


def _providers(providers: Any) -> list[str]:
    ort = _ort()
    have = ort.get_available_providers()
    if providers == "auto":
        return [_CUDA, _CPU] if _CUDA in have else [_CPU]
    if providers == "cpu":
        return [_CPU]
    if providers == "cuda":
        if _CUDA not in have:
            raise ConfigError(f"OnnxExecutor(providers='cuda'): onnxruntime offers only {have} here "
                              f"(install onnxruntime-gpu on a machine with a CUDA device)")
        return [_CUDA, _CPU]
    if isinstance(providers, (list, tuple)) and all(isinstance(p, str) for p in providers) and providers:
        missing = [p for p in providers if p not in have]
        if missing:
            raise ConfigError(f"OnnxExecutor: providers {missing} are not available (onnxruntime offers {have})")
        return list(providers)
    raise ConfigError(f"OnnxExecutor: providers must be 'auto', 'cpu', 'cuda' or a list of provider names, "
                      f"got {providers!r}")


class OnnxExecutor(BatchExecutor):
    """Run an ONNX model on each batch with ONNX Runtime, one session per worker thread.

    Args:
        model: the model: a ``.onnx`` file path, its bytes, or an ``onnx.ModelProto``.  Its first
            input axis must be the batch axis and dynamic (pard forms batches of 1..max_batch).
        providers: ``"auto"`` (CUDA where onnxruntime offers it, else CPU; default), ``"cpu"``,
            ``"cuda"`` (ConfigError if unavailable) or a list of provider names.
        intra_op_threads: ONNX Runtime threads per session; None (default): the cores pard gives
            each worker (:meth:`bind`'s ``threads``, the runtime's ``blas_threads``), 1 before that.
        input_name, output_name: which input gets the batch and which output is returned; default
            the model's only input and its first output.
        payload_shape: the shape of one request's input; default the model input's shape without
            the batch axis, when all of its dimensions are fixed.
        name: a label for messages and ``repr`` (default the graph's name).

    Calling it with ``B >= 1`` payloads (array-likes of ``payload_shape``) returns ``B`` NumPy
    arrays, the model output's rows.  The session runs with the GIL released, so workers of one
    process compute in parallel.

    Raises:
        pard.errors.MissingExtraError (an ImportError): onnxruntime is not installed (``pip install 'pard[onnx]'``).
        pard.ConfigError: a bad model (unreadable, several inputs and no ``input_name``, a fixed
            batch axis), unknown ``input_name``/``output_name``, unavailable providers, a bad
            ``intra_op_threads``.
        ValueError (at call time; the runtime fails that batch): payloads of differing shapes or
            an output whose first axis is not ``B``.  ONNX Runtime's own errors propagate.
    """

    def __init__(
        self,
        model: Any,
        *,
        providers: Any = "auto",
        intra_op_threads: int | None = None,
        input_name: str | None = None,
        output_name: str | None = None,
        payload_shape: Sequence[int] | None = None,
        name: str | None = None,
    ) -> None:
        if intra_op_threads is not None and (isinstance(intra_op_threads, bool) or not isinstance(intra_op_threads, int)
                                             or intra_op_threads < 1):
            raise ConfigError(f"OnnxExecutor: intra_op_threads must be an int >= 1 or None, got {intra_op_threads!r}")
        self._bytes, label = _model_bytes(model)
        self.name = name or label
        self.providers = _providers(providers)
        self._threads_arg = intra_op_threads
        self.intra_op_threads = intra_op_threads or 1
        self._lock = threading.Lock()
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._local = threading.local()
        self._sessions: list[Any] = []
        first = self._new_session()  # validates the model now, not on the first batch
        self._free.put(first)
        inputs, outputs = first.get_inputs(), first.get_outputs()
        if input_name is None:
            if len(inputs) != 1:
                raise ConfigError(f"OnnxExecutor({self.name}): the model has {len(inputs)} inputs "
                                  f"{[i.name for i in inputs]}; say which gets the batch with input_name")
            meta = inputs[0]
        else:
            found = [i for i in inputs if i.name == input_name]
            if not found:
                raise ConfigError(f"OnnxExecutor({self.name}): input_name {input_name!r} is not an input of the "
                                  f"model (inputs: {[i.name for i in inputs]})")
            meta = found[0]
        out_names = [o.name for o in outputs]
        if output_name is not None and output_name not in out_names:
            raise ConfigError(f"OnnxExecutor({self.name}): output_name {output_name!r} is not an output of the "
                              f"model (outputs: {out_names})")
        self.input_name: str = meta.name
        self.output_name: str = output_name or out_names[0]
        dims = list(meta.shape)
        if not dims:
            raise ConfigError(f"OnnxExecutor({self.name}): input {meta.name!r} is a scalar; it needs a batch axis")
        if isinstance(dims[0], int) and dims[0] > 0:
            raise ConfigError(f"OnnxExecutor({self.name}): input {meta.name!r} has a fixed batch axis of "
                              f"{dims[0]} (shape {dims}); export the model with a dynamic first axis, since "
                              f"pard forms batches of 1..max_batch")
        self.dtype = np.dtype(_ORT_TYPES.get(meta.type, np.float32))
        if payload_shape is not None:
            from .array import _shape_arg  # noqa: PLC0415

            self.payload_shape = _shape_arg(payload_shape, "OnnxExecutor: payload_shape")
        elif all(isinstance(d, int) and d > 0 for d in dims[1:]):
            self.payload_shape = tuple(int(d) for d in dims[1:])
        else:
            self.payload_shape = None

    def __repr__(self) -> str:
        return (f"OnnxExecutor({self.name}, providers={self.providers}, intra_op_threads={self.intra_op_threads}, "
                f"sessions={self.sessions}, payload_shape={self.payload_shape})")

    @property
    def sessions(self) -> int:
        """How many sessions exist now (one per worker thread that has called, or bound ahead)."""
        with self._lock:
            return len(self._sessions)

    @property
    def device(self) -> str:
        """``"gpu"`` when the CUDA provider runs the model, else ``"cpu"``."""
        return "gpu" if self.providers[0] == _CUDA else "cpu"

    def _new_session(self) -> Any:
        ort = _ort()
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.intra_op_threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        # no busy-waiting pool threads: the cores belong to pard's workers, not to idle spinning
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            sess = ort.InferenceSession(self._bytes, sess_options=so, providers=self.providers)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types for a bad model
            raise ConfigError(f"OnnxExecutor({self.name}): onnxruntime could not load the model: {exc}") from exc
        with self._lock:
            self._sessions.append(sess)
        return sess

    def bind(self, stage: Any, *, workers: int, threads: int | None = None) -> None:
        """Create sessions ahead for ``workers`` threads, each with ``threads`` intra-op threads.

        ``threads`` (the cores pard gives one worker) sets the sessions' thread count unless
        ``intra_op_threads`` was given; sessions made before with another count are replaced.
        """
        want = self._threads_arg or (int(threads) if threads else 1)
        with self._lock:
            rebuild = want != self.intra_op_threads
            self.intra_op_threads = want
            if rebuild:
                self._sessions.clear()
                self._free = queue.SimpleQueue()
                self._local = threading.local()
            have = self._free.qsize()
        for _ in range(max(0, int(workers) - have)):
            self._free.put(self._new_session())

    def _session(self) -> Any:
        sess = getattr(self._local, "session", None)
        if sess is None:
            try:
                sess = self._free.get_nowait()
            except queue.Empty:  # more calling threads than bound workers: one more session
                sess = self._new_session()
            self._local.session = sess
        return sess

    def __call__(self, payloads: list[Any]) -> list[Any]:
        n = len(payloads)
        if n == 0:
            return []
        batch = stack_payloads(payloads, dtype=self.dtype, payload_shape=self.payload_shape,
                               who=f"OnnxExecutor({self.name})")
        out = self._session().run([self.output_name], {self.input_name: batch})[0]
        return split_rows(out, n, f"OnnxExecutor({self.name})")

    def close(self) -> None:
        """Drop the sessions (a later call creates new ones)."""
        with self._lock:
            self._sessions.clear()
            self._free = queue.SimpleQueue()
            self._local = threading.local()
