"""What every pard executor shares: the base class with its hooks, and the batch stacking rule.

A worker of :class:`pard.Runtime` calls its stage's executor with a batch's payloads and expects one
output per payload (see :mod:`pard.executors`).  Executors that wrap an engine (ONNX Runtime, a
Triton server) need to know a little about the stage they serve before the first batch: how many
workers will call them at once (one engine session each), how many cores pard gives each worker
(the engine's thread count) and the stage's ``max_batch`` (a server's model config must match it).
:class:`BatchExecutor` gives them one hook for that, :meth:`BatchExecutor.bind`, that the runtime
and the profiler call once per stage before any batch runs; and one flag,
:attr:`BatchExecutor.accepts_budget`, with which an executor asks for the batch's remaining latency
budget on each call (a remote engine uses it as its client timeout).

Neighbours: :mod:`.array` (NumPy/CuPy arrays, plain callables), :mod:`.onnx` (ONNX Runtime),
:mod:`.triton` (a Triton Inference Server over gRPC).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import PardValueError

__all__ = ["BatchExecutor", "stack_payloads", "split_rows"]


class BatchExecutor:
    """Base class of pard's executors: ``__call__(payloads) -> outputs`` plus two optional hooks.

    Attributes:
        payload_shape: the shape every payload must have (without the batch axis), or None when
            the executor does not know; the runtime checks it at ``submit`` for an entry stage.
        accepts_budget: when True, the runtime calls ``executor(payloads, budget_s=...)`` with the
            batch's remaining latency budget in seconds (the latest deadline of its requests minus
            now; may be <= 0 when every request of the batch is already late).
    """

    payload_shape: tuple[int, ...] | None = None
    accepts_budget: bool = False

    def bind(self, stage: Any, *, workers: int, threads: int | None = None) -> None:
        """Prepare for serving ``stage`` with ``workers`` worker threads of ``threads`` cores each.

        Called once per stage by :class:`pard.Runtime` and :func:`pard.profiling.measure_profile`
        before the first batch.  ``stage`` is the :class:`pard.StageSpec` (its ``name`` and
        ``max_batch`` matter); ``threads`` is the cores pard gives each worker (the runtime's
        ``blas_threads``), None when pard leaves it open.  The default does nothing.

        Raises:
            pard.ConfigError: the executor cannot serve this stage as specified (a subclass says why).
        """

    def close(self) -> None:
        """Release engine resources (sessions, connections, shared memory).  Idempotent."""

    def __call__(self, payloads: list[Any]) -> Sequence[Any]:  # pragma: no cover - abstract
        raise NotImplementedError


def stack_payloads(
    payloads: Sequence[Any], *, dtype: Any, payload_shape: tuple[int, ...] | None, who: str
) -> np.ndarray:
    """The batch's payloads stacked into one ``(B, *shape)`` host array of ``dtype``.

    Args:
        payloads: ``B >= 1`` array-likes of one shape.
        dtype: the stacked array's dtype.
        payload_shape: the shape every payload must have, or None (then payload 0's shape).
        who: the executor's name, for messages.
    Raises:
        ValueError: a payload's shape differs (the message names its index and both shapes).
    """
    check_shapes(payloads, payload_shape, who)
    return np.stack([np.asarray(p, dtype=dtype) for p in payloads])


def check_shapes(payloads: Sequence[Any], payload_shape: tuple[int, ...] | None, who: str) -> None:
    """ValueError naming the first payload whose shape differs (from ``payload_shape``, else payload 0)."""
    want = payload_shape
    for i, p in enumerate(payloads):
        shape = getattr(p, "shape", None)
        got = tuple(int(d) for d in shape) if shape is not None else np.shape(p)
        if want is None:
            want = got
            continue
        if got != want:
            what = "payload_shape" if payload_shape is not None else "payload 0's shape"
            raise PardValueError(
                f"{who}: payload {i} of the batch has shape {got}, expected {what} {want}: "
                f"a batch's payloads are stacked, so they must share one shape"
            )


def split_rows(out: Any, n: int, who: str) -> list[Any]:
    """``out``'s ``n`` rows as a list; ValueError when ``out``'s first axis is not ``n``."""
    shape = getattr(out, "shape", None)
    if shape is None or len(shape) == 0 or int(shape[0]) != n:
        raise PardValueError(f"{who}: the model returned {type(out).__name__} of shape {shape}, expected first axis {n}")
    return [out[i] for i in range(n)]
