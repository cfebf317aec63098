"""The live runtime: conservation under concurrent submitters, failures, close(), bad input, cancellation."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np
import pytest

from pard import _core
from pard.config import PipelineSpec, StageSpec
from pard.errors import Dropped, ExecutorError, Rejected
from pard.executors import CallableExecutor
from pard.runtime import STATES, Runtime
from pard.sim import simulate as pard_simulate


def _chain(slo: float = 10.0, max_batch: int = 8, d: float = 0.0005, n: int = 2, workers: int = 1) -> PipelineSpec:
    names = [f"s{i}" for i in range(n)]
    return PipelineSpec(
        name="chain", slo=slo,
        stages=[StageSpec(name=names[i], profile={1: d, max_batch: d * 2}, max_batch=max_batch,
                          workers=workers, successors=names[i + 1 : i + 2]) for i in range(n)],
    )


def _identity(xs: list[Any]) -> list[Any]:
    return list(xs)


class _Gate:
    """A stage that records its batches and blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.batches: list[list[Any]] = []

    def __call__(self, xs: list[Any]) -> list[Any]:
        self.batches.append(list(xs))
        self.started.set()
        assert self.release.wait(10.0), "test gate never released"
        return [x * 10 for x in xs]


def _outcome_of(f: Any) -> str:
    if f.cancelled():
        return "cancelled"
    e = f.exception(timeout=0)
    if e is None:
        return "finished"
    return type(e).__name__


def test_conservation_holds_at_every_moment() -> None:
    """While 4 threads submit and cancel, every counts() read satisfies submitted = pending + the five terminal states."""
    spec = _chain(slo=0.004, max_batch=16, d=0.0002)
    rt = Runtime(spec, {"s0": _identity, "s1": _identity}, policy="pard", planner={"sync_interval_s": 0.2}, max_queue_size=64)
    stop = threading.Event()
    reads: list[dict[str, int]] = []

    def submitter(i: int) -> None:
        for j in range(3_000):
            f = rt.submit(j, slo=0.004 if j % 3 else 1.0)
            if j % 7 == 0:
                f.cancel()

    def monitor() -> None:
        while not stop.is_set():
            reads.append(rt.counts())

    mon = threading.Thread(target=monitor)
    mon.start()
    threads = [threading.Thread(target=submitter, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.close(drain=True)
    stop.set()
    mon.join()
    reads.append(rt.counts())
    assert len(reads) > 2
    for c in reads:
        assert c["submitted"] == sum(c[s] for s in STATES), c
    assert reads[-1]["submitted"] == 12_000 and reads[-1]["pending"] == 0
    assert all(a["submitted"] <= b["submitted"] for a, b in zip(reads, reads[1:]))  # monotonic


def test_conservation_four_submitters() -> None:
    """4 threads x 20 000 requests: every request ends once, in a state whose future agrees, and the states add
    up to what was submitted (rejections allowed: whether the queue fills depends on the machine's speed)."""
    spec = _chain(slo=0.004, max_batch=32, d=0.0002)
    rt = Runtime(spec, {"s0": _identity, "s1": _identity}, policy="pard", planner={"sync_interval_s": 0.2})
    futures: list[list[Any]] = [[] for _ in range(4)]

    def submitter(i: int) -> None:
        for j in range(20_000):
            futures[i].append(rt.submit(i * 100_000 + j, slo=0.004 if j % 3 else 1.0))

    threads = [threading.Thread(target=submitter, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.close(drain=True)
    counts = rt.counts()
    assert counts["submitted"] == 80_000
    assert counts["pending"] == 0
    assert sum(counts[s] for s in STATES[1:]) == 80_000
    out = rt.outcomes()
    assert out["state"].size == 80_000 and (out["state"] > 0).all()
    np.testing.assert_array_equal(np.bincount(out["state"], minlength=6)[1:], [counts[s] for s in STATES[1:]])
    ids = sorted(f.request_id for fs in futures for f in fs)
    assert ids == list(range(80_000))
    # each future agrees with the recorded state, and finished ones return their own payload
    for i, fs in enumerate(futures):
        for j, f in enumerate(fs):
            state = STATES[out["state"][f.request_id]]
            if state in ("on_time", "late"):
                assert f.result(timeout=0) == i * 100_000 + j
                assert (out["finish_s"][f.request_id] <= out["send_s"][f.request_id] + out["slo_s"][f.request_id]) == (
                    state == "on_time")
            elif state == "dropped":
                e = f.exception(timeout=0)
                assert isinstance(e, Dropped) and e.request_id == f.request_id
                assert e.stage in ("s0", "s1") and e.reason in _core.REASONS
            else:  # back-pressure (a full queue or ring) is part of the contract, however fast the machine
                assert state == "rejected"
                e = f.exception(timeout=0)
                assert isinstance(e, Rejected) and e.stage == "s0" and e.retry_after_s is not None
    rep = rt.report()
    assert rep.submitted == 80_000
    assert rep.on_time + rep.late + rep.dropped + rep.rejected + rep.failed == 80_000


def test_executor_exception_fails_only_that_batch() -> None:
    """A raising executor fails exactly its batch's requests, with the error, and the worker carries on."""
    calls: list[list[int]] = []

    def stage(xs: list[int]) -> list[int]:
        calls.append(list(xs))
        if any(x < 0 for x in xs):
            raise RuntimeError("bad input in batch")
        return [x + 1 for x in xs]

    spec = _chain(max_batch=1, n=1)
    with Runtime(spec, {"s0": stage}, policy="naive") as rt:
        good1 = rt.submit(1)
        good1.result(timeout=5)
        bad = rt.submit(-5)
        with pytest.raises(ExecutorError, match="bad input in batch") as info:
            bad.result(timeout=5)
        assert isinstance(info.value.__cause__, RuntimeError)
        good2 = rt.submit(7)
        assert good2.result(timeout=5) == 8
    c = rt.counts()
    assert (c["failed"], c["on_time"] + c["late"], c["submitted"]) == (1, 2, 3)
    assert rt.outcomes()["state"][bad.request_id] == STATES.index("failed")
    assert rt.outcomes()["drop_stage"][bad.request_id] == 0
    rep = rt.report()
    assert (rep.failed, rep.stages[0].failed, rep.stages[0].rejected) == (1, 1, 0)


def test_wrong_output_count_fails_batch() -> None:
    """An executor returning the wrong number of outputs fails its batch instead of losing requests."""
    with Runtime(_chain(n=1, max_batch=1), {"s0": CallableExecutor(lambda xs: [])}, policy="naive") as rt:
        f = rt.submit(3)
        with pytest.raises(ExecutorError, match="0 outputs"):
            f.result(timeout=5)


def test_close_drain_false_with_queued_and_running() -> None:
    """close(drain=False) cancels queued and running requests at once; each ends as dropped/cancelled."""
    gate = _Gate()
    rt = Runtime(_chain(n=1, max_batch=1), {"s0": gate}, policy="naive")
    running = rt.submit(1)
    assert gate.started.wait(5)
    queued = [rt.submit(i) for i in range(2, 6)]
    closer = threading.Thread(target=rt.close, kwargs={"drain": False})
    closer.start()
    for f in [running, *queued]:
        with pytest.raises(Dropped) as info:
            f.result(timeout=5)  # resolved while the running batch is still blocked
        assert info.value.reason == "cancelled" and info.value.stage == "s0"
    assert closer.is_alive()  # close waits for the running batch's thread
    gate.release.set()
    closer.join(5)
    assert not closer.is_alive()
    c = rt.counts()
    assert (c["submitted"], c["dropped"], c["pending"]) == (5, 5, 0)
    assert (rt.outcomes()["reason"] == _core.REASONS.index("cancelled")).all()
    with pytest.raises(RuntimeError, match="not accepting"):
        rt.submit(9)


def test_close_drain_true_finishes_queued_and_running() -> None:
    """close(drain=True) lets queued and running requests finish before the threads stop."""
    gate = _Gate()
    rt = Runtime(_chain(n=2, max_batch=2), {"s0": gate, "s1": _identity}, policy="naive")
    futs = [rt.submit(1)]
    assert gate.started.wait(5)
    futs += [rt.submit(i) for i in range(2, 7)]
    closer = threading.Thread(target=rt.close)
    closer.start()
    time.sleep(0.05)
    assert closer.is_alive() and not any(f.done() for f in futs)
    gate.release.set()
    closer.join(10)
    assert not closer.is_alive()
    assert sorted(f.result(timeout=0) for f in futs) == [10, 20, 30, 40, 50, 60]
    c = rt.counts()
    assert c["on_time"] == 6 and c["pending"] == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"slo": float("nan")}, ValueError, "slo"),
        ({"slo": float("inf")}, ValueError, "slo"),
        ({"slo": -0.1}, ValueError, "slo"),
        ({"slo": 0.0}, ValueError, "slo"),
        ({"slo": "1s"}, TypeError, "slo"),
        ({"slo": True}, TypeError, "slo"),
        ({"tier": -1}, ValueError, "tier"),
        ({"tier": 1.5}, TypeError, "tier"),
    ],
)
def test_bad_submit_arguments_count_nowhere(kwargs: dict[str, Any], error: type, match: str) -> None:
    """Bad SLO or tier values raise a clear error naming the argument, and the request is not counted."""
    with Runtime(_chain(n=1), {"s0": _identity}, policy="pard") as rt:
        with pytest.raises(error, match=match):
            rt.submit(1, **kwargs)
        assert rt.counts()["submitted"] == 0
        assert rt.submit(2).result(timeout=5) == 2
        assert rt.counts()["submitted"] == 1


def test_wrong_payload_shape_counts_nowhere() -> None:
    """A payload of the wrong shape raises ValueError naming both shapes and is not counted."""
    with Runtime(_chain(n=1), {"s0": _identity}, payload_shape=(4, 2)) as rt:
        with pytest.raises(ValueError, match=r"payload shape \(3,\) does not match .*\(4, 2\)"):
            rt.submit(np.zeros(3))
        with pytest.raises(ValueError, match="payload shape"):
            rt.submit("text")
        assert rt.counts()["submitted"] == 0
        out = rt.submit(np.ones((4, 2))).result(timeout=5)
        np.testing.assert_array_equal(out, np.ones((4, 2)))


def test_cancel_queued_request_frees_its_place() -> None:
    """Cancelling a queued request ends it at once and the next request takes its place in the batch."""
    gate = _Gate()
    rt = Runtime(_chain(n=1, max_batch=2), {"s0": gate}, policy="naive")
    a = rt.submit(1)
    assert gate.started.wait(5)
    b, c, d = rt.submit(2), rt.submit(3), rt.submit(4)
    assert rt.queued("s0") == 3
    assert b.cancel()
    assert b.cancelled() and b.done()
    assert rt.queued("s0") == 2
    counts = rt.counts()
    assert (counts["dropped"], counts["pending"]) == (1, 3)
    gate.release.set()
    assert [f.result(timeout=5) for f in (a, c, d)] == [10, 30, 40]
    rt.close()
    assert gate.batches == [[1], [3, 4]]  # the ghost took no place in the second batch
    out = rt.outcomes()
    assert out["reason"][b.request_id] == _core.REASONS.index("cancelled")
    assert not a.cancel()  # finished requests cannot be cancelled


def test_policy_drops_carry_id_stage_reason() -> None:
    """Under overload the pard policy drops requests with pard.Dropped naming id, stage and a known reason."""
    def slow(xs: list[Any]) -> list[Any]:
        time.sleep(0.004)
        return list(xs)

    spec = _chain(slo=0.03, max_batch=2, d=0.004, n=2)
    with Runtime(spec, {"s0": slow, "s1": slow}, policy="pard", planner={"sync_interval_s": 0.1}) as rt:
        futs = [rt.submit(i) for i in range(300)]
        drops = []
        for f in futs:
            e = f.exception(timeout=10)
            if isinstance(e, Dropped):
                drops.append(e)
    assert drops, "2 batches of 2 per 4 ms cannot serve 300 requests within 30 ms"
    for e in drops:
        assert 0 <= e.request_id < 300 and e.stage in ("s0", "s1") and e.reason in _core.REASONS
    out = rt.outcomes()
    for e in drops:
        assert out["state"][e.request_id] == STATES.index("dropped")
        assert rt.pipeline.stage_names[out["drop_stage"][e.request_id]] == e.stage


def test_dag_join_and_async() -> None:
    """A diamond DAG joins both branches' outputs for each request; submit_async awaits the result."""
    spec = PipelineSpec(name="diamond", slo=5.0, stages=[
        StageSpec(name="a", profile={1: 0.001}, max_batch=4, successors=["b", "c"]),
        StageSpec(name="b", profile={1: 0.001}, max_batch=4, successors=["d"]),
        StageSpec(name="c", profile={1: 0.001}, max_batch=4, successors=["d"]),
        StageSpec(name="d", profile={1: 0.001}, max_batch=4),
    ])
    ex = {
        "a": CallableExecutor(lambda x: x + 1, per_request=True),
        "b": CallableExecutor(lambda x: x * 2, per_request=True),
        "c": CallableExecutor(lambda x: x * 3, per_request=True),
        "d": CallableExecutor(lambda parts: parts, per_request=True),
    }
    with Runtime(spec, ex, policy="naive") as rt:
        assert [rt.submit(i).result(timeout=5) for i in range(5)] == [((i + 1) * 2, (i + 1) * 3) for i in range(5)]

        async def main() -> Any:
            return await asyncio.gather(*(rt.submit_async(i) for i in (10, 20)))

        assert asyncio.run(main()) == [(22, 33), (42, 63)]
    rep = rt.outcomes()
    assert (rep["state"] == STATES.index("on_time")).all()


def test_idle_workers_do_not_spin() -> None:
    """Idle workers block on a condition: half a second of idleness costs (almost) no CPU."""
    with Runtime(_chain(n=2, workers=2), {"s0": _identity, "s1": _identity}, planner={"sync_interval_s": 10.0}) as rt:
        rt.submit(1).result(timeout=5)
        c0 = time.process_time()
        time.sleep(0.5)
        assert time.process_time() - c0 < 0.1


def test_constructor_errors() -> None:
    """Missing executors, bad worker counts and a bad sync interval raise errors naming them."""
    spec = _chain(n=2)
    with pytest.raises(ValueError, match="missing"):
        Runtime(spec, {"s0": _identity}, start=False)
    with pytest.raises(ValueError, match="workers"):
        Runtime(spec, {"s0": _identity, "s1": _identity}, workers=[1, 0], start=False)
    with pytest.raises(ValueError, match="sync_interval_s"):
        Runtime(spec, {"s0": _identity, "s1": _identity}, planner={"sync_interval_s": 0}, start=False)
    with pytest.raises(ValueError, match="unknown policy"):
        Runtime(spec, {"s0": _identity, "s1": _identity}, policy="fastest", start=False)


def test_report_span_and_metrics() -> None:
    """The live report counts each request once; goodput is per the span asked for, its series in whole seconds."""
    with Runtime(_chain(n=2), {"s0": _identity, "s1": _identity}, policy="naive") as rt:
        t0 = rt.now()
        futs = [rt.submit(i) for i in range(10)]
        assert [f.result(timeout=5) for f in futs] == list(range(10))
    rep = rt.report(t0_s=t0, duration_s=2.5)
    # goodput is per the span asked for (issue 13: it was per 3 whole seconds); the series has 3 bins
    assert rep.duration_s == 2.5 and rep.arrivals_per_s.size == 3
    assert rep.on_time == 10 and rep.goodput == pytest.approx(10 / 2.5)
    assert [s.submitted for s in rep.stages] == [10, 10] and [s.executed for s in rep.stages] == [10, 10]
    b = rt.batches()
    assert b["size"].sum() == 20 and set(b["stage"].tolist()) == {0, 1}
    assert (b["wait_s"] >= 0).all() and (b["duration_s"] >= 0).all()


def _close_or_fail(rt: Runtime, what: str) -> None:
    """Close ``rt`` in a helper thread; fail (instead of hanging the suite) if it does not return."""
    closer = threading.Thread(target=rt.close, daemon=True)
    closer.start()
    closer.join(timeout=20.0)
    assert not closer.is_alive(), f"close() hung after {what}: a rejected submit was left in flight"


class _RaisingPush:
    """A push hook of the C++ pipeline (``LivePipeline.set_push_hook``) that raises while ``armed``:
    an error of the C++ push into a stage's queue at submit."""

    def __init__(self) -> None:
        self.armed = True

    def __call__(self, stage: int) -> None:
        if self.armed:
            raise RuntimeError("injected C++ submit failure")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"slo": 1e12}, ValueError, r"slo must be a number of seconds in \(0, 1e\+09\].*1e9 s.*1000000000000"),
        ({"slo": 1e9 * (1 + 1e-9)}, ValueError, "slo"),
        ({"slo": float("nan")}, ValueError, "slo"),
        ({"slo": "1s"}, TypeError, "slo"),
        ({"tier": 2**31}, ValueError, "tier"),
        ({"tier": 1}, ValueError, r"tier = 1 is not a valid tier code for pipeline 'chain'; valid: 0 \(the pipeline declares no tiers\)"),
        ({"payload": np.zeros(5)}, ValueError, "payload shape"),
    ],
)
def test_rejected_submit_leaves_nothing_in_flight(kwargs: dict[str, Any], error: type, match: str) -> None:
    """After any rejected submit, nothing is counted and close() returns instead of waiting forever."""
    rt = Runtime(_chain(n=1), {"s0": _identity}, payload_shape=(3,))
    args = dict(kwargs)
    payload = args.pop("payload", np.zeros(3))
    with pytest.raises(error, match=match):
        rt.submit(payload, **args)
    assert rt.counts() == {s: 0 for s in (*STATES, "submitted")}
    _close_or_fail(rt, f"submit(**{kwargs})")


def test_largest_slo_is_accepted() -> None:
    """slo = 1e9 s (the core's cap) is accepted and served."""
    with Runtime(_chain(n=1), {"s0": _identity}) as rt:
        assert rt.submit(4, slo=1e9).result(timeout=5) == 4
        assert rt.outcomes()["slo_s"][0] == 1e9


def test_core_submit_error_unwinds_registration() -> None:
    """When the C++ submit raises, the error propagates, nothing is counted, the id is reused, close() returns."""
    rt = Runtime(_chain(n=1), {"s0": _identity}, policy="naive")
    wrapped = _RaisingPush()
    rt._live.set_push_hook(0, wrapped)
    with pytest.raises(RuntimeError, match="injected C\\+\\+ submit failure"):
        rt.submit(1)
    assert rt.counts()["submitted"] == 0 and rt.counts()["pending"] == 0
    assert rt.queued() == 0
    wrapped.armed = False
    f = rt.submit(2)
    assert f.request_id == 0 and f.result(timeout=5) == 2
    assert rt.counts()["submitted"] == 1
    _close_or_fail(rt, "a C++ submit error")
    assert rt.counts()["on_time"] + rt.counts()["late"] == 1


def test_core_submit_error_on_second_entry_fails_request() -> None:
    """In a two-entry DAG, an error after the first entry push ends the request as failed; close() returns."""
    spec = PipelineSpec(name="twin", slo=5.0, stages=[
        StageSpec(name="a", profile={1: 0.001}, max_batch=4, successors=["c"]),
        StageSpec(name="b", profile={1: 0.001}, max_batch=4, successors=["c"]),
        StageSpec(name="c", profile={1: 0.001}, max_batch=4),
    ])
    ex = {n: CallableExecutor(lambda x: x, per_request=True) for n in ("a", "b", "c")}
    rt = Runtime(spec, ex, policy="naive")
    k = rt._entries[1]
    rt._live.set_push_hook(k, _RaisingPush())
    with pytest.raises(RuntimeError, match="injected"):
        rt.submit(1)
    c = rt.counts()
    assert (c["submitted"], c["failed"], c["pending"]) == (1, 1, 0)
    _close_or_fail(rt, "a C++ submit error on the second entry stage")


def test_submit_async_bad_slo_leaves_nothing_in_flight() -> None:
    """submit_async with an out-of-range SLO raises at the await and leaves nothing in flight."""
    rt = Runtime(_chain(n=1), {"s0": _identity})

    async def go() -> Any:
        return await rt.submit_async(1, slo=1e12)

    with pytest.raises(ValueError, match="slo"):
        asyncio.run(go())
    assert rt.counts()["submitted"] == 0
    _close_or_fail(rt, "submit_async(slo=1e12)")


def test_payload_shape_learnt_from_first_array_batch() -> None:
    """With an ArrayExecutor entry and no declared shape, a payload unlike the first one submitted is rejected."""
    from pard.executors import ArrayExecutor

    rt = Runtime(_chain(n=2), {"s0": ArrayExecutor(lambda b: b * 2, device="cpu"), "s1": _identity}, policy="naive")
    assert rt.payload_shape is None
    np.testing.assert_array_equal(rt.submit(np.ones(3)).result(timeout=5), np.full(3, 2.0))
    assert rt.payload_shape == (3,)
    with pytest.raises(ValueError, match=r"payload shape \(4,\) does not match .*\(3,\).*learnt"):
        rt.submit(np.ones(4))
    good = rt.submit(np.zeros(3))
    np.testing.assert_array_equal(good.result(timeout=5), np.zeros(3))
    c = rt.counts()
    assert (c["submitted"], c["failed"]) == (2, 0)
    _close_or_fail(rt, "a rejected payload")


def test_callable_entry_learns_no_shape() -> None:
    """A plain callable entry stage accepts payloads of any shape (no shape is learnt)."""
    with Runtime(_chain(n=1), {"s0": CallableExecutor(lambda x: x.size, per_request=True)}, policy="naive") as rt:
        assert rt.submit(np.ones(3)).result(timeout=5) == 3
        assert rt.submit(np.ones((2, 5))).result(timeout=5) == 10
        assert rt.payload_shape is None


def test_report_capacity_given() -> None:
    """report(capacity_req_s=...) bounds goodput with that capacity; the default is at least the profile's."""
    spec = _chain(n=2, max_batch=8, d=0.0005)  # own capacity: 8 / 0.001 = 8000 req/s
    with Runtime(spec, {"s0": _identity, "s1": _identity}, policy="naive") as rt:
        t0 = rt.now()
        assert [f.result(timeout=5) for f in [rt.submit(i) for i in range(5)]] == list(range(5))
    own = rt.report(t0_s=t0, duration_s=1.0)
    assert own.capacity[0] >= 8000.0  # the profile's, or more where the batches ran faster
    given = rt.report(t0_s=t0, duration_s=2.0, capacity_req_s=3.0)
    np.testing.assert_allclose(given.capacity, [3.0, 3.0])
    assert given.on_time == own.on_time == 5
    # 5 arrivals in the first second: 3 fit that second; the SLO (10 s) lets the rest carry over
    assert given.goodput_bound_per_second == pytest.approx(3.0)
    assert given.goodput_bound_count == pytest.approx(5.0)
    for bad in (0.0, -1.0, float("inf"), "fast"):
        with pytest.raises(ValueError, match="capacity_req_s"):
            rt.report(capacity_req_s=bad)  # type: ignore[arg-type]


def _log_batches(rt: Runtime, k: int, rows: list[tuple[float, float, int, float]]) -> None:
    """Add executed batches (start, duration, size, wait) to stage ``k``'s statistics log in the C++ pipeline."""
    for row in rows:
        rt._live.log_batch(k, *row)


def test_bound_capacity_scaled_by_faster_batches() -> None:
    """The bound's capacity is workers * best b/d(b), times the run's speed-up over the profile where it is > 1."""
    spec = _chain(n=2, max_batch=8, d=0.0005)  # d(1) = 0.0005, d(8) = 0.001: best 8 / 0.001 = 8000 req/s
    rt = Runtime(spec, {"s0": _identity, "s1": _identity}, policy="naive", start=False)
    assert rt.bound_capacity()["req_s"] == pytest.approx(8000.0)
    _log_batches(rt, 0, [(0.0, 0.0005, 8, 0.0), (0.1, 0.0005, 8, 0.0)])  # twice as fast: 16000
    _log_batches(rt, 1, [(0.0, 0.0020, 8, 0.0)])  # twice as slow: clamped, stays 8000
    info = rt.bound_capacity()
    assert info["req_s"] == pytest.approx(8000.0) and info["bottleneck"] == "s1"
    assert info["speedup_by_stage"] == {"s0": pytest.approx(2.0), "s1": pytest.approx(0.5)}
    # a fresh runtime (the batch logs are consumed by the run recorder, so they are appended to, not replaced)
    rt = Runtime(spec, {"s0": _identity, "s1": _identity}, policy="naive", start=False)
    _log_batches(rt, 0, [(0.0, 0.0005, 8, 0.0), (0.1, 0.0005, 8, 0.0)])  # twice as fast: 16000
    _log_batches(rt, 1, [(0.0, 0.00025, 8, 0.0)])  # four times as fast: 32000
    info = rt.bound_capacity()
    assert info["req_s"] == pytest.approx(16000.0) and info["bottleneck"] == "s0"
    assert info["profile_req_s"] == pytest.approx(8000.0)
    np.testing.assert_allclose(rt.report(duration_s=1.0).capacity, [16000.0])


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_base_exception_in_executor_fails_batch_and_worker_survives(exc_type: type) -> None:
    """An executor raising SystemExit/KeyboardInterrupt fails its batch (cause kept) and the worker serves on."""

    def stage(xs: list[int]) -> list[int]:
        if any(x < 0 for x in xs):
            raise exc_type("executor bailed out")
        return [x + 1 for x in xs]

    rt = Runtime(_chain(n=1, max_batch=1), {"s0": stage}, policy="naive")
    bad = rt.submit(-1)
    with pytest.raises(ExecutorError, match="executor bailed out") as info:
        bad.result(timeout=5)
    assert isinstance(info.value.__cause__, exc_type)
    assert all(t.is_alive() for t in rt._stages[0].threads)
    assert rt.submit(4).result(timeout=5) == 5
    _close_or_fail(rt, f"an executor raising {exc_type.__name__}")
    c = rt.counts()
    assert (c["submitted"], c["failed"], c["dropped"], c["on_time"] + c["late"]) == (2, 1, 0, 1)


def _dying_form(stage: int) -> None:
    """A form hook of the C++ pipeline (``LivePipeline.set_form_hook``): forming a batch raises SystemExit
    (a worker dying outside the executor)."""
    raise SystemExit("injected worker death")


def test_dead_worker_is_noticed() -> None:
    """A worker thread that dies anyway fails the requests of its stage, and submit then names the dead stage."""
    rt = Runtime(_chain(n=2, max_batch=4), {"s0": _identity, "s1": _identity}, policy="naive")
    rt._live.set_form_hook(1, _dying_form)
    f = rt.submit(1)
    with pytest.raises(ExecutorError, match="s1") as info:
        f.result(timeout=5)
    assert isinstance(info.value.__cause__, SystemExit)
    for t in rt._stages[1].threads:
        t.join(timeout=5)
        assert not t.is_alive()
    with pytest.raises(RuntimeError, match=r"stage 's1' is dead.*SystemExit"):
        rt.submit(2)
    _close_or_fail(rt, "a dead worker")
    c = rt.counts()
    assert (c["submitted"], c["failed"], c["pending"], c["dropped"]) == (1, 1, 0, 0)


@pytest.mark.parametrize("drain", [False, True])
def test_close_timeout_bounds_close_with_hung_executor(drain: bool) -> None:
    """close(timeout_s=...) returns despite a hung executor, every request ended, with a warning naming the stage."""
    import warnings

    gate = _Gate()
    rt = Runtime(_chain(n=1, max_batch=1), {"s0": gate}, policy="naive")
    running = rt.submit(1)
    assert gate.started.wait(5)
    queued = [rt.submit(i) for i in range(2, 5)]
    caught: list[warnings.WarningMessage] = []

    def closer_body() -> None:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            rt.close(drain=drain, timeout_s=0.2)
        caught.extend(w)

    closer = threading.Thread(target=closer_body, daemon=True)
    try:
        closer.start()
        closer.join(timeout=5)
        assert not closer.is_alive(), "close(timeout_s=0.2) did not return while the executor hung"
        for f in [running, *queued]:
            assert f.done()
            with pytest.raises(Dropped) as info:
                f.result(timeout=0)
            assert info.value.reason == "cancelled"
        c = rt.counts()
        assert (c["submitted"], c["dropped"], c["pending"]) == (4, 4, 0)
        msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(msgs) == 1 and "'s0'" in msgs[0] and "daemon" in msgs[0]
        assert rt.closed
    finally:
        gate.release.set()
    for t in rt._stages[0].threads:  # the stuck worker ends once its batch returns; its result is discarded
        t.join(timeout=5)
        assert not t.is_alive()
    assert rt.counts()["dropped"] == 4


def test_close_timeout_must_be_valid() -> None:
    """close(timeout_s=-1) raises ValueError naming timeout_s, and the runtime stays usable."""
    rt = Runtime(_chain(n=1), {"s0": _identity})
    with pytest.raises(ValueError, match=r"timeout_s.*-1"):
        rt.close(timeout_s=-1)
    assert rt.submit(3).result(timeout=5) == 3
    _close_or_fail(rt, "a bad timeout_s")


def test_payload_shape_learnt_from_first_submitted_payload() -> None:
    """The first payload submitted fixes the shape: later odd shapes are rejected at submit, the good one is served."""
    from pard.executors import ArrayExecutor

    gate = _Gate()
    spec = _chain(n=2, max_batch=8)
    rt = Runtime(spec, {"s0": ArrayExecutor(lambda b: b + 1, device="cpu"), "s1": gate}, policy="naive")
    first = rt.submit(np.ones(4))
    assert rt.payload_shape == (4,)
    for odd in (np.ones(5), np.ones((2, 4))):
        with pytest.raises(ValueError, match=r"payload shape \(.*\) does not match .*\(4,\).*first payload submitted"):
            rt.submit(odd)
    later = rt.submit(np.zeros(4))
    gate.release.set()
    np.testing.assert_array_equal(first.result(timeout=5), np.full(4, 20.0))
    np.testing.assert_array_equal(later.result(timeout=5), np.full(4, 10.0))
    assert rt.payload_shape == (4,)
    _close_or_fail(rt, "rejected payload shapes")
    c = rt.counts()
    assert (c["submitted"], c["failed"], c["on_time"] + c["late"]) == (2, 0, 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"payload_shape": "x"}, TypeError, r"payload_shape.*'x'"),
        ({"payload_shape": (4, "a")}, TypeError, r"payload_shape.*\(4, 'a'\)"),
        ({"payload_shape": (-1,)}, ValueError, r"payload_shape.*-1"),
        ({"payload_shape": 7}, TypeError, r"payload_shape.*7"),
        ({"planner": {"zz": 1}}, TypeError, r"planner.*\['zz'\].*lam"),
        ({"planner": [1]}, TypeError, r"planner must be a pard.PlannerConfig.*\[1\]"),
        ({"stages": {"s0": 5}}, TypeError, r"stages\['s0'\].*callable.*int: 5"),
    ],
)
def test_constructor_errors_name_argument_and_value(kwargs: dict[str, Any], error: type, match: str) -> None:
    """A bad payload_shape, planner option or stage executor raises an error naming the argument (or stage) and value."""
    args: dict[str, Any] = {"stages": {"s0": _identity}, "start": False}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        Runtime(_chain(n=1), **args)


def test_model_options_unknown_key_named() -> None:
    """An unknown model option raises TypeError naming model_options and the key."""
    with pytest.raises(TypeError, match=r"model_options.*\['bogus'\].*scale"):
        Runtime("tm", model_options={"bogus": 1}, start=False)


def test_planner_survives_system_exit() -> None:
    """A planner update raising SystemExit is recorded in planner_errors and the planner thread keeps running."""
    rt = Runtime(_chain(n=1), {"s0": _identity}, planner={"sync_interval_s": 0.01})
    raised = threading.Event()

    def update(*args: Any, **kwargs: Any) -> Any:
        raised.set()
        raise SystemExit("planner bailed out")

    rt._planner.update = update  # type: ignore[method-assign]
    assert raised.wait(5)
    for _ in range(500):  # until the error is recorded (the thread appends it right after raising)
        if rt.planner_errors:
            break
        time.sleep(0.01)
    assert rt.planner_errors and isinstance(rt.planner_errors[0], SystemExit)
    assert rt._planner_thread is not None and rt._planner_thread.is_alive()
    assert rt.submit(2).result(timeout=5) == 2
    _close_or_fail(rt, "a planner raising SystemExit")


def test_cancelled_queue_frees_the_whole_capacity_at_once() -> None:
    """Ray Serve #44644: after 1 000 queued requests are cancelled, max_queue_size new ones are accepted
    at once, the next batch is full of live requests and no cancelled one is ever computed."""
    gate = _Gate()
    rt = Runtime(_chain(n=1, max_batch=8), {"s0": gate}, policy="naive", max_queue_size=1000)
    first = rt.submit(-1)
    assert gate.started.wait(5)
    doomed = [rt.submit(i) for i in range(1000)]
    assert rt.counts()["rejected"] == 0 and rt.queued("s0") == 1000
    assert all(f.cancel() for f in doomed)
    assert rt.queued("s0") == 0
    fresh = [rt.submit(i) for i in range(1000, 2000)]  # the queue's whole capacity, at once
    counts = rt.counts()
    assert (counts["rejected"], counts["dropped"], counts["pending"]) == (0, 1000, 1001)
    assert rt.snapshot()["queued"]["s0"] == 1000
    gate.release.set()
    assert [f.result(timeout=30) for f in fresh] == [10 * i for i in range(1000, 2000)]
    assert first.result(timeout=5) == -10
    rt.close()
    assert gate.batches[1] == list(range(1000, 1008))  # a full batch, no place taken by the cancelled
    seen = {x for b in gate.batches for x in b}
    assert seen.isdisjoint(range(1000))
    assert (rt.counts()["on_time"], rt.counts()["dropped"]) == (1001, 1000)


def test_binding_submit_arguments() -> None:
    """The C++ pipeline's submit takes (payload, slo_s, tier[, deadline_s]) by position or keyword and refuses
    malformed ones, counting nothing."""
    with Runtime(_chain(n=1), {"s0": _identity}, policy="naive") as rt:
        live = rt._live
        assert live.submit(3, 10.0, 0).result(timeout=10) == 3
        assert live.submit(payload=4, slo_s=10, tier=1).result(timeout=10) == 4  # an int SLO converts, as float() does
        assert live.submit(5, tier=0, slo_s=10.0).result(timeout=10) == 5
        assert live.submit(6, 10.0, 0, None).result(timeout=10) == 6  # no deadline
        assert live.submit(7, 10.0, 0, deadline_s=rt.now() + 10.0).result(timeout=10) == 7
        for args, kwargs, exc in [((1, 10.0), {}, TypeError), ((1, 10.0, 0, None, 0, 0, 0, 0), {}, TypeError),
                                  ((1, 10.0, 0, "soon"), {}, TypeError), ((1, 10.0, 0, float("nan")), {}, ValueError),
                                  ((1, "10", 0), {}, TypeError), ((1, 10.0, 0.5), {}, TypeError),
                                  ((1, 10.0, 2**31), {}, OverflowError), ((1, float("nan"), 0), {}, ValueError),
                                  ((1, 10.0), {"tier": 0, "slo_s": 1.0}, TypeError), ((1, 10.0), {"tyre": 0}, TypeError)]:
            with pytest.raises(exc):
                live.submit(*args, **kwargs)
        assert rt.counts()["submitted"] == 5


def test_tier_codes_index_the_declared_tiers_and_report_stays_usable() -> None:
    """With tiers {gold, free}: codes 0 and 1 are served and reported per tier, code 2 is refused at submit."""
    spec = PipelineSpec(name="chain", slo=10.0, tiers={"gold": 4.0, "free": 1.0}, stages=_chain(n=1).stages)
    with Runtime(spec, {"s0": _identity}, policy="naive") as rt:
        assert [rt.submit(i, tier=t).result(timeout=10) for i, t in enumerate([0, 1, 1])] == [0, 1, 2]
        with pytest.raises(ValueError, match=r"tier = 2 is not a valid tier code.*valid: 0\.\.1"):
            rt.submit(9, tier=2)
        # a tier's name (as X-Pard-Tier and a trace's tier column give it) and None (tier 0), as infer takes them
        assert [rt.submit(i, tier=t).result(timeout=10) for i, t in [(3, "free"), (4, "gold"), (5, None)]] == [3, 4, 5]
        with pytest.raises(ValueError, match=r"tier = 'silver' is not a tier of pipeline 'chain' \(its tiers: gold, free\)"):
            rt.submit(9, tier="silver")
        rep = rt.report()
    assert rep.submitted == 6 and rep.on_time == 6
    assert rep.weighted_goodput * rep.duration_s == pytest.approx(4.0 + 1.0 + 1.0 + 1.0 + 4.0 + 4.0)


def test_sub_second_burst_is_a_rate_over_one_bin_live_and_simulated() -> None:
    """A 50-request burst sent in well under 1 s is reported per one 1 s bin, live as in the simulator."""
    spec = _chain(n=1)
    with Runtime(spec, {"s0": _identity}, policy="naive") as rt:
        for f in [rt.submit(i) for i in range(50)]:
            f.result(timeout=10)
        live = rt.report()
    sim = pard_simulate(spec, np.linspace(0.0, 0.01, 50), policy="naive")
    for rep in (live, sim):
        assert rep.duration_s == 1.0 and rep.on_time == 50
        assert rep.goodput == 50.0


def test_submit_after_close_is_a_pard_error_and_a_runtime_error() -> None:
    """Submitting to a closed runtime raises pard.RuntimeStateError, which is both a PardError and a RuntimeError."""
    import pard

    rt = Runtime(_chain(n=1), {"s0": _identity}, policy="naive")
    rt.close()
    with pytest.raises(pard.RuntimeStateError, match="not accepting") as info:
        rt.submit(1)
    assert isinstance(info.value, pard.PardError) and isinstance(info.value, RuntimeError)


def test_prior_terms_policy_serves_live() -> None:
    """A policy with PolicySpec.prior_terms publishes an idle interval's terms at start and then serves as usual: 20 requests with a 10 s SLO all finish on time."""
    import dataclasses

    from pard.policies import POLICIES

    pol = dataclasses.replace(POLICIES["pard"], name="pard+prior", prior_terms=True)
    with Runtime(_chain(), {"s0": _identity, "s1": _identity}, policy=pol, planner={"sync_interval_s": 0.2}) as rt:
        futures = [rt.submit(i) for i in range(20)]
        assert [f.result(timeout=10.0) for f in futures] == list(range(20))
    assert rt.counts()["on_time"] == 20


def test_a_custom_spec_without_executors_warns_that_it_serves_reference_models() -> None:
    """Runtime(my_spec) with no ``stages`` serves seeded random networks for the user's stage names: a
    forgotten ``stages=`` in production would serve garbage, so it warns, naming the stages; a built-in
    pipeline's demo (``Runtime("tm")``) does not."""
    import warnings

    import pard

    mine = PipelineSpec(name="mine", slo=0.5, stages=[StageSpec(name="det", profile={1: 0.01}, max_batch=4)])
    with pytest.warns(pard.PardWarning, match=r"no `stages`.*reference models.*\['det'\]"):
        Runtime(mine, start=False).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", pard.PardWarning)
        Runtime("tm", start=False, model_options={"scale": 0.01}).close()


@pytest.mark.parametrize("workers", [{"s0": 100_000}, [1025], {"s0": 0}])
def test_absurd_worker_count_is_refused_before_any_thread(workers: Any) -> None:
    """Runtime(workers=...) past MAX_WORKERS (1 024 per stage) raises ConfigError naming the stage and count, starting no thread."""
    from pard.errors import ConfigError

    before = threading.active_count()
    with pytest.raises(ConfigError, match=r"workers for stage 's0' must be an int in 1\.\.1024 .*got "
                                          + str(list(workers.values())[0] if isinstance(workers, dict) else workers[0])):
        Runtime(_chain(n=1), {"s0": _identity}, workers=workers)
    assert threading.active_count() == before


def test_runtime_workers_sum_is_bounded() -> None:
    """Runtime(workers=...) whose counts sum past MAX_TOTAL_WORKERS (4 096) raises ConfigError with the sum, starting nothing."""
    from pard.errors import ConfigError

    spec = _chain(n=5)
    with pytest.raises(ConfigError, match=r"workers sum to 4097 .* more than MAX_TOTAL_WORKERS = 4096"):
        Runtime(spec, {f"s{i}": _identity for i in range(5)}, workers=[1024, 1024, 1024, 1024, 1], start=False)


def test_default_queue_bound_of_a_fastest_profile_and_longest_slo_is_capped() -> None:
    """A 1 µs profile with a 1e9 s SLO gets the capped default queue bound (MAX_QUEUE_SIZE), not an int64 overflow."""
    from pard.runtime.setup import MAX_QUEUE_SIZE

    spec = PipelineSpec(name="fast", slo=1e9, stages=[StageSpec(name="s0", profile={1: 1e-6, 1024: 1e-6},
                                                                max_batch=1024, workers=1024)])
    rt = Runtime(spec, {"s0": _identity}, start=False)
    try:
        assert rt.max_queue_size == {"s0": MAX_QUEUE_SIZE}
    finally:
        rt.close()
    with pytest.raises(ValueError, match=r"max_queue_size for stage 's0' must be an int in 1\.\.2147483647"):
        Runtime(spec, {"s0": _identity}, max_queue_size=2**63, start=False)


def test_report_rates_are_per_real_sending_time_not_whole_seconds() -> None:
    """1 500 requests sent at 1 000/s report about 1 000/s offered (the sends' own span), not 1 500 per 2 whole seconds."""
    n, rate = 1500, 1000.0
    with Runtime(_chain(n=1, slo=30.0), {"s0": _identity}, policy="naive") as rt:
        futs = rt.replay(np.arange(n) / rate, list(range(n)))
        assert [f.result(timeout=30) for f in futs] == list(range(n))
    rep = rt.report()
    send = np.sort(rt.outcomes()["send_s"])
    # independent of the report: the mean gap between consecutive sends, as the pacing set it
    expected = 1.0 / float(np.mean(np.diff(send)))
    assert rep.submitted == rep.on_time == n
    assert rep.offered_load == pytest.approx(expected, rel=1e-9)
    assert rep.goodput == pytest.approx(expected, rel=1e-9)  # whole one-second bins gave 1 500 / 2 s
