"""The live runtime's clock and the accounting of time spent in the scheduler.

All times are float seconds since the runtime started (``time.perf_counter``, monotonic).  The
scheduler's own cost is accumulated per thread (no lock on the hot path) and summed on demand:
around each ``form_batch`` call and each planner update (with its ``publish`` calls) as the
calling thread's CPU time (``time.thread_time_ns``), so that waiting for the GIL after the call is
not charged to the scheduler; around each ``submit`` (which keeps the GIL and takes a fraction of a
microsecond) as wall time (``time.perf_counter_ns``), which costs far less to read.
"""

from __future__ import annotations

import threading
import time

__all__ = ["ThreadClock", "RunClock"]


class ThreadClock:
    """One thread's accumulators of the time spent in the scheduler (ns)."""

    __slots__ = ("sched_ns", "planner_ns")

    def __init__(self) -> None:
        self.sched_ns = 0
        self.planner_ns = 0


class RunClock:
    """The runtime clock (:meth:`now`) and every thread's :class:`ThreadClock`."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self._lock = threading.Lock()
        self._clocks: list[ThreadClock] = []
        self._local = threading.local()

    def restart(self) -> None:
        """Set time 0 to now (when the runtime starts)."""
        self.t0 = time.perf_counter()

    def now(self) -> float:
        """Seconds since the runtime started."""
        return time.perf_counter() - self.t0

    def mine(self) -> ThreadClock:
        """The calling thread's accumulators (created on first use)."""
        c: ThreadClock | None = getattr(self._local, "clock", None)
        if c is None:
            c = ThreadClock()
            self._local.clock = c
            with self._lock:
                self._clocks.append(c)
        return c

    def totals_s(self) -> tuple[float, float]:
        """Seconds spent in ``submit``/``form_batch`` and in planner updates, over all threads."""
        with self._lock:
            clocks = list(self._clocks)
        return sum(c.sched_ns for c in clocks) * 1e-9, sum(c.planner_ns for c in clocks) * 1e-9
