"""Rate-aware admission at the entry stages (DESIGN §3.7): the planner's share of input each entry admits.

The planner (:mod:`pard.planner`) owns one :class:`RateAdmission` when the policy sets
``PolicySpec.rate_admission``; once per sync it hands it the interval's per-stage arrivals, the stages'
service rates and their serving workers, and publishes :attr:`RateAdmission.share` as each stage's
``admit_fraction``.  The C++ stage scheduler sheds the refused share on arrival, before any compute is
spent, lowest tier first.  Two rules, chosen by ``PolicySpec.rate_admission_s``:

* **long-run** (``rate_admission_s > 0``, the default 30 s): an entry ``k`` sheds only for a downstream
  stage ``i`` that has been short for the whole last ``rate_admission_s`` seconds *with a fixed number of
  workers*: with ``D_i`` its demand over that span (arrivals divided by the share ``k`` admitted while they
  arrived) and ``S_i`` the requests its workers could finish at full batches over the span,
  ``f_k = min_i S_i / D_i`` over the stages with ``D_i > S_i``, else 1.  A burst shorter than the span is
  left to the downstream queue and the drop rule; a stage whose workers changed during the span is being
  resized by an autoscaler, which sizes on :meth:`RateAdmission.demand` and must not be fought.
* **per sync** (``rate_admission_s == 0``, the rule first measured in bench/RESULTS.md, issue 9): for
  every downstream stage whose windowed load factor at full batches exceeds 1,
  ``f <- f * service_rate_i / rate_i`` (its rate in the last interval); otherwise ``f`` grows back by at
  most :data:`ADMIT_GROWTH` per sync, to 1.

Either way :meth:`RateAdmission.demand` reports each stage's input as it would be without the shedding
(what an autoscaler must size for: sizing on the post-shed rate would starve the stage that is short).
"""

from __future__ import annotations

from collections import deque
from typing import Deque, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["RateAdmission", "ADMIT_GROWTH", "ADMIT_MIN"]

#: Per-sync rule: largest relative growth of the admitted share per sync.  Both rules: its floor.
ADMIT_GROWTH = 0.1
ADMIT_MIN = 0.05

F64 = npt.NDArray[np.float64]


class RateAdmission:
    """The admitted share of every entry stage (module doc).

    Args:
        entry: per stage, True for an entry stage (only entries shed).
        downstream: per stage, the indices of the stages on its downstream paths.
        long_s: the long-run span (s); 0 selects the per-sync rule.
    """

    def __init__(self, entry: Sequence[bool], downstream: Sequence[Sequence[int]], long_s: float) -> None:
        self._entry = [bool(e) for e in entry]
        self._down = [sorted({int(i) for i in d}) for d in downstream]
        self._long_s = float(long_s)
        self.share: F64 = np.ones(len(self._entry))
        # long-run history, oldest first: (end s, length s, arrivals (n,), finishable (n,), workers (n,),
        # admitted share in force (n,))
        self._hist: Deque[tuple[float, float, F64, F64, F64, F64]] = deque()

    def update(self, now_s: float, dt_s: float, arrivals: F64, rate_win: F64, service: F64, workers: F64) -> None:
        """Ingest one interval and move every entry's share.

        Args:
            now_s, dt_s: the interval's end and length (s).
            arrivals: (n,) requests that arrived at each stage in the interval.
            rate_win: (n,) each stage's windowed arrival rate (req/s; the per-sync rule's test).
            service: (n,) each stage's service rate at full batches with its serving workers (req/s).
            workers: (n,) each stage's serving workers.
        """
        if self._long_s <= 0.0:
            self._per_sync(arrivals / dt_s, rate_win, service)
            return
        self._hist.append((now_s, dt_s, arrivals.astype(np.float64), service * dt_s, workers.astype(np.float64),
                           self.share.copy()))
        while self._hist and self._hist[0][0] - self._hist[0][1] < now_s - self._long_s - 1e-9:
            self._hist.popleft()
        span = sum(h[1] for h in self._hist)
        if span < self._long_s - 1e-9:  # not yet a whole span of history: admit everything
            return
        arr = np.stack([h[2] for h in self._hist])       # (T, n)
        can = np.stack([h[3] for h in self._hist]).sum(axis=0)
        wk = np.stack([h[4] for h in self._hist])
        fixed = wk.min(axis=0) == wk.max(axis=0)
        shares = np.stack([h[5] for h in self._hist])     # (T, n), entries' shares in force
        for k, down in enumerate(self._down):
            if not self._entry[k]:
                continue
            f = 1.0
            demand = (arr / shares[:, [k]]).sum(axis=0)
            for i in down:
                if fixed[i] and demand[i] > can[i]:
                    f = min(f, can[i] / demand[i])
            self.share[k] = max(ADMIT_MIN, f)

    def _per_sync(self, rate_last: F64, rate_win: F64, service: F64) -> None:
        for k, down in enumerate(self._down):
            if not self._entry[k]:
                continue
            factor = 1.0 + ADMIT_GROWTH
            for i in down:
                if rate_win[i] > service[i] and rate_last[i] > 0:  # stays above 1 over the window
                    factor = min(factor, service[i] / rate_last[i])
            self.share[k] = min(1.0, max(ADMIT_MIN, self.share[k] * factor))

    def demand(self, rate: F64) -> F64:
        """Each stage's input rate scaled up by the share its entry sheds (what it would receive), (n,)."""
        out = rate.copy()
        for k, down in enumerate(self._down):
            if self._entry[k] and self.share[k] < 1.0:
                for i in down:
                    out[i] = max(out[i], rate[i] / self.share[k])
        return out
