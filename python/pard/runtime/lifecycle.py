"""Ending a runtime: close()'s drain, cancel and join; an unreferenced runtime's cleanup; and fork.

* ``close(timeout_s=T)`` splits ``T``: the drain may use all but a *join reserve* -- enough for a
  worker to finish the batch it is running (a few profiled ``d(max_batch)``, at most half of ``T``)
  -- so that healthy workers are joined in time and only a really hung stage is named in the warning.
* An unreferenced, unclosed Runtime is cleaned up by a ``weakref.finalize``: its requests in flight
  are cancelled and its threads told to stop (they hold the parts, never the Runtime itself).
* After ``os.fork()`` the child has none of the parent's threads: the Runtime detects it (the
  process id it started in), ``submit`` raises and ``close`` only ends what is in flight.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from .planner_loop import PlannerLoop
from .workers import Stage, WorkerPool

__all__ = ["join_reserve_s", "cancel_all", "stop", "join", "ForkedError", "forked_message", "reinit_locks"]

#: The join reserve: this many profiled ``d(max_batch)`` of the slowest stage, plus a margin (s).
_RESERVE_BATCHES = 4.0
_RESERVE_MARGIN_S = 0.5


class ForkedError(RuntimeError):
    """The Runtime was started in another process (this one is a fork of it): its threads are not here."""


def forked_message(pid: int) -> str:
    return (f"this Runtime was started in process {pid}, and this process ({os.getpid()}) is a fork of it: "
            f"its worker and planner threads do not exist here, so it cannot serve; create a new Runtime "
            f"in this process (after the fork)")


def join_reserve_s(stages: Sequence[Stage], timeout_s: float) -> float:
    """How much of close()'s ``timeout_s`` is kept for joining the threads after the drain (s)."""
    longest = max(st.duration(st.max_batch) for st in stages)
    return min(0.5 * timeout_s, _RESERVE_BATCHES * longest + _RESERVE_MARGIN_S)


def cancel_all(live: Any) -> None:
    """End every request still in flight as dropped, reason ``cancelled`` (at the stage it was last at)."""
    live.cancel_all()


def stop(live: Any, pool: WorkerPool, loop: PlannerLoop) -> None:
    """Cancel what is in flight and tell every thread to stop (no waiting): an abandoned runtime's end."""
    live.close_admission()
    cancel_all(live)
    pool.stop()
    loop.stop()


def join(threads: Sequence[threading.Thread], stages: Sequence[Stage], deadline: float | None) -> list[str]:
    """Join ``threads`` until ``deadline`` (``time.monotonic``; None: no limit); the names of the stages
    (or ``"the planner"``) whose threads are still running then, each named once."""
    for t in threads:
        t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    alive = {t.name for t in threads if t.is_alive()}
    names = sorted({st.name for st in stages for t in st.threads if t.name in alive})
    if any(not any(t.name == n for st in stages for t in st.threads) for n in alive):
        names.append("the planner")
    return names


def reinit_locks(stages: Sequence[Stage], loop: PlannerLoop, clock: Any) -> None:
    """Fresh Python locks for a forked child: a lock held by a parent's thread at the fork would never be
    released.  (The C++ pipeline's locks are held only for short sections that never wait.)"""
    loop._lock = threading.Lock()
    clock._lock = threading.Lock()
