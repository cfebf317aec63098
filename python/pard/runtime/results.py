"""What a runtime reports: its Report (from the run recorder and the held outcomes), a live snapshot,
the goodput bound's capacity and the recent batches.  Functions of the runtime's parts, so the
:class:`~pard.runtime.Runtime` façade only delegates.

Memory stays flat in a long run: the recorder keeps counters and the last hours' per-second bins
(:data:`~pard.runtime.facade.SERIES_KEEP_S`), the C++ pipeline
(``live``, ``pard._core.LivePipeline``) the outcomes of the most recent ``history`` requests and, per
stage, the most recent :data:`~pard.runtime.workers.BATCH_HISTORY` batches; the counts by state
cover every request ever.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import show
from ..errors import PardValueError
from ..outcomes import ON_TIME, PENDING, STATES
from ..report import report_bins, sending_time_s
from .planner_loop import PlannerLoop
from .workers import Stage

if TYPE_CHECKING:  # pragma: no cover
    from ..report import Report

__all__ = ["report", "counts", "snapshot", "bound_capacity", "batches"]


def report(live: Any, loop: PlannerLoop, policy: str, *, t0_s: float | None, duration_s: float | None,
           capacity_req_s: float | None, llm: tuple[Any, Sequence[Stage]] | None = None) -> Report:
    """See :meth:`pard.runtime.Runtime.report`.  ``llm``: the spec and the stages of a closed runtime, whose
    llm stages' output-length calibration goes into ``Report.llm_calibration`` as a simulation's does (a
    running one's record belongs to its workers, so it is read only once they stopped)."""
    if capacity_req_s is not None and (
            isinstance(capacity_req_s, bool) or not isinstance(capacity_req_s, (int, float, np.integer, np.floating))
            or not (math.isfinite(float(capacity_req_s)) and float(capacity_req_s) > 0)):
        raise PardValueError(f"capacity_req_s must be a finite number of req/s > 0, got {show(capacity_req_s)}")
    if duration_s is not None and (isinstance(duration_s, bool) or not isinstance(duration_s, (int, float))
                                   or not (math.isfinite(float(duration_s)) and float(duration_s) > 0)):
        raise PardValueError(f"duration_s must be a finite number of seconds > 0, got {show(duration_s)}")
    loop.flush()
    totals = counts(live)
    out = live.outcomes()
    held = out["state"].size
    ended = out["state"] != PENDING  # a live report covers the requests that have ended
    out = {k: v[ended] for k, v in out.items()}
    send = out["send_s"]
    n = send.size
    t0, nb = report_bins(send, t0_s, duration_s)
    # rates per second of the real time the sends took, not per whole one-second bin
    per_s = duration_s if duration_s is not None else sending_time_s(np.sort(send))
    rep = loop.recorder.report(policy=policy, outcomes=out, t0_s=t0, n_bins=nb, slo_s=out["slo_s"],
                               capacity_req_s=capacity_req_s, duration_s=per_s, compute_split=live.compute_split())
    if llm is not None:
        from ..sim_llm import llm_calibration

        raw = {k: c for k, st in enumerate(llm[1]) if (c := st.sched.llm_calibration()) is not None}
        rep.llm_calibration = llm_calibration(llm[0], raw)
    submitted = totals.pop("submitted")
    if n < submitted:  # part of the run only: say which part, and give the totals from the counters
        rep.window = {"requests": n, "submitted": submitted, "not_held": max(0, submitted - held),
                      "pending": held - n, "totals": totals}
    return rep


def counts(live: Any) -> dict[str, int]:
    """Requests by state, one consistent moment: ``submitted`` and each of :data:`STATES`."""
    c = live.counts()
    out = dict(zip(STATES, c[1:]))
    out["submitted"] = c[0]
    return out


def snapshot(live: Any, stages: Sequence[Stage], loop: PlannerLoop, now: float) -> dict[str, Any]:
    """See :meth:`pard.runtime.Runtime.snapshot`."""
    counts_now = counts(live)
    o = live.outcomes()
    recent_state, recent_send = o["state"], o["send_s"]
    window = 10.0
    last = recent_send >= now - window
    recent = recent_state[last]
    done = recent[recent != PENDING]
    lost = np.isin(done, [STATES.index("late"), STATES.index("dropped"), STATES.index("rejected"),
                          STATES.index("failed")])
    return {
        "now_s": now, "counts": counts_now, "in_flight": counts_now["pending"],
        "queued": {st.name: int(live.queued(st.index)) for st in stages},
        "max_queue_size": {st.name: st.max_queue for st in stages},
        "goodput_recent": float(np.count_nonzero(recent == ON_TIME)) / window,
        "drop_rate_recent": float(lost.mean()) if done.size else 0.0,
        "window_s": window, "planner_calls": loop.calls,
    }


def bound_capacity(stages: Sequence[Stage], loop: PlannerLoop) -> dict[str, Any]:
    """See :meth:`pard.runtime.Runtime.bound_capacity`."""
    loop.flush()
    rec = loop.recorder
    workers = np.array([float(st.workers) for st in stages])
    rates = rec.stage_capacity(workers)
    k = int(np.argmin(rates))
    speedup = rec.speedup()
    return {"req_s": float(rates[k]), "profile_req_s": float((workers * rec.peak).min()),
            "bottleneck": stages[k].name,
            "speedup_by_stage": {st.name: None if math.isnan(s) else float(s) for st, s in zip(stages, speedup)}}


def batches(live: Any, stages: Sequence[Stage]) -> dict[str, np.ndarray]:
    """See :meth:`pard.runtime.Runtime.batches`."""
    rows = sorted(((st.index, b[0], b[1], int(b[2]), b[3]) for st in stages for b in live.recent_batches(st.index)),
                  key=lambda r: r[1])
    cols = list(zip(*rows)) if rows else [()] * 5
    return {name: np.asarray(col, dtype=dtype) for name, col, dtype in zip(
        ("stage", "start_s", "duration_s", "size", "wait_s"), cols,
        (np.int32, np.float64, np.float64, np.int64, np.float64))}
