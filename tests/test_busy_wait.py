"""downstream="busy" on a stage that runs back to back without a backlog (the planner's busy wait, DESIGN §3.7).

A two-stage chain whose last stage is the bottleneck and whose SLO is tight: the last stage, fed by the
first at its own pace, is busy nearly all the time, yet finds its queue empty at each batch start, so no
request ever waits for a pre-collected batch (DESIGN 3.1). Budgeting it q + rho d counted the running
batch's residual twice: the first stage dropped what the second could have served (a new user's test,
2026-12-03: pard 145.1 req/s against pard-paper's 163.0 and nexus's 150.5)."""

from __future__ import annotations

import pard
from pard import workloads as wl


def _last_is_bottleneck() -> pard.PipelineSpec:
    return pard.PipelineSpec(name="last2", slo=0.1442, stages=[
        pard.StageSpec(name="s0", profile={1: 0.002, 4: 0.0039}, max_batch=4, workers=1, successors=["s1"]),
        pard.StageSpec(name="s1", profile={1: 0.02, 16: 0.0922}, max_batch=16, workers=1),
    ])


def test_pard_keeps_pace_with_the_paper_and_nexus_when_the_last_stage_is_the_bottleneck() -> None:
    """Poisson at 1.5x for 60 s: pard within 5 % of pard-paper and ahead of nexus (before: 0.89 of
    pard-paper, behind nexus), and the conservation identity holds for each."""
    spec = _last_is_bottleneck()
    arrivals = wl.poisson(1.5 * spec.capacity().pipeline, 60.0, seed=0)
    got = pard.compare(spec, arrivals, policies=["pard", "pard-paper", "nexus"], seed=0)
    for r in got.values():
        assert r.on_time + r.late + r.dropped + r.rejected + r.failed == r.submitted == arrivals.size
    assert got["pard"].goodput >= 0.95 * got["pard-paper"].goodput
    assert got["pard"].goodput > got["nexus"].goodput
