"""pard's hot-path shed after an idle gap (stage_scheduler.hpp step 2b): it sheds only what cannot start in
time in batches, not by the fluid count, which shed a batch too many per burst (a new user's test).

One stage, d(1) = 0.1 s, d(4) = 0.2 s, max_batch 4, one worker, SLO 0.5 s, no jitter. Ten requests at
0, 10, .., 90 ms: the first runs alone (0 - 0.1 s); the other nine queue. Served as naive serves them (1-4 in
0.1 - 0.3 s, 5-8 in 0.3 - 0.5 s, 9 alone in 0.5 - 0.6 s) their latencies are 0.10, 0.29, 0.28, 0.27, 0.26,
0.45, 0.44, 0.43, 0.42 and 0.51 s: nine can be on time and the tenth cannot, in any order (nine queued need
three batches, 0.5 s, and the last of them ends at 0.6 s, after every deadline but none).
"""

from __future__ import annotations

import numpy as np
import pytest

import pard


def one_stage() -> pard.PipelineSpec:
    return pard.PipelineSpec(name="one", slo=0.5, stages=[
        pard.StageSpec(name="s", profile={1: 0.1, 4: 0.2}, max_batch=4, workers=1)])


def test_naive_latencies_are_the_hand_worked_ones() -> None:
    """The model the expectations below rest on: naive's latencies are exactly the hand-worked list."""
    r = pard.simulate(one_stage(), np.arange(10) * 0.01, "naive", jitter_cv=0.0)
    lat = np.sort(r.finish_s - r.send_s)
    assert lat == pytest.approx(np.sort([0.10, 0.29, 0.28, 0.27, 0.26, 0.45, 0.44, 0.43, 0.42, 0.51]), abs=1e-9)


@pytest.mark.parametrize(("n", "on_time"), [(10, 9), (8, 8)])
def test_pard_serves_every_request_that_can_be_on_time(n: int, on_time: int) -> None:
    """Ten requests: pard serves the nine that can be on time and drops one (it shed four before); eight:
    all eight are on time (the queue of seven needs two batches, done at 0.5 s), and pard drops none."""
    r = pard.simulate(one_stage(), np.arange(n) * 0.01, "pard", jitter_cv=0.0)
    assert r.on_time == on_time and r.late == 0
    assert r.submitted == r.on_time + r.late + r.dropped + r.rejected + r.failed


def test_repeated_bursts_lose_nothing_that_could_be_on_time() -> None:
    """Fifteen such bursts 2 s apart (each drains within 0.6 s): 9 of 10 on time in each, 135 in all, as
    the hand count says (pard had 90 and shed 60)."""
    arr = np.concatenate([np.arange(10) * 0.01 + 2.0 * k for k in range(15)])
    r = pard.simulate(one_stage(), arr, "pard", jitter_cv=0.0)
    assert r.on_time == 135 and r.late == 0 and r.dropped == 15
