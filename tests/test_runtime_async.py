"""The asyncio API of the runtime: await infer, deadlines, retry hints, cancellation, aclose, async with."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any

import numpy as np
import pytest

import pard
from pard.config import PipelineSpec, StageSpec
from pard.errors import Dropped, ExecutorError
from pard.runtime.aio import DeadlineError, retry_after_s


def _chain(slo: float = 5.0, d: float = 0.001, workers: int = 1, max_batch: int = 4) -> PipelineSpec:
    return PipelineSpec(name="chain", slo=slo, stages=[
        StageSpec(name="a", profile={1: d, max_batch: 2 * d}, max_batch=max_batch, workers=workers, successors=["b"]),
        StageSpec(name="b", profile={1: d}, max_batch=max_batch, workers=1),
    ])


class _Gate:
    """A stage that records every payload it computes and blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.seen: list[Any] = []

    def __call__(self, xs: list[Any]) -> list[Any]:
        self.seen.extend(xs)
        self.started.set()
        assert self.release.wait(10.0), "test gate never released"
        return list(xs)


def test_infer_returns_the_pipelines_output() -> None:
    """await infer gives what the two stages compute in sequence (3x + 1, then squared)."""
    async def main() -> list[Any]:
        async with pard.Runtime(_chain(), {"a": lambda xs: [3 * x + 1 for x in xs],
                                           "b": lambda xs: [x * x for x in xs]}) as rt:
            outs = await asyncio.gather(*(rt.infer(i) for i in range(20)))
        assert rt.counts()["on_time"] == 20
        return outs

    assert asyncio.run(main()) == [(3 * i + 1) ** 2 for i in range(20)]


def test_deadline_shorter_than_any_batch_is_dropped_not_served() -> None:
    """A deadline 5 ms away on a stage whose every batch takes 50 ms is dropped at the first stage (infeasible)."""
    spec = _chain(d=0.05)
    seen: list[Any] = []

    def a(xs: list[Any]) -> list[Any]:
        seen.extend(xs)
        return list(xs)

    async def main() -> Dropped:
        async with pard.Runtime(spec, {"a": a, "b": lambda xs: list(xs)}) as rt:
            with pytest.raises(Dropped) as info:
                await rt.infer("late", deadline=rt.now() + 0.005)
            with pytest.raises(Dropped):  # a deadline already past is submitted, and dropped, too
                await rt.infer("past", deadline=rt.now() - 1.0)
        c = rt.counts()
        assert (c["submitted"], c["dropped"], c["on_time"], c["late"]) == (2, 2, 0, 0)
        return info.value

    err = asyncio.run(main())
    assert (err.stage, err.reason) == ("a", "infeasible")
    assert err.retry_after_s is not None and err.retry_after_s >= 0.05  # at least one batch of size 1
    assert seen == []  # never computed


def test_bad_deadline_is_refused_and_counted_nowhere() -> None:
    """A NaN or string deadline raises DeadlineError (a PardError and ValueError) before anything is submitted."""
    async def main() -> None:
        async with pard.Runtime(_chain(), {"a": list, "b": list}) as rt:
            for bad in (float("nan"), "soon", True):
                with pytest.raises(DeadlineError, match="deadline"):
                    await rt.infer(1, deadline=bad)  # type: ignore[arg-type]
        assert rt.counts()["submitted"] == 0

    asyncio.run(main())
    assert issubclass(DeadlineError, pard.PardError) and issubclass(DeadlineError, ValueError)


def test_cancelling_the_task_cancels_the_request_before_it_costs_compute() -> None:
    """With the worker busy, a cancelled infer leaves the queue at once, counts as cancelled and is never computed."""
    gate = _Gate()

    async def main() -> dict[str, Any]:
        rt = pard.Runtime(_chain(), {"a": gate, "b": lambda xs: list(xs)})
        first = asyncio.ensure_future(rt.infer("first"))
        await asyncio.to_thread(gate.started.wait, 5.0)
        second = asyncio.ensure_future(rt.infer("second"))
        for _ in range(100):  # let it reach the queue
            if rt.queued("a") == 1:
                break
            await asyncio.sleep(0.01)
        assert rt.queued("a") == 1
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        queued_after = rt.queued("a")
        gate.release.set()
        assert await first == "first"
        await rt.aclose()
        return {"queued": queued_after, "out": rt.outcomes()}

    res = asyncio.run(main())
    assert res["queued"] == 0
    assert gate.seen == ["first"]
    out = res["out"]
    assert out["state"].tolist() == [1, 3]  # on_time, dropped
    assert pard._core.REASONS[int(out["reason"][1])] == "cancelled"


def test_aclose_keeps_the_event_loop_running() -> None:
    """While aclose() waits for a 0.3 s batch, the loop keeps ticking (a blocking close would freeze it)."""
    gate = _Gate()

    async def main() -> int:
        rt = pard.Runtime(_chain(), {"a": gate, "b": lambda xs: list(xs)})
        task = asyncio.ensure_future(rt.infer(7))
        await asyncio.to_thread(gate.started.wait, 5.0)
        threading.Timer(0.3, gate.release.set).start()
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        await rt.aclose(drain=True)
        ticker.cancel()
        assert await task == 7
        return ticks

    assert asyncio.run(main()) >= 5


def test_executor_error_carries_the_request_id() -> None:
    """A failing stage raises ExecutorError from infer with the request's id and the original cause."""
    def boom(xs: list[Any]) -> list[Any]:
        raise KeyError("model missing")

    async def main() -> ExecutorError:
        async with pard.Runtime(_chain(), {"a": lambda xs: list(xs), "b": boom}) as rt:
            with pytest.raises(ExecutorError) as info:
                await rt.infer(1)
        return info.value

    err = asyncio.run(main())
    assert err.request_id == 0 and isinstance(err.__cause__, KeyError)


def test_retry_after_is_the_backlog_over_peak_throughput() -> None:
    """With q requests queued at a stage of peak 4 req / 0.02 s (200 req/s), the hint is q/200 s."""
    gate = _Gate()
    spec = _chain(d=0.01, max_batch=4)  # a: d(1)=0.01, d(4)=0.02 -> peak 200 req/s

    rt = pard.Runtime(spec, {"a": gate, "b": lambda xs: list(xs)})
    try:
        futs = [rt.submit(i) for i in range(30)]
        assert gate.started.wait(5.0)
        time.sleep(0.05)  # the worker holds its running batch and the next one; the rest waits
        q = rt.queued("a")
        assert 30 - 2 * 4 <= q <= 29
        assert retry_after_s(rt) == pytest.approx(q / 200)
    finally:
        gate.release.set()
        rt.close()
    assert all(f.done() for f in futs)
    assert np.isclose(retry_after_s(rt), 0.01)  # nothing queued: one batch of size 1 at the entry


def test_infer_outcome_tells_on_time_from_late() -> None:
    """``naive`` never drops: a request whose 10 ms SLO its 30 ms of stage time overruns finishes late, one
    with 5 s finishes on time; ``infer_outcome`` says which, agreeing with ``counts()``, and so does the
    future's ``outcome_state`` (an index into pard.outcomes.STATES)."""
    from pard.outcomes import LATE, ON_TIME

    def slow(xs: list[Any]) -> list[Any]:
        time.sleep(0.015)
        return list(xs)

    async def main() -> None:
        async with pard.Runtime(_chain(), {"a": slow, "b": slow}, policy="naive") as rt:
            assert await rt.infer_outcome(7, slo=5.0) == (7, "on_time")
            assert await rt.infer_outcome(8, slo=0.01) == (8, "late")
            assert (rt.counts()["on_time"], rt.counts()["late"]) == (1, 1)
            fut = rt.submit(9, slo=0.01)
            assert fut.outcome_state == 0 or fut.done()  # pending until it ends
            assert fut.result(timeout=10) == 9 and fut.outcome_state == LATE
            on_time = rt.submit(10)
            assert on_time.result(timeout=10) == 10 and on_time.outcome_state == ON_TIME

    asyncio.run(main())


@pytest.mark.parametrize("method", ["infer", "infer_outcome"])
def test_a_dropped_request_leaves_no_reference_cycle(method: str) -> None:
    """300 requests dropped at once (a deadline shorter than any batch) leave nothing for the garbage collector:
    refcounting frees each one's future, exception and traceback.  A cycle per dropped request would leave
    the collector's full passes to free them, each a pause of the event loop past a server's capacity."""
    spec = _chain(d=0.05)

    async def main() -> tuple[int, int]:
        async with pard.Runtime(spec, {"a": lambda xs: list(xs), "b": lambda xs: list(xs)}) as rt:
            call = getattr(rt, method)
            await asyncio.sleep(0)
            gc.collect()
            gc.disable()
            try:
                dropped = 0

                async def one() -> None:
                    nonlocal dropped
                    try:
                        await call(1.0, deadline=rt.now() + 0.005)
                    except Dropped:
                        dropped += 1

                await asyncio.gather(*(one() for _ in range(300)))
                return dropped, gc.collect()
            finally:
                gc.enable()

    dropped, unreachable = asyncio.run(main())
    assert dropped == 300
    assert unreachable < 30, unreachable  # (with the cycle: about 7 objects per request)
