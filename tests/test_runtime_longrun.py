"""The live runtime for long runs (issue 13): bounded state, back-pressure, true goodput span, honest
close() warnings, fork, context-manager timeout, cancel vs a collected batch, no leaked threads."""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
import warnings
from typing import Any

import numpy as np
import pytest

from pard.config import PipelineSpec, StageSpec
from pard.errors import Rejected
from pard.runtime import Runtime


def _chain(slo: float = 10.0, max_batch: int = 8, d: float = 0.0005, n: int = 2, workers: int = 1) -> PipelineSpec:
    names = [f"s{i}" for i in range(n)]
    return PipelineSpec(name="chain", slo=slo, stages=[
        StageSpec(name=names[i], profile={1: d, max_batch: d * 2}, max_batch=max_batch, workers=workers,
                  successors=names[i + 1: i + 2]) for i in range(n)])


def _identity(xs: list[Any]) -> list[Any]:
    return list(xs)


class _Gate:
    """An executor that records its batches and blocks on the first one until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.batches: list[list[Any]] = []

    def __call__(self, xs: list[Any]) -> list[Any]:
        self.batches.append(list(xs))
        self.started.set()
        assert self.release.wait(10.0), "test gate never released"
        return list(xs)


def _caught(fn: Any) -> list[str]:
    """Run ``fn`` in a helper thread (bounded: 20 s); the RuntimeWarnings it raised."""
    out: list[str] = []

    def body() -> None:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fn()
        out.extend(str(x.message) for x in w if issubclass(x.category, RuntimeWarning))

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(timeout=20.0)
    assert not t.is_alive(), "did not return within 20 s"
    return out


def test_report_of_a_whole_run_has_no_window() -> None:
    """A closed runtime's report within its history covers every request: no window notice, not in the JSON either."""
    with Runtime(_chain(), {"s0": _identity, "s1": _identity}, policy="naive") as rt:
        assert [rt.submit(i).result(timeout=10) for i in range(20)] == list(range(20))
    rep = rt.report()
    assert rep.submitted == 20 and rep.window is None and "window" not in rep.to_dict()


def test_outcome_records_are_bounded_and_counts_exact() -> None:
    """With history=100, 1 000 requests leave 100 outcome rows and empty stage logs; the counts cover all 1 000."""
    with Runtime(_chain(), {"s0": _identity, "s1": _identity}, policy="naive", history=100) as rt:
        for start in range(0, 1000, 100):  # in waves, so no queue bound is reached
            assert [f.result(timeout=10) for f in [rt.submit(i) for i in range(start, start + 100)]] == \
                list(range(start, start + 100))
    c = rt.counts()
    assert c["submitted"] == 1000 and c["on_time"] + c["late"] == 1000 and c["pending"] == 0
    out = rt.outcomes()
    assert out["state"].size == 100 and out["request_id"].tolist() == list(range(900, 1000))
    assert rt._live.outcome_rows() < 200  # the ring (100 rows, rounded up to the C++ stripes), not one per request
    for st in rt._stages:  # the planner loop emptied the logs it handed to the recorder
        assert all(v.size == 0 for v in rt._live.take_stats(st.index).values())
    rep = rt.report()
    assert rep.submitted == 100 and rep.stages[0].submitted == 1000  # the window, and the stage counters
    # the report says it is a window, and carries the whole run's totals from the counters
    assert rep.window is not None
    assert {k: rep.window[k] for k in ("requests", "submitted", "not_held", "pending")} == \
        {"requests": 100, "submitted": 1000, "not_held": 900, "pending": 0}
    assert rep.window["totals"] == {k: v for k, v in c.items() if k != "submitted"}
    assert rep.to_dict()["window"] == rep.window and "100 of 1000" in repr(rep)
    with pytest.raises(ValueError, match="history"):
        Runtime(_chain(), {"s0": _identity, "s1": _identity}, history=0, start=False)


def test_report_and_snapshot_while_running() -> None:
    """report() and snapshot() work before close(): the report covers the requests that have ended."""
    gate = _Gate()
    rt = Runtime(_chain(n=1, max_batch=1), {"s0": gate}, policy="naive")
    try:
        done = rt.submit(1)
        gate.release.set()
        assert done.result(timeout=10) == 1
        gate.release.clear()
        gate.started.clear()
        blocked = rt.submit(2)
        assert gate.started.wait(10)
        rep = rt.report()
        assert (rep.submitted, rep.on_time + rep.late) == (1, 1)
        snap = rt.snapshot()
        assert snap["counts"]["submitted"] == 2 and snap["in_flight"] == 1
        assert snap["max_queue_size"] == rt.max_queue_size
        gate.release.set()
        assert blocked.result(timeout=10) == 2
    finally:
        gate.release.set()
        rt.close()


def test_queue_bound_rejects_with_retry_after() -> None:
    """A full queue rejects at once, naming the stage, with retry_after_s = (queued + 1) / capacity."""
    d = 0.001  # one worker, max batch 1: capacity 1 / d = 1000 req/s
    gate = _Gate()
    rt = Runtime(_chain(n=1, max_batch=1, d=d), {"s0": gate}, policy="naive", max_queue_size=3)
    try:
        first = rt.submit(0)
        assert gate.started.wait(10)  # in the executor: the queue is empty
        queued = [rt.submit(i) for i in (1, 2, 3)]
        refused = rt.submit(4)
        with pytest.raises(Rejected) as info:
            refused.result(timeout=5)
        e = info.value
        assert e.stage == "s0" and e.reason == "queue_full" and "max_queue_size 3" in e.detail
        assert e.request_id == refused.request_id  # the exception names the request its future carries
        assert e.retry_after_s == pytest.approx((3 + 1) * d * 2)  # _chain's profile: d(1) = 2 d here
        assert rt.counts()["rejected"] == 1
        gate.release.set()
        assert [f.result(timeout=10) for f in [first, *queued]] == [0, 1, 2, 3]
    finally:
        gate.release.set()
        rt.close()


def test_default_queue_bound_from_slo_and_capacity() -> None:
    """The default bound is ceil(10 * slo * workers * best b/d(b)) by hand; a mapping sets some stages."""
    spec = _chain(slo=0.1, max_batch=8, d=0.001, n=2, workers=3)  # best 8 / 0.002 = 4000 req/s per worker
    rt = Runtime(spec, {"s0": _identity, "s1": _identity}, start=False)
    assert rt.max_queue_size == {"s0": 12000, "s1": 12000}  # 10 * 0.1 s * 3 * 4000 req/s
    some = Runtime(spec, {"s0": _identity, "s1": _identity}, max_queue_size={"s1": 5}, start=False)
    assert some.max_queue_size == {"s0": 12000, "s1": 5}
    with pytest.raises(ValueError, match="max_queue_size"):
        Runtime(spec, {"s0": _identity, "s1": _identity}, max_queue_size=0, start=False)


def test_live_goodput_is_per_whole_bins_like_the_simulator() -> None:
    """40 requests at 100/s (0.4 s) are a rate over one 1 s bin, live as in pard.simulate: the bound's
    capacity is counted per whole bin, so dividing by 0.4 s would put the bound above capacity."""
    with Runtime(_chain(), {"s0": _identity, "s1": _identity}, policy="naive") as rt:
        futs = rt.replay(np.arange(40) / 100.0, [1])
        for f in futs:
            f.result(timeout=10)
    rep = rt.report()
    assert rep.duration_s == 1.0 and rep.goodput == rep.on_time == 40
    assert rep.goodput_bound <= rt.pipeline.capacity().pipeline + 1e-9


def test_close_timeout_leaves_time_to_join_healthy_workers() -> None:
    """close(drain, timeout_s) that runs out while batches are running warns of nothing: workers finish in the reserve."""
    def slow(xs: list[Any]) -> list[Any]:
        time.sleep(0.05)
        return list(xs)

    rt = Runtime(_chain(n=1, max_batch=1, d=0.025), {"s0": slow}, policy="naive")  # d(1) = 0.05 s as profiled
    futs = [rt.submit(i) for i in range(100)]  # 5 s of work: the drain cannot finish within 1 s
    msgs = _caught(lambda: rt.close(drain=True, timeout_s=1.0))
    assert msgs == [] and all(f.done() for f in futs)


def test_close_does_not_name_an_executor_slower_than_its_profile() -> None:
    """An executor 300x slower than its 1 ms profile, caught mid-batch by close(timeout_s=0.2), is not named: that batch has run less than 4x its longest measured one."""
    second, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow(xs: list[Any]) -> list[Any]:
        calls.append(len(xs))
        if len(calls) == 1:
            time.sleep(0.3)  # the measured longest batch: >= 0.3 s
        else:
            second.set()  # the batch close() meets: still running at its deadline
            release.wait(10.0)
        return list(xs)

    rt = Runtime(_chain(n=1, max_batch=1), {"s0": slow}, policy="naive")  # d(1) = 1 ms as profiled
    try:
        first, other = rt.submit(0), rt.submit(1)
        assert first.result(timeout=10) == 0
        assert second.wait(10)
        msgs = _caught(lambda: rt.close(drain=True, timeout_s=0.2))
        assert msgs == [] and other.done()
    finally:
        release.set()


def test_only_the_hung_stage_is_named() -> None:
    """With one stage hung, the close() warning names that stage and not the healthy one."""
    gate = _Gate()
    rt = Runtime(_chain(n=2, max_batch=1), {"s0": _identity, "s1": gate}, policy="naive")
    try:
        f = rt.submit(1)
        assert gate.started.wait(10)
        msgs = _caught(lambda: rt.close(drain=True, timeout_s=0.5))
        assert len(msgs) == 1 and "'s1'" in msgs[0] and "'s0'" not in msgs[0]
        assert f.done()
    finally:
        gate.release.set()


def test_context_manager_close_timeout() -> None:
    """`with Runtime(..., close_timeout_s=...)` over a hung executor exits, with a warning naming the stage."""
    gate = _Gate()

    def body() -> None:
        with Runtime(_chain(n=1, max_batch=1), {"s0": gate}, policy="naive", close_timeout_s=0.3) as rt:
            rt.submit(1)
            assert gate.started.wait(10)

    try:
        msgs = _caught(body)
        assert len(msgs) == 1 and "'s0'" in msgs[0]
    finally:
        gate.release.set()


class _BlockingForm:
    """A form hook of the C++ pipeline (``LivePipeline.set_form_hook``): the ``n``-th batch formation
    blocks until ``go`` is set."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0
        self.blocked, self.go = threading.Event(), threading.Event()

    def __call__(self, stage: int) -> None:
        self.calls += 1
        if self.calls == self.n:
            self.blocked.set()
            assert self.go.wait(10.0)


def test_cancel_of_a_started_batch_fails_or_skips_the_work() -> None:
    """cancel() on a request whose batch has been collected: it returns False, or the executor never sees it."""
    seen: list[Any] = []
    gate = threading.Event()

    def stage(xs: list[Any]) -> list[Any]:
        seen.extend(xs)
        if "a" in xs:
            assert gate.wait(10.0)
        return list(xs)

    rt = Runtime(_chain(n=1, max_batch=1), {"s0": stage}, policy="naive")
    try:
        wrapped = _BlockingForm(3)  # 1: [a]; 2: [x]; 3: the next batch, as [x] starts
        rt._live.set_form_hook(0, wrapped)
        a = rt.submit("a")
        deadline = time.monotonic() + 10
        while "a" not in seen and time.monotonic() < deadline:
            time.sleep(0.01)
        x, y = rt.submit("x"), rt.submit("y")
        gate.set()
        assert wrapped.blocked.wait(10)  # x's batch is collected and its worker forms the next one
        cancelled = x.cancel()
        wrapped.go.set()
        a.result(timeout=10)
        y.result(timeout=10)
        assert not (cancelled and "x" in seen)
    finally:
        gate.set()
        rt.close()


def test_unreferenced_runtime_stops_its_threads() -> None:
    """Runtimes dropped without close() end their threads (and their in-flight requests)."""
    gc.collect()
    before = threading.active_count()
    for _ in range(5):
        rt = Runtime(_chain(), {"s0": _identity, "s1": _identity}, policy="naive")
        f = rt.submit(1)
    assert f.result(timeout=10) == 1
    del rt
    gc.collect()
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_is_detected() -> None:
    """In a forked child the parent's Runtime refuses submit with an error naming the fork, and close() returns."""
    rt = Runtime(_chain(n=1), {"s0": _identity}, policy="naive")
    try:
        assert rt.submit(1).result(timeout=10) == 1
        pid = os.fork()
        if pid == 0:  # the child: report through the exit code only
            code = 1
            try:
                try:
                    rt.submit(2)
                except RuntimeError as e:
                    code = 0 if "fork" in str(e) else 3
                rt.close(timeout_s=1.0)
            finally:
                os._exit(code)
        deadline = time.monotonic() + 20
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert rt.submit(3).result(timeout=10) == 3  # the parent serves on
    finally:
        rt.close()



def test_an_idle_runtime_keeps_a_bounded_record_of_its_syncs() -> None:
    """A server that waits for traffic syncs its planner for ever; what the runtime keeps per sync is
    bounded: after more than TERMS_KEPT syncs it holds exactly TERMS_KEPT terms, the newest last (it kept
    every sync's terms, a few KB a sync for ever: a new user's tracemalloc of an idle 5-stage Runtime).  The planner's own windows are bounded by time (window_s, cv_history_s), not by syncs."""
    from pard.runtime.planner_loop import TERMS_KEPT

    spec = PipelineSpec(name="idle", slo=1.0, stages=[StageSpec(name="s", profile={1: 0.001, 8: 0.002}, max_batch=8)])
    with Runtime(spec, {"s": lambda xs: list(xs)}, planner={"sync_interval_s": 0.002}) as rt:
        deadline = time.monotonic() + 30.0
        while rt.overhead()["planner_calls"] < 2 * TERMS_KEPT and time.monotonic() < deadline:
            time.sleep(0.01)
        log = list(rt._loop.terms_log)
        calls = rt.overhead()["planner_calls"]
    assert calls >= 2 * TERMS_KEPT and len(log) == TERMS_KEPT
    assert [t for t, _ in log] == sorted(t for t, _ in log)
