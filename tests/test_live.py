"""Live runtime vs simulator: the same arrivals and profile give goodput within a loose bound.

The stages sleep for exactly their profiled duration, so the comparison tests the runtime's
scheduling (same StageSchedulers, same batching rule, same planner) rather than this machine's
CPU speed; docs/live.md states the tolerance measured with the real reference models.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from pard import workloads as wl
from pard.config import PipelineSpec, StageSpec
from pard.runtime import Runtime
from pard.sim import simulate

D0, D1 = 0.004, 0.002  # d(b) = D0 + D1 * b seconds
MAX_B = 8


def _sleeper(xs: list[Any]) -> list[Any]:
    time.sleep(D0 + D1 * len(xs))
    return list(xs)


def _spec() -> PipelineSpec:
    prof = {b: D0 + D1 * b for b in (1, 2, 4, 8)}
    return PipelineSpec(name="sleepy", slo=0.12, stages=[
        StageSpec(name="first", profile=prof, max_batch=MAX_B, successors=["second"]),
        StageSpec(name="second", profile=prof, max_batch=MAX_B),
    ])


@pytest.mark.parametrize("policy", ["pard", "clipper++", "naive"])
def test_live_goodput_matches_simulation(policy: str) -> None:
    """On a bursty overload, live goodput is within 25 % (plus 10 req/s) of the simulated goodput."""
    spec = _spec()
    capacity = spec.capacity().pipeline  # 8 / 0.02 = 400 req/s
    arrivals = wl.bursty(1.2 * capacity, 4.0, 1.0, seed=3)
    rt = Runtime(spec, {"first": _sleeper, "second": _sleeper}, policy=policy, sync_interval_s=1.0)
    t_rep = rt.now()
    rt.replay(arrivals, [0])
    rt.close(drain=True, timeout_s=3.0)
    live = rt.report(t0_s=t_rep)
    send = np.maximum(rt.outcomes()["send_s"] - t_rep, 0.0)
    sim = simulate(spec, send, policy, jitter_cv=0.0, seed=0)
    assert live.submitted == sim.submitted == arrivals.size
    assert abs(live.goodput - sim.goodput) <= 0.25 * sim.goodput + 10.0, (live, sim)
