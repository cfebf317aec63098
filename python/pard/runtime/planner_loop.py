"""The live runtime's planner loop (DESIGN §3.5): every sync interval on the runtime clock it hands
each stage's new statistics to the :class:`pard.planner.Planner` (the simulator's planner,
unchanged) and to the :class:`pard.recorder.RunRecorder` (fed as the simulator feeds it), then
publishes the new terms to the C++ stage schedulers.

The statistics come from the C++ pipeline's per-stage logs (``LivePipeline.take_stats``, in the form
``pard._core.Simulator.take_stats()`` returns); taking them empties them, so the logs hold one
interval's samples and a long run's memory stays flat.  :meth:`PlannerLoop.flush` hands the recorder what
is left once the workers have stopped, so a report covers every batch.

Between syncs the same thread runs an optional *tick* (the pard rule's purge timer,
:meth:`pard.runtime.workers.WorkerPool.purge`), so a stage whose workers are all busy still drops
its infeasible requests promptly (Triton #7512).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..planner import Planner
from ..recorder import RunRecorder
from .clock import RunClock
from .workers import Stage

#: Planner-update exceptions kept (the newest; :attr:`PlannerLoop.error_count` counts them all).
ERRORS_KEPT = 100
#: Syncs' published terms kept (the newest last).
TERMS_KEPT = 64

__all__ = ["PlannerLoop"]


class PlannerLoop:
    """The planner thread of one runtime (see the module docstring)."""

    def __init__(self, stages: Sequence[Stage], planner: Planner, recorder: RunRecorder, clock: RunClock,
                 sync_interval_s: float, live: Any, tick: Callable[[float, Any], None] | None = None,
                 tick_s: float = 0.0) -> None:
        self._stages = stages
        #: called as ``tick(now, thread_clock)`` every ``tick_s`` between syncs (the purge timer), or None
        self._tick = tick
        self._tick_s = tick_s
        self._live = live
        self._llm = any(st.spec.kind == "llm" for st in stages)
        self._planner = planner
        self.recorder = recorder
        self._clock = clock
        self._sync_s = sync_interval_s
        self._lock = threading.Lock()  # the planner thread and flush() take statistics one at a time
        self._last_t = 0.0
        self.calls = 0
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        #: The last :data:`ERRORS_KEPT` exceptions raised by planner updates (the schedulers keep the last
        #: published terms); ``error_count`` counts them all.  Bounded, as :attr:`terms_log`: a Runtime
        #: runs for days, and an entry kept per sync grows it for ever (a new user's tracemalloc).
        self.errors: deque[BaseException] = deque(maxlen=ERRORS_KEPT)
        self.error_count = 0
        #: The last :data:`TERMS_KEPT` syncs' ``(time, terms)`` (the monitor reads the newest).
        self.terms_log: deque[tuple[float, list[Any]]] = deque(maxlen=TERMS_KEPT)

    def start(self) -> None:
        if self._planner.policy.prior_terms and self._planner.policy.uses_planner_terms:
            # PolicySpec.prior_terms: an idle interval's terms until the first sync, as the simulator
            for st, term in zip(self._stages, self._planner.prior_terms(self._sync_s, [s.workers for s in self._stages])):
                st.sched.publish(**term.publish_kwargs())
        self.thread = threading.Thread(target=self._loop, name="pard-planner", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()

    def _error(self, e: BaseException) -> None:
        self.errors.append(e)
        self.error_count += 1

    def _take(self, now: float) -> list[dict[str, np.ndarray]]:
        """Each stage's statistics since the last call, handed to the recorder too (``(last, now]``)."""
        stats: list[dict[str, np.ndarray]] = [self._live.take_stats(st.index) for st in self._stages]
        self.recorder.record(stats, [st.workers for st in self._stages], self._last_t, max(now, self._last_t))
        self._last_t = max(now, self._last_t)
        return stats

    def flush(self) -> None:
        """Hand the recorder the statistics not yet taken (call once the workers have stopped)."""
        with self._lock:
            self._take(self._clock.now())

    def _loop(self) -> None:
        clock = self._clock.mine()
        while True:
            # every sync interval on the runtime clock (t = 1, 2, ... x sync_interval_s), as the simulator
            due = self._sync_s * (self.calls + 1)
            now = self._clock.now()
            until = due if self._tick is None else min(due, now + self._tick_s)
            if self.stop_event.wait(max(0.0, until - now)):
                return
            if self._tick is not None and self._clock.now() < due:
                try:
                    self._tick(self._clock.now(), clock)
                except BaseException as e:  # noqa: BLE001 - as a planner update: keep serving
                    self._error(e)
                continue
            self.calls += 1
            t0 = time.thread_time_ns()
            now = self._clock.now()
            with self._lock:
                stats = self._take(now)
            try:
                workers = [st.workers for st in self._stages]
                terms = self._planner.update(now, stats, workers)
                for st, term in zip(self._stages, terms):
                    kw = term.publish_kwargs()
                    if self._llm:  # LLM stages' load counts work, as the simulator publishes it
                        kw["mu"], kw["service_rate"], kw["path_rate"] = self._live.llm_terms(
                            st.index, workers, kw["mu"], kw["service_rate"], kw["path_rate"])
                    st.sched.publish(**kw)
                self.terms_log.append((now, terms))
            except BaseException as e:  # noqa: BLE001 - keep serving with the last published terms (SystemExit too)
                self._error(e)
            clock.planner_ns += time.thread_time_ns() - t0
