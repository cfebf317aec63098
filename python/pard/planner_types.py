"""The planner's plain data: what it must know about a stage (:class:`PlannerStage`) and what it publishes
to one (:class:`StageTerms`).  :mod:`pard.planner` re-exports both; they live here to keep the planner
module to its loop (DESIGN §3.5)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from . import profile as _profile

__all__ = ["PlannerStage", "StageTerms"]

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PlannerStage:
    """What the planner must know about one stage (plain values, no simulator objects).

    Attributes:
        name: the stage's name.
        batch_sizes, durations_s: the profile's measured points, ``d(b)`` in seconds, piecewise-linear
            between them and linearly extrapolated past the last (as ``pard._core.Profile``).
        max_batch: the stage's largest batch.
        paths: the stage's downstream paths: each a tuple of stage indices from a successor of this
            stage to a sink, the stage itself excluded.  Empty for a sink.
        entry: True for a stage that receives the pipeline's input (its arrivals set the window's CV).
        llm: True for an LLM stage (its queueing term is read live under ``PolicySpec.llm_live_queue``).
    """

    name: str
    batch_sizes: tuple[int, ...]
    durations_s: tuple[float, ...]
    max_batch: int
    paths: tuple[tuple[int, ...], ...] = ()
    entry: bool = False
    llm: bool = False

    def duration(self, batch: float | F64) -> Any:
        """``d(b)`` in seconds for a (possibly fractional) batch size ``b``: :func:`pard.profile.duration`
        (the one rule, as ``pard._core.Profile``; a single-point profile is constant)."""
        return _profile.duration(*self._points, batch)

    @cached_property
    def _points(self) -> tuple[F64, F64]:
        return (np.asarray(self.batch_sizes, dtype=np.float64), np.asarray(self.durations_s, dtype=np.float64))

    @classmethod
    def from_profile(
        cls, name: str, profile: Mapping[int, float], max_batch: int,
        paths: Sequence[Sequence[int]] = (), entry: bool = False, llm: bool = False,
    ) -> "PlannerStage":
        """Build from a ``{batch: duration_s}`` profile mapping (as ``StageSpec.profile``)."""
        pts = sorted((int(b), float(d)) for b, d in profile.items())
        return cls(name, tuple(b for b, _ in pts), tuple(d for _, d in pts), int(max_batch),
                   tuple(tuple(int(i) for i in p) for p in paths if len(p)), bool(entry), bool(llm))


@dataclass(frozen=True)
class StageTerms:
    """What the planner publishes to one stage's scheduler, plus diagnostics.

    ``downstream_s, mu, eps, queue_delay_s, admit_fraction, service_rate, duration_scale, path_rate,
    overload_downstream_s, floor_downstream_s, outrank_downstream_s`` are the
    arguments of ``StageScheduler.publish`` / ``Simulator.publish``; ``in_rate`` (req/s, arrivals at the
    stage), ``demand_rate`` (req/s the stage would receive with no stage above it paced or, for an llm
    stage with ``PolicySpec.shed_demand``, dropping on its behalf: what an autoscaler sizes for), ``batch_size``, ``wait_quantile_s``,
    ``window_s`` and ``lam`` (the quantile in force) are for reports and autoscaling.
    """

    downstream_s: float
    mu: float
    eps: float
    queue_delay_s: float
    admit_fraction: float
    in_rate: float
    batch_size: float
    wait_quantile_s: float
    window_s: float
    service_rate: float = 0.0
    duration_scale: float = 1.0  # 0: none measured yet (prior_terms; the stage uses its own ratio)
    demand_rate: float = 0.0
    lam: float = 0.0
    path_rate: float = 0.0
    overload_downstream_s: float = 0.0
    floor_downstream_s: float = 0.0
    outrank_downstream_s: float = 0.0

    def publish_kwargs(self) -> dict[str, float]:
        """The keyword arguments of ``publish(stage, **kwargs)``."""
        return {
            "downstream_s": self.downstream_s,
            "mu": self.mu,
            "eps": self.eps,
            "queue_delay_s": self.queue_delay_s,
            "admit_fraction": self.admit_fraction,
            "service_rate": self.service_rate,
            "duration_scale": self.duration_scale,
            "path_rate": self.path_rate,
            "overload_downstream_s": self.overload_downstream_s,
            "floor_downstream_s": self.floor_downstream_s,
            "outrank_downstream_s": self.outrank_downstream_s,
        }
