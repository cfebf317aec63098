"""Policy.coherent_rank: on a parallel DAG branch, in overload, a stage serves and sheds by a
pseudo-random rank of the request id that every stage computes alike (stage_scheduler.hpp, sync_rank), so
that overloaded sibling branches keep the same requests instead of each serving its own newest.

Expectations are independent of the code under test: the rank is recomputed here from the published
SplitMix64 finaliser (Steele, Lea, Flood 2014), ``parallel_branches`` is checked against a brute-force
reachability, and the simulated join efficiency against the bound every join obeys (a request reaches the
join at most once per copy the slower branch ran)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pard
from _graphs import closure, random_dags
from pard import _core
from pard.policies import POLICIES

MASK = (1 << 64) - 1
B = 8  # max batch
PROFILE = _core.Profile([1, B], [0.010, 0.020])


def rank(request_id: int) -> int:
    """SplitMix64's finaliser of ``id + golden gamma``, halved into a non-negative int64."""
    x = (request_id + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return (x ^ (x >> 31)) >> 1


def stage(order: str = "hbf", coherent: bool = True, parallel: bool = True) -> _core.StageScheduler:
    """A pard stage (no downstream term, ample deadlines: nothing is dropped) on a parallel branch or not."""
    pol = _core.Policy(order=order, drop="pard", tiered=True, coherent_rank=coherent)
    s = _core.StageScheduler(stage=1, profile=PROFILE, max_batch=B, policy=pol, budget_fraction=1.0,
                             tier_weights=[1.0])
    s.parallel = parallel
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=400.0)
    return s


def fill(s: _core.StageScheduler, ids: list[int]) -> None:
    """Queue ``ids`` (sent at 0, due 10 s + 1 ms per position: later ids in the list have more slack)."""
    for i, rid in enumerate(ids):
        s.submit(rid, 0.0, 10.0 + 1e-3 * i, 0.0)


def drain(s: _core.StageScheduler) -> list[list[int]]:
    """Every batch until the queue is empty."""
    out = []
    while True:
        ids, dropped, _ = s.form_batch(0.0, 0.0)
        assert dropped.size == 0
        if ids.size == 0:
            return out
        out.append(ids.tolist())


def test_a_branch_in_overload_serves_the_top_ranks() -> None:
    """HBF on a parallel branch: batches come out in descending rank, whatever the deadlines."""
    ids = [int(x) for x in np.random.default_rng(4).choice(1 << 40, size=100, replace=False)]
    s = stage()
    fill(s, ids)
    served = [rid for batch in drain(s) for rid in batch]
    assert served == sorted(ids, key=rank, reverse=True)


@pytest.mark.parametrize("coherent,parallel", [(False, True), (True, False)])
def test_off_a_branch_or_off_the_policy_hbf_serves_the_latest_deadlines(coherent: bool, parallel: bool) -> None:
    """Without both the policy field and a parallel stage, HBF is the paper's: the most slack first."""
    ids = list(range(1000, 1040))
    s = stage(coherent=coherent, parallel=parallel)
    fill(s, ids)
    assert drain(s)[0] == ids[::-1][:B]


def test_the_order_switch_rekeys_the_queue_without_losing_a_request() -> None:
    """Adaptive order: LBF serves the earliest deadlines; once mu publishes HBF the rest go by rank; back in
    LBF the deadline order returns. Every request is served exactly once across the two re-keyings."""
    ids = [int(x) for x in np.random.default_rng(5).choice(1 << 30, size=60, replace=False)]
    s = stage(order="adaptive")
    fill(s, ids)
    first = s.form_batch(0.0, 0.0)[0].tolist()
    assert first == ids[:B]  # LBF: the least slack first
    s.publish(downstream_s=0.0, mu=2.0, eps=0.1, queue_delay_s=0.0, service_rate=400.0)
    second = s.form_batch(0.0, 0.0)[0].tolist()
    left = [r for r in ids if r not in first]
    assert second == sorted(left, key=rank, reverse=True)[:B]
    s.publish(downstream_s=0.0, mu=0.2, eps=0.1, queue_delay_s=0.0, service_rate=400.0)
    third = s.form_batch(0.0, 0.0)[0].tolist()
    assert third == [r for r in ids if r not in first and r not in second][:B]
    rest = [r for batch in drain(s) for r in batch]
    assert sorted(first + second + third + rest) == sorted(ids)


def test_a_branch_that_finds_itself_overloaded_ranks_until_the_planner_says_calm() -> None:
    """Before the planner has published HBF (a run's first second, a burst after a calm sync), a branch whose
    own hot-path overload test fires ranks from its next batch on, and keeps the rank until a publish leaves
    the order calm; then the deadline order returns for one batch (whose test fires again)."""
    ids = [int(x) for x in np.random.default_rng(6).choice(1 << 30, size=100, replace=False)]
    pol = _core.Policy(order="adaptive", drop="pard", tiered=True, reactive=True, coherent_rank=True)
    s = _core.StageScheduler(stage=1, profile=PROFILE, max_batch=B, policy=pol, budget_fraction=1.0,
                             tier_weights=[1.0])
    s.parallel = True
    calm = dict(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=5.0, duration_scale=0.0)
    s.publish(**calm)  # 5 req/s: 100 queued with ~10 s of slack at most cannot drain (n > R s_max); no shed
    fill(s, ids)       # (nothing measured yet: duration_scale 0 and no batch observed)
    left = list(ids)

    def take(expect: list[int]) -> None:
        got = s.form_batch(0.0, 0.0)[0].tolist()
        assert got == expect
        for r in got:
            left.remove(r)

    take([r for r in ids if r in left][::-1][:B])          # overloaded, not ranked yet: the latest deadlines
    take(sorted(left, key=rank, reverse=True)[:B])          # ranked from the next batch
    take(sorted(left, key=rank, reverse=True)[:B])          # and kept (no publish since)
    s.publish(**calm)                                       # the planner: calm
    take([r for r in ids if r in left][::-1][:B])           # deadline order for one batch, whose test fires
    take(sorted(left, key=rank, reverse=True)[:B])          # ranked again


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 1 << 50), min_size=1, max_size=120, unique=True), st.randoms(use_true_random=False),
       st.integers(1, 4), st.integers(0, 6))
def test_siblings_keep_the_same_requests(ids: list[int], rnd, slow_batches: int, extra: int) -> None:
    """Two sibling branches holding the same copies, queued in different orders, one serving more batches
    than the other: every request the slower branch serves, the faster one serves too."""
    fast, slow = stage(), stage()
    other = list(ids)
    rnd.shuffle(other)
    fill(fast, ids)
    fill(slow, other)
    by_slow = {r for _ in range(slow_batches) for r in slow.form_batch(0.0, 0.0)[0].tolist()}
    by_fast = {r for _ in range(slow_batches + extra) for r in fast.form_batch(0.0, 0.0)[0].tolist()}
    assert by_slow <= by_fast


def incomparable(successors: list[list[int]]) -> list[bool]:
    """Brute force: stage k is on a parallel branch iff some other stage is neither above nor below it."""
    reach = closure(successors)
    n = len(successors)
    return [any(j != k and not reach[k][j] and not reach[j][k] for j in range(n)) for k in range(n)]


@settings(max_examples=200, deadline=None)
@given(random_dags)
def test_parallel_branches_is_incomparability(succ: list[list[int]]) -> None:
    """On random DAGs."""
    assert _core.parallel_branches(succ) == incomparable(succ)


def test_parallel_branches_of_the_builtins() -> None:
    """da's pose, face detection and face landmarks are branches; chains (tm, lv, ga) have none."""
    for name in ("tm", "lv", "ga", "da"):
        spec = pard.config.builtin(name)
        names = [s.name for s in spec.stages]
        flags = _core.parallel_branches([[names.index(x) for x in s.successors] for s in spec.stages])
        want = {"pose", "face_detect", "face_landmark"} if name == "da" else set()
        assert {n for n, f in zip(names, flags) if f} == want


def test_the_ray_stage_scheduler_knows_its_branch() -> None:
    """pard.ray's stage actors build their scheduler alone (wiring.stage_scheduler): it sets the flag."""
    from pard.wiring import stage_scheduler

    spec = pard.config.builtin("da")
    flags = [stage_scheduler(spec, k, POLICIES["pard"], 1024).parallel for k in range(len(spec.stages))]
    assert flags == [False, True, True, True, False]


def short_branches() -> pard.PipelineSpec:
    """da with both branches short of the entry: face detection (533 req/s) below pose (667 req/s)."""
    return pard.config.builtin("da").with_workers({"person_detect": 8, "pose": 2, "face_detect": 1})


@pytest.mark.parametrize("load", [1.5, 3.0])
def test_simulated_branches_join_what_they_serve(load: float) -> None:
    """Both branches overloaded, fixed workers: a request reaches the join at most once per copy the slower
    branch ran. With the coherent rank at least 98 % of the slower branch's copies reach it; without it (the
    same policy otherwise) fewer than 95 % do, which is the compute the branches waste on each other."""
    spec = short_branches()
    n = int(load * spec.capacity().pipeline * 20)
    arr = np.sort(np.random.default_rng(1).uniform(0.0, 20.0, n))
    eff = {}
    for on in (True, False):
        # without the entry's virtual queue, which also keeps the branches from spending on each other's drops
        # (it sheds the excess before either runs it): the lever alone
        pol = dataclasses.replace(POLICIES["pard"], coherent_rank=on, virtual_queue=False)
        r = pard.simulate(spec, arr, pol, seed=2, jitter_cv=0.1)
        assert r.submitted == n == r.on_time + r.late + r.dropped + r.rejected + r.failed
        by = {s.name: s for s in r.stages}
        slower = min(by["pose"].executed, by["face_landmark"].executed)
        assert by["expression"].submitted <= slower
        eff[on] = by["expression"].submitted / slower
    assert eff[True] >= 0.98
    assert eff[False] < 0.95


def test_pard_ranks_its_branches_and_no_other_policy_does() -> None:
    """``pard`` carries the field; pard-paper and the baselines do not."""
    assert POLICIES["pard"].core().coherent_rank
    assert not any(POLICIES[n].core().coherent_rank for n in POLICIES if n != "pard")
    with pytest.raises(pard.PardError, match="coherent_rank.*'yes'"):
        dataclasses.replace(POLICIES["pard"], coherent_rank="yes")  # type: ignore[arg-type]


def test_live_runtime_marks_its_branches_and_accounts_for_every_request() -> None:
    """The LivePipeline sets each scheduler's branch flag from the graph; a small DAG served live under
    pard ends every request once and joins both branches' outputs."""
    spec = pard.PipelineSpec(name="fork", slo=0.5, stages=[
        pard.StageSpec(name="a", profile={1: 0.001, 8: 0.002}, max_batch=8, workers=1, successors=["b", "c"]),
        pard.StageSpec(name="b", profile={1: 0.001, 8: 0.002}, max_batch=8, workers=1, successors=["d"]),
        pard.StageSpec(name="c", profile={1: 0.001, 8: 0.002}, max_batch=8, workers=1, successors=["d"]),
        pard.StageSpec(name="d", profile={1: 0.001, 8: 0.002}, max_batch=8, workers=1),
    ])
    stages = {"a": pard.ArrayExecutor(lambda x: x + 1.0), "b": pard.ArrayExecutor(lambda x: x * 2.0),
              "c": pard.ArrayExecutor(lambda x: x * 3.0), "d": pard.ArrayExecutor(lambda x: x)}
    with pard.Runtime(spec, stages) as rt:
        assert [st.sched.parallel for st in rt._stages] == [False, True, True, False]  # set by the LivePipeline
        futures = [rt.submit(np.full(2, float(i), np.float32)) for i in range(100)]
        for f in futures:
            try:
                f.result(timeout=30)
            except pard.Dropped:
                pass
    rep = rt.report()
    assert rep.submitted == 100 == rep.on_time + rep.late + rep.dropped + rep.rejected + rep.failed
    assert rep.on_time > 0
