"""The online correction of every stage's ``d_k(b)`` from measured batch durations, and its warning.

A profile is measured once, on some machine under some load; the runtime then runs wherever it runs.
When the executors run ``k`` times slower (or faster) than their profile, every ``d_k(b)`` in the
end-to-end estimate of paper Eq. 3b is off by ``k``, and the drops follow the profile instead of the
machine.  The planner (``SyncDurationScale`` in ``cpp/include/pard/sync_planner.hpp``) keeps, per
stage, the ratio ``s_k`` of measured to profiled batch durations (the latency scale AlpaServe applies to
its profiles) and multiplies every ``d_k`` by it; ``s_k`` is published to the C++ stage, which scales its own ``d_k(b)`` and its service
rate too.

How ``s_k`` is formed, so that it holds from a run's first batches and never forgets:

* **count-weighted from the first batch, then running.**  Each stage keeps decayed sums ``M_k`` of
  measured and ``P_k`` of profiled batch seconds and ``N_k`` of batches; every interval multiplies them by
  ``0.5 ** (dt / half_life_s)`` before adding its own batches.  Early in a run (``t << half_life_s``) the
  decay is negligible and ``M_k / P_k`` is the plain count-weighted ratio over every batch so far; later
  it is a running ratio over the last few half-lives, which follows a machine whose load changes
  within seconds (a shared machine's live runs went from 1.2x to 1.9x their profile within minutes).
  A stage that runs no batch keeps its ratio (both sums decay alike); only its weight ``N_k`` fades.
* **pooled over the stages while a stage has few batches.**  The executors share one machine, so a
  stage that has not run yet (a downstream stage behind an entry that drops everything its profile calls
  infeasible) takes the whole pipeline's ratio ``s = sum M / sum P``:
  ``s_k = (N_k * M_k / P_k + kappa * s) / (N_k + kappa)``, ``kappa`` = :data:`PRIOR_BATCHES`.  Without
  this, an entry that believes a 3x-too-slow profile drops every request, so the downstream stages never
  measure a batch and their ``d`` stays 3x too high for ever.
* clipped to [:data:`SCALE_MIN`, :data:`SCALE_MAX`].

A runtime far from its profile says so: once a stage has run :data:`WARN_MIN_BATCHES` batches and its
ratio is beyond :data:`WARN_FACTOR` either way, :meth:`DriftWatch.drifted` names it (once per stage;
:meth:`DriftWatch.warn_drifted` raises a :class:`pard.PardWarning` for it).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .errors import PardWarning

__all__ = ["DriftWatch", "HALF_LIFE_S", "PRIOR_BATCHES", "SCALE_MIN", "SCALE_MAX", "WARN_FACTOR",
           "WARN_MIN_BATCHES"]

F64 = npt.NDArray[np.float64]

#: Half-life (s) of the running ratio: the weight of a batch halves every this many seconds.
HALF_LIFE_S = 2.5
#: Batches' worth of weight the pooled (whole-pipeline) ratio carries in a stage's own ratio.
PRIOR_BATCHES = 8.0
#: Clip of the measured / profiled duration ratio: wide, so that a stage running far from its profile (a
#: front starving it, a profile from another machine) is budgeted at what it is measured to take; the
#: clip only keeps a single absurd batch from setting a ratio no machine has.
SCALE_MIN, SCALE_MAX = 0.001, 1000.0
#: A stage whose ratio is beyond this factor either way (``s > 2`` or ``s < 0.5``) is reported as drifted.
WARN_FACTOR = 2.0
#: ... once it has run at least this many batches.
WARN_MIN_BATCHES = 20


class DriftWatch:
    """Which stages run far from their profile, from the ratios and batch counts the planner computes.

    Args:
        n: number of stages.
    """

    def __init__(self, n: int) -> None:
        self._count = np.zeros(n, dtype=np.int64)  # batches ever seen
        self._warned = np.zeros(n, dtype=bool)
        self._clipped = np.zeros(n, dtype=bool)  # warned at the clip (the correction's limit) too
        self.scale: F64 = np.ones(n)

    def observe(self, scale: Sequence[float], batches_seen: Sequence[int]) -> None:
        """Take the planner's ratios ``s_k`` and batches seen per stage, so that :meth:`drifted` reports on them."""
        self.scale = np.asarray(scale, dtype=np.float64)
        self._count = np.asarray(batches_seen, dtype=np.int64)

    def drifted(self) -> list[tuple[int, float, int]]:
        """Stages newly past :data:`WARN_FACTOR`, or newly at the clip, after :data:`WARN_MIN_BATCHES`
        batches: ``(k, s_k, batches)``.

        Each stage is reported at most twice per run: once when it passes the factor, once more if its ratio
        reaches the clip (:data:`SCALE_MIN`, :data:`SCALE_MAX`), past which the correction does not follow.
        """
        enough = self._count >= WARN_MIN_BATCHES
        far = enough & ~self._warned & ((self.scale > WARN_FACTOR) | (self.scale < 1.0 / WARN_FACTOR))
        clip = enough & ~self._clipped & ((self.scale >= SCALE_MAX) | (self.scale <= SCALE_MIN))
        self._warned |= far | clip
        self._clipped |= clip
        return [(int(k), float(self.scale[k]), int(self._count[k])) for k in np.flatnonzero(far | clip)]

    def warn_drifted(self, names: Sequence[str]) -> None:
        """A :class:`pard.PardWarning` for each stage :meth:`drifted` reports (``names``: the stages' names)."""
        for k, s_k, nb in self.drifted():
            warnings.warn(f"stage {names[k]!r} runs {_ratio_text(s_k)} its profile's batch durations (over {nb} "
                          f"batches; beyond {WARN_FACTOR:g}x either way): {_correction_text(s_k)}", PardWarning,
                          stacklevel=3)


def _ratio_text(s: float) -> str:
    """``"2.50x"``, or, at the clip, ``"at least 10x"`` / ``"at most 0.1x"``: the true ratio is past it."""
    if s >= SCALE_MAX:
        return f"at least {SCALE_MAX:g}x"
    if s <= SCALE_MIN:
        return f"at most {SCALE_MIN:g}x"
    return f"{s:.2f}x"


def _correction_text(s: float) -> str:
    """What the online correction does about it: all of it, or only up to its clip (a new user's profile 100x
    too fast was reported as 10x, and goodput fell to 5 % of a right profile's)."""
    if SCALE_MIN < s < SCALE_MAX:
        return "pard corrects d(b) online, but the profile does not describe this machine's executors; measure it again"
    return (f"pard's online correction of d(b) stops at {SCALE_MIN:g}x-{SCALE_MAX:g}x, so its drops and order "
            f"still follow a profile that is wrong by more than that; measure it again")
