"""A live view of the runtime's stages for monitoring (``pard serve``'s ``/metrics``).

:func:`stage_snapshot` reads what the parts already keep -- each stage's scheduler (its current
order), most recent queueing delays (:mod:`~pard.runtime.workers`, a bounded window) and the planner loop's
published terms (:mod:`~pard.runtime.planner_loop`) -- without locks.  :class:`MonitorMixin` puts it on the :class:`~pard.runtime.facade.Runtime`
façade as ``Runtime.stage_stats()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["stage_snapshot", "MonitorMixin"]


def stage_snapshot(stages: Sequence[Any], terms_log: Sequence[tuple[float, list[Any]]],
                   queued: Callable[[str], int]) -> list[dict[str, Any]]:
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
            "queue_delay_s": np.asarray(list(st.recent_delays), dtype=np.float64),
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
        return stage_snapshot(rt._stages, rt._loop.terms_log, rt.queued)
