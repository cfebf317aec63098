"""Cases from public bug reports of other inference servers, pinned against pard (issue 13).

- Triton #5783: a queue bound must hold exactly: a ring of capacity N accepts exactly N requests
  and refuses the next one, with a reason (never silently, never one more or one less).
- Triton #7512: a request whose budget runs out while a long batch runs ahead of it must be
  dropped when it becomes infeasible, not only once that batch has finished.

Expectations are closed forms from the scenario (capacities, arrival times, profile durations).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import pard
from pard import _core


@pytest.mark.parametrize("capacity", [2, 8, 1024])
def test_ring_of_capacity_n_accepts_exactly_n(capacity: int) -> None:
    """Triton #5783: a StageScheduler ring of capacity N takes N submits and refuses the (N+1)-th."""
    pol = _core.Policy(order="fcfs", drop="none")
    s = _core.StageScheduler(stage=0, profile=_core.Profile([1], [0.01]), max_batch=1, policy=pol,
                             budget_fraction=1.0, ring_capacity=capacity)
    accepted = [s.submit(i, 0.0, 10.0, 0.0) for i in range(capacity)]
    assert all(accepted)
    assert s.submit(capacity, 0.0, 10.0, 0.0) is False
    assert s.queued() == capacity


def _one_stage(workers: int = 1, profile: dict[int, float] | None = None) -> pard.PipelineSpec:
    return pard.PipelineSpec.from_dict({
        "name": "one", "slo": 5.0,
        "stages": [{"name": "only", "profile": profile or {1: 0.001}, "max_batch": 1, "workers": workers,
                    "successors": []}],
    })


def test_runtime_full_ring_rejects_the_next_request_with_a_reason() -> None:
    """Triton #5783 live: with the entry worker held in its executor, a ring of 8 accepts 8 more and rejects the 9th."""
    entered, release = threading.Event(), threading.Event()

    def hold(batch: list[object]) -> list[object]:
        entered.set()
        release.wait(timeout=30.0)
        return batch

    cap = 8
    rt = pard.Runtime(_one_stage(), {"only": pard.CallableExecutor(hold)}, ring_capacity=cap)
    try:
        first = rt.submit(0)
        # The worker collects its next batch just before it enters the executor, so once it is
        # inside nobody drains the ring: the next `cap` submits fill it exactly.
        assert entered.wait(timeout=30.0)
        queued = [rt.submit(i) for i in range(1, cap + 1)]
        refused = rt.submit(cap + 1)
        assert refused.done()
        with pytest.raises(pard.Rejected) as info:
            refused.result(timeout=0)
        assert info.value.reason == "ring_full" and info.value.stage == "only"
        assert info.value.request_id == refused.request_id
        assert "''" not in str(info.value)  # no "stage 'only''s" (issue 13, Found 7)
        assert info.value.retry_after_s is None or info.value.retry_after_s >= 0.0
        assert not any(f.done() for f in queued)
    finally:
        release.set()
        rt.close(timeout_s=30.0)
    counts = rt.counts()
    assert counts["submitted"] == cap + 2
    assert counts["rejected"] == 1
    assert counts["on_time"] + counts["late"] == cap + 1
    assert first.done() and all(f.done() for f in queued)


def test_request_infeasible_behind_a_long_batch_is_dropped_when_infeasible() -> None:
    """Triton #7512: a request that cannot make its deadline behind a 100 ms batch is dropped by its deadline, not at the batch end."""
    spec = _one_stage(profile={1: 0.1, 2: 0.2})
    # Request 0 starts a 100 ms batch at t = 0; request 1 arrives at 10 ms with a 50 ms SLO: even a
    # batch of one started when the running batch ends (t = 100 ms) ends at 200 ms > 60 ms, so it
    # is infeasible from its arrival on, and its deadline passes at 60 ms, 40 ms before the batch end.
    r = pard.simulate(spec, np.array([0.0, 0.01]), "pard", slo=np.array([1.0, 0.05]), jitter_cv=0.0)
    assert list(r.state) == [1, 3]  # on time, dropped
    assert r.reasons[int(r.reason[1])] == "infeasible"
    assert r.finish_s[1] <= 0.06 + 1e-9


def test_simulator_purge_expects_the_start_when_the_busy_worker_is_free() -> None:
    """Triton #7512: the busy-arrival purge's t_e is the running batch's nominal end: 1 ns short of feasible is dropped at arrival, exactly feasible is served on time."""
    spec = _one_stage(profile={1: 0.01, 2: 0.02})
    # Request 0 runs [0, 10 ms]. Arriving at 1 ms, a batch of one can start at 10 ms and end at
    # 20 ms: deadline 20 ms keeps (equal keeps, Eq. 3b) and is served [10, 20 ms], on time;
    # deadline 20 ms - 1 us (1 us: the seconds <-> ns conversion's exact range) is dropped at 1 ms.
    arr = np.array([0.0, 0.001, 0.001])
    slo = np.array([1.0, 0.019, 0.019 - 1e-6])
    r = pard.simulate(spec, arr, "pard", slo=slo, jitter_cv=0.0)
    assert list(r.state) == [1, 1, 3]
    assert r.reasons[int(r.reason[2])] == "infeasible"
    assert r.finish_s[2] == pytest.approx(0.001, abs=1e-9)
    assert r.finish_s[1] == pytest.approx(0.02, abs=1e-9)


def test_runtime_drops_a_request_that_becomes_infeasible_while_every_worker_is_busy() -> None:
    """Triton #7512 live: with the only worker held past its profiled 10 ms, a 50 ms request is dropped (infeasible) before the worker is released, a 30 s one is served after."""
    entered, release = threading.Event(), threading.Event()

    def hold(batch: list[object]) -> list[object]:
        entered.set()
        release.wait(timeout=30.0)
        return batch

    rt = pard.Runtime(_one_stage(profile={1: 0.01, 2: 0.02}), {"only": pard.CallableExecutor(hold)})
    try:
        first = rt.submit(0)
        assert entered.wait(timeout=30.0)
        # Once now > send + 40 ms, even a batch of one started now (t_e = now, d(1) = 10 ms) misses
        # the 50 ms deadline: only the purge timer can drop it, the worker forms nothing until released.
        doomed = rt.submit(1, slo=0.05)
        patient = rt.submit(2, slo=30.0)
        with pytest.raises(pard.Dropped) as info:
            doomed.result(timeout=30.0)
        assert not release.is_set()
        assert info.value.reason == "infeasible" and info.value.stage == "only"
        assert not patient.done()
    finally:
        release.set()
        rt.close(timeout_s=30.0)
    assert patient.result(timeout=0) == 2 and first.result(timeout=0) == 0
    counts = rt.counts()
    assert counts["submitted"] == 3 and counts["dropped"] == 1
    assert counts["on_time"] + counts["late"] == 2
