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
          ring_capacity: int = 1024, **policy: float) -> _core.StageScheduler:
    pol = _core.Policy(order=order, drop=drop, **policy)
    return _core.StageScheduler(stage=0, profile=profile(), max_batch=max_batch, policy=pol,
                                budget_fraction=budget_fraction, ring_capacity=ring_capacity)


def drops_of(result: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[int, str]:
    _, ids, codes = result
    return {int(i): _core.REASONS[int(c)] for i, c in zip(ids, codes)}


def test_reason_names() -> None:
    """The reason codes are the documented names, in order."""
    assert _core.REASONS == ["infeasible", "expired", "stage-budget", "window", "overload",
                             "cancelled", "rejected"]


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
