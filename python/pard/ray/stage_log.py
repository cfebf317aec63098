"""A stage actor's statistics log: what the planner takes every sync and the report reads at the end.

The samples are the local runtime's (:mod:`pard.runtime.planner_loop`): arrival times, each request's
queueing delay when taken into a batch, and one row per executed batch ``(start, duration, size,
wait)``.  :meth:`StageLog.take` returns those since its previous call, keyed exactly as the local
runtime hands them to :meth:`pard.Planner.update` and the run recorder, so both runtimes' planners
see the same statistics; :meth:`StageLog.history` returns all of them in the same form, for the
driver's :class:`pard.recorder.RunRecorder`.  It also keeps two delays pard.ray adds to the local
runtime's: a request's *hop* (its arrival time to reaching this actor) and a batch's *record lag*
(its end on the worker to this actor knowing it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["StageLog"]


class StageLog:
    """Append-only samples of one stage (all times on the deployment clock, s)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.q_t: list[float] = []
        self.q_s: list[float] = []
        self.batches: list[tuple[float, float, int, float]] = []  # start, duration, size, wait
        self._cursor = (0, 0, 0)
        self.hop_s = 0.0
        self.hops = 0
        self.lag_s = 0.0

    def _form(self, a: int, q: int, b: int, na: int, nq: int, nb: int) -> dict[str, np.ndarray]:
        rows = self.batches[b:nb]
        return {
            "arrival_s": np.asarray(self.arrivals[a:na], dtype=np.float64),
            "qdelay_t_s": np.asarray(self.q_t[q:nq], dtype=np.float64),
            "qdelay_s": np.asarray(self.q_s[q:nq], dtype=np.float64),
            "batch_start_s": np.asarray([r[0] for r in rows], dtype=np.float64),
            "batch_duration_s": np.asarray([r[1] for r in rows], dtype=np.float64),
            "batch_size": np.asarray([r[2] for r in rows], dtype=np.int64),
            "batch_wait_s": np.asarray([r[3] for r in rows], dtype=np.float64),
        }

    def take(self) -> dict[str, np.ndarray]:
        """The samples since the previous call."""
        end = (len(self.arrivals), len(self.q_s), len(self.batches))
        out = self._form(*self._cursor, *end)
        self._cursor = end
        return out

    def history(self) -> dict[str, np.ndarray]:
        """Every sample since the start, in the form of :meth:`take`."""
        return self._form(0, 0, 0, len(self.arrivals), len(self.q_s), len(self.batches))

    def delays(self) -> dict[str, Any]:
        """``hop_s_mean`` and ``record_lag_s_mean`` (s; 0 before any sample)."""
        return {"hop_s_mean": self.hop_s / self.hops if self.hops else 0.0,
                "record_lag_s_mean": self.lag_s / len(self.batches) if self.batches else 0.0}
