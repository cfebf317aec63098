"""pard's pacing (PolicySpec.pace, stage_scheduler.hpp step 2c): an overloaded stage forwards no faster
than the slowest stage below it, so the path's excess is dropped once, at that stage.

Expectations are closed forms of a linear profile d(b) = a + c b, the planner's path_rate recomputed from
the spec, and, for the simulated DAG, what capacity arithmetic says must happen to the faster branch."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import pard
from pard import _core, config
from pard.planner import Planner
from pard.policies import POLICIES
from pard.wiring import planner_stages

A, C, B = 0.010, 0.005, 16  # d(b) = A + C b seconds: d(1) = 15 ms, d(16) = 90 ms


def linear_sched(pace: bool) -> _core.StageScheduler:
    prof = _core.Profile([1, B], [A + C, A + C * B])
    pol = _core.Policy(order="adaptive", drop="pard", tiered=True, reactive=True, pace=pace)
    return _core.StageScheduler(stage=0, profile=prof, max_batch=B, policy=pol, budget_fraction=1.0,
                                tier_weights=[1.0])


def overloaded(s: _core.StageScheduler, service_rate: float, path_rate: float, n: int = 1000) -> tuple:
    """n requests due 0.3 .. 0.4 s, all queued at t = 0: far more than 0.4 s of service."""
    s.publish(downstream_s=0.0, mu=2.0, eps=0.1, queue_delay_s=0.0, service_rate=service_rate,
              path_rate=path_rate)
    for i in range(n):
        s.submit(i, 0.0, 0.3 + 1e-4 * i, 0.0)
    return s.form_batch(0.0, 0.0)


def closed_form_batch(ratio: float) -> int:
    """Smallest b with b / (A + C b) >= ratio * B / d(B): b >= k A / (1 - k C), k = ratio * B / d(B)."""
    k = ratio * B / (A + C * B)
    return min(B, math.ceil(k * A / (1.0 - k * C)))


@pytest.mark.parametrize("ratio", [0.5, 0.8])
def test_paced_batch_is_the_smallest_that_keeps_up_with_the_path(ratio: float) -> None:
    """With the path at 0.5 (0.8) of this stage's rate the batch is 2 (5), the closed form's size, popped HBF."""
    rate = 2 * B / (A + C * B)  # two workers at full batches
    ids, _, _ = overloaded(linear_sched(True), rate, ratio * rate)
    want = closed_form_batch(ratio)
    assert want == {0.5: 2, 0.8: 5}[ratio]
    assert ids.tolist() == list(range(999, 999 - want, -1))


@pytest.mark.parametrize(("pace", "path_factor"), [(False, 0.5), (True, 0.0), (True, 1.0), (True, 1.5)])
def test_no_pacing_without_a_slower_path(pace: bool, path_factor: float) -> None:
    """pace off, no path rate (a sink), or a path at least as fast as the stage: the full batch of B."""
    rate = 2 * B / (A + C * B)
    ids, _, _ = overloaded(linear_sched(pace), rate, path_factor * rate)
    assert len(ids) == B


def test_pacing_sheds_what_the_path_cannot_take_in_time() -> None:
    """The shed keeps what can start by max deadline - d(B) in batches of B, B * (floor(rate * local / B) + 1):
    rate * local = 110.2, so 7 batch starts = 112 at the stage's rate; 55.1 at half, 4 starts = 64."""
    rate = 2 * B / (A + C * B)
    local = 0.3 + 1e-4 * 999 - (A + C * B)
    for pace, r in ((False, rate), (True, 0.5 * rate)):
        kept = B * (math.floor(r * local / B) + 1)
        ids, dropped, codes = overloaded(linear_sched(pace), rate, 0.5 * rate)
        assert kept == (112 if not pace else 64)
        assert len(dropped) == 1000 - kept
        assert {_core.REASONS[int(c)] for c in codes} == {"shed"}


@pytest.mark.parametrize("mode", ["none", "forks"])
def test_planner_publishes_the_least_service_rate_below_each_paced_stage(mode: str) -> None:
    """da: a paced stage's path_rate is the least workers * B / d(B) over the stages below it; under
    "forks" only the entry (its work splits into the pose and face branches) is paced; unpaced: 0."""
    spec = config.builtin("da")
    workers = [st.workers for st in spec.stages]
    pol = dataclasses.replace(POLICIES["pard"], name="p", pace=mode)
    terms = Planner(planner_stages(spec), policy=pol).update(1.0, [{} for _ in workers], workers)
    rate = {st.name: st.workers * st.max_batch / st.profile[st.max_batch] for st in spec.stages}
    names = [st.name for st in spec.stages]
    below = {"person_detect": ["pose", "face_detect", "face_landmark", "expression"],
             "pose": ["expression"], "face_detect": ["face_landmark", "expression"],
             "face_landmark": ["expression"], "expression": []}
    for k, name in enumerate(names):
        paced = mode == "forks" and name == "person_detect"
        want = min((rate[j] for j in below[name]), default=0.0) if paced else 0.0
        assert terms[k].path_rate == pytest.approx(want, rel=1e-12)
        assert terms[k].publish_kwargs()["path_rate"] == terms[k].path_rate


def test_pace_names_its_choices() -> None:
    """PolicySpec.pace takes none / forks; anything else is a PardError naming the field and value."""
    with pytest.raises(pard.PardError, match="pace.*'sometimes'"):
        dataclasses.replace(POLICIES["pard"], name="p", pace="sometimes")


def test_paced_entry_keeps_the_faster_branch_of_a_dag_from_dropping() -> None:
    """da with pose (1000 req/s) the bottleneck and face_detect at 1067: a 3 s burst at 4x capacity, no jitter.

    Unpaced, the entry forwards its own 1250 req/s and both branches overload and drop different requests;
    paced, it forwards about 1000 req/s, under face_detect's capacity, so face_detect drops almost nothing
    and the pose work that the face branch used to waste becomes goodput."""
    spec = config.builtin("da")
    spec = spec.with_workers({"person_detect": spec.stage("person_detect").workers + 1})
    cap = spec.capacity()
    assert cap.bottleneck == "pose" and cap.stages["face_detect"] > cap.pipeline
    rng = np.random.default_rng(7)
    base = np.sort(rng.uniform(0.0, 12.0, int(0.5 * cap.pipeline * 12)))
    burst = np.sort(rng.uniform(4.0, 7.0, int(4.0 * cap.pipeline * 3)))
    arr = np.sort(np.concatenate([base, burst]))
    # without the entry's virtual queue, which also sheds the excess before either branch runs it: the lever alone
    lone = dataclasses.replace(POLICIES["pard"], virtual_queue=False)
    paced_policy = dataclasses.replace(lone, name="pard+pace", pace="forks")
    out = {}
    plain_policy = dataclasses.replace(lone, name="pard-unpaced", pace="none")
    for name, pol in (("plain", plain_policy), ("paced", paced_policy)):
        r = pard.simulate(spec, arr, pol, seed=0, jitter_cv=0.0)
        assert r.submitted == r.on_time + r.late + r.dropped + r.rejected + r.failed
        out[name] = (r, {s.name: s for s in r.stages})
    plain, paced = out["plain"], out["paced"]
    face_in = paced[1]["face_detect"].submitted
    assert paced[1]["face_detect"].dropped <= 0.01 * face_in
    assert plain[1]["face_detect"].dropped > 5 * max(paced[1]["face_detect"].dropped, 1)
    assert paced[0].on_time > plain[0].on_time
    assert paced[0].invalid_rate < plain[0].invalid_rate


def test_a_paced_stage_publishes_unpaced_demand_below_it() -> None:
    """da, pace at the fork: each stage below the entry reports demand max(own input, min(entry input, entry
    service rate)), what the entry would forward unpaced; unpaced, demand is each stage's own input."""
    spec = config.builtin("da")
    workers = [st.workers for st in spec.stages]
    n = len(workers)
    rng = np.random.default_rng(5)
    # one interval: 3000 arrivals at the entry, 600 at every stage below (the paced flow)
    stats = [{"arrival_s": np.sort(rng.uniform(0.0, 1.0, 3000 if k == 0 else 600))} for k in range(n)]
    for mode in ("none", "forks"):
        pol = dataclasses.replace(POLICIES["pard"], name="p", pace=mode, shed_demand=False)
        terms = Planner(planner_stages(spec), policy=pol).update(1.0, stats, workers)
        entry = terms[0]
        for k in range(1, n):
            want = max(terms[k].in_rate, min(entry.in_rate, entry.service_rate)) if mode == "forks" else terms[k].in_rate
            assert terms[k].demand_rate == pytest.approx(want, rel=1e-12)
        assert entry.demand_rate == entry.in_rate
        if mode == "forks":  # the entry's input (3000 req/s) exceeds its service rate: demand is the latter
            assert entry.in_rate > entry.service_rate > terms[1].in_rate
            assert terms[1].demand_rate == entry.service_rate


def test_pard_paces_forks_on_fixed_pools_only() -> None:
    """pard paces DAG forks (pace "forks"), but while an autoscaler sizes the stages it runs unpaced
    (PolicySpec.for_autoscaling): the same bursty da run (an entry faster than the pose branch, as above)
    gives exactly the unpaced variant's outcomes under autoscale=True and exactly the paced variant's with
    fixed workers, where the two differ."""
    pard_spec = POLICIES["pard"]
    assert pard_spec.pace == "forks"
    auto = pard_spec.for_autoscaling()
    assert auto.pace == "none" and auto.name == "pard"
    assert POLICIES["pard-paper"].for_autoscaling() is POLICIES["pard-paper"]
    spec = config.builtin("da")
    spec = spec.with_workers({"person_detect": spec.stage("person_detect").workers + 1})  # as the test above
    rng = np.random.default_rng(3)
    cap = spec.capacity().pipeline
    arr = np.sort(np.concatenate([rng.uniform(0.0, 20.0, int(0.6 * cap * 20)),
                                  rng.uniform(8.0, 11.0, int(3.0 * cap * 3))]))
    unpaced = dataclasses.replace(pard_spec, name="pard", pace="none")

    def outcome(pol: object, **kw: object) -> tuple[int, int, int]:
        r = pard.simulate(spec, arr, pol, seed=0, **kw)  # type: ignore[arg-type]
        assert r.submitted == r.on_time + r.late + r.dropped + r.rejected + r.failed
        return r.on_time, r.late, r.dropped

    assert outcome("pard", autoscale=True, cold_start_s=2.0) == outcome(unpaced, autoscale=True, cold_start_s=2.0)
    assert outcome("pard") == outcome(dataclasses.replace(pard_spec, name="pard+pace"))
    assert outcome("pard") != outcome(unpaced)
