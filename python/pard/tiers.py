"""Per-tier results and weighted goodput (DESIGN §3.7, §4).

A pipeline may declare service tiers (``PipelineSpec.tiers``: name -> weight) and every request carries
a tier code (the index of its tier in that mapping's order; 0 when none are declared).  This module turns
per-request outcomes into per-tier counts, checks the conservation identity for each tier, and computes
the weighted goodput: the summed weight of on-time requests per second.  :class:`pard.report.Report`
calls it; it depends on nothing but NumPy so the simulator and the live runtime share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from .errors import PardValueError

__all__ = ["TierResult", "tier_results", "weighted_goodput"]

# Outcome state codes, as pard._core and pard.report number them.
_ON_TIME, _LATE, _DROPPED, _REJECTED, _FAILED = 1, 2, 3, 4, 5


@dataclass(frozen=True)
class TierResult:
    """One tier's outcomes.  ``submitted = on_time + late + dropped + rejected + failed`` holds exactly."""

    name: str
    weight: float
    submitted: int
    on_time: int
    late: int
    dropped: int
    rejected: int
    failed: int

    @property
    def on_time_share(self) -> float:
        """on_time / submitted of this tier (0 for an empty tier)."""
        return self.on_time / self.submitted if self.submitted else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {"name": self.name, "weight": self.weight, "submitted": self.submitted, "on_time": self.on_time,
                "late": self.late, "dropped": self.dropped, "rejected": self.rejected, "failed": self.failed}


def tier_results(state: npt.ArrayLike, tier: npt.ArrayLike, names: Sequence[str],
                 weights: Sequence[float]) -> list[TierResult]:
    """Per-tier outcome counts.

    Args:
        state: per-request outcome codes (shape ``(n,)``; 1 on time, 2 late, 3 dropped, 4 rejected, 5 failed).
        tier: per-request tier codes, shape ``(n,)``, each in ``0 .. len(names) - 1``.
        names, weights: the tiers in code order (one unnamed tier of weight 1 when both are empty).

    Raises:
        ValueError: shapes differ, a tier code is out of range, or a tier's counts do not add up.
    """
    st = np.asarray(state, dtype=np.int64)
    tr = np.asarray(tier, dtype=np.int64)
    if st.shape != tr.shape:
        raise PardValueError(f"tier must have the shape of state {st.shape}, got {tr.shape}")
    names = list(names) or ["default"]
    weights = list(weights) or [1.0]
    if len(names) != len(weights):
        raise PardValueError(f"tier names ({len(names)}) and weights ({len(weights)}) must match")
    if tr.size and (tr.min() < 0 or tr.max() >= len(names)):
        raise PardValueError(f"tier codes must be in 0..{len(names) - 1}, got {int(tr.min())}..{int(tr.max())}")
    out = []
    for t, (name, w) in enumerate(zip(names, weights)):
        c = np.bincount(st[tr == t], minlength=6)
        res = TierResult(str(name), float(w), int(c.sum()), int(c[_ON_TIME]), int(c[_LATE]), int(c[_DROPPED]),
                         int(c[_REJECTED]), int(c[_FAILED]))
        if res.submitted != res.on_time + res.late + res.dropped + res.rejected + res.failed:
            raise PardValueError(f"conservation violated for tier {name!r}: {res}")
        out.append(res)
    return out


def weighted_goodput(tiers: Sequence[TierResult], duration_s: float) -> float:
    """Sum over tiers of weight x on-time requests, per second of the run (0 for an empty run)."""
    if duration_s <= 0:
        return 0.0
    return sum(t.weight * t.on_time for t in tiers) / duration_s
