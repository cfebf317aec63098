"""PolicySpec.overload_below: a stage's pop rule budgets the overload downstream term (pard-upper's
sum q_i + 2 sum d_i) while a stage *below* it signals, now, that it is backed up -- its own hot-path
overload test held at its last batch ("overloaded") (stage_scheduler.hpp step 2b). The stages below come from the successor lists (``_core.stages_below``),
wired once by the simulator and the live pipeline. ``pard`` reads "overloaded"; every other named policy none.

Expectations are hand-computed from a linear profile d(b) = A + C b (as tests/test_overload_upper.py),
and ``stages_below`` is checked against a brute-force reachability on random DAGs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings

import pard
from _graphs import closure, random_dags
from pard import _core
from pard.policies import POLICIES, PolicySpec

A, C, B = 0.010, 0.005, 16  # d(b) = A + C b seconds: d(1) = 15 ms, d(16) = 90 ms
RATE = 2 * B / (A + C * B)  # two workers at full batches: 355.6 req/s
RAISED = 0.21095  # the overload term: with d(16) = 0.09 a request is kept iff its deadline >= 0.30095 s


def sched(below: str = "none", stage: int = 0) -> _core.StageScheduler:
    """A reactive pard stage on the linear profile, publishing downstream 0 and the overload term RAISED."""
    prof = _core.Profile([1, B], [A + C, A + C * B])
    pol = _core.Policy(order="adaptive", drop="pard", tiered=True, reactive=True, overload_below=below)
    s = _core.StageScheduler(stage=stage, profile=prof, max_batch=B, policy=pol, budget_fraction=1.0,
                             tier_weights=[1.0])
    s.publish(downstream_s=0.0, mu=0.5, eps=0.1, queue_delay_s=0.0, service_rate=RATE,
              overload_downstream_s=RAISED)
    return s


def fill(s: _core.StageScheduler, n: int, first_id: int = 0) -> None:
    """n requests sent at 0, due 0.3 + 1e-4 i s, queued at t = 0."""
    for i in range(n):
        s.submit(first_id + i, 0.0, 0.3 + 1e-4 * i, 0.0)


def upper_batch(below_state: str, signal: str) -> tuple[list[int], list[int]]:
    """Stage 0 (20 queued: calm, 75 req could drain in its 0.21 s of slack) forms a batch at t = 0 while
    stage 1 below it is `below_state`: "overloaded" (1000 queued, one batch formed), "backlog" (16 queued,
    none formed), "short" (15 queued) or "idle". Returns (batch ids, dropped ids) of stage 0."""
    up, low = sched(signal, 0), sched(signal, 1)
    up.set_below([low])
    if below_state == "overloaded":
        fill(low, 1000, 10_000)
        low.form_batch(0.0, 0.0)
    elif below_state in ("backlog", "short"):
        fill(low, B if below_state == "backlog" else B - 1, 10_000)
    fill(up, 20)
    ids, dropped, _ = up.form_batch(0.0, 0.0)
    return ids.tolist(), dropped.tolist()


CALM = (list(range(16)), [])                 # LBF pops ids 0..15, all feasible at downstream 0
RAISED_POP = (list(range(10, 20)), list(range(10)))  # deadlines < 0.30095 (ids 0..9) dropped at pop


@pytest.mark.parametrize(("signal", "below_state", "expected"), [
    ("overloaded", "overloaded", RAISED_POP),
    ("overloaded", "idle", CALM),
    ("overloaded", "backlog", CALM),       # a full batch queued is not an overload test that held
    ("none", "overloaded", CALM),
    ("none", "backlog", CALM),
])
def test_pop_rule_follows_the_stage_below(signal: str, below_state: str, expected: tuple) -> None:
    """A calm stage keeps the published downstream term (0: ids 0..15 batched) unless a stage below signals,
    by the policy's own signal; then its pop rule takes the overload term and drops the ten requests due
    before t_e + d(16) + 0.21095 = 0.30095 s."""
    assert upper_batch(below_state, signal) == expected


def test_overload_state_clears_with_an_empty_batch() -> None:
    """overloaded_now is the test of the stage's last batch: true after the 1000-request batch, false after a
    formation that found nothing queued, and the stage above is calm again."""
    up, low = sched("overloaded", 0), sched("overloaded", 1)
    up.set_below([low])
    fill(low, 1000, 10_000)
    assert not low.overloaded_now
    low.form_batch(0.0, 0.0)
    assert low.overloaded_now
    low.form_batch(10.0, 10.0)  # every request is past its deadline by now: purged, nothing to batch
    assert not low.overloaded_now
    fill(up, 20)
    assert up.form_batch(0.0, 0.0)[0].tolist() == CALM[0]


def test_only_the_stages_set_below_are_read() -> None:
    """A stage with no stages set below, or with an unrelated calm one, ignores an overloaded stage elsewhere."""
    up, low, other = sched("overloaded", 0), sched("overloaded", 1), sched("overloaded", 2)
    fill(low, 1000, 10_000)
    low.form_batch(0.0, 0.0)
    up.set_below([other])
    fill(up, 20)
    assert up.form_batch(0.0, 0.0)[0].tolist() == CALM[0]


def reachable(successors: list[list[int]]) -> list[list[int]]:
    """Brute force: stage j is below k iff some path of successor edges leads from k to j (j != k)."""
    reach = closure(successors)
    n = len(successors)
    return [[j for j in range(n) if reach[k][j] and j != k] for k in range(n)]


@settings(max_examples=200, deadline=None)
@given(random_dags)
def test_stages_below_is_reachability(succ: list[list[int]]) -> None:
    """On random DAGs stages_below equals the closure."""
    assert _core.stages_below(succ) == reachable(succ)


def test_stages_below_of_the_da_pipeline() -> None:
    """da: person detection fans out to pose and face, joined at expression (DESIGN §5)."""
    spec = pard.config.builtin("da")
    names = [s.name for s in spec.stages]
    succ = [[names.index(x) for x in s.successors] for s in spec.stages]
    below = _core.stages_below(succ)
    assert below == reachable(succ)
    assert below[0] == list(range(1, len(names)))  # the entry reaches every other stage
    assert below[names.index("expression")] == []


def test_stages_below_refuses_an_index_out_of_range() -> None:
    """A successor that names no stage is refused with the index."""
    with pytest.raises(ValueError, match="successor 3 is out of range"):
        _core.stages_below([[3], []])


def test_bad_values_are_refused() -> None:
    """PolicySpec and the binding name the field and the value."""
    with pytest.raises(pard.PardError, match="overload_below.*'sometimes'"):
        dataclasses.replace(POLICIES["pard"], overload_below="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="overload_below='sometimes'"):
        _core.Policy(order="adaptive", drop="pard", overload_below="sometimes")
    assert POLICIES["pard"].core().overload_below == "overloaded"  # pard reads the stages below (DESIGN §3.7)
    assert all(POLICIES[n].core().overload_below == "none" for n in POLICIES if n != "pard")
    with pytest.raises(pard.PardError, match="overload_below.*'backlog'"):
        dataclasses.replace(POLICIES["pard"], overload_below="backlog")  # type: ignore[arg-type]


def variant(signal: str) -> PolicySpec:
    return dataclasses.replace(POLICIES["pard"], overload_below=signal)  # type: ignore[arg-type]


@pytest.mark.parametrize("signal", ["overloaded"])
def test_simulated_da_conserves_every_request(signal: str) -> None:
    """Through the simulator's wiring (da, bursty input at 1.3x capacity, jitter): every request ends once,
    per stage and per tier."""
    spec = pard.config.builtin("da")
    arr = pard.workloads.bursty(1.3 * spec.capacity().pipeline, 20.0, 1.5, seed=3)
    r = pard.simulate(spec, arr, variant(signal), seed=3, jitter_cv=0.3)
    assert r.submitted == arr.size == r.on_time + r.late + r.dropped + r.rejected + r.failed
    assert r.on_time > 0 and r.dropped > 0


def test_live_runtime_wires_the_stages_below() -> None:
    """A live Runtime under the policy serves and accounts for every request (the LivePipeline wiring)."""
    spec = pard.PipelineSpec(name="two", slo=0.2, stages=[
        pard.StageSpec(name="a", profile={1: 0.001, 8: 0.002}, max_batch=8, workers=1, successors=["b"]),
        pard.StageSpec(name="b", profile={1: 0.001, 8: 0.002}, max_batch=8, workers=1),
    ])
    stages = {"a": pard.ArrayExecutor(lambda x: x + 1.0), "b": pard.ArrayExecutor(lambda x: x * 2.0)}
    with pard.Runtime(spec, stages, policy=variant("overloaded")) as rt:
        futures = [rt.submit(np.full(4, float(i), np.float32), slo=0.5) for i in range(200)]
        served = 0
        for i, f in enumerate(futures):
            try:
                out = f.result(timeout=30)
            except pard.Dropped:
                continue
            assert np.array_equal(out, np.full(4, (i + 1.0) * 2.0, np.float32))  # a then b, on its own input
            served += 1
    rep = rt.report()
    assert rep.submitted == 200 == rep.on_time + rep.late + rep.dropped + rep.rejected + rep.failed
    assert served == rep.on_time + rep.late > 0
