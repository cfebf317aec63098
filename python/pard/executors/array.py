"""Array and callable executors: NumPy/CuPy models and plain Python callables.

An *executor* is any object with ``__call__(payloads: list) -> Sequence`` that takes a batch's
payloads (one per request, in the batch's service order) and returns one output per request, in the
same order.  :class:`pard.Runtime` calls it from the stage's worker threads, one batch at a time per
worker, and treats an exception as the failure of that batch only: its requests end in state
``failed`` with the error, and the worker carries on with its next batch.

Two executors ship here:

* :class:`ArrayExecutor` — for array models: stacks the payloads into one ``(B, ...)`` array, runs
  ``fn`` on it once, and splits the ``(B, ...)`` result back into ``B`` outputs.  It computes with
  CuPy when CuPy is importable and a GPU is present (``cupy.is_available()``), giving each worker
  thread its own CUDA stream, and with NumPy otherwise.
* :class:`CallableExecutor` — wraps a plain Python callable, either batched (``fn(list) -> list``)
  or per request (``fn(payload) -> output``).

A plain callable handed to the runtime as a stage is wrapped in ``CallableExecutor(fn)`` (batched).
Neighbours: :mod:`.base` (the base class and the stacking rule every executor shares),
:mod:`.onnx` and :mod:`.triton` (real engines); :mod:`pard.models` provides array models;
:mod:`pard.runtime` owns the worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import PardTypeError, PardValueError

from .base import BatchExecutor, check_shapes, split_rows

__all__ = [
    "Executor",
    "ArrayExecutor",
    "CallableExecutor",
    "as_executor",
    "gpu_available",
]


@runtime_checkable
class Executor(Protocol):
    """Anything the runtime can call with a batch: ``payloads -> outputs`` of the same length."""

    def __call__(self, payloads: list[Any]) -> Sequence[Any]: ...


_GPU: bool | None = None
_GPU_LOCK = threading.Lock()


def gpu_available() -> bool:
    """True when CuPy imports and reports a usable CUDA device (``cupy.is_available()``); cached."""
    global _GPU
    if _GPU is None:
        with _GPU_LOCK:
            if _GPU is None:
                try:
                    import cupy  # noqa: PLC0415 - optional dependency (pard[gpu])

                    _GPU = bool(cupy.is_available())
                except Exception:  # ImportError, or a CUDA driver/runtime error while probing
                    _GPU = False
    return _GPU


class ArrayExecutor(BatchExecutor):
    """Run an array function on a whole batch: stack, compute once, split.

    Args:
        fn: ``fn(batch) -> out`` where ``batch`` has shape ``(B, *payload_shape)`` and ``out`` has
            shape ``(B, ...)``; it must compute with the module of its argument (see
            :func:`pard.models.array_module`), like the reference models do.
        device: ``"auto"`` (CuPy on a GPU when :func:`gpu_available`, else NumPy), ``"cpu"``
            (always NumPy) or ``"gpu"`` (CuPy; ``RuntimeError`` at construction if unavailable).
        payload_shape: if given, the shape every payload must have (without the batch axis); the
            runtime checks it at ``submit`` for an entry stage (see :attr:`payload_shape`).
        to_host: on the GPU, copy the outputs back to NumPy (default ``False``: outputs stay on
            the device, so the next stage's executor stacks them without a transfer).
        dtype: the stacked batch's dtype (default ``float32``).

    Calling the executor with ``B >= 1`` payloads (array-likes of one shape, NumPy or CuPy)
    returns a list of ``B`` arrays, ``out[i]`` for request ``i``.  On the GPU each worker thread
    runs on its own non-blocking CUDA stream and synchronises it before returning, so the outputs
    are ready and the measured duration is the real one.

    Raises (at call time; the runtime turns them into ``failed`` requests):
        ValueError: payloads of differing shapes (or not of ``payload_shape``; the message names
            the payload's index and both shapes), or ``fn`` returned something whose first axis is
            not ``B``.  Whatever ``fn`` raises propagates unchanged.  The runtime rejects a payload
            of the wrong shape at ``submit`` already (see ``pard.Runtime``'s ``payload_shape``), so
            it does not fail the batch it would have joined.
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        *,
        device: str = "auto",
        payload_shape: Sequence[int] | None = None,
        to_host: bool = False,
        dtype: Any = np.float32,
    ) -> None:
        if not callable(fn):
            raise PardTypeError(f"ArrayExecutor: fn must be callable, got {type(fn).__name__}")
        if device not in ("auto", "cpu", "gpu"):
            raise PardValueError(f"ArrayExecutor: device must be 'auto', 'cpu' or 'gpu', got {device!r}")
        if device == "gpu" and not gpu_available():
            raise RuntimeError("ArrayExecutor(device='gpu'): CuPy is not installed or no CUDA device is available")
        self.fn = fn
        self._device = device
        self.on_gpu = device == "gpu" or (device == "auto" and gpu_available())
        self.payload_shape = None if payload_shape is None else _shape_arg(payload_shape, "ArrayExecutor: payload_shape")
        self.to_host = bool(to_host)
        self.dtype = np.dtype(dtype)
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        # Picklable (pard.ray ships executors to worker actors): the per-thread CUDA streams stay behind.
        state = dict(self.__dict__)
        del state["_local"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()
        if self._device == "auto":  # unpickled on another machine: look for its GPU
            self.on_gpu = gpu_available()

    @property
    def device(self) -> str:
        """``"gpu"`` when batches run on CuPy, else ``"cpu"``."""
        return "gpu" if self.on_gpu else "cpu"

    def __repr__(self) -> str:
        name = getattr(self.fn, "name", None) or getattr(self.fn, "__name__", type(self.fn).__name__)
        return f"ArrayExecutor({name}, device={self.device!r}, payload_shape={self.payload_shape})"

    def _stream(self) -> Any:
        stream = getattr(self._local, "stream", None)
        if stream is None:
            import cupy  # noqa: PLC0415

            stream = cupy.cuda.Stream(non_blocking=True)
            self._local.stream = stream
        return stream

    def __call__(self, payloads: list[Any]) -> list[Any]:
        n = len(payloads)
        if n == 0:
            return []
        self._check_shapes(payloads)
        if self.on_gpu:
            import cupy  # noqa: PLC0415

            stream = self._stream()
            with stream:
                if all(isinstance(p, cupy.ndarray) for p in payloads):
                    batch = cupy.stack([p.astype(self.dtype, copy=False) for p in payloads])
                else:  # host payloads: stack on the host, then one transfer
                    host = np.stack([cupy.asnumpy(p) if isinstance(p, cupy.ndarray) else np.asarray(p, dtype=self.dtype)
                                     for p in payloads]).astype(self.dtype, copy=False)
                    batch = cupy.asarray(host)
                out = self.fn(batch)
                if self.to_host:
                    out = cupy.asnumpy(out, stream=stream)
            stream.synchronize()
        else:
            batch = np.stack([np.asarray(p, dtype=self.dtype) for p in payloads])
            out = self.fn(batch)
        return split_rows(out, n, "ArrayExecutor: fn")


    def _check_shapes(self, payloads: list[Any]) -> None:
        """ValueError naming the first payload whose shape differs (from ``payload_shape``, else payload 0)."""
        check_shapes(payloads, self.payload_shape, "ArrayExecutor")


class CallableExecutor(BatchExecutor):
    """Wrap a plain Python callable as a stage executor.

    Args:
        fn: with ``per_request=False`` (default), ``fn(payloads: list) -> Sequence`` returning one
            output per payload, in order; with ``per_request=True``, ``fn(payload) -> output``,
            called once per request of the batch.
        per_request: see ``fn``.

    Raises (at call time): ``ValueError`` when a batched ``fn`` returns a sequence of the wrong
    length; whatever ``fn`` raises propagates (the runtime fails that batch's requests).
    """

    def __init__(self, fn: Callable[..., Any], *, per_request: bool = False) -> None:
        if not callable(fn):
            raise PardTypeError(f"CallableExecutor: fn must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.per_request = bool(per_request)

    def __repr__(self) -> str:
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        return f"CallableExecutor({name}, per_request={self.per_request})"

    def __call__(self, payloads: list[Any]) -> Sequence[Any]:
        if self.per_request:
            return [self.fn(p) for p in payloads]
        out = self.fn(payloads)
        if isinstance(out, (str, bytes, Mapping)):  # sized, but its items are not one output per payload
            raise PardValueError(
                f"CallableExecutor: batched fn returned a {type(out).__name__}, expected a sequence of "
                f"{len(payloads)} outputs (a list, tuple or array)"
            )
        try:
            length = len(out)
        except TypeError:
            raise PardValueError(
                f"CallableExecutor: batched fn returned {type(out).__name__}, expected a sequence of "
                f"{len(payloads)} outputs"
            ) from None
        if length != len(payloads):
            raise PardValueError(
                f"CallableExecutor: batched fn returned {length} outputs for {len(payloads)} payloads"
            )
        return list(out)


def _shape_arg(value: Any, name: str) -> tuple[int, ...]:
    """``value`` as a shape tuple; TypeError/ValueError naming ``name`` and the value otherwise."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise PardTypeError(f"{name} must be a sequence of ints >= 0 (e.g. (32, 32, 3)), got {value!r}")
    dims = list(value)
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims):
        raise PardTypeError(f"{name} must be a sequence of ints >= 0 (e.g. (32, 32, 3)), got {value!r}")
    if any(d < 0 for d in dims):
        raise PardValueError(f"{name} must be a sequence of ints >= 0, got {value!r}")
    return tuple(int(d) for d in dims)


def as_executor(stage: Any) -> Any:
    """The executor for a stage: a pard executor (a :class:`~pard.executors.base.BatchExecutor`:
    ``ArrayExecutor``, ``CallableExecutor``, ``OnnxExecutor``, ``TritonExecutor``) as is, else
    ``CallableExecutor(stage)``.

    Raises:
        TypeError: if ``stage`` is not callable.
    """
    if isinstance(stage, BatchExecutor):
        return stage
    if not callable(stage):
        raise PardTypeError(f"a stage executor must be callable, got {type(stage).__name__}: {stage!r}")
    return CallableExecutor(stage)
