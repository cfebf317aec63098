"""PolicySpec.overload_upper: when a stage's hot-path overload test holds, the pop rule of the batch it forms
budgets the downstream batch waits at pard-upper's w = sum d_i (stage_scheduler.hpp step 2b), whatever the
planner measured (downstream="busy" lags a burst that follows an idle gap).

Expectations are hand-computed from a linear profile d(b) = A + C b and from the planner's documented
formula (sum q_i + 2 sum d_i, maximised over paths); the simulated case is tests/test_duration_scale.py's
wrong-profile on-off input, held to the same bar as pard there."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import pard
from pard import _core
from pard.config import resolve_pipeline
from pard.planner import Planner, PlannerStage
from pard.policies import POLICIES, PolicySpec

A, C, B = 0.010, 0.005, 16  # d(b) = A + C b seconds: d(1) = 15 ms, d(16) = 90 ms
RATE = 2 * B / (A + C * B)  # two workers at full batches: 355.6 req/s


def linear_sched() -> _core.StageScheduler:
    """A reactive pard stage on the linear profile."""
    prof = _core.Profile([1, B], [A + C, A + C * B])
    pol = _core.Policy(order="adaptive", drop="pard", tiered=True, reactive=True)
    return _core.StageScheduler(stage=0, profile=prof, max_batch=B, policy=pol, budget_fraction=1.0,
                                tier_weights=[1.0])


def one_batch(n: int, overload_downstream_s: float) -> tuple:
    """n requests due 0.3 + 1e-4 i s, queued at t = 0, downstream term 0, LBF as published; one batch at t = 0."""
    s = linear_sched()
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=RATE,
              overload_downstream_s=overload_downstream_s)
    for i in range(n):
        s.submit(i, 0.0, 0.3 + 1e-4 * i, 0.0)
    return s.form_batch(0.0, 0.0)


def test_overloaded_stage_drops_on_the_raised_term() -> None:
    """1000 queued against 355.6 req/s and 0.31 s of slack: overloaded, so the bottom 888 are shed (what can
    start in batches of 16 within 0.3999 - 0.09 s is kept: 16 * (floor(355.6 * 0.3099 / 16) + 1) = 112) and,
    popped HBF, only the requests due at or after 0.09 + 0.30945 s (ids 995..999) pass the raised pop rule;
    ids 994..888 are infeasible. Published 0: the top 16 pass."""
    ids, dropped, codes = one_batch(1000, 0.30945)
    reasons = dict(zip(dropped.tolist(), (_core.REASONS[int(c)] for c in codes)))
    assert ids.tolist() == [999, 998, 997, 996, 995]
    assert {i for i, r in reasons.items() if r == "shed"} == set(range(888))
    assert {i for i, r in reasons.items() if r == "infeasible"} == set(range(888, 995))
    ids0, dropped0, _ = one_batch(1000, 0.0)
    assert ids0.tolist() == list(range(999, 983, -1)) and len(dropped0) == 888


def test_calm_stage_ignores_the_raised_term() -> None:
    """20 queued need 0.056 s of the 0.21 s of slack: not overloaded, so the published downstream 0 applies:
    LBF pops ids 0..15 and nothing is dropped, although the raised term would drop every one of them."""
    ids, dropped, _ = one_batch(20, 0.30945)
    assert ids.tolist() == list(range(16)) and len(dropped) == 0


def test_one_request_with_little_slack_is_not_an_overload() -> None:
    """One request queued, due 1 ms after a batch of one ends (d(1) = 15 ms): nothing is ahead of it, so the
    stage is not overloaded, although 1 ms is under one request's share of the service rate (1 / 355.6 s =
    2.8 ms). It runs; the raised term, which would drop it, is not used. (The test counted n / R = 2.8 ms
    against the 1 ms of slack until 2026-12-03 and dropped it.)"""
    s = linear_sched()
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=RATE, overload_downstream_s=0.3)
    s.submit(0, 0.0, A + C + 0.001, 0.0)
    ids, dropped, _ = s.form_batch(0.0, 0.0)
    assert ids.tolist() == [0] and len(dropped) == 0


def test_idle_chain_with_a_tight_feasible_slo_serves_every_request() -> None:
    """Two stages of 10 ms each (max_batch 1), SLO 24 ms, one request every 0.2 s (2.5 % load), no jitter:
    each request is alone in the pipeline and done 20 ms after it arrives, so all 300 are on time, as
    naive's are. Before the count above was fixed, `pard` dropped all 300 at the first stage (a new user's
    test, 2026-12-03)."""
    spec = pard.PipelineSpec(name="tight", slo=0.024, stages=[
        pard.StageSpec(name="a", profile={1: 0.010}, max_batch=1, workers=1, successors=["b"]),
        pard.StageSpec(name="b", profile={1: 0.010}, max_batch=1, workers=1)])
    arrivals = np.arange(300) * 0.2
    for name in ("pard", "naive"):
        r = pard.simulate(spec, arrivals, name, jitter_cv=0.0)
        assert (r.on_time, r.dropped, r.late) == (300, 0, 0), name


def test_a_raised_term_that_no_queued_request_meets_is_not_applied() -> None:
    """1000 queued as in the first test, but a raised term of 0.5 s, more than any request's whole budget
    (due by 0.3999 s, a batch of 16 ends at 0.09 s): it would drop the entire queue, and a stage that drops
    its entire queue sends the stages below nothing, so the premise of the raise (they are about to be
    busy) never comes true. The published 0 applies instead: popped HBF, ids 999..984 run; the shed is
    the same 888. (Applied, it dropped every request of a sustained overload: a new user's test, 2026-12-03.)"""
    ids, dropped, codes = one_batch(1000, 0.5)
    assert ids.tolist() == list(range(999, 983, -1))
    assert sum(_core.REASONS[int(c)] == "shed" for c in codes) == 888 and len(dropped) == 888


@pytest.mark.parametrize(("floor_s", "kept"), [(0.05, 16), (0.0, 0)])
def test_a_published_term_that_no_queued_request_meets_falls_back_to_the_floor(floor_s: float, kept: int) -> None:
    """20 requests due 0.3 + 1e-4 i s, published downstream 0.5 s (downstream="busy"'s forecast), floor
    Σq + Σd = 0.05 s, no stage below holding anything: every request would be purged (0 + d(1) + 0.5 >
    0.302), so the batch takes the floor: 0.09 + 0.05 <= 0.3, LBF pops ids 0..15, nothing dropped, 4 wait. No floor
    published (0, every policy but downstream="busy"): the published term stands and all 20 are purged."""
    s = linear_sched()
    s.publish(downstream_s=0.5, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=RATE, floor_downstream_s=floor_s)
    for i in range(20):
        s.submit(i, 0.0, 0.3 + 1e-4 * i, 0.0)
    ids, dropped, _ = s.form_batch(0.0, 0.0)
    assert ids.tolist() == list(range(kept)) and len(dropped) == (0 if kept else 20)  # 4 stay queued


def test_two_requests_on_an_idle_chain_with_room_for_one() -> None:
    """Two stages of 0.1 s (max_batch 1), SLO 0.25 s, two requests at t = 0, no jitter: the first is done at
    0.2 s, the second could not be before 0.3 s, so exactly one is on time (as pard-paper, nexus and naive
    serve). pard dropped both at the first stage: with two queued its overload test held and the raised term
    (2 x 0.1 s below) left neither feasible (a new user's test, 2026-12-03)."""
    spec = pard.PipelineSpec(name="pair", slo=0.25, stages=[
        pard.StageSpec(name="a", profile={1: 0.1}, max_batch=1, workers=1, successors=["b"]),
        pard.StageSpec(name="b", profile={1: 0.1}, max_batch=1, workers=1)])
    for name in ("pard", "pard-paper", "naive"):
        assert pard.simulate(spec, [0.0, 0.0], name, jitter_cv=0.0).on_time == 1, name


@pytest.mark.parametrize("jitter", [0.0, 0.1])
def test_a_tight_slo_chain_in_sustained_overload_keeps_its_goodput(jitter: float) -> None:
    """Three stages (12.7, 29/34.9 for two, 34.3 ms; one worker each), SLO 0.135 s, Poisson at twice the
    29.2 req/s capacity for 120 s: a request alone needs 76 ms, so the SLO leaves room, and the fluid bound
    is the capacity. pard served 12 (jitter 0.1) and 2 (jitter 0) of 7 040 requests, under 0.01 of the bound
    (pard-paper: 0.94): pard-upper's 2 Σd = 138 ms below the entry exceeds the SLO, so the raised term
    dropped every request at the entry, and a stage below whose last batch was overloaded kept saying so
    while idle. Now each forecast stands only while something below backs it; pard reaches 0.7 of the bound."""
    spec = pard.PipelineSpec(name="three", slo=0.135, stages=[
        pard.StageSpec(name="s0", profile={1: 0.0127}, max_batch=1, workers=1, successors=["s1"]),
        pard.StageSpec(name="s1", profile={1: 0.029, 2: 0.0349}, max_batch=2, workers=1, successors=["s2"]),
        pard.StageSpec(name="s2", profile={1: 0.0343}, max_batch=1, workers=1)])
    arr = pard.workloads.poisson(2 * spec.capacity().pipeline, 120, seed=97)
    r = pard.simulate(spec, arr, "pard", jitter_cv=jitter)
    assert r.goodput_ratio >= 0.7, r


def test_a_paced_stage_below_is_not_budgeted_a_running_batch() -> None:
    """Two stages of 0.1 s (max_batch 1), SLO 0.25 s, Poisson at 1.2x the 10 req/s capacity for 300 s: the
    stage below, fed one request per 0.1 s by the one above, is busy throughout, yet a request reaching it
    starts at once. downstream="busy" budgeted it a whole running batch (rho d = 0.1 s), so the entry dropped
    what it could serve: 0.36 of the bound (pard-paper 0.64). Now 0.5 of the bound at least."""
    spec = pard.PipelineSpec(name="two", slo=0.25, stages=[
        pard.StageSpec(name="a", profile={1: 0.1}, max_batch=1, workers=1, successors=["b"]),
        pard.StageSpec(name="b", profile={1: 0.1}, max_batch=1, workers=1)])
    arr = pard.workloads.poisson(1.2 * spec.capacity().pipeline, 300, seed=0)
    r = pard.simulate(spec, arr, "pard", jitter_cv=0.1)
    assert r.goodput_ratio >= 0.5, r


def dag() -> list[PlannerStage]:
    """a -> {b, c} -> d: d(1) of b, c, d = 4, 7 (a single profile point: constant), 2 ms."""
    return [
        PlannerStage("a", (1, 4), (0.010, 0.016), 16, paths=((1, 3), (2, 3)), entry=True),
        PlannerStage("b", (1, 2, 8), (0.004, 0.005, 0.011), 8, paths=((3,),)),
        PlannerStage("c", (3,), (0.007,), 4, paths=((3,),)),
        PlannerStage("d", (1, 16), (0.002, 0.020), 32),
    ]


@pytest.mark.parametrize("on", [True, False])
def test_planner_publishes_sum_q_plus_twice_sum_d(on: bool) -> None:
    """No batch has run (b_i = 1) and d queued its requests 3 and 5 ms (q_d = 4 ms): a publishes
    max(2 (4 + 2), 2 (7 + 2)) + 4 = 22 ms, b and c 2 * 2 + 4 = 8 ms, the sink 0; off: 0 everywhere.
    The published downstream term itself stays busy's (rho = 0 when idle: a gets 7 + 2 + 4 = 13 ms)."""
    pol = dataclasses.replace(POLICIES["pard"], name="v", downstream="busy", overload_upper=on)
    stats = [{}, {}, {}, {"qdelay_s": np.array([0.003, 0.005])}]
    terms = Planner(dag(), policy=pol).update(1.0, stats, [1, 1, 1, 1])
    want = [0.022, 0.008, 0.008, 0.0] if on else [0.0] * 4
    assert [t.overload_downstream_s for t in terms] == pytest.approx(want, abs=1e-12)
    assert terms[0].downstream_s == pytest.approx(0.013, abs=1e-12)
    assert terms[0].publish_kwargs()["overload_downstream_s"] == terms[0].overload_downstream_s


@pytest.mark.parametrize("mode", ["busy", "full"])
def test_planner_publishes_the_floor_sum_q_plus_sum_d_for_busy_only(mode: str) -> None:
    """As above (b_i = 1, q_d = 4 ms): a's floor is max(4 + 2, 7 + 2) + 4 = 13 ms, b's and c's 2 + 4 = 6 ms,
    the sink's 0 (tests/test_planner_native.py holds the C++ planner to the same bits); with the paper's
    downstream="full" every floor is 0 (the stage scheduler then never falls back)."""
    pol = dataclasses.replace(POLICIES["pard"], name="v", downstream=mode)
    stats = [{}, {}, {}, {"qdelay_s": np.array([0.003, 0.005])}]
    terms = Planner(dag(), policy=pol).update(1.0, stats, [1, 1, 1, 1])
    want = [0.013, 0.006, 0.006, 0.0] if mode == "busy" else [0.0] * 4
    assert [t.floor_downstream_s for t in terms] == pytest.approx(want, abs=1e-12)
    assert terms[0].publish_kwargs()["floor_downstream_s"] == terms[0].floor_downstream_s


@pytest.mark.parametrize("value", [1, "yes", None])
def test_bad_overload_upper_raises(value: object) -> None:
    """A non-bool overload_upper is a PardError naming the field and the value."""
    with pytest.raises(pard.PardError, match=rf"overload_upper.*{value!r}"):
        PolicySpec("v", "adaptive", "pard", overload_upper=value)  # type: ignore[arg-type]


def test_busy_with_overload_upper_holds_on_a_burst_after_an_idle_gap() -> None:
    """lv, executors 3x their profile, 2 s bursts at 1.5x the true capacity every 10 s: downstream="busy"
    alone budgets w from utilisations measured while idle; with overload_upper it serves more, on the wrong
    profile (1 295 vs 974 on time today) and on the true one (1 438 vs 1 005), and holds pard's bar (>= 0.9
    of itself on the true profile; 0.90 today, below 0.9 before step 2b shed by the batch count), and every
    request ends in exactly one terminal state. (Until 2026-12-03 busy alone also held less of itself, 0.94
    against 1.03; since the forecasts stand only while something below backs them, it holds 0.97 of a run
    that serves as little, and the claim was dropped.)"""
    spec = resolve_pipeline("lv")
    data = spec.to_dict()
    for st in data["stages"]:
        st["profile"] = {b: v * 3.0 for b, v in st["profile"].items()}
    true = type(spec).from_dict(data, source="profile x 3")
    rng = np.random.default_rng(0)
    rate = true.capacity().pipeline * 1.5
    arr = np.sort(np.concatenate([t0 + rng.uniform(0, 2, int(rate * 2)) for t0 in range(0, 60, 10)]))
    busy = dataclasses.replace(POLICIES["pard"], name="busy", downstream="busy", prior_terms=False,
                               overload_upper=False)
    both = dataclasses.replace(busy, name="busy-ou", overload_upper=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pard.PardWarning)  # the wrong profile is the point here
        runs = {nm: (pard.simulate(spec, arr, pol, exec_scale=3.0), pard.simulate(true, arr, pol))
                for nm, pol in (("busy", busy), ("both", both))}
    for wrong, right in runs.values():
        for r in (wrong, right):
            assert r.submitted == arr.size == r.on_time + r.late + r.dropped + r.rejected + r.failed
    held = {nm: wrong.on_time / right.on_time for nm, (wrong, right) in runs.items()}
    assert held["both"] >= 0.9
    assert runs["both"][0].on_time > runs["busy"][0].on_time and runs["both"][1].on_time > runs["busy"][1].on_time
