"""A stage's worker as a Ray actor: runs one batch per call through the stage's own executor.

The stage actor (:mod:`pard.ray.stage`) forms a batch with the C++ ``StageScheduler`` and calls
:meth:`StageWorker.run` once for it.  Payloads travel in *groups*: one Ray object holds a list of
payloads -- the outputs of one upstream batch, or the requests the driver sent in one ``enqueue``
call -- and a request's payload is ``(group, position)``.  The call passes each distinct group of
the batch once, as a top-level object ref, so Ray moves it straight from the node that made it to
this worker (the payload's own hop, never through the driver), and resolves it once however many of
the batch's requests it holds: Ray's cost per object (~0.1-0.7 ms of CPU on a busy 2-core machine,
docs/ray.md) is paid per batch, not per request.  ``run`` returns two objects: the batch's outputs
as one group (for the next stage) and a small record of the batch, the only value the stage actor
reads.

Batches run one at a time.  The stage sends the *next* batch while this one runs (DESIGN §3.1), so
the actor is created with ``max_concurrency=2``: the next call is already inside the actor, its
payloads resolved, waiting on the worker's turn lock, and it starts the moment the running batch
ends.  With one call at a time, Ray would start it only after finishing the previous call's
bookkeeping: that gap measured ~5 ms per batch on a busy 2-core machine (docs/ray.md).  The stage
never has more than two calls outstanding per worker, so at most one waits, and order is kept.

Errors.  Whatever the executor raises -- ``SystemExit`` and ``KeyboardInterrupt`` included -- fails
this batch only: the record carries the error and the worker serves the next call.  A request whose
join (several predecessors) raises fails alone.  If the actor process itself dies (killed, out of
memory, its node lost), Ray fails the call with a ``RayActorError`` and restarts the actor up to
``max_restarts`` times; the stage actor fails that batch's requests (see :mod:`pard.ray.stage`).
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import PardValueError
from .clock import Clock

__all__ = ["StageWorker", "BatchRecord"]

#: What ``run`` returns second: (start_s, end_s, executor error or None, {position: join error},
#: the executor call's thread CPU time in s).
BatchRecord = tuple[float, float, "tuple[str, Any] | None", dict[int, "tuple[str, Any]"], float]


def _portable(exc: BaseException) -> tuple[str, Any]:
    """``(description, exc or None)``: the exception itself when it pickles (it becomes the cause)."""
    text = f"{type(exc).__name__}: {exc}"
    try:
        pickle.dumps(exc)
    except Exception:  # noqa: BLE001 - an exception that does not pickle travels as text only
        return text, None
    return text, exc


class StageWorker:
    """One worker of one stage (a Ray actor class body; :func:`pard.ray.deploy` creates them).

    Args:
        stage: the stage's :class:`pard.StageSpec`; an executor with a ``bind`` hook
            (:class:`pard.executors.BatchExecutor`) is bound to it here, as one worker, before any
            batch -- the local runtime binds each executor once per stage the same way.
        executor: the stage's executor, ``list -> list`` of the same length (as the local runtime's).
        join: for a stage with several predecessors, ``join(parts) -> payload``; else None.
        epoch_s: the deployment's epoch on the driver's clock (:class:`pard.ray.clock.Clock`).
    """

    def __init__(self, stage: Any, executor: Callable[[list[Any]], Sequence[Any]],
                 join: Callable[[list[Any]], Any] | None, epoch_s: float) -> None:
        bind = getattr(executor, "bind", None)
        if callable(bind):  # e.g. an engine executor creates its session on this node here
            bind(stage, workers=1, threads=None)
        self._stage = stage.name
        self._executor = executor
        self._join = join
        self._clock = Clock(epoch_s)
        self._turn = threading.Lock()  # one batch executes at a time; the next one waits here
        self._cpu0 = time.process_time()  # the process's start-up (imports) is not serving cost

    def wall_time(self) -> float:
        """This node's ``time.time()`` (the clock probe of :func:`pard.ray.clock.estimate_offset`)."""
        return time.time()

    def set_offset(self, offset_s: float) -> None:
        """Use ``offset_s`` (this node's clock minus the driver's) from now on."""
        self._clock.offset_s = float(offset_s)

    def pid(self) -> int:
        """The actor's process id (tests kill it)."""
        return os.getpid()

    def cpu_s(self) -> float:
        """CPU time of this actor's process since it was constructed (s)."""
        return time.process_time() - self._cpu0

    def run(self, layout: Sequence[Sequence[tuple[int, int]]], *groups: Sequence[Any]) -> tuple[list[Any], Any]:
        """Run one batch.  ``layout[i]`` lists request ``i``'s parts as ``(group, position)`` pairs (one
        part, or one per predecessor of a join); ``groups`` are the resolved payload groups.

        Returns (as two Ray objects) the outputs, one per request (None for a failed one), and a
        :data:`BatchRecord` with the batch's start and end on the deployment clock.
        """
        n = len(layout)
        payloads: list[Any] = []
        keep: list[int] = []
        join_errors: dict[int, tuple[str, Any]] = {}
        for pos, where in enumerate(layout):
            mine = [groups[g][e] for g, e in where]
            if self._join is None:
                payloads.append(mine[0])
                keep.append(pos)
                continue
            try:
                payloads.append(self._join(mine))
                keep.append(pos)
            except BaseException as e:  # noqa: BLE001 - a failing join fails that request only
                join_errors[pos] = _portable(e)
        outputs: list[Any] = [None] * n
        error: tuple[str, Any] | None = None
        with self._turn:
            cpu0 = time.thread_time()
            start = self._clock.now()
            if payloads:
                try:
                    outs = self._executor(payloads)
                    if len(outs) != len(payloads):
                        raise PardValueError(f"executor returned {len(outs)} outputs for a batch of {len(payloads)}")
                    for pos, out in zip(keep, outs):
                        outputs[pos] = out
                except BaseException as e:  # noqa: BLE001 - any executor error fails this batch only
                    error = _portable(e)
            end = self._clock.now()
            cpu = time.thread_time() - cpu0
        record: BatchRecord = (start, end, error, join_errors, cpu)
        return outputs, record
