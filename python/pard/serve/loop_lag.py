"""How far behind the event loop of ``pard serve`` runs: the signal for its 429 at the door
(:meth:`pard.serve.service.ServedPipeline.shed_if_behind`)."""

from __future__ import annotations

import asyncio
import time

__all__ = ["LAG_TICK_S", "LoopLag"]

#: The event-loop lag monitor's tick (s).
LAG_TICK_S = 0.01


class LoopLag:
    """How far behind the event loop runs (s): a task sleeps :data:`LAG_TICK_S` at a time and records how
    late it woke; :meth:`now` also counts a wake-up that is overdue right now (a loop still busy)."""

    def __init__(self) -> None:
        self.last = 0.0
        self._due: float | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start measuring (call from the running event loop; idempotent)."""
        if self._task is None:
            self._due = time.monotonic() + LAG_TICK_S
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(LAG_TICK_S)
            now = time.monotonic()
            assert self._due is not None
            self.last, self._due = max(0.0, now - self._due), now + LAG_TICK_S

    def now(self) -> float:
        """The loop's lag now (s): the last measured, or the current wake-up's overdue time if larger."""
        if self._due is None:
            return 0.0
        return max(self.last, time.monotonic() - self._due)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
            self._due = None
