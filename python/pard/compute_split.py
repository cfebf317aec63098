"""Where a run's compute went (DESIGN §4): per stage, the seconds that were useful, wasted or unresolved,
and the share of drops made before any compute.

The rule is ``cpp/include/pard/compute_split.hpp``'s, applied by each engine as its requests run: a
batch's measured duration is shared equally among the requests in it; the shares of a request are held
*unresolved* while it is in flight and become *useful* when it finishes on time, *wasted* when it ends
otherwise (late, dropped, rejected, failed); a share charged to a request that had already ended is
wasted at once.  The simulator and the live runtime keep it in C++ (``compute_split()`` of
``pard._core.Simulator`` and ``LivePipeline``); :mod:`pard.ray`'s driver through
``pard._core.ComputeBook``.  This module holds what they hand over, for :class:`pard.report.Report`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import PardValueError

__all__ = ["ComputeSplit"]

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class ComputeSplit:
    """One run's compute by use.

    Attributes:
        useful_s, wasted_s, unresolved_s: per stage (stage-index order), seconds, float64 ``(n_stages,)``;
            per stage they add up to the stage's compute (batch durations summed), ``unresolved_s`` being
            what requests still in flight hold (0 once a run has ended).
        shed: requests dropped or rejected, every request of the run.
        shed_before_compute: of those, the ones no stage had spent anything on when they ended.
    """

    useful_s: F64
    wasted_s: F64
    unresolved_s: F64
    shed: int
    shed_before_compute: int

    @classmethod
    def from_mapping(cls, split: Mapping[str, Any], n_stages: int) -> ComputeSplit:
        """From an engine's ``compute_split()`` dict (keys as the attributes).

        Raises:
            PardValueError: a key missing, an array not of shape ``(n_stages,)`` or not finite, a count
                negative or ``shed_before_compute > shed``.
        """
        arrays = {}
        for key in ("useful_s", "wasted_s", "unresolved_s"):
            if key not in split:
                raise PardValueError(f"compute_split needs {key!r}, got keys {sorted(split)}")
            a = np.asarray(split[key], dtype=np.float64)
            if a.shape != (n_stages,) or not np.isfinite(a).all():
                raise PardValueError(f"compute_split[{key!r}] must be {n_stages} finite seconds (one per stage), "
                                     f"got {a.tolist()}")
            arrays[key] = a
        counts = {}
        for key in ("shed", "shed_before_compute"):
            v = split.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise PardValueError(f"compute_split[{key!r}] must be an int >= 0, got {v!r}")
            counts[key] = int(v)
        if counts["shed_before_compute"] > counts["shed"]:
            raise PardValueError(f"compute_split['shed_before_compute']={counts['shed_before_compute']} exceeds "
                                 f"compute_split['shed']={counts['shed']}")
        return cls(useful_s=arrays["useful_s"], wasted_s=arrays["wasted_s"], unresolved_s=arrays["unresolved_s"],
                   shed=counts["shed"], shed_before_compute=counts["shed_before_compute"])

    @property
    def total_s(self) -> F64:
        """Per stage, the compute charged (s): useful + wasted + unresolved."""
        return self.useful_s + self.wasted_s + self.unresolved_s

    @property
    def wasted_share(self) -> float:
        """Wasted over all compute charged, every stage (0 when nothing ran)."""
        total = float(self.total_s.sum())
        return float(self.wasted_s.sum()) / total if total > 0 else 0.0

    @property
    def drops_before_compute(self) -> float:
        """The share of the shed requests that no stage had spent on (NaN when nothing was shed)."""
        return self.shed_before_compute / self.shed if self.shed else math.nan

    def to_dict(self, stage_names: list[str]) -> dict[str, Any]:
        """``{stage: {useful_s, wasted_s, unresolved_s}}``, plain floats."""
        return {name: {"useful_s": float(self.useful_s[k]), "wasted_s": float(self.wasted_s[k]),
                       "unresolved_s": float(self.unresolved_s[k])} for k, name in enumerate(stage_names)}
