"""A live view of the runtime's stages for monitoring (``pard serve``'s ``/metrics``).

:func:`stage_snapshot` reads what the parts already keep -- each stage's scheduler (its current
order), most recent queueing delays (kept by the C++ pipeline, a bounded window) and the planner loop's
published terms (:mod:`~pard.runtime.planner_loop`) -- without locks.  :class:`MonitorMixin` puts it on the :class:`~pard.runtime.facade.Runtime`
façade as ``Runtime.stage_stats()``, with ``Runtime.drop_counts()`` (monotonic counters of every
dropped request), ``Runtime.compute_split()`` (where the compute of every request went) and ``Runtime.observe_stages()`` (an observer told of every batch as it happens,
so a monitor can keep cumulative histograms without rescanning bounded windows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ..compute_split import ComputeSplit
from ..outcomes import REASONS

__all__ = ["stage_snapshot", "StageObserver", "MonitorMixin"]


class StageObserver(Protocol):
    """What :meth:`MonitorMixin.observe_stages` calls, from the worker threads (keep it cheap, never raise)."""

    def queue_delays(self, stage: str, delays_s: list[float]) -> None:
        """The queueing delays (s) of the requests just taken into one batch at ``stage``."""

    def batch(self, stage: str, size: int) -> None:
        """One batch of ``size`` requests was executed at ``stage``."""


def stage_snapshot(stages: Sequence[Any], terms_log: Sequence[tuple[float, list[Any]]],
                   queued: Callable[[str], int], live: Any) -> list[dict[str, Any]]:
    """One dict per stage (pipeline order); see :meth:`MonitorMixin.stage_stats`."""
    last = terms_log[-1][1] if terms_log else None
    out = []
    for st in stages:
        term = last[st.index] if last is not None else None
        out.append({
            "stage": st.name,
            "queued": queued(st.name),
            "order": str(st.sched.current_order),
            "mu": float(term.mu) if term is not None else float("nan"),
            "eps": float(term.eps) if term is not None else float("nan"),
            "queue_delay_s": np.asarray(live.recent_delays(st.index), dtype=np.float64),
        })
    return out


class MonitorMixin:
    """``Runtime.stage_stats()``: part of the Runtime façade, in its own file (the façade's size limit)."""

    def stage_stats(self) -> list[dict[str, Any]]:
        """A live snapshot per stage (pipeline order), for monitoring.

        Each entry: ``stage`` (name), ``queued`` (as ``Runtime.queued``), ``order`` (the scheduler's
        current order, ``"fcfs"``, ``"lbf"`` or ``"hbf"``; DESIGN §3.3), ``mu`` and ``eps`` (the
        planner's last load factor and burstiness band; NaN before its first update),
        ``queue_delay_s`` (the most recent queueing delays, up to
        :data:`~pard.runtime.workers.BATCH_HISTORY`, s, float64, in the order the requests were
        taken into batches).
        """
        rt: Any = self
        return stage_snapshot(rt._stages, rt._loop.terms_log, rt.queued, rt._live)

    def door_finish_s(self, tier: int = 0, in_front: int = 0) -> float:
        """When (s, :meth:`now`'s clock) a request of tier code ``tier`` arriving now would leave the
        pipeline, as the entry stages' drop rule estimates it (``cpp/include/pard/door.hpp``): what
        :class:`pard.runtime.door.Door` admits by.  Lock-free; for any thread."""
        rt: Any = self
        return float(rt._live.door_finish_s(tier, in_front))

    def drop_counts(self) -> dict[tuple[str, str], int]:
        """Requests dropped so far by ``(stage name, reason)`` (:data:`pard.outcomes.REASONS`), over
        every request ever (not only the last ``history``): monotonic, summing to ``counts()["dropped"]``."""
        rt: Any = self
        flat = rt._live.drop_counts()  # stage * len(REASONS) + reason
        names = [st.name for st in rt._stages]
        nr = len(REASONS)
        return {(names[i // nr], REASONS[i % nr]): int(n) for i, n in enumerate(flat) if n}

    def compute_split(self) -> ComputeSplit:
        """Where the compute went so far, per stage (:mod:`pard.compute_split`), over every request ever (not only
        the last ``history``), at one moment: useful and wasted seconds only grow; unresolved is what requests in
        flight hold.  Lock-free for the caller's other calls; it holds each stripe's lock briefly."""
        rt: Any = self
        return ComputeSplit.from_mapping(rt._live.compute_split(), len(rt._stages))

    def observe_stages(self, observer: StageObserver | None) -> None:
        """Have ``observer`` told of every batch at every stage from now on (None: stop).

        ``observer.queue_delays(stage, delays_s)`` runs when a batch is formed (the delays of the
        requests taken into it), ``observer.batch(stage, size)`` when a batch has executed; both on
        the worker threads, so they must be cheap and thread-safe (prometheus-client's metrics are).
        At an llm stage a batch is an engine step: ``queue_delays`` gets the delays of the requests that
        join at a step boundary, ``batch`` the sequences that ran in the step.
        Set it before the first request so the observer sees every batch.
        """
        rt: Any = self
        for st in rt._stages:
            st.observer = observer
