"""Ending a runtime: close()'s drain, cancel and join; an unreferenced runtime's cleanup; and fork.

* ``close(timeout_s=T)`` splits ``T``: the drain may use all but a *join reserve* -- enough for a
  worker to finish the batch it is running (a few of the stage's longest batches: measured in this
  run or profiled ``d(max_batch)``, whichever is longer; at most half of ``T``) -- so that healthy
  workers are joined in time.  A thread still running at the deadline is named in the warning only
  when it is inside its executor and has been for more than 4x the stage's longest batch plus
  0.1 s (a *hung* stage): an executor merely slower than its profile (a loaded machine) is not
  named, nor is a thread outside its executor (the planner), which runs only pard's code.
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

from ..errors import RuntimeStateError
from .planner_loop import PlannerLoop
from .workers import Stage, WorkerPool

__all__ = ["join_reserve_s", "stage_reserve_s", "longest_batch_s", "hung_message", "cancel_all", "stop", "join", "ForkedError", "forked_message", "reinit_locks"]

#: The join reserve: this many profiled ``d(max_batch)`` of the slowest stage, plus a margin (s).
_RESERVE_BATCHES = 4.0
_RESERVE_MARGIN_S = 0.5
#: A stage is *hung* once one executor call has run this many of its longest batches, plus a margin (s).
_HUNG_BATCHES = 4.0
_HUNG_MARGIN_S = 0.1


class ForkedError(RuntimeStateError):
    """The Runtime was started in another process (this one is a fork of it): its threads are not here."""


def forked_message(pid: int) -> str:
    return (f"this Runtime was started in process {pid}, and this process ({os.getpid()}) is a fork of it: "
            f"its worker and planner threads do not exist here, so it cannot serve; create a new Runtime "
            f"in this process (after the fork)")


def longest_batch_s(st: Stage, live: Any) -> float:
    """``st``'s longest batch (s): measured in this run's kept history (``live.recent_batches``), or
    the profiled ``d(max_batch)``, whichever is longer."""
    measured = max((float(b[1]) for b in live.recent_batches(st.index)), default=0.0)
    return max(st.duration(st.max_batch), measured)


def stage_reserve_s(st: Stage, live: Any) -> float:
    """Time enough for ``st``'s workers to finish the batch they run (s)."""
    return _RESERVE_BATCHES * longest_batch_s(st, live) + _RESERVE_MARGIN_S


def join_reserve_s(stages: Sequence[Stage], live: Any, timeout_s: float) -> float:
    """How much of close()'s ``timeout_s`` is kept for joining the threads after the drain (s)."""
    return min(0.5 * timeout_s, max(stage_reserve_s(st, live) for st in stages))


def cancel_all(live: Any) -> None:
    """End every request still in flight as dropped, reason ``cancelled`` (at the stage it was last at)."""
    live.cancel_all()


def stop(live: Any, pool: WorkerPool, loop: PlannerLoop) -> None:
    """Cancel what is in flight and tell every thread to stop (no waiting): an abandoned runtime's end."""
    live.close_admission()
    cancel_all(live)
    pool.stop()
    loop.stop()


def join(threads: Sequence[threading.Thread], stages: Sequence[Stage], deadline: float | None, live: Any,
         now: Any) -> list[tuple[str, float]]:
    """Join ``threads`` until ``deadline`` (``time.monotonic``; None: no limit); the *hung* stages
    then (see the module docstring), each once, with how long its oldest running batch has run (s).
    ``now``: the runtime clock (``Stage.running_since``'s)."""
    for t in threads:
        t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    t_now = now()
    hung = []
    for st in stages:
        since = [s for t in st.threads if t.is_alive() and (s := st.running_since.get(t.name)) is not None]
        if since and t_now - min(since) > _HUNG_BATCHES * longest_batch_s(st, live) + _HUNG_MARGIN_S:
            hung.append((st.name, t_now - min(since)))
    return hung


def hung_message(timeout_s: float | None, hung: Sequence[tuple[str, float]]) -> str:
    """close()'s warning naming the hung stages that :func:`join` found."""
    names = ", ".join(f"{name!r} (one batch running for {s:.1f} s)" for name, s in hung)
    return (f"Runtime.close(timeout_s={timeout_s!r}): stage {names} still in its executor after the timeout, "
            f"more than 4x its longest batch (a hung executor?); its thread(s) are left behind as daemons. "
            f"Every request has ended; whatever they return is discarded.")


def reinit_locks(stages: Sequence[Stage], loop: PlannerLoop, clock: Any) -> None:
    """Fresh Python locks for a forked child: a lock held by a parent's thread at the fork would never be
    released.  (The C++ pipeline's locks are held only for short sections that never wait.)"""
    loop._lock = threading.Lock()
    clock._lock = threading.Lock()
