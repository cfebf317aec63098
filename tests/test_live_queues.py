"""PolicySpec.live_queues: a stage's pop rule budgets each stage below it at the larger of the planner's
queueing delay q_i (a window mean, already in the published downstream term) and the wait its queue holds
now, n_i / R_i, less the batch being formed's own duration (the time before the request can reach it),
summed along the worst path below; the rule takes the larger of that and the published term (0 here)
(stage_scheduler.hpp, step 4, ``below_lag_ns``).

Expectations are hand-computed from a linear profile d(b) = A + C b (as tests/test_overload_below.py), and
the worst path is checked against a brute-force enumeration of the paths of random DAGs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _graphs import random_dags
from pard import _core
from pard.policies import POLICIES

A, C, B = 0.010, 0.005, 16  # d(b) = A + C b seconds: d(16) = 90 ms
RATE = 2 * B / (A + C * B)  # two workers at full batches: 355.6 req/s


def sched(live: bool, stage: int = 0, queue_delay_s: float = 0.0, rate: float = RATE) -> _core.StageScheduler:
    """A pard stage (LBF, calm) on the linear profile, publishing downstream 0."""
    prof = _core.Profile([1, B], [A + C, A + C * B])
    pol = _core.Policy(order="adaptive", drop="pard", tiered=True, reactive=True, live_queues=live)
    s = _core.StageScheduler(stage=stage, profile=prof, max_batch=B, policy=pol, budget_fraction=1.0,
                             tier_weights=[1.0])
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=queue_delay_s, service_rate=rate)
    return s


def fill(s: _core.StageScheduler, n: int, first_id: int = 0, due: float = 0.3) -> None:
    """n requests sent at 0, due ``due`` + 1e-4 i s, queued at t = 0."""
    for i in range(n):
        s.submit(first_id + i, 0.0, due + 1e-4 * i, 0.0)


def test_pard_reads_the_queues_below_and_the_paper_does_not() -> None:
    assert POLICIES["pard"].live_queues
    assert not POLICIES["pard-paper"].live_queues
    assert POLICIES["pard"].core().live_queues


@pytest.mark.parametrize(("n", "q"), [(100, 0.01), (100, 0.0), (3, 0.0), (2, 0.5), (0, 0.0)])
def test_queue_lag_is_the_backlog_beyond_the_published_delay(n: int, q: float) -> None:
    """queue_lag_s = max(0, n / R - q): the fluid drain time of the n queued at R req/s, beyond the delay
    the planner already published."""
    s = sched(True, queue_delay_s=q)
    fill(s, n, due=10.0)
    assert s.queue_lag_s == pytest.approx(max(0.0, n / RATE - q), abs=1e-9)


def test_queue_lag_is_zero_while_the_rate_is_unknown() -> None:
    s = sched(True, rate=0.0)
    fill(s, 500, due=10.0)
    assert s.queue_lag_s == 0.0


def test_queue_lag_is_zero_until_the_stage_is_measured() -> None:
    """Before the planner publishes a ratio (duration_scale 0) and before the stage has run a batch, its rate
    is the profile's word alone, so it reports no lag (a live stage whose thread has not run yet holds a
    queue its profile may overstate a hundredfold); after one batch measured at the profile's own duration
    (ratio 1), the backlog counts: n / R; and so it does once the planner publishes a ratio (1)."""
    prof = _core.Profile([1, B], [A + C, A + C * B])
    pol = _core.Policy(order="adaptive", drop="pard", tiered=True, reactive=True, live_queues=True)
    s = _core.StageScheduler(stage=1, profile=prof, max_batch=B, policy=pol, budget_fraction=1.0, tier_weights=[1.0])
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=RATE, duration_scale=0.0)
    fill(s, 100, due=10.0)
    assert s.queue_lag_s == 0.0
    s.observe_batch(B, A + C * B)
    assert s.queue_lag_s == pytest.approx(100 / RATE, abs=1e-9)
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=RATE, duration_scale=1.0)
    assert s.queue_lag_s == pytest.approx(100 / RATE, abs=1e-9)


def batch_above(n_below: int, live: bool) -> tuple[list[int], list[int]]:
    """Stage 0 (20 queued, due 0.3 + 1e-4 i) forms a batch of 16 at t = 0 while stage 1 below it holds
    n_below. Returns (batch ids, dropped ids) of stage 0."""
    up, low = sched(live, 0), sched(live, 1)
    up.set_below([low])
    fill(low, n_below, 10_000, due=10.0)
    fill(up, 20)
    ids, dropped, _ = up.form_batch(0.0, 0.0)
    return ids.tolist(), dropped.tolist()


@pytest.mark.parametrize("n_below", [0, 40, 107, 140])
def test_pop_rule_adds_the_backlog_below_less_the_batch(n_below: int) -> None:
    """The threshold is t_e + d(16) + max(0, n / R - d(16)): a request is kept iff its deadline reaches it.
    n = 40: 0.1125 s of backlog, 0.0225 s after the 0.09 s batch, all kept; n = 107: 0.30094 s, the ten due
    before 0.30094 dropped; n = 140: 0.3938 s, all twenty dropped."""
    d16 = A + C * B
    thr = d16 + max(0.0, n_below / RATE - d16)
    deadlines = [0.3 + 1e-4 * i for i in range(20)]
    keep = [i for i, dl in enumerate(deadlines) if dl >= thr]
    drop = [i for i, dl in enumerate(deadlines) if dl < thr]
    assert batch_above(n_below, True) == (keep[:B], drop)


def test_without_live_queues_the_backlog_below_is_not_read() -> None:
    assert batch_above(140, False) == (list(range(16)), [])


def tiered_pair(below_mu: float) -> tuple[list[int], list[int]]:
    """Two tiered stages, weights gold 10 (tier 0) and free 1 (tier 1). Below: 140 free and 4 gold queued
    (due at 10 s), order HBF when below_mu = 2 (> 1 + eps), LBF when 0.5. Above: one gold (id 1) and one
    free (id 2) request, both due 0.2 s, formed into a batch of 2 at t = 0 (d(2) = 20 ms). Returns (batch
    ids, dropped ids) above."""
    prof = _core.Profile([1, B], [A + C, A + C * B])
    pol = _core.Policy(order="adaptive", drop="pard", tiered=True, reactive=True, live_queues=True)
    up, low = (_core.StageScheduler(stage=k, profile=prof, max_batch=B, policy=pol, budget_fraction=1.0,
                                    tier_weights=[10.0, 1.0]) for k in (0, 1))
    up.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=RATE)
    low.publish(downstream_s=0.0, mu=below_mu, eps=0.1, queue_delay_s=0.0, service_rate=RATE)
    up.set_below([low])
    for i in range(144):
        low.submit(10_000 + i, 0.0, 10.0, 0.0, tier=1 if i < 140 else 0)
    low.purge(0.0, 0.0)  # into its heap (nothing is due: nothing purged), so its tiers are counted
    up.submit(1, 0.0, 0.2, 0.0, tier=0)
    up.submit(2, 0.0, 0.2, 0.0, tier=1)
    ids, dropped, _ = up.form_batch(0.0, 0.0)
    return sorted(ids.tolist()), sorted(dropped.tolist())


def test_a_high_tier_request_is_budgeted_only_the_tiers_ahead_of_it_below() -> None:
    """Below pops HBF, so a gold request there waits only behind the 4 gold: 4 / R = 11.2 ms, less the 20 ms
    batch above, is no lag, and gold's threshold is 20 ms against its 0.2 s: kept. A free request waits behind
    all 144: 0.405 s - 20 ms = 0.385 s of lag, threshold 0.405 s > 0.2 s: dropped. (A tier-blind lag dropped
    both.) Below in LBF the same: a tiered LBF stage serves the top tier first too (pop_top_low); until
    2026-12-03 the lag counted every queued request there, and both were dropped."""
    assert tiered_pair(2.0) == ([1], [2])
    assert tiered_pair(0.5) == ([1], [2])


def path_lags(successors: list[list[int]], lag: list[float], k: int) -> float:
    """Brute force: the most, over every path of successor edges from k, of the summed lags below k."""
    best = 0.0
    for j in successors[k]:
        best = max(best, lag[j] + path_lags(successors, lag, j))
    return best


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[list[int]], list[int]]:
    """A random DAG (``_graphs.random_dags``) and a queue length per stage."""
    succ = draw(random_dags)
    return succ, draw(st.lists(st.integers(0, 300), min_size=len(succ), max_size=len(succ)))


def probe_dropped(succ: list[list[int]], queued: list[int], k: int, due: float) -> bool:
    """Fresh stages wired as the DAG ``succ``, stage j holding queued[j] requests due at 50 s; stage k gets one
    more, due at ``due``, and forms a batch at t = 0. Whether that request was dropped."""
    stages = [sched(True, j) for j in range(len(succ))]
    for j, below in enumerate(_core.stages_below(succ)):
        stages[j].set_below([stages[i] for i in below])
    for j, m in enumerate(queued):
        fill(stages[j], m, 100_000 * (j + 1), due=50.0)
    stages[k].submit(1, 0.0, due, 0.0)
    _, dropped, _ = stages[k].form_batch(0.0, 0.0)
    return 1 in dropped.tolist()


@settings(max_examples=40, deadline=None)
@given(dags())
def test_worst_path_below_matches_brute_force(dag: tuple[list[list[int]], list[int]]) -> None:
    """For every stage of a random DAG: the drop threshold of its next batch is d(b) plus the largest summed
    lag over the paths below it, each stage's lag max(0, n_i / R - d(b)) (d(b) the batch formed above): a
    request due just before it is dropped, one due just after it is kept."""
    succ, queued = dag
    for k in range(len(succ)):
        d = A + C * min(queued[k] + 1, B)  # the request joins the batch: LBF pops it first
        lag = [max(0.0, m / RATE - d) for m in queued]
        expect = d + path_lags(succ, lag, k)
        assert probe_dropped(succ, queued, k, expect - 1e-6)
        assert not probe_dropped(succ, queued, k, expect + 1e-6)


def test_a_non_bool_live_queues_names_the_field() -> None:
    import dataclasses

    from pard.errors import PardTypeError

    with pytest.raises(PardTypeError, match=r"PolicySpec\.live_queues must be True or False, got 'true'"):
        dataclasses.replace(POLICIES["pard"], live_queues="true")  # type: ignore[arg-type]


@pytest.mark.parametrize(("order", "mu", "want_high"), [("adaptive", 0.5, 3), ("adaptive", 5.0, 3), ("fcfs", 0.5, 15)])
def test_a_tier_served_first_counts_only_its_own_and_higher_tiers_ahead(order: str, mu: float, want_high: int) -> None:
    """Tiers weighted [1, 4] (codes 0, 1), 12 low and 3 high queued: a request of the high tier waits behind
    the 3 high ones in LBF (mu 0.5) and in HBF (mu 5), which both serve the top tier first, and behind all 15
    in FCFS; a low-tier request, or a tier-blind asker (min_weight 0), behind all 15.  Until 2026-12-03 LBF
    counted all 15 for the high tier too."""
    prof = _core.Profile([1, B], [A + C, A + C * B])
    pol = _core.Policy(order=order, drop="pard", tiered=True, reactive=True, live_queues=True)
    s = _core.StageScheduler(stage=1, profile=prof, max_batch=B, policy=pol, budget_fraction=1.0,
                             tier_weights=[1.0, 4.0], entry=False)
    s.publish(downstream_s=0.0, mu=mu, eps=0.1, queue_delay_s=0.0, service_rate=RATE, duration_scale=1.0)
    for i in range(15):
        s.submit(i, 0.0, 10.0 + i, 0.0, 1 if i % 5 == 0 else 0)
    s.purge(0.0, 0.0)  # drains the ring into the tiers' heaps
    assert s.current_order == ("fcfs" if order == "fcfs" else ("hbf" if mu > 1 else "lbf"))
    assert s.queue_lag(min_weight=4.0) == pytest.approx(want_high / RATE, abs=1e-9)
    assert s.queue_lag(min_weight=1.0) == pytest.approx(15 / RATE, abs=1e-9)
    assert s.queue_lag() == pytest.approx(15 / RATE, abs=1e-9)
    assert s.queue_lag(transit_s=5 / RATE, min_weight=1.0) == pytest.approx(10 / RATE, abs=1e-9)
