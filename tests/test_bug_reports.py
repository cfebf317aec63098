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
        assert "full" in info.value.reason and info.value.stage == "only"
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


@pytest.mark.xfail(strict=True, reason=(
    "Triton #7512 reproduces in pard: a stage purges its queue only when a worker forms a batch, so "
    "a request that is infeasible on arrival behind a running batch is dropped when that batch ends "
    "(simulator: StageScheduler::form_batch is the only place the low-end purge runs); see "
    "bench/RESULTS.md"))
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
