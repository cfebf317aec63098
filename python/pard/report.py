"""Run reports: every metric of DESIGN §4, for one policy's run (simulated or live).

A :class:`Report` is built from plain per-request outcomes (send time, final state, finish time, the
stage and reason of a drop, the compute charged to the request) plus a few per-second series the run
recorded (queueing delay per stage, workers serving per stage, pipeline capacity).  It checks the
conservation identity ``submitted = on_time + late + dropped + rejected + failed`` when it is built and
derives everything else from those arrays: goodput, drop rate, invalid rate, drop shares per stage,
transient drop rates, latency percentiles and the goodput bound.  Where the compute went per stage (useful,
wasted, unresolved) and the share of drops before any compute come from the engine that ran
(:mod:`pard.compute_split`), which counts them as the requests run.

Several reports (one per policy, same pipeline and arrivals) form a comparison: :func:`comparison_dict`
gives the JSON of ``pard simulate --json``, :func:`comparison_table` a rich table, and
:func:`pard.plotting.plot_reports` the figure.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ._extras import require
from .compute_split import ComputeSplit
from .errors import PardValueError
from .fluid_bound import fluid_bound_share, fluid_goodput_bound
from .outcomes import DROPPED as _DROPPED
from .outcomes import FAILED as _FAILED
from .outcomes import LATE as _LATE
from .outcomes import ON_TIME as _ON_TIME
from .outcomes import REASONS, STATES
from .outcomes import REJECTED as _REJECTED
from .tiers import tier_results, weighted_goodput

__all__ = [
    "STATES",
    "Report",
    "StageReport",
    "comparison_dict",
    "comparison_table",
    "bin_per_second",
    "report_bins",
    "sending_time_s",
    "DEFAULT_REASONS",
    "fluid_goodput_bound",
    "fluid_bound_share",
]

F64 = npt.NDArray[np.float64]

#: Drop reason names by code, used when the caller passes none: :data:`pard.outcomes.REASONS`.
DEFAULT_REASONS = REASONS


def report_bins(send_s: F64, t0_s: float | None = None, duration_s: float | None = None) -> tuple[float, int]:
    """The 1 s bins a run's report covers, ``(t0_s, n_bins)``: one rule for simulator, runtime and Ray.

    ``t0_s`` defaults to the first send rounded down; ``n_bins`` is ``ceil(duration_s)`` when given, else
    the whole bins from ``t0_s`` that hold the last send.  Rates are per ``duration_s`` when given, else
    per ``n_bins`` s: the bound's capacity is counted per whole bin, so a shorter divisor would put the
    bound above the pipeline's capacity (a burst of 0.05 s is a rate over 1 s)."""
    n = send_s.size
    t0 = float(t0_s) if t0_s is not None else (float(math.floor(send_s[0])) if n else 0.0)
    if duration_s is not None:
        return t0, max(1, int(math.ceil(float(duration_s) - 1e-9)))
    return t0, max(1, int(math.floor((float(send_s[-1]) if n else t0) - t0)) + 1)


def sending_time_s(send_s: F64) -> float:
    """The real time a live run's sends took (s), the divisor of its rates: ``n`` sends spread over
    ``last - first`` seconds at a steady rate ``r`` span ``(n - 1) / r``, so they took
    ``(last - first) * n / (n - 1)`` (1 500 sends at 1 000/s: 1.5 s, where the whole one-second bins
    that hold them count 2 s).  At least 1 s, as :func:`report_bins` counts a short run, so that a
    burst's rate is per second like the per-second goodput bound (1 s for fewer than two sends).

    ``send_s``: the send times (s), sorted, shape ``(n,)``.
    """
    n = send_s.size
    if n < 2:
        return 1.0
    return max(1.0, (float(send_s[-1]) - float(send_s[0])) * n / (n - 1))


def bin_per_second(t_s: F64, t0_s: float, n_bins: int, weights: F64 | None = None) -> F64:
    """Sum ``weights`` (default 1 each) of samples at times ``t_s`` into 1 s bins from ``t0_s``.

    Samples outside ``[t0_s, t0_s + n_bins)`` go to the nearest edge bin (a run's last events may
    land after the last arrival).  Returns shape ``(n_bins,)``, float64.
    """
    if n_bins <= 0:
        return np.zeros(0)
    idx = np.clip(np.floor(np.asarray(t_s, dtype=np.float64) - t0_s), 0, n_bins - 1).astype(np.int64)
    return np.bincount(idx, weights=weights, minlength=n_bins).astype(np.float64)


def _nan_to_none(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _nan_to_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan_to_none(v) for v in x]
    return x


@dataclass(frozen=True)
class StageReport:
    """One stage's share of a run.

    Attributes:
        name: the stage.
        submitted: requests that reached the stage.
        executed: requests the stage executed (batch rows summed).
        dropped: requests dropped at this stage (all reasons).
        dropped_by_reason: reason -> count.
        rejected: requests refused at this stage's admission (state rejected, attributed here).
        failed: requests whose batch failed at this stage (executor error; none in simulation).
        drop_share: this stage's share of all drops (0 when nothing dropped).
        compute_s: execution time spent at this stage (s, batch durations summed).
        mean_queue_delay_s: mean queueing delay of the requests taken into batches here (s).
        useful_compute_s, wasted_compute_s, unresolved_compute_s: this stage's compute spent on requests
            that finished on time, that ended otherwise (late, dropped, rejected, failed), and that were
            still in flight (s; :mod:`pard.compute_split`; NaN when the run gave no split).
    """

    name: str
    submitted: int
    executed: int
    dropped: int
    dropped_by_reason: dict[str, int]
    rejected: int
    failed: int
    drop_share: float
    compute_s: float
    mean_queue_delay_s: float
    useful_compute_s: float = math.nan
    wasted_compute_s: float = math.nan
    unresolved_compute_s: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form: every field but ``name`` (the key it is filed under)."""
        out = asdict(self)
        del out["name"]
        return out


class Report:
    """The metrics of one run of one policy (DESIGN §4).

    Args (keyword-only; arrays have one entry per request, indexed by request id):
        policy, pipeline: names, for tables and JSON.
        stage_names: the stages, in stage-index order.
        send_s: arrival time at the pipeline (s), float64 ``(n,)``.
        state: outcome codes (:data:`STATES`), int ``(n,)``; no request may be pending.
        finish_s: finish time (s) of finished requests (others ignored), float64 ``(n,)``.
        drop_stage: stage index of a drop, -1 otherwise, int ``(n,)``.
        reason: drop reason code (index into ``reasons``), -1 otherwise, int ``(n,)``.
        compute_s: compute time charged to each request (s), float64 ``(n,)``.
        reasons: reason names by code.
        stage_submitted, stage_executed: per stage counts, shape ``(n_stages,)``.
        stage_compute_s: per stage execution time (s), shape ``(n_stages,)``.
        t0_s: start of the first 1 s bin of the per-second series.
        qdelay_sum_s, qdelay_count: per stage and second, the summed queueing delays and their count,
            shape ``(n_stages, n_bins)``.
        workers: mean workers serving per stage and second, shape ``(n_stages, n_bins)``.
        capacity: the pipeline's capacity in each second (req/s) from the workers serving then,
            shape ``(n_bins,)``.
        slo_s: each request's SLO (s), scalar or ``(n,)``; lets the goodput bound carry queued work
            over to later seconds (:func:`fluid_goodput_bound`).  None: the per-second bound of DESIGN
            §4 without carry-over, which a policy can exceed slightly when work queued in one second
            finishes in the next.
        duration_s: the span goodput is per (s); default the number of one-second bins.
        compute_split: where the compute went, per stage (:class:`pard.compute_split.ComputeSplit`, or the
            engines' ``compute_split()`` dict); it covers every request of the run, like
            ``stage_compute_s``.  None: the compute figures that need it are NaN.

    Attribute ``window``: None when the report covers every request of the run (a simulation, a closed
    runtime within its ``history``); otherwise set by ``Runtime.report()`` to what it covers:
    ``requests`` (in the report), ``submitted`` (ever), ``not_held`` (older than the runtime's
    ``history``, no longer held), ``pending`` (in flight, not yet in a report) and ``totals`` (every
    request ever, by state, from the runtime's counters).  Then the figures above are those of the
    window, not of the whole run.

    Raises:
        ValueError: shapes disagree, a request is still pending, conservation fails, or ``compute_split``
            is malformed.
    """

    def __init__(
        self,
        *,
        policy: str,
        pipeline: str,
        stage_names: Sequence[str],
        send_s: F64,
        state: npt.ArrayLike,
        finish_s: F64,
        drop_stage: npt.ArrayLike,
        reason: npt.ArrayLike,
        compute_s: F64,
        reasons: Sequence[str] = DEFAULT_REASONS,
        stage_submitted: npt.ArrayLike,
        stage_executed: npt.ArrayLike,
        stage_compute_s: npt.ArrayLike,
        t0_s: float,
        qdelay_sum_s: npt.ArrayLike,
        qdelay_count: npt.ArrayLike,
        workers: npt.ArrayLike,
        capacity: npt.ArrayLike,
        slo_s: float | npt.ArrayLike | None = None,
        duration_s: float | None = None,
        tier: npt.ArrayLike | None = None,
        tier_names: Sequence[str] = (),
        tier_weights: Sequence[float] = (),
        compute_split: ComputeSplit | Mapping[str, Any] | None = None,
    ) -> None:
        self.policy = policy
        self.pipeline = pipeline
        self.window: dict[str, Any] | None = None  # see the class docstring
        self.stage_names = list(stage_names)
        self.reasons = list(reasons)
        self.send_s = np.asarray(send_s, dtype=np.float64)
        self.state = np.asarray(state, dtype=np.int8)
        self.finish_s = np.asarray(finish_s, dtype=np.float64)
        self.drop_stage = np.asarray(drop_stage, dtype=np.int32)
        self.reason = np.asarray(reason, dtype=np.int32)
        self.compute_s = np.asarray(compute_s, dtype=np.float64)
        n = self.send_s.shape[0]
        per_request: list[tuple[str, npt.NDArray[Any]]] = [
            ("state", self.state), ("finish_s", self.finish_s), ("drop_stage", self.drop_stage),
            ("reason", self.reason), ("compute_s", self.compute_s)]
        for field, arr in per_request:
            if arr.shape != (n,):
                raise PardValueError(f"{field} must have shape ({n},) like send_s, got {arr.shape}")
        ns = len(self.stage_names)
        self.t0_s = float(t0_s)
        self.qdelay_sum_s = np.asarray(qdelay_sum_s, dtype=np.float64)
        self.qdelay_count = np.asarray(qdelay_count, dtype=np.float64)
        self.workers = np.asarray(workers, dtype=np.float64)
        self.capacity = np.asarray(capacity, dtype=np.float64)
        self.slo_s = None if slo_s is None else np.broadcast_to(np.asarray(slo_s, dtype=np.float64), (n,))
        self._bound_count: float | None = None
        nb = self.capacity.shape[0]
        for field, arr in [("qdelay_sum_s", self.qdelay_sum_s), ("qdelay_count", self.qdelay_count),
                           ("workers", self.workers)]:
            if arr.shape != (ns, nb):
                raise PardValueError(f"{field} must have shape ({ns}, {nb}) (stages x seconds), got {arr.shape}")

        counts = np.bincount(self.state.astype(np.int64), minlength=len(STATES))
        if counts.size > len(STATES) or self.state.min(initial=0) < 0:
            raise PardValueError(f"state codes must be in 0..{len(STATES) - 1}, got max {self.state.max()}")
        if counts[0]:
            raise PardValueError(f"{counts[0]} request(s) still pending: a report needs a finished run")
        self.submitted = int(n)
        self.on_time = int(counts[_ON_TIME])
        self.late = int(counts[_LATE])
        self.dropped = int(counts[_DROPPED])
        self.rejected = int(counts[_REJECTED])
        self.failed = int(counts[_FAILED])
        total = self.on_time + self.late + self.dropped + self.rejected + self.failed
        if total != self.submitted:  # pragma: no cover - guarded by the pending check above
            raise PardValueError(f"conservation violated: submitted {self.submitted} != sum of outcomes {total}")

        # ---- per stage
        is_drop = self.state == _DROPPED
        ds = self.drop_stage[is_drop]
        if ds.size and (ds.min() < 0 or ds.max() >= ns):
            raise PardValueError(f"drop_stage of a dropped request must be in 0..{ns - 1}, got {ds.min()}..{ds.max()}")
        rs = self.reason[is_drop]
        by_stage = np.bincount(ds, minlength=ns) if ns else np.zeros(0, np.int64)
        sub = np.asarray(stage_submitted, dtype=np.int64)
        exe = np.asarray(stage_executed, dtype=np.int64)
        comp = np.asarray(stage_compute_s, dtype=np.float64)
        qsum = self.qdelay_sum_s.sum(axis=1)
        qn = self.qdelay_count.sum(axis=1)
        split = compute_split if compute_split is None or isinstance(compute_split, ComputeSplit) else \
            ComputeSplit.from_mapping(compute_split, ns)
        if split is not None and split.useful_s.shape != (ns,):
            raise PardValueError(f"compute_split must have one entry per stage ({ns}), got {split.useful_s.shape}")
        self.compute_split = split
        #: Per LLM stage name, its output-length predictor's calibration {quantile, n, under_share}: the share
        #: of requests finished there whose length fell within the length predicted at their join; None
        #: for a pipeline without an LLM stage (set by the simulator).
        self.llm_calibration: dict[str, dict[str, Any]] | None = None
        nan = np.full(ns, math.nan)
        use = (nan, nan, nan) if split is None else (split.useful_s, split.wasted_s, split.unresolved_s)
        self.stages: list[StageReport] = []
        for k, name in enumerate(self.stage_names):
            here = rs[ds == k]
            by_reason = {self.reasons[c] if 0 <= c < len(self.reasons) else str(int(c)): int(m)
                         for c, m in zip(*np.unique(here, return_counts=True))}
            self.stages.append(StageReport(
                name=name, submitted=int(sub[k]), executed=int(exe[k]), dropped=int(by_stage[k]),
                dropped_by_reason=by_reason,
                rejected=int(np.count_nonzero((self.state == _REJECTED) & (self.drop_stage == k))),
                failed=int(np.count_nonzero((self.state == _FAILED) & (self.drop_stage == k))),
                drop_share=float(by_stage[k] / self.dropped) if self.dropped else 0.0,
                compute_s=float(comp[k]), mean_queue_delay_s=float(qsum[k] / qn[k]) if qn[k] else 0.0,
                useful_compute_s=float(use[0][k]), wasted_compute_s=float(use[1][k]),
                unresolved_compute_s=float(use[2][k]),
            ))

        # ---- per-second series (requests binned by send time)
        self.duration_s = float(nb) if duration_s is None else float(duration_s)
        self.arrivals_per_s = bin_per_second(self.send_s, self.t0_s, nb)
        self.goodput_per_s = bin_per_second(self.send_s[self.state == _ON_TIME], self.t0_s, nb)
        lost = (self.state == _DROPPED) | (self.state == _REJECTED)
        self.drops_per_s = bin_per_second(self.send_s[lost], self.t0_s, nb)
        self.late_per_s = bin_per_second(self.send_s[self.state == _LATE], self.t0_s, nb)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.queue_delay_per_s = np.where(self.qdelay_count > 0, self.qdelay_sum_s / self.qdelay_count, np.nan)

        # ---- per service tier (DESIGN §3.7): counts, conservation per tier, weighted goodput
        self.tier = np.zeros(n, dtype=np.int32) if tier is None else np.asarray(tier, dtype=np.int32)
        self.tiers = tier_results(self.state, self.tier, tier_names, tier_weights)

    def tier_goodput_per_s(self) -> F64:
        """On-time requests per second of send time, per tier: shape ``(len(tiers), n_bins)``, row ``k``
        the tier of code ``k`` (rows sum to :attr:`goodput_per_s`)."""
        on_time = self.state == _ON_TIME
        rows = [bin_per_second(self.send_s[on_time & (self.tier == k)], self.t0_s, self.arrivals_per_s.size)
                for k in range(len(self.tiers))]
        return np.stack(rows) if rows else np.zeros((0, self.arrivals_per_s.size))

    # ------------------------------------------------------------------ metrics
    @property
    def goodput(self) -> float:
        """Requests finished within their SLO per second of the run (req/s)."""
        return self.on_time / self.duration_s if self.duration_s else 0.0

    @property
    def weighted_goodput(self) -> float:
        """Summed tier weight of on-time requests per second of the run (= goodput without tiers)."""
        return weighted_goodput(self.tiers, self.duration_s)

    @property
    def offered_load(self) -> float:
        """Requests submitted per second of the run (req/s)."""
        return self.submitted / self.duration_s if self.duration_s else 0.0

    @property
    def goodput_normalised(self) -> float:
        """Goodput over the offered load: the share of requests that finished on time."""
        return self.on_time / self.submitted if self.submitted else 0.0

    @property
    def drop_rate(self) -> float:
        """(dropped + rejected + failed + late) / submitted: the share of requests that did not make it.

        Late requests (finished after their SLO) count here too (DESIGN §2), so a policy that never drops
        (``naive``) still has a non-zero drop rate when requests miss their SLO.  The tables label this
        column "drop rate (incl. late)"; the JSON key stays ``drop_rate``.
        """
        bad = self.dropped + self.rejected + self.failed + self.late
        return bad / self.submitted if self.submitted else 0.0

    @property
    def invalid_rate(self) -> float:
        """Compute spent on requests that did not finish on time / all compute (the wasted GPU time)."""
        total = float(self.compute_s.sum())
        wasted = float(self.compute_s[self.state != _ON_TIME].sum())
        return wasted / total if total > 0 else 0.0

    @property
    def wasted_compute_share(self) -> float:
        """Compute spent on requests that did not finish on time over all compute, every stage and every request
        of the run, from the engine's split (:mod:`pard.compute_split`; NaN without one).  It differs from
        :attr:`invalid_rate` where the report covers part of a live run (``window``), where requests are
        still in flight (their compute is unresolved, in neither part) and by the compute of requests that
        ended while their batch ran, which the split counts and the per-request ``compute_s`` does not."""
        return math.nan if self.compute_split is None else self.compute_split.wasted_share

    @property
    def drops_before_compute(self) -> float:
        """Of the requests shed (dropped or rejected), the share that no stage had spent compute on by the time
        they were shed (:mod:`pard.compute_split`; every request of the run; NaN when none was shed or without a
        split)."""
        return math.nan if self.compute_split is None else self.compute_split.drops_before_compute

    @property
    def drop_share_by_stage(self) -> dict[str, float]:
        """Stage name -> its share of the drops (sums to 1 when anything was dropped)."""
        return {s.name: s.drop_share for s in self.stages}

    @property
    def dropped_by_reason(self) -> dict[str, int]:
        """Reason -> drops over all stages."""
        out: dict[str, int] = {}
        for s in self.stages:
            for r, c in s.dropped_by_reason.items():
                out[r] = out.get(r, 0) + c
        return out

    @property
    def goodput_bound_per_second(self) -> float:
        """DESIGN §4's per-second figure ``sum_t min(arrivals_t, capacity_t)`` (requests).

        It ignores work that queues in one second and finishes in the next, so a policy can exceed it
        slightly; :attr:`goodput_bound_count` is the true bound (equal to this without carry-over).
        """
        return float(np.minimum(self.arrivals_per_s, self.capacity).sum())

    @property
    def goodput_bound_count(self) -> float:
        """An upper bound on the requests any policy can finish on time (:func:`fluid_goodput_bound`; DESIGN §4).

        With the requests' SLOs known (``slo_s``), work may carry over to later seconds until its
        deadline; without them this is :attr:`goodput_bound_per_second`.
        """
        if self._bound_count is None:
            self._bound_count = fluid_goodput_bound(self.send_s, self.slo_s, self.capacity, self.t0_s)
        return self._bound_count

    @property
    def goodput_bound(self) -> float:
        """The goodput bound in req/s (``goodput_bound_count`` over the run's duration)."""
        return self.goodput_bound_count / self.duration_s if self.duration_s else 0.0

    @property
    def goodput_ratio(self) -> float:
        """Goodput over the goodput bound (1 = nothing better is possible)."""
        b = self.goodput_bound_count
        return self.on_time / b if b > 0 else 0.0

    def transient_drop_rate(self, window_s: int) -> float:
        """The worst drop rate over sliding windows of ``window_s`` whole seconds (DESIGN §4).

        Drop rate as :attr:`drop_rate`, by send time; windows without arrivals are skipped; a run
        shorter than the window gives its overall rate.  Raises ValueError for ``window_s < 1``.
        """
        if window_s < 1:
            raise PardValueError(f"window_s must be >= 1 s, got {window_s!r}")
        arr = self.arrivals_per_s
        bad = arr - self.goodput_per_s
        if arr.size <= window_s:
            return float(bad.sum() / arr.sum()) if arr.sum() else 0.0
        ca = np.concatenate([[0.0], np.cumsum(arr)])
        cb = np.concatenate([[0.0], np.cumsum(bad)])
        wa = ca[window_s:] - ca[:-window_s]
        wb = cb[window_s:] - cb[:-window_s]
        ok = wa > 0
        return float((wb[ok] / wa[ok]).max()) if ok.any() else 0.0

    def latency_percentiles(self) -> dict[str, float]:
        """p50, p99 and p99.9 of end-to-end latency of on-time requests (s; NaN when none)."""
        on = self.state == _ON_TIME
        lat = self.finish_s[on] - self.send_s[on]
        if lat.size == 0:
            return {"p50": math.nan, "p99": math.nan, "p99.9": math.nan}
        p = np.percentile(lat, [50, 99, 99.9])
        return {"p50": float(p[0]), "p99": float(p[1]), "p99.9": float(p[2])}

    # ------------------------------------------------------------------ output
    def to_dict(self, *, detail: bool = False) -> dict[str, Any]:
        """The policy's entry of the comparison JSON (issue 4 schema); ``detail`` adds everything else.

        Keys: submitted, on_time, late, dropped, rejected, failed, goodput (req/s), drop_rate,
        invalid_rate, drop_share_by_stage {stage: share}, p99_latency (s, None when nothing finished on
        time), goodput_bound (req/s), weighted_goodput (summed tier weight of on-time requests per
        second), tiers {tier: {weight, submitted, on_time, late, dropped, rejected, failed}},
        wasted_compute_share, drops_before_compute (None when undefined), compute_by_stage {stage: {useful_s,
        wasted_s, unresolved_s}} (absent without a split); window
        (only when the report covers part of a live run: see the class docstring).  With ``detail``: per-stage figures, drops by reason, transient
        drop rates, latency percentiles and the per-second series.
        """
        lat = self.latency_percentiles()
        out: dict[str, Any] = {
            "submitted": self.submitted, "on_time": self.on_time, "late": self.late,
            "dropped": self.dropped, "rejected": self.rejected, "failed": self.failed,
            "goodput": self.goodput, "drop_rate": self.drop_rate, "invalid_rate": self.invalid_rate,
            "drop_share_by_stage": self.drop_share_by_stage, "p99_latency": lat["p99"],
            "goodput_bound": self.goodput_bound,
            "weighted_goodput": self.weighted_goodput,
            "tiers": {t.name: {k: v for k, v in t.to_dict().items() if k != "name"} for t in self.tiers},
            "wasted_compute_share": self.wasted_compute_share, "drops_before_compute": self.drops_before_compute,
        }
        if self.compute_split is not None:
            out["compute_by_stage"] = self.compute_split.to_dict(self.stage_names)
        if self.llm_calibration is not None:
            out["llm_calibration"] = self.llm_calibration
        if self.window is not None:  # a live report of part of the run: say which part
            out["window"] = self.window
        if detail:
            out.update({
                "policy": self.policy, "pipeline": self.pipeline, "duration_s": self.duration_s,
                "goodput_ratio": self.goodput_ratio, "goodput_normalised": self.goodput_normalised,
                "dropped_by_reason": self.dropped_by_reason,
                "transient_drop_rate_1s": self.transient_drop_rate(1),
                "transient_drop_rate_10s": self.transient_drop_rate(10),
                "latency": lat,
                "stages": {s.name: s.to_dict() for s in self.stages},
                "series": {
                    "t0_s": self.t0_s,
                    "arrivals": self.arrivals_per_s.tolist(), "goodput": self.goodput_per_s.tolist(),
                    "drops": self.drops_per_s.tolist(), "late": self.late_per_s.tolist(),
                    "capacity": self.capacity.tolist(),
                    "queue_delay_s": {n: self.queue_delay_per_s[k].tolist() for k, n in enumerate(self.stage_names)},
                    "workers": {n: self.workers[k].tolist() for k, n in enumerate(self.stage_names)},
                },
            })
        return _nan_to_none(out)  # type: ignore[no-any-return]

    def to_json(self, *, detail: bool = False, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text (NaN written as null)."""
        return json.dumps(self.to_dict(detail=detail), indent=indent)

    def table(self) -> Any:
        """A rich Table with this run's headline figures (one row)."""
        return comparison_table({self.policy: self})

    def plot(self, path: str | Path) -> Path:
        """Write goodput, drops and queueing delay over time to ``path`` (PNG/PDF/SVG by suffix)."""
        from .plotting import plot_reports  # matplotlib loads only when a figure is drawn

        return plot_reports({self.policy: self}, path)

    def __repr__(self) -> str:
        part = "" if self.window is None else f", window: {self.submitted} of {self.window['submitted']} requests"
        return (f"Report(policy={self.policy!r}, pipeline={self.pipeline!r}, submitted={self.submitted}, "
                f"on_time={self.on_time}, goodput={self.goodput:.1f}/s of bound {self.goodput_bound:.1f}/s, "
                f"drop_rate={self.drop_rate:.3%}, invalid_rate={self.invalid_rate:.3%}{part})")


def comparison_dict(
    reports: Mapping[str, Report], *, pipeline: str, trace: str, load: float | None, detail: bool = False,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON of a comparison: ``{"pipeline", "trace", "load", "settings", "policies": {name: report}}``;
    ``settings``: how the runs were made (seed, jitter, autoscaling, ...), so that two files can be told apart."""
    return {
        "pipeline": pipeline, "trace": trace, "load": load, "settings": dict(settings or {}),
        "policies": {name: r.to_dict(detail=detail) for name, r in reports.items()},
    }


def comparison_table(reports: Mapping[str, Report], *, title: str | None = None) -> Any:
    """A rich Table, one row per policy: goodput, its ratio to the bound, drop / invalid rates, the wasted share of
    compute and the share of drops before any compute, p99, drops by stage."""
    table = require("rich.table", "cli", "comparison tables").Table(title=title)
    for col in ["policy", "goodput\nreq/s", "of\nbound", "on\ntime", "drop rate\n(incl. late)", "invalid\nrate",
                "compute\nwasted", "before compute\n(of drops)", "worst 1 s\n(incl. late)", "p99 ms\n(on time)",
                "drops by stage"]:
        table.add_column(col, justify="left" if col in ("policy", "drops by stage") else "right",
                         no_wrap=col != "drops by stage")
    for name, r in reports.items():
        p99 = r.latency_percentiles()["p99"]
        shares = ", ".join(f"{s.name} {s.drop_share:.0%}" for s in r.stages if s.drop_share >= 0.005) or "-"
        wasted, before = r.wasted_compute_share, r.drops_before_compute
        table.add_row(
            name, f"{r.goodput:.1f}", f"{r.goodput_ratio:.1%}", f"{r.goodput_normalised:.1%}",
            f"{r.drop_rate:.2%}", f"{r.invalid_rate:.2%}", "-" if math.isnan(wasted) else f"{wasted:.2%}",
            "-" if math.isnan(before) else f"{before:.0%}", f"{r.transient_drop_rate(1):.0%}",
            "-" if math.isnan(p99) else f"{p99 * 1e3:.0f}", shares,
        )
    return table
