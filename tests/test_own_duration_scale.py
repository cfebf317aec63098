"""Tests of a stage's own d(b) correction before the planner's first sync (issue 9 item 4): the
StageScheduler's measured / profiled ratio, the terms it corrects while the published duration_scale is 0
("none measured yet"), the shed gate before any batch, and pard on executors far faster than declared.

Scheduler profile: d(b) = 10 ms * b (points (1, 10 ms) and (4, 40 ms)); every expectation is worked by hand.
"""

from __future__ import annotations

import collections
import dataclasses
import time
import warnings

import numpy as np
import pytest

import pard
from pard import _core
from pard.duration_scale import SCALE_MAX, SCALE_MIN
from pard.outcomes import reason_code
from pard.policies import POLICIES

MS = 1e-3


def sched(max_batch: int = 2, **policy: object) -> _core.StageScheduler:
    pol = _core.Policy(order="adaptive", drop="pard", **policy)
    return _core.StageScheduler(stage=0, profile=_core.Profile([1, 4], [10 * MS, 40 * MS]), max_batch=max_batch,
                                policy=pol, budget_fraction=1.0)


def drops_of(result: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[int, str]:
    _, ids, codes = result
    return {int(i): _core.REASONS[int(c)] for i, c in zip(ids, codes)}


def test_the_clip_is_one_value_in_cpp_and_python() -> None:
    """The C++ clip of the stage's own ratio is pard.duration_scale's SCALE_MIN / SCALE_MAX."""
    assert _core.DURATION_SCALE_BOUNDS == (SCALE_MIN, SCALE_MAX)


def test_own_ratio_is_the_ratio_of_sums_clipped() -> None:
    """1 before any batch; a batch of 2 in 10 ms (profiled 20 ms): 0.5; then a batch of 1 in 30 ms (10 ms):
    (10 + 30) / (20 + 10) = 4/3; then a batch of 2 in 80 s: far above the clip, so SCALE_MAX. A batch larger
    than max_batch counts as max_batch (observe(9, 0.04) on max_batch 4 adds 40 ms profiled)."""
    s = sched()
    assert s.own_duration_scale == 1.0
    s.observe_batch(2, 0.010)
    assert s.own_duration_scale == pytest.approx(0.5)
    s.observe_batch(1, 0.030)
    assert s.own_duration_scale == pytest.approx(40 / 30)
    s.observe_batch(2, 80.0)
    assert s.own_duration_scale == SCALE_MAX
    big = sched(max_batch=4)
    big.observe_batch(9, 0.004)
    assert big.own_duration_scale == pytest.approx(0.1)  # 4 ms / 40 ms
    with pytest.raises(ValueError, match="size=0"):
        big.observe_batch(0, 0.01)


def test_unmeasured_terms_use_the_stage_ratio_published_ones_win() -> None:
    """Published duration_scale 0 and batches at half their profile: d(2) is expected at 10 ms, not 20;
    a published 2 overrides the stage's own ratio (40 ms); before any batch the profile holds (20 ms)."""
    s = sched()
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, duration_scale=0.0)
    assert s.expected_duration(2) == pytest.approx(0.020)
    s.observe_batch(2, 0.010)
    assert s.expected_duration(2) == pytest.approx(0.010)
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, duration_scale=2.0)
    assert s.expected_duration(2) == pytest.approx(0.040)


@pytest.mark.parametrize(("published", "want_batch", "want_drops"), [
    # published 1: d(1) 10 ms + downstream 10 ms: the 35 ms and 45 ms requests both fit (20 ms)
    (1.0, [0, 1], {}),
    # unmeasured, own ratio 2: d(1) 20 ms + downstream 20 ms = 40 ms: the 35 ms request is purged
    (0.0, [1], {0: "infeasible"}),
])
def test_unmeasured_purge_scales_d_and_the_downstream_term(published: float, want_batch: list[int],
                                                            want_drops: dict[int, str]) -> None:
    """The purge under an unmeasured publish scales both d_k(1) and the prior's downstream term by the
    stage's own ratio (2: a batch of 1 took 20 ms), so a request with 35 ms of budget is dropped, one with
    45 ms kept; under a published scale of 1 both are kept."""
    s = sched()
    s.observe_batch(1, 0.020)
    s.publish(downstream_s=0.010, mu=0.5, eps=0.1, queue_delay_s=0.0, duration_scale=published)
    s.submit(0, 0.0, 0.035, 0.0)
    s.submit(1, 0.0, 0.045, 0.0)
    res = s.form_batch(0.0, 0.0)
    assert res[0].tolist() == want_batch
    assert drops_of(res) == want_drops


@pytest.mark.parametrize(("observed", "want_batch", "want_drops"), [
    # no batch measured yet: overloaded at the profile's 50 req/s (HBF), but nothing is shed
    (None, [9, 8], {}),
    # a batch at its profile (ratio 1): overloaded as in test_scheduler's reactive test, but the planner
    # has published no measured ratio yet, so nothing is shed (one batch of evidence is not enough)
    (0.020, [9, 8], {}),
    # ratio 0.5: d(2) 10 ms, service rate 100 req/s; the most slack 0.145 - 0.01 = 0.135 s holds
    # 100 * 0.135 = 13.5 >= 10: not overloaded, LBF as published, nothing shed
    (0.010, [0, 1], {}),
])
def test_unmeasured_overload_test_uses_the_stage_ratio_and_never_sheds_blind(
        observed: float | None, want_batch: list[int], want_drops: dict[int, str]) -> None:
    """reactive pard, unmeasured publish with service rate 50 req/s (the profile's), 10 queued with
    deadlines 0.100 .. 0.145 s (every 5 ms), b 2: the overload test follows the stage's own ratio, and
    until the planner publishes a measured ratio it switches the order but sheds nothing (a shed is
    irreversible; the stage's own first batches are too little evidence for it). Published at ratio 1, the
    same queue sheds ids 0 and 1 (test_scheduler's reactive case)."""
    s = sched(reactive=True)
    if observed is not None:
        s.observe_batch(2, observed)
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=50.0, duration_scale=0.0)
    for i in range(10):
        s.submit(i, 0.0, 0.1 + 0.005 * i, 0.0)
    res = s.form_batch(0.0, 0.0)
    assert res[0].tolist() == want_batch
    assert drops_of(res) == want_drops


def test_published_ratio_lets_the_overload_test_shed() -> None:
    """The case above once the planner has published a measured ratio of 1: 10 queued against 50 req/s,
    the most slack 0.145 - 0.02 = 0.125 s: overloaded (9 ahead > 50 * 0.125 = 6.25); with l_max = 0.125 s,
    2 * (floor(50 * 0.125 / 2) + 1) = 8 can start in time, so the bottom two (ids 0, 1) are shed and the
    batch is popped HBF (ids 9, 8)."""
    s = sched(reactive=True)
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=50.0, duration_scale=1.0)
    for i in range(10):
        s.submit(i, 0.0, 0.1 + 0.005 * i, 0.0)
    res = s.form_batch(0.0, 0.0)
    assert res[0].tolist() == [9, 8]
    assert drops_of(res) == {0: "shed", 1: "shed"}


def demo_spec() -> pard.PipelineSpec:
    """The README's embedded example: detect (4 ms at 1, 12 ms at 8) -> classify (2 ms, 6 ms)."""
    return pard.PipelineSpec(name="demo", slo=0.2, stages=[
        pard.StageSpec(name="detect", profile={1: 0.004, 8: 0.012}, max_batch=8, workers=1,
                       successors=["classify"]),
        pard.StageSpec(name="classify", profile={1: 0.002, 8: 0.006}, max_batch=8, workers=1),
    ])


def test_simulated_burst_before_the_first_sync_on_executors_20x_faster() -> None:
    """1 000 requests in the first 1 ms, SLO 0.15 s, executors at 0.05x the profile, no jitter: detect
    really finishes 8 / (0.05 * 12 ms) = 13 333 req/s, so the burst is through in 75 ms and every request
    can be served on time (naive does). pard serves them all; the same policy without the own-ratio correction (the
    prior's terms at the profile's 667 req/s) sheds most of the burst at detect."""
    arr = np.linspace(0.0, 0.001, 1000, endpoint=False)
    kw = {"slo": 0.15, "jitter_cv": 0.0, "exec_scale": 0.05}
    blind = dataclasses.replace(POLICIES["pard"], name="pard-blind", correct_durations=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pard.PardWarning)  # 20x off the profile is the point
        naive = pard.simulate(demo_spec(), arr, "naive", **kw)
        ours = pard.simulate(demo_spec(), arr, "pard", **kw)
        before = pard.simulate(demo_spec(), arr, blind, **kw)
    assert naive.on_time == 1000
    assert ours.on_time == 1000
    assert before.on_time < 500


def readme_stages() -> dict[str, pard.ArrayExecutor]:
    """The README example's NumPy stages: a batch of 8 in well under 1 ms against a declared 12 ms."""
    w1 = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    w2 = np.random.default_rng(1).standard_normal((32, 10)).astype(np.float32)
    return {"detect": pard.ArrayExecutor(lambda x: np.maximum(x @ w1, 0)),
            "classify": pard.ArrayExecutor(lambda x: x @ w2)}


def burst(rt: pard.Runtime, n: int = 1000) -> collections.Counter[str]:
    """Submit n requests at once (SLO 0.15 s) and count how each ended: "served" or the drop reason."""
    ends: collections.Counter[str] = collections.Counter()
    for f in [rt.submit(np.ones(64, np.float32), slo=0.15) for _ in range(n)]:
        try:
            f.result(timeout=30)
            ends["served"] += 1
        except pard.Dropped as d:
            ends[d.reason] += 1
    return ends


def test_live_readme_example_serves_a_burst_its_profile_calls_unreachable() -> None:
    """The README's embedded runtime: 1 000 requests at once, SLO 0.15 s, NumPy stages that run a batch of 8
    in well under 1 ms against a declared 12 ms. Real capacity (> 8 000 req/s) serves the burst within its
    budget, so pard serves most of it on time: before the own-ratio correction it shed 65-90 % at detect
    (10-35 % on time). The bar is 75 %, not the 90-100 % a quiet machine gives: the burst is live on shared
    cores, and a 90 % bar failed once (2026-12-02, not reproduced in 10 reruns). Every request
    ends exactly once."""
    with pard.Runtime(demo_spec(), readme_stages(), policy="pard") as rt:
        ends = burst(rt)
    r = rt.report()
    assert sum(ends.values()) == 1000
    assert r.on_time + r.late + r.dropped + r.rejected + r.failed == r.submitted == 1000
    b = rt.batches()  # on failure, the first batches' stage, size and ms say what the stage measured
    first = [(int(k), int(n), round(float(d) * 1e3, 3)) for k, n, d in
             zip(b["stage"][:6], b["size"][:6], b["duration_s"][:6])]
    assert r.on_time >= 750, (dict(ends), first)


def test_live_burst_after_idle_syncs_is_not_shed_on_the_profiles_word() -> None:
    """The same burst, sent after the planner has synced 5 times with no batch anywhere (a server that
    waits for its first request: `pard serve`, a new user's test, 102 of 200 shed). A sync that measured
    nothing publishes duration_scale 0 ("none measured yet"), not the profile's 1, so the stage still
    corrects by its own ratio and sheds nothing before its first batch: no request is shed before the
    shedding stage's first batch has ended (on a quiet machine none is shed at all; on a loaded one the
    measured batches may show a real shortfall, and shedding on that evidence is right), and every
    request ends exactly once."""
    with pard.Runtime(demo_spec(), readme_stages(), policy="pard", planner={"sync_interval_s": 0.05}) as rt:
        deadline = time.monotonic() + 30.0
        while rt.overhead()["planner_calls"] < 5 and time.monotonic() < deadline:  # idle syncs: nothing submitted yet
            time.sleep(0.02)
        assert rt.overhead()["planner_calls"] >= 5
        ends = burst(rt)
    r = rt.report()
    assert sum(ends.values()) == 1000 == r.submitted == r.on_time + r.late + r.dropped + r.rejected + r.failed
    out, batches = rt.outcomes(), rt.batches()
    shed = out["reason"] == reason_code("shed")
    for k in np.unique(out["drop_stage"][shed]):
        mine = batches["stage"] == k
        first_end = float(np.min(batches["start_s"][mine] + batches["duration_s"][mine]))
        assert float(np.min(out["finish_s"][shed & (out["drop_stage"] == k)])) >= first_end - 1e-6, dict(ends)
