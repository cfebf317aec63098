"""Runtime.submit's future is a concurrent.futures.Future: wait, as_completed, asyncio.wrap_future, callbacks."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import threading
from typing import Any

import pytest

from pard.config import PipelineSpec, StageSpec
from pard.errors import ExecutorError
from pard.runtime import RequestFuture, Runtime


def _one_stage(max_batch: int = 1) -> PipelineSpec:
    return PipelineSpec(name="one", slo=30.0,
                        stages=[StageSpec(name="s0", profile={1: 0.0005, max_batch: 0.001}, max_batch=max_batch)])


class _Held:
    """An executor that multiplies by 10, raises on a negative payload, and holds payloads in ``hold``
    until ``release`` is set (one batch of one at a time, so completion order is submission order)."""

    def __init__(self, hold: set[int]) -> None:
        self.hold = hold
        self.release = threading.Event()

    def __call__(self, xs: list[int]) -> list[int]:
        if any(x in self.hold for x in xs):
            assert self.release.wait(20), "test never released the held payload"
        if any(x < 0 for x in xs):
            raise ValueError("negative payload")
        return [x * 10 for x in xs]


def test_future_is_a_concurrent_future_and_wait_returns_all() -> None:
    """isinstance holds, and concurrent.futures.wait(ALL_COMPLETED) returns every future with x*10."""
    with Runtime(_one_stage(8), {"s0": _Held(set())}, policy="naive") as rt:
        futs = [rt.submit(i) for i in range(200)]
        assert all(isinstance(f, cf.Future) and isinstance(f, RequestFuture) for f in futs)
        done, not_done = cf.wait(futs, timeout=20)
        assert not not_done and done == set(futs)
        assert [f.result(timeout=0) for f in futs] == [10 * i for i in range(200)]


def test_wait_first_completed_and_timeout_while_held() -> None:
    """A held request keeps wait(timeout) from returning it; FIRST_COMPLETED returns the free one first."""
    ex = _Held({1})
    with Runtime(_one_stage(), {"s0": ex}, policy="naive") as rt:
        held = rt.submit(1)
        done, not_done = cf.wait([held], timeout=0.05)
        assert (done, not_done) == (set(), {held})
        free = rt.submit(2)  # queued behind the held batch: neither can finish yet
        done, not_done = cf.wait([held, free], timeout=0.05, return_when=cf.FIRST_COMPLETED)
        assert done == set()
        ex.release.set()
        done, _ = cf.wait([held, free], timeout=20, return_when=cf.FIRST_COMPLETED)
        assert held in done
        assert (held.result(timeout=20), free.result(timeout=20)) == (10, 20)


def test_wait_first_exception_returns_before_the_held_request() -> None:
    """FIRST_EXCEPTION returns once the failing request ends, while a later one is still held."""
    ex = _Held({3})
    with Runtime(_one_stage(), {"s0": ex}, policy="naive") as rt:
        ok, bad, held = rt.submit(1), rt.submit(-1), rt.submit(3)
        done, not_done = cf.wait([held, bad, ok], timeout=20, return_when=cf.FIRST_EXCEPTION)
        assert bad in done and held in not_done
        assert isinstance(bad.exception(timeout=0), ExecutorError)
        ex.release.set()
        assert held.result(timeout=20) == 30 and ok.result(timeout=0) == 10


def test_as_completed_yields_in_completion_order() -> None:
    """One worker, batches of one, FIFO (naive): as_completed yields the futures in submission order."""
    ex = _Held({0})
    with Runtime(_one_stage(), {"s0": ex}, policy="naive") as rt:
        futs = [rt.submit(i) for i in range(6)]
        threading.Timer(0.05, ex.release.set).start()
        order = [f.result() for f in cf.as_completed(futs, timeout=20)]
        assert order == [0, 10, 20, 30, 40, 50]
        # already-finished futures are yielded at once, with ordinary Futures mixed in
        plain: cf.Future[int] = cf.Future()
        plain.set_result(7)
        assert sorted(f.result() for f in cf.as_completed([*futs, plain], timeout=20)) == [0, 7, 10, 20, 30, 40, 50]


def test_many_waiters_on_shared_futures_from_threads() -> None:
    """8 threads wait/as_completed on overlapping slices while the runtime resolves them: all see every result."""
    with Runtime(_one_stage(8), {"s0": _Held(set())}, policy="naive") as rt:
        futs = [rt.submit(i) for i in range(400)]
        seen: list[list[int]] = []

        def waiter(k: int) -> None:
            part = futs[k * 40 : k * 40 + 200]
            if k % 2:
                got = [f.result() for f in cf.as_completed(part, timeout=30)]
            else:
                done, _ = cf.wait(part, timeout=30)
                got = [f.result() for f in done]
            seen.append(sorted(got))

        threads = [threading.Thread(target=waiter, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(40)
        assert sorted(seen) == sorted([[10 * i for i in range(k * 40, min(k * 40 + 200, 400))] for k in range(8)])


def test_asyncio_wrap_future_and_cancel_forwarding() -> None:
    """asyncio.wrap_future awaits the output; cancelling the asyncio future cancels the queued request."""
    ex = _Held({1})
    with Runtime(_one_stage(), {"s0": ex}, policy="naive") as rt:
        held, queued = rt.submit(1), rt.submit(2)

        async def main() -> Any:
            aq = asyncio.wrap_future(queued)
            aq.cancel()
            await asyncio.sleep(0.01)  # the cancellation is forwarded by a done-callback
            ex.release.set()
            return await asyncio.wrap_future(held)

        assert asyncio.run(main()) == 10
        assert queued.cancelled()
        with pytest.raises(cf.CancelledError):
            queued.result(timeout=0)


def test_done_callback_gets_the_future_and_a_raising_one_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Callbacks receive the RequestFuture itself (before and after it ends); a raising one is logged."""
    with Runtime(_one_stage(), {"s0": _Held(set())}, policy="naive") as rt:
        f = rt.submit(4)
        got: list[Any] = []
        f.add_done_callback(got.append)
        assert f.result(timeout=20) == 40
        f.add_done_callback(got.append)  # already done: called at once

        def boom(_: Any) -> None:
            raise KeyError("callback bug")

        with caplog.at_level(logging.ERROR, logger="concurrent.futures"):
            f.add_done_callback(boom)
        assert got == [f, f]
        assert "exception calling callback" in caplog.text and "callback bug" in caplog.text


def test_only_the_runtime_resolves_it() -> None:
    """set_result / set_exception / set_running_or_notify_cancel raise RuntimeError and change nothing."""
    ex = _Held({1})
    with Runtime(_one_stage(), {"s0": ex}, policy="naive") as rt:
        f = rt.submit(1)
        for call in (lambda: f.set_result(5), lambda: f.set_exception(ValueError()), f.set_running_or_notify_cancel):
            with pytest.raises(RuntimeError, match="Runtime"):
                call()
        assert not f.done()
        ex.release.set()
        assert f.result(timeout=20) == 10


def test_caught_exceptions_of_ended_requests_are_collected() -> None:
    """A done-callback that calls result() and catches, and a coroutine that awaits infer and catches, each
    make a cycle (exception -> traceback -> frame -> future -> exception).  The future takes part in the
    cycle collector, so after gc.collect() none of the 2 000 requests' Dropped / Rejected / ExecutorError
    is alive (a new user's service kept every one: about 1 KB per dropped request, for ever)."""
    import gc
    import time

    import numpy as np

    from pard.errors import Dropped, Rejected

    spec = PipelineSpec(name="one", slo=0.02, stages=[StageSpec(name="s0", profile={1: 0.01, 8: 0.01}, max_batch=8)])

    def slow(xs: list[Any]) -> list[Any]:
        time.sleep(0.01)
        if any(x[0] < 0 for x in xs):
            raise ValueError("negative")
        return list(xs)

    def caught(f: Any) -> None:
        try:
            f.result()
        except Exception:  # noqa: BLE001 - what a service's callback does
            pass

    def alive() -> int:
        return sum(isinstance(o, (Dropped, Rejected, ExecutorError)) for o in gc.get_objects())

    async def one(rt: Runtime, x: Any) -> None:
        try:
            await rt.infer(x)
        except Exception:  # noqa: BLE001
            pass

    async def main(rt: Runtime) -> None:
        await asyncio.gather(*(one(rt, np.full(4, -1.0 if i % 7 == 0 else 1.0)) for i in range(1000)))

    with Runtime(spec, {"s0": slow}, history=100) as rt:
        for i in range(1000):
            rt.submit(np.full(4, -1.0 if i % 7 == 0 else 1.0)).add_done_callback(caught)
        asyncio.run(main(rt))
    counts = rt.counts()
    assert counts["dropped"] + counts["rejected"] + counts["failed"] >= 500  # most of them ended in an exception
    gc.collect()
    assert alive() == 0


@pytest.mark.parametrize("how", ["future", "asyncio"])
def test_a_request_cancelled_while_its_batch_runs_ends_then_and_no_later_stage_runs_it(how: str) -> None:
    """Cancelled while stage a runs it (the executor is held until the cancel is in): the running batch is not
    interrupted, but when it ends the request ends dropped (reason cancelled, its future cancelled) and stage b
    never executes it; a request submitted after it is served by both stages (the pipeline is not stuck)."""
    spec = PipelineSpec(name="ab", slo=30.0, stages=[
        StageSpec(name="a", profile={1: 0.01}, max_batch=1, workers=1, successors=["b"]),
        StageSpec(name="b", profile={1: 0.01}, max_batch=1, workers=1)])
    started, release = threading.Event(), threading.Event()
    seen_b: list[Any] = []

    def a(xs: list[Any]) -> list[Any]:
        if xs == ["held"]:
            started.set()
            assert release.wait(20.0)
        return xs

    def b(xs: list[Any]) -> list[Any]:
        seen_b.extend(xs)
        return xs

    with Runtime(spec, {"a": a, "b": b}, policy="naive") as rt:
        if how == "future":
            fut = rt.submit("held")
            assert started.wait(20.0)
            assert fut.cancel() is False  # its batch runs: it cannot end before that batch does
            release.set()
            with pytest.raises(cf.CancelledError):
                fut.result(timeout=20.0)
            assert fut.cancelled()
        else:
            async def main() -> None:
                task = asyncio.ensure_future(rt.infer("held"))
                while not started.is_set():
                    await asyncio.sleep(0.005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                release.set()

            asyncio.run(asyncio.wait_for(main(), 20.0))
        assert rt.submit("after").result(timeout=20.0) == "after"
        counts = rt.counts()
        drops = rt.drop_counts()
    assert seen_b == ["after"]
    assert counts["dropped"] == 1 and counts["on_time"] + counts["late"] == 1
    assert drops == {("a", "cancelled"): 1}
