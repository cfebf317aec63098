"""Tests of pard._core's Profile, Policy and StageScheduler (DESIGN §3.1-3.4, §3.6).

Every expectation is computed by hand in the test (drop sets, reasons, orders), not read back from
the code. Profile used throughout: d(b) = 10 ms * b (points (1, 10 ms) and (4, 40 ms)).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from _cpp import run_standalone_cpp_test
from pard import _core

MS = 1e-3
REASON = {name: code for code, name in enumerate(_core.REASONS)}


def profile() -> _core.Profile:
    return _core.Profile([1, 4], [10 * MS, 40 * MS])


def sched(drop: str, order: str, max_batch: int, *, budget_fraction: float = 0.5,
          ring_capacity: int = 1024, tier_weights: tuple[float, ...] = (), entry: bool = True,
          **policy: float) -> _core.StageScheduler:
    pol = _core.Policy(order=order, drop=drop, **policy)
    return _core.StageScheduler(stage=0, profile=profile(), max_batch=max_batch, policy=pol,
                                budget_fraction=budget_fraction, ring_capacity=ring_capacity,
                                tier_weights=list(tier_weights), entry=entry)


def drops_of(result: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[int, str]:
    _, ids, codes = result
    return {int(i): _core.REASONS[int(c)] for i, c in zip(ids, codes)}


def test_reason_names() -> None:
    """The reason codes are the documented names, in order."""
    assert _core.REASONS == ["infeasible", "expired", "stage-budget", "window", "overload",
                             "cancelled", "rejected", "timeout", "shed"]


def test_profile_interpolation_and_extrapolation() -> None:
    """d(b) is linear between points, clamped below the first and extrapolated past the last."""
    p = _core.Profile([2, 4, 8], [0.010, 0.020, 0.028])
    assert p.duration(1) == pytest.approx(0.010)
    assert p.duration(3) == pytest.approx(0.015)
    assert p.duration(6) == pytest.approx(0.024)
    assert p.duration(10) == pytest.approx(0.032)
    assert p.max_batch == 8
    assert p.points() == ([2, 4, 8], [0.010, 0.020, 0.028])


@pytest.mark.parametrize(
    ("sizes", "durs", "needle"),
    [
        ([], [], "batch_sizes is empty"),
        ([1, 2], [0.1], "durations has 1"),
        ([0, 2], [0.1, 0.2], "batch_sizes[0]=0"),
        ([2, 2], [0.1, 0.2], "batch_sizes[1]=2"),
        ([1, 2], [0.2, 0.1], "durations[1]"),
        ([1, 2], [0.1, float("nan")], "durations_s[1]=nan"),
        ([1], [-0.1], "durations_s[0]"),
    ],
)
def test_profile_rejects_bad_points(sizes: list[int], durs: list[float], needle: str) -> None:
    """A bad profile raises ValueError naming the offending field and value."""
    with pytest.raises(ValueError, match=None) as info:
        _core.Profile(sizes, durs)
    assert needle in str(info.value)


def test_profile_duration_rejects_batch_below_one() -> None:
    """duration(0) raises ValueError."""
    with pytest.raises(ValueError, match="batch=0"):
        profile().duration(0)


def test_policy_value_and_errors() -> None:
    """A Policy is a value with order/drop names; unknown names raise ValueError quoting them."""
    p = _core.Policy(order="lbf", drop="nexus")
    assert (p.order, p.drop) == ("lbf", "nexus")
    assert p == _core.Policy(order="lbf", drop="nexus")
    assert p.dagor_threshold_s == pytest.approx(0.02) and p.dagor_alpha == pytest.approx(0.4)
    with pytest.raises(ValueError, match="order='edf'"):
        _core.Policy(order="edf", drop="pard")
    with pytest.raises(ValueError, match="drop='clipper\\+\\+'"):
        _core.Policy(order="fcfs", drop="clipper++")
    with pytest.raises(ValueError, match="dagor_alpha=1.5"):
        _core.Policy(order="fcfs", drop="dagor", dagor_alpha=1.5)


def test_scheduler_rejects_bad_config() -> None:
    """Bad max_batch, budget_fraction or ring capacity raise ValueError naming the field."""
    with pytest.raises(ValueError, match="max_batch=0"):
        sched("pard", "lbf", 0)
    with pytest.raises(ValueError, match="budget_fraction=1.5"):
        sched("pard", "lbf", 2, budget_fraction=1.5)
    with pytest.raises(ValueError, match="ring_capacity=6"):
        sched("pard", "lbf", 2, ring_capacity=6)
    s = sched("pard", "lbf", 2)
    with pytest.raises(ValueError, match="admit_fraction=2"):
        s.publish(downstream_s=0.0, mu=1.0, eps=0.1, queue_delay_s=0.0, admit_fraction=2.0)
    with pytest.raises(ValueError, match="downstream_s=-1"):
        s.publish(downstream_s=-1.0, mu=1.0, eps=0.1, queue_delay_s=0.0)
    with pytest.raises(ValueError, match="now_s=nan"):
        s.form_batch(float("nan"), 0.0)


def test_pard_drop_rule_trace() -> None:
    """Eq. 3b with downstream 30 ms, t_e = 0: purge below 40 ms (d(1)), pop-drop below 50 ms (d(2))."""
    s = sched("pard", "lbf", 2)
    s.publish(downstream_s=30 * MS, mu=0.5, eps=0.1, queue_delay_s=0.0)
    for i, dl in enumerate([35 * MS, 45 * MS, 50 * MS, 60 * MS]):
        assert s.submit(i, 0.0, dl, 0.0)
    res = s.form_batch(0.0, 0.0)
    assert res[0].tolist() == [2, 3]
    assert drops_of(res) == {0: "infeasible", 1: "infeasible"}
    assert s.queued() == 0


def test_pard_equal_keeps_one_ns_above_drops() -> None:
    """An estimate exactly equal to the SLO keeps the request; 1 ns more drops it."""
    s = sched("pard", "lbf", 1)
    # One request alone: b = 1, threshold = t_e 0.1 + d(1) 0.01 + downstream 0.2 = 0.31 s.
    s.publish(downstream_s=0.2, mu=0.5, eps=0.1, queue_delay_s=0.0)
    s.submit(7, 0.0, 0.31, 0.0)
    assert s.form_batch(0.0, 0.1)[0].tolist() == [7]
    s.submit(8, 0.0, 0.31, 0.0)
    res = s.form_batch(0.0, 0.1 + 1e-9)
    assert res[0].tolist() == [] and drops_of(res) == {8: "infeasible"}


def test_lbf_and_hbf_pop_order() -> None:
    """LBF serves the earliest deadlines, HBF the latest, each batch in that order."""
    for order, want in [("lbf", [0, 1]), ("hbf", [3, 2])]:
        s = sched("pard", order, 2)
        for i in range(4):
            s.submit(i, 0.0, 1.0 + i, 0.0)
        assert s.form_batch(0.0, 0.0)[0].tolist() == want
        assert s.current_order == order


def test_fcfs_orders_by_arrival_at_stage() -> None:
    """FCFS pops by arrival at the stage, not by deadline (ties broken by id)."""
    s = sched("none", "fcfs", 3)
    s.submit(0, 0.0, 9.0, 0.3)
    s.submit(1, 0.0, 1.0, 0.2)
    s.submit(2, 0.0, 5.0, 0.1)
    s.submit(3, 0.0, 5.0, 0.1)
    assert s.form_batch(1.0, 1.0)[0].tolist() == [2, 3, 1]


def test_hysteresis_sequence() -> None:
    """Adaptive order with eps = 0.2 from LBF: mu 1.1 -> LBF, 1.25 -> HBF, 0.9 -> HBF, 0.79 -> LBF."""
    s = sched("pard", "adaptive", 2)
    assert s.current_order == "lbf"
    seen = []
    for mu in [1.1, 1.25, 0.9, 0.79]:
        s.publish(downstream_s=0.0, mu=mu, eps=0.2, queue_delay_s=0.0)
        seen.append(s.current_order)
    assert seen == ["lbf", "hbf", "hbf", "lbf"]


def test_hbf_purge_prevents_starvation() -> None:
    """Under HBF a low-budget request is purged (infeasible) once even a batch of one cannot make it."""
    s = sched("pard", "hbf", 1)
    s.submit(0, 0.0, 0.105, 0.0)  # low budget
    outcome = {}
    for k in range(1, 20):
        now = 0.01 * k
        s.submit(k, 0.0, 10.0, now)  # a fresh high-budget request every step
        res = s.form_batch(now, now)
        assert 0 not in res[0].tolist()
        outcome.update(drops_of(res))
        if 0 in outcome:
            break
    # purged at the first step with now + d(1) = now + 0.01 > 0.105, i.e. now = 0.10
    assert outcome == {0: "infeasible"} and k == 10


def test_clipper_trace() -> None:
    """clipper++: stage budget 0.5 * slo from arrival at the stage; deadline passed -> expired."""
    s = sched("clipper", "fcfs", 4)
    s.submit(0, 0.0, 0.100, 0.000)  # spent 60 ms > slo_k 50 ms -> stage-budget
    s.submit(1, 0.0, 0.100, 0.020)  # spent 40 ms <= 50 ms -> kept
    s.submit(2, 0.0, 0.050, 0.050)  # deadline 50 ms < now 60 ms -> expired
    s.submit(3, 0.0, 0.100, 0.010)  # spent exactly 50 ms -> kept
    res = s.form_batch(0.060, 0.060)
    assert res[0].tolist() == [3, 1]
    assert drops_of(res) == {0: "stage-budget", 2: "expired"}


def test_nexus_window_trace() -> None:
    """nexus: the first run of b feasible requests is the window; every request before it drops."""
    s = sched("nexus", "fcfs", 2)
    # t_e = 0.1, b = 2, d(2) = 0.02: feasible iff 0.12 - arrival <= 0.5 * slo.
    rows = [(0.00, 0.2), (0.01, 0.4), (0.02, 0.1), (0.03, 0.4), (0.04, 0.4), (0.05, 0.4)]
    for i, (arr, slo) in enumerate(rows):
        s.submit(i, 0.0, slo, arr)
    # feasibility: 0 no (0.12 > 0.1), 1 yes, 2 no (0.10 > 0.05), 3 yes, 4 yes -> window [3, 4]
    res = s.form_batch(0.1, 0.1)
    assert res[0].tolist() == [3, 4]
    assert drops_of(res) == {0: "window", 1: "window", 2: "window"}
    assert s.queued() == 1


def test_nexus_no_full_window_takes_feasible_remainder() -> None:
    """nexus without a full window: drop the infeasible, take the first b feasible, requeue the rest."""
    s = sched("nexus", "fcfs", 3)
    # b = 3, d(3) = 0.03, t_e = 0: feasible iff 0.03 - arrival <= 0.5 * slo; slo 0.04 -> infeasible.
    slos = [1.0, 1.0, 0.04, 1.0, 1.0, 0.04]  # F F I F F I: no run of 3
    for i, slo in enumerate(slos):
        s.submit(i, 0.0, slo, 0.0)
    res = s.form_batch(0.0, 0.0)
    assert res[0].tolist() == [0, 1, 3]
    assert drops_of(res) == {2: "window", 5: "window"}
    assert s.queued() == 1
    assert s.form_batch(0.0, 0.0)[0].tolist() == [4]


def test_dagor_overload_throttle_and_expiry() -> None:
    """dagor: while the published queueing delay exceeds T, 3 of every 5 arrivals are admitted (alpha 0.4)."""
    s = sched("dagor", "fcfs", 8, dagor_threshold_s=0.02, dagor_alpha=0.4)
    s.publish(downstream_s=0.0, mu=1.0, eps=0.0, queue_delay_s=0.03)
    for i in range(5):
        s.submit(i, 0.0, 0.5 if i != 4 else 0.05, 0.0)
    res = s.form_batch(0.1, 0.1)
    # accumulator +0.6 per arrival, admit when >= 1: calls 2, 4, 5 admitted; request 4 expired
    assert res[0].tolist() == [1, 3]
    assert drops_of(res) == {0: "overload", 2: "overload", 4: "expired"}
    s.publish(downstream_s=0.0, mu=1.0, eps=0.0, queue_delay_s=0.02)  # not above T: admit all
    for i in range(5, 10):
        s.submit(i, 0.0, 0.5, 0.1)
    assert s.form_batch(0.1, 0.1)[0].tolist() == [5, 6, 7, 8, 9]


def test_admit_fraction_rejects_deterministically() -> None:
    """A published admit_fraction of 0.5 rejects every other arrival (reason rejected)."""
    s = sched("pard", "lbf", 8)
    s.publish(downstream_s=0.0, mu=1.0, eps=0.1, queue_delay_s=0.0, admit_fraction=0.5)
    for i in range(6):
        s.submit(i, 0.0, 10.0, 0.0)
    res = s.form_batch(0.0, 0.0)
    assert res[0].tolist() == [1, 3, 5]
    assert drops_of(res) == {0: "rejected", 2: "rejected", 4: "rejected"}


def test_naive_never_drops() -> None:
    """The none rule keeps requests whose deadline passed long ago."""
    s = sched("none", "fcfs", 4)
    for i in range(3):
        s.submit(i, 0.0, 0.001, 0.0)
    res = s.form_batch(100.0, 100.0)
    assert res[0].tolist() == [0, 1, 2] and res[1].size == 0


def test_full_ring_refuses_submit() -> None:
    """A full ingress ring refuses the submit (back-pressure) until a batch drains it."""
    s = sched("none", "fcfs", 4, ring_capacity=2)
    assert s.submit(0, 0.0, 1.0, 0.0) and s.submit(1, 0.0, 1.0, 0.0)
    assert not s.submit(2, 0.0, 1.0, 0.0)
    assert s.queued() == 2
    assert s.form_batch(0.0, 0.0)[0].tolist() == [0, 1]
    assert s.submit(2, 0.0, 1.0, 0.0)


def test_batch_matches_sorted_reference_under_random_load() -> None:
    """LBF batches pop the deadlines in the order a sorted reference gives, across many batches."""
    rng = np.random.default_rng(3)
    s = sched("none", "lbf", 7)
    dl = rng.uniform(1.0, 2.0, size=500)
    for i, d in enumerate(dl):
        s.submit(i, 0.0, float(d), 0.0)
    got: list[int] = []
    while s.queued():
        got.extend(s.form_batch(0.0, 0.0)[0].tolist())
    assert got == sorted(range(500), key=lambda i: (round(dl[i] * 1e9), i))


def test_standalone_cpp_scheduler(tmp_path: Path) -> None:
    """The C++ scheduler test (hand traces, cancelled copies, torn-snapshot and concurrency checks) passes."""
    run_standalone_cpp_test("test_scheduler", tmp_path)


# ---------------------------------------------------------------- issue 9: triton, ray-serve, pard's levers

def test_triton_queue_timeout_counts_from_arrival_at_the_stage() -> None:
    """triton: a request that waited longer than its SLO at this stage (from its arrival here) times out.

    SLO 0.1 s for all.  Request 0 was sent at 0 but arrived here at 0.25 (its deadline has passed, yet
    it waited only 0.05 s here at now = 0.30: kept, as Triton keeps it); request 1 arrived at 0.15
    (waited 0.15 > 0.1: timeout); request 2 arrived at 0.20 (waited exactly 0.1: kept).
    """
    s = sched("triton", "fcfs", 4)
    s.submit(0, 0.0, 0.1, 0.25)
    s.submit(1, 0.0, 0.1, 0.15)
    s.submit(2, 0.1, 0.2, 0.20)
    res = s.form_batch(0.30, 0.30)
    assert res[0].tolist() == [2, 0]
    assert drops_of(res) == {1: "timeout"}


def test_triton_max_queue_size_rejects_at_every_stage() -> None:
    """triton with max_queue_size 2: the third request queued at a (non-entry) stage is rejected."""
    s = sched("triton", "fcfs", 1, max_queue=2, entry=False)
    for i in range(3):
        s.submit(i, 0.0, 10.0, 0.001 * i)
    res = s.form_batch(0.01, 0.01)
    assert res[0].tolist() == [0]
    assert drops_of(res) == {2: "rejected"}
    assert s.queued() == 1


def test_ray_serve_end_to_end_timeout_and_entry_queue_limit() -> None:
    """ray-serve: a request past its deadline is cancelled wherever it is; max_queued_requests binds
    only at an entry stage (a downstream stage with the same policy queues everything)."""
    s = sched("ray-serve", "fcfs", 4)
    s.submit(0, 0.0, 0.5, 0.0)    # deadline 0.5 < now 0.6: expired
    s.submit(1, 0.0, 0.6, 0.1)    # deadline == now: kept
    s.submit(2, 0.2, 0.7, 0.2)
    res = s.form_batch(0.6, 0.6)
    assert res[0].tolist() == [1, 2] and drops_of(res) == {0: "expired"}
    for entry, want_rejected in [(True, {3: "rejected", 4: "rejected"}), (False, {})]:
        q = sched("ray-serve", "fcfs", 1, max_queue=3, max_queue_entry_only=True, entry=entry)
        for i in range(5):
            q.submit(i, 0.0, 10.0, 0.001 * i)
        res = q.form_batch(0.01, 0.01)
        assert res[0].tolist() == [0] and drops_of(res) == want_rejected


@pytest.mark.parametrize(("drop", "reason"), [
    ("ray-serve", "expired"), ("dagor", "expired"), ("clipper", "expired"), ("triton", "timeout")])
def test_timeout_rules_are_judged_at_the_batch_start(drop: str, reason: str) -> None:
    """A batch collected at now = 0.5 s to start at t_e = 0.6 s (a worker pre-collecting its next batch):
    a request whose timeout passes between the two never runs in these systems, so it is dropped now.
    Request 0: sent at 0.40 s with SLO 0.12 s (deadline 0.52 s), arrived here at 0.45 s, so for triton it
    has waited 0.05 s at now and 0.15 s > 0.12 s at the start. Request 1 (deadline 0.65 s, arrived 0.55 s)
    is within every timeout at the start (clipper's stage share is the whole SLO here): kept."""
    s = sched(drop, "fcfs", 4, budget_fraction=1.0)
    s.submit(0, 0.40, 0.52, 0.45)
    s.submit(1, 0.50, 0.65, 0.55)
    res = s.form_batch(0.5, 0.6)
    assert res[0].tolist() == [1] and drops_of(res) == {0: reason}


def test_ray_serve_drops_what_expires_before_its_pre_collected_batch() -> None:
    """One stage, d = 0.5 s, max_batch 1, SLO 1.2 s, four requests at t = 0, no jitter: batches run at
    0-0.5, 0.5-1.0 (on time), 1.0-1.5 (started before the deadline: late), and the fourth, collected at
    1.0 s for a start at 1.5 s, has expired by then: dropped, never run (it used to run 1.5-2.0 s)."""
    import pard

    spec = pard.PipelineSpec(name="one", slo=1.2, stages=[
        pard.StageSpec(name="s", profile={1: 0.5, 2: 1.0}, max_batch=1, workers=1)])
    r = pard.simulate(spec, np.zeros(4), "ray-serve", jitter_cv=0.0)
    assert (r.on_time, r.late, r.dropped) == (2, 1, 1)
    assert r.invalid_rate == pytest.approx(1 / 3)  # the late one's 0.5 s of 1.5 s computed


def test_tiered_queue_serves_high_tier_first_in_hbf_and_in_lbf() -> None:
    """Tiers weighted [1, 4]: HBF pops the tier-1 (weight 4) requests first, latest deadline first; LBF
    pops them first too, earliest deadline first (until 2026-12-03 LBF was EDF over every tier, which served
    a low tier's tighter SLOs ahead of a high tier: a chain at 2x bursty load, gold 10 at 500 ms and free 1
    at 150 ms, lost 419 gold where FCFS clipper++ lost none)."""
    reqs = [(0, 1.0, 0), (1, 2.0, 1), (2, 3.0, 0), (3, 4.0, 1), (4, 5.0, 0)]  # id, deadline, tier
    for order, want in [("hbf", [3, 1, 4, 2, 0]), ("lbf", [1, 3, 0, 2, 4])]:
        s = sched("pard", order, 5, tier_weights=(1.0, 4.0), tiered=True)
        for i, dl, tier in reqs:
            s.submit(i, 0.0, dl, 0.0, tier)
        assert s.form_batch(0.0, 0.0)[0].tolist() == want
    # tier-blind (tiered off): HBF is plain deadline order
    s = sched("pard", "hbf", 5, tier_weights=(1.0, 4.0))
    for i, dl, tier in reqs:
        s.submit(i, 0.0, dl, 0.0, tier)
    assert s.form_batch(0.0, 0.0)[0].tolist() == [4, 3, 2, 1, 0]


def test_tiered_admission_sheds_the_low_tier_first() -> None:
    """admit_fraction 0.5 with equal arrivals of tiers weighted [1, 4]: every rejection is tier 0."""
    s = sched("pard", "lbf", 4, tier_weights=(1.0, 4.0), tiered=True)
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, admit_fraction=0.5)
    rejected_tiers = []
    for rnd in range(20):
        for j in range(4):
            i = rnd * 4 + j
            s.submit(i, 0.0, 100.0, 0.0, i % 2)
        res = s.form_batch(0.0, 0.0)
        rejected_tiers += [int(i) % 2 for i, c in zip(res[1], res[2]) if _core.REASONS[int(c)] == "rejected"]
        while s.queued():
            s.form_batch(0.0, 0.0)
    # half of 80 shed (within the decaying-share warm-up of the first call), all from tier 0
    assert set(rejected_tiers) == {0}
    assert 30 <= len(rejected_tiers) <= 40


def test_reactive_overload_switches_to_hbf_and_sheds_the_unreachable() -> None:
    """reactive: 10 queued, service rate 50 req/s, t_e 0, b 2 (d = 20 ms). The test is the fluid count
    (n > 50 * most slack); the shed keeps what can start in batches: one of 2 every 0.04 s, so
    2 * (floor(50 s / 2) + 1) within s.

    Downstream 0, deadlines 0.1 .. 1.0 s: the most slack is 0.98 s, 49 > 10: LBF as published.
    Deadlines 0.10 .. 0.19 s: 0.17 s of slack, 8.5 < 10: overloaded, HBF now (latest deadlines first); but
    batches start at 0, 0.04 .. 0.16 s, so all 10 can start by 0.17 s: none is shed (the fluid count shed 2).
    Deadlines 0.100 .. 0.145 s (every 5 ms): 0.125 s, 4 batch starts = 8: the 2 lowest (ids 0, 1), which in
    HBF order start at 0.16 s, after every deadline less d, are shed.
    Downstream 0.05 s, deadlines 0.150 .. 0.195 s: the slack with the downstream estimate is again 0.125 s
    (overloaded: HBF), but only what cannot leave this stage by its deadline is shed: 0.175 s of slack
    without it, 5 batch starts = 10 requests, so none is.
    """
    for downstream, deadlines, want_batch, want_drops in [
        (0.0, [0.1 * (i + 1) for i in range(10)], [0, 1], {}),
        (0.0, [0.1 + 0.01 * i for i in range(10)], [9, 8], {}),
        (0.0, [0.1 + 0.005 * i for i in range(10)], [9, 8], {0: "shed", 1: "shed"}),
        (0.05, [0.15 + 0.005 * i for i in range(10)], [9, 8], {}),
    ]:
        s = sched("pard", "adaptive", 2, reactive=True)
        s.publish(downstream_s=downstream, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=50.0)
        for i, dl in enumerate(deadlines):
            s.submit(i, 0.0, dl, 0.0)
        res = s.form_batch(0.0, 0.0)
        assert res[0].tolist() == want_batch
        assert drops_of(res) == want_drops


def test_duration_scale_scales_the_drop_threshold() -> None:
    """duration_scale 2: d(1) counts as 20 ms, so a request with 15 ms of slack is purged, one with 25 kept."""
    s = sched("pard", "lbf", 1)
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, duration_scale=2.0)
    s.submit(0, 0.0, 0.015, 0.0)
    s.submit(1, 0.0, 0.025, 0.0)
    res = s.form_batch(0.0, 0.0)
    assert res[0].tolist() == [1] and drops_of(res) == {0: "infeasible"}


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"service_rate": -1.0}, "service_rate=-1"),
    ({"duration_scale": -1.0}, "duration_scale=-1"),
    ({"duration_scale": 2000.0}, "duration_scale=2000"),
    ({"admit_fraction": 1.5}, "admit_fraction=1.5"),
])
def test_publish_validates_new_terms(kwargs: dict[str, float], needle: str) -> None:
    """PublishedTerms::from_seconds names the bad field and value, for the scheduler and the simulator."""
    s = sched("pard", "lbf", 1)
    with pytest.raises(ValueError, match=needle):
        s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, **kwargs)


def test_form_batch_discards_requests_the_cancelled_mask_marks() -> None:
    """A uint8 mask passed as cancelled= removes the marked ids (slot id % len) as 'cancelled' drops, and the
    batch fills from the unmarked ones in FCFS order."""
    s = sched("none", "fcfs", 4)
    for i in range(10):
        assert s.submit(i, 0.0, 100.0, i * 1e-3)
    mask = np.zeros(8, dtype=np.uint8)
    mask[[0, 2, 3]] = 1  # ids 0, 2, 3 and, by slot, 8
    ids, dropped, reasons = s.form_batch(0.02, 0.02, cancelled=mask)
    assert ids.tolist() == [1, 4, 5, 6]
    assert dropped.tolist() == [0, 2, 3] and all(_core.REASONS[r] == "cancelled" for r in reasons.tolist())
    ids, dropped, _ = s.form_batch(0.02, 0.02, mask)
    assert ids.tolist() == [7, 9] and dropped.tolist() == [8]
    with pytest.raises(ValueError):
        s.form_batch(0.02, 0.02, np.zeros((2, 2), dtype=np.uint8))
