"""Tests of Report (DESIGN §4) on hand-built outcomes whose metrics are computed by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pard.report import Report, bin_per_second, comparison_dict, comparison_table


def make(state: list[int], **over: object) -> Report:
    """A two-stage run of len(state) requests sent 0.5 s apart, 1 s latency for finished ones."""
    n = len(state)
    send = np.arange(n) * 0.5
    drop_stage = np.array([1 if s == 3 else -1 for s in state])
    reason = np.array([0 if s == 3 else -1 for s in state])
    nb = int(math.ceil(send[-1] + 1e-9)) if n else 1
    kw: dict[str, object] = dict(
        policy="p", pipeline="x", stage_names=["a", "b"], send_s=send, state=np.array(state),
        finish_s=send + 1.0, drop_stage=drop_stage, reason=reason, compute_s=np.full(n, 0.1),
        stage_submitted=[n, n], stage_executed=[n, n], stage_compute_s=[1.0, 2.0], t0_s=0.0,
        qdelay_sum_s=np.ones((2, nb)), qdelay_count=np.full((2, nb), 2.0), workers=np.ones((2, nb)),
        capacity=np.full(nb, 1.0),
    )
    kw.update(over)
    return Report(**kw)  # type: ignore[arg-type]


def test_counts_and_rates_by_hand() -> None:
    """Counts, goodput, drop rate and invalid rate match hand-computed values."""
    # 8 requests over 4 s: 5 on time, 1 late, 2 dropped at stage b
    r = make([1, 1, 2, 3, 1, 3, 1, 1])
    assert (r.submitted, r.on_time, r.late, r.dropped, r.rejected, r.failed) == (8, 5, 1, 2, 0, 0)
    assert r.duration_s == 4.0
    assert r.goodput == pytest.approx(5 / 4)
    assert r.drop_rate == pytest.approx(3 / 8)
    assert r.invalid_rate == pytest.approx(3 / 8)  # equal compute per request
    assert r.drop_share_by_stage == {"a": 0.0, "b": 1.0}
    assert r.stages[1].dropped_by_reason == {"infeasible": 2}
    assert r.stages[0].mean_queue_delay_s == pytest.approx(0.5)


def test_rejected_and_failed_attributed_to_their_stage() -> None:
    """Rejected and failed requests count in the totals and at the stage recorded for them."""
    r = make([1, 4, 5, 1], drop_stage=np.array([-1, 0, 1, -1]), reason=np.array([-1, 6, -1, -1]))
    assert (r.rejected, r.failed) == (1, 1)
    assert (r.stages[0].rejected, r.stages[1].failed) == (1, 1)
    assert r.drop_rate == pytest.approx(2 / 4)


def test_goodput_bound_is_sum_of_min_of_arrivals_and_capacity() -> None:
    """The bound is sum_t min(arrivals_t, capacity_t): 2 arrivals per second vs capacity 1 -> 1 per second."""
    r = make([1] * 8)
    assert list(r.arrivals_per_s) == [2, 2, 2, 2]
    assert r.goodput_bound_count == 4.0
    assert r.goodput_bound == 1.0
    assert r.goodput_ratio == pytest.approx(2.0)  # the per-second bound lets a queue carry over


def test_transient_drop_rate_windows() -> None:
    """The worst 1 s window holds both of its requests dropped; the 10 s window is the whole run."""
    r = make([1, 1, 3, 3, 1, 1, 1, 1])
    assert r.transient_drop_rate(1) == 1.0
    assert r.transient_drop_rate(10) == pytest.approx(2 / 8)
    assert r.transient_drop_rate(2) == pytest.approx(2 / 4)
    with pytest.raises(ValueError, match="window_s"):
        r.transient_drop_rate(0)


def test_latency_percentiles_of_on_time_only() -> None:
    """Latency percentiles use on-time requests only; none on time gives NaN and JSON null."""
    n = 10
    r = make([1] * n, finish_s=np.arange(n) * 0.5 + np.linspace(0.1, 1.0, n))
    lat = np.linspace(0.1, 1.0, n)
    assert r.latency_percentiles()["p50"] == pytest.approx(float(np.median(lat)))
    none = make([3] * 4)
    assert math.isnan(none.latency_percentiles()["p99"])
    assert none.to_dict()["p99_latency"] is None


def test_pending_and_bad_shapes_raise() -> None:
    """A pending request, or arrays of the wrong shape, are refused with a message naming the problem."""
    with pytest.raises(ValueError, match="pending"):
        make([1, 0, 1])
    with pytest.raises(ValueError, match="compute_s"):
        make([1, 1], compute_s=np.zeros(3))
    with pytest.raises(ValueError, match="workers"):
        make([1, 1], workers=np.ones((3, 1)))


def test_json_schema_and_round_trip() -> None:
    """to_dict carries exactly the issue's keys (issue 4, plus issue 9's weighted goodput and per-tier
    results, and issue 37's compute split: per stage only when the run gave one); the comparison JSON
    parses back to the same numbers."""
    r = make([1, 1, 2, 3, 1, 3, 1, 1])
    keys = {"submitted", "on_time", "late", "dropped", "rejected", "failed", "goodput", "drop_rate",
            "invalid_rate", "drop_share_by_stage", "p99_latency", "goodput_bound", "weighted_goodput", "tiers",
            "wasted_compute_share", "drops_before_compute"}
    assert set(r.to_dict()) == keys
    assert r.to_dict()["wasted_compute_share"] is None  # no split given: unknown, not 0
    split = {"useful_s": [0.5, 1.5], "wasted_s": [0.5, 0.5], "unresolved_s": [0.0, 0.0], "shed": 2,
             "shed_before_compute": 1}
    assert set(make([1, 1, 2, 3, 1, 3, 1, 1], compute_split=split).to_dict()) == keys | {"compute_by_stage"}
    doc = json.loads(json.dumps(comparison_dict({"p": r}, pipeline="x", trace="t", load=1.2, settings={"seed": 3})))
    assert set(doc) == {"pipeline", "trace", "load", "settings", "policies"} and doc["settings"] == {"seed": 3}
    assert doc["policies"]["p"]["on_time"] == 5
    assert doc["policies"]["p"]["goodput"] == pytest.approx(1.25)
    detail = json.loads(r.to_json(detail=True))
    assert detail["series"]["arrivals"] == [2.0, 2.0, 2.0, 2.0]
    assert detail["stages"]["b"]["dropped"] == 2


def test_bin_per_second_clamps_edges() -> None:
    """Samples before or after the series go to its first or last bin."""
    out = bin_per_second(np.array([-1.0, 0.2, 1.5, 9.0]), 0.0, 2)
    assert list(out) == [2.0, 2.0]


def test_table_and_plot(tmp_path: object) -> None:
    """The table has one row per policy and the plot writes a PNG file."""
    from pathlib import Path

    a, b = make([1] * 8), make([1, 3] * 4)
    t = comparison_table({"a": a, "b": b})
    assert t.row_count == 2
    out = a.plot(Path(str(tmp_path)) / "fig.png")
    assert out.stat().st_size > 1000


def _max_matching(windows: list[tuple[int, int]], cap: list[int]) -> int:
    """Brute-force reference: maximum bipartite matching of requests to unit slots of their bins."""
    slots = [t for t, c in enumerate(cap) for _ in range(c)]
    owner: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j, t in enumerate(slots):
            if windows[i][0] <= t <= windows[i][1] and j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return sum(augment(i, set()) for i in range(len(windows)))


@pytest.mark.parametrize(("seed", "cap_hi", "n_hi", "slo_lo", "slo_hi", "cases"), [
    (7, 4, 12, 0.05, 3.0, 40),  # deadlines within a few bins
    (5, 3, 14, 0.5, 12.0, 30),  # SLOs of up to 12 bins: many deadline bins pending at once
])
def test_fluid_bound_matches_brute_force_matching(seed: int, cap_hi: int, n_hi: int, slo_lo: float, slo_hi: float,
                                                  cases: int) -> None:
    """With integer capacities the fluid bound equals a maximum matching of requests to slots in their windows."""
    from pard.report import fluid_goodput_bound

    rng = np.random.default_rng(seed)
    for _ in range(cases):
        nb = int(rng.integers(1, 6))
        cap = [int(c) for c in rng.integers(0, cap_hi, nb)]
        n = int(rng.integers(1, n_hi))
        send = np.sort(rng.uniform(0, nb, n))
        slo = rng.uniform(slo_lo, slo_hi, n)
        # windows: send bin .. deadline bin; bins past the last use the tail capacity (max of cap)
        last = nb - 1 + int(np.ceil(slo.max())) + 1
        full_cap = cap + [max(cap)] * (last - nb + 1)
        windows = [(int(np.floor(s)), int(np.floor(s + d))) for s, d in zip(send, slo)]
        expect = _max_matching(windows, full_cap)
        got = fluid_goodput_bound(send, slo, np.array(cap, dtype=float), 0.0)
        assert got == pytest.approx(expect)


def test_fluid_bound_equals_design_formula_without_carry_over() -> None:
    """Without carry-over (arrivals under capacity, or deadlines inside the send second) the bound is sum_t min(a_t, c_t)."""
    from pard.report import fluid_goodput_bound

    rng = np.random.default_rng(3)
    send = np.sort(rng.uniform(0, 50, 2000))
    a = np.bincount(np.floor(send).astype(int), minlength=50).astype(float)
    cap = rng.uniform(10, 80, 50)
    design = float(np.minimum(a, cap).sum())
    in_bin = (np.floor(send) + 1 - send) * 0.999  # every deadline stays in its send second
    assert fluid_goodput_bound(send, in_bin, cap, 0.0) == pytest.approx(design)
    assert fluid_goodput_bound(send, None, cap, 0.0) == pytest.approx(design)
    high = np.maximum(cap, a + 1)  # never over capacity: the bound is every request
    assert fluid_goodput_bound(send, 5.0, high, 0.0) == pytest.approx(send.size)
    # queued work carried into an idle next second raises the bound above the per-second figure
    assert fluid_goodput_bound(np.zeros(10), 1.5, np.array([4.0, 4.0]), 0.0) == pytest.approx(8.0)


def test_table_labels_drop_rate_as_including_late_and_json_key_is_unchanged() -> None:
    """A run with only late requests (no drops) shows its drop rate under a header saying late ones are included; JSON keeps drop_rate."""
    from rich.console import Console

    r = make([2, 2, 1, 1])  # 2 late, 0 dropped: a never-dropping policy that misses SLOs
    assert r.dropped == 0 and r.drop_rate == pytest.approx(0.5)
    headers = [str(c.header) for c in comparison_table({"naive": r}).columns]
    drop_headers = [h for h in headers if h.startswith("drop") and "stage" not in h]
    assert drop_headers == ["drop rate\n(incl. late)"]
    assert "worst 1 s\n(incl. late)" in headers  # the transient drop rate counts late requests too
    console = Console(width=200, record=True)
    console.print(comparison_table({"naive": r}))
    assert "(incl. late)" in console.export_text()
    assert "drop_rate" in json.loads(r.to_json()) and "late" in (Report.drop_rate.__doc__ or "")


def test_per_tier_counts_conservation_and_weighted_goodput_by_hand() -> None:
    """Tiers gold (4) / free (1): 8 requests over 4 s, gold = ids 0-3 (on time 0, 1; late 2; dropped 3),
    free = ids 4-7 (on time 4, 6, 7; dropped 5): weighted goodput (4 * 2 + 1 * 3) / 4 s = 2.75."""
    r = make([1, 1, 2, 3, 1, 3, 1, 1], tier=[0, 0, 0, 0, 1, 1, 1, 1], tier_names=["gold", "free"],
             tier_weights=[4.0, 1.0])
    gold, free = r.tiers
    assert (gold.submitted, gold.on_time, gold.late, gold.dropped) == (4, 2, 1, 1)
    assert (free.submitted, free.on_time, free.late, free.dropped) == (4, 3, 0, 1)
    assert r.weighted_goodput == pytest.approx(2.75)
    assert r.to_dict()["tiers"]["gold"] == {"weight": 4.0, "submitted": 4, "on_time": 2, "late": 1, "dropped": 1,
                                            "rejected": 0, "failed": 0}
    plain = make([1, 1, 2, 3, 1, 3, 1, 1])  # no tiers: one default tier of weight 1
    assert plain.weighted_goodput == pytest.approx(plain.goodput)
    with pytest.raises(ValueError, match="tier codes"):
        make([1, 1], tier=[0, 2], tier_names=["a", "b"], tier_weights=[1.0, 1.0])


def test_fluid_bound_share_hand_computed() -> None:
    """The counted requests get their pro-rata share of a deadline bin they share with earlier work (hand-worked)."""
    from pard.report import fluid_bound_share, fluid_goodput_bound

    # bin 0: 6 requests due in bin 1, 4 served; bin 1: 2 left + 4 new (counted), all due in bin 1, 4 served:
    # the counted get 4 * 4 / 6 = 8 / 3, the others 4 + 4 * 2 / 6
    send = np.array([0.5] * 6 + [1.2] * 4)
    slo = np.array([1.0] * 6 + [0.5] * 4)
    counted = np.array([False] * 6 + [True] * 4)
    cap = np.array([4.0, 4.0])
    assert fluid_bound_share(send, slo, cap, 0.0, counted) == pytest.approx(8.0 / 3.0)
    assert fluid_bound_share(send, slo, cap, 0.0, ~counted) == pytest.approx(4.0 + 4.0 / 3.0)
    assert fluid_goodput_bound(send, slo, cap, 0.0) == pytest.approx(8.0)


def test_fluid_bound_share_partitions_the_bound() -> None:
    """A mask's share plus its complement's is the whole bound; every request counted is the bound itself."""
    from pard.report import fluid_bound_share, fluid_goodput_bound

    rng = np.random.default_rng(11)
    for _ in range(30):
        nb = int(rng.integers(1, 8))
        cap = rng.uniform(0, 5, nb)
        n = int(rng.integers(1, 40))
        send = np.sort(rng.uniform(0, nb, n))
        slo = rng.uniform(0.05, 3.0, n)
        mask = rng.random(n) < 0.5
        whole = fluid_goodput_bound(send, slo, cap, 0.0)
        assert fluid_bound_share(send, slo, cap, 0.0, np.ones(n, bool)) == pytest.approx(whole)
        parts = fluid_bound_share(send, slo, cap, 0.0, mask) + fluid_bound_share(send, slo, cap, 0.0, ~mask)
        assert parts == pytest.approx(whole)
    with pytest.raises(ValueError, match="counted"):
        fluid_bound_share(np.zeros(3), 1.0, np.ones(2), 0.0, np.ones(2, bool))


def test_fluid_bound_of_a_huge_slo_is_every_request_and_cheap() -> None:
    """An SLO of 1e9 s (a user's "no deadline") on an overloaded 5 s trace: every request can finish in the
    tail, so the bound is every request (this once allocated a 37 GiB array), and the share of a mask is
    its size."""
    from pard.report import fluid_bound_share, fluid_goodput_bound

    rng = np.random.default_rng(5)
    send = np.sort(rng.uniform(0.0, 5.0, 5000))
    cap = np.full(5, 100.0)  # 1000 req/s offered against 100
    assert fluid_goodput_bound(send, 1e9, cap, 0.0) == pytest.approx(5000.0)
    mask = rng.random(5000) < 0.3
    assert fluid_bound_share(send, 1e9, cap, 0.0, mask) == pytest.approx(float(mask.sum()))
