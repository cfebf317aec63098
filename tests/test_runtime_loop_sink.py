"""How ended requests reach the event loops awaiting them (``src/live_loop_sink.hpp``): in bulk, one loop
wake-up per batch and no Python per request on the runtime's threads; every await ends exactly once
when the runtime stops; nothing is kept when a loop closes with requests pending; several loops at once."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import pard
from pard import _core
from pard.config import PipelineSpec, StageSpec
from pard.errors import Dropped
from pard.runtime.live import watch, wrap_future


def _one_stage(max_batch: int = 64) -> PipelineSpec:
    return PipelineSpec(name="one", slo=30.0, stages=[
        StageSpec(name="s", profile={1: 1e-4, max_batch: 2e-4}, max_batch=max_batch)])


def _two_stages() -> PipelineSpec:
    return PipelineSpec(name="two", slo=30.0, stages=[
        StageSpec(name="a", profile={1: 1e-4, 32: 2e-4}, max_batch=32, successors=["b"]),
        StageSpec(name="b", profile={1: 1e-4, 32: 2e-4}, max_batch=32)])


class _Gate:
    """An executor that blocks every batch until released; ten times each payload."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()

    def __call__(self, xs: list[Any]) -> list[Any]:
        self.started.set()
        assert self.release.wait(10.0), "test gate never released"
        return [10 * x for x in xs]


class _CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the wake-ups other threads ask of it."""

    wakes = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:
        self.wakes += 1
        return super().call_soon_threadsafe(*args, **kwargs)


@pytest.fixture
def unraisable() -> Iterator[list[Any]]:
    """What reaches sys.unraisablehook meanwhile (an error swallowed in C++ lands there)."""
    seen: list[Any] = []
    old = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        yield seen
    finally:
        sys.unraisablehook = old


async def _queue_behind_a_held_batch(rt: pard.Runtime, gate: _Gate, k: int) -> tuple[Any, list[Any]]:
    """One request held in the gated stage's running batch, then ``k`` awaits queued behind it."""
    first = asyncio.ensure_future(rt.infer(-1))
    await asyncio.to_thread(gate.started.wait, 5.0)
    tasks = [asyncio.ensure_future(rt.infer(i)) for i in range(k)]
    for _ in range(500):
        if rt.queued("s") == k:
            break
        await asyncio.sleep(0.01)
    assert rt.queued("s") == k
    return first, tasks


def _python_calls_while_a_batch_ends(k: int) -> tuple[int, int]:
    """(Python calls on the stage's worker thread, loop wake-ups) from releasing a held batch until ``k``
    queued awaits behind it have their outputs."""
    gate = _Gate()
    calls: Counter[str] = Counter()
    counting = threading.Event()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and counting.is_set():
            calls[threading.current_thread().name] += 1

    threading.setprofile(profile)
    try:
        rt = pard.Runtime(_one_stage(), {"s": gate}, policy="naive")
    finally:
        threading.setprofile(None)  # the worker threads, started above, keep it
    loop = _CountingLoop()
    try:
        async def main() -> int:
            first, tasks = await _queue_behind_a_held_batch(rt, gate, k)
            wakes = loop.wakes
            counting.set()
            gate.release.set()
            assert await asyncio.gather(first, *tasks) == [-10] + [10 * i for i in range(k)]
            counting.clear()
            return loop.wakes - wakes

        wakes = loop.run_until_complete(main())
    finally:
        loop.close()
        rt.close()
    return sum(n for name, n in calls.items() if name.startswith("pard-s-")), wakes


def test_a_batch_reaches_the_loop_in_one_wake_up_with_no_python_per_request() -> None:
    """48 awaits that end in one batch wake the loop at most twice (the held batch's, then theirs), and the
    worker runs no more Python for that batch than for a batch of 4."""
    few_calls, _ = _python_calls_while_a_batch_ends(4)
    many_calls, many_wakes = _python_calls_while_a_batch_ends(48)
    assert many_wakes <= 2
    assert many_calls - few_calls < 20, (few_calls, many_calls)  # one call per request would add 44


def test_stopping_the_runtime_ends_every_pending_await_once() -> None:
    """close(drain=False) with 20 awaits queued behind a running batch: all 21 raise Dropped (cancelled),
    the queued ones before the running batch is let go, and the counts add up."""
    gate = _Gate()

    async def main() -> tuple[list[Any], dict[str, int]]:
        rt = pard.Runtime(_one_stage(), {"s": gate}, policy="naive")
        first, tasks = await _queue_behind_a_held_batch(rt, gate, 20)
        closing = asyncio.ensure_future(rt.aclose(drain=False))
        done, _ = await asyncio.wait(tasks, timeout=5.0)  # before the held batch is let go
        assert len(done) == 20
        gate.release.set()
        await closing
        await asyncio.wait([first])
        return [t.exception() for t in [first, *tasks]], rt.counts()

    errors, counts = asyncio.run(main())
    assert all(isinstance(e, Dropped) and e.reason == "cancelled" for e in errors)
    assert (counts["submitted"], counts["dropped"], counts["pending"]) == (21, 21, 0)


def _loop_with_pending_awaits(rt: pard.Runtime, gate: _Gate, k: int) -> tuple[asyncio.AbstractEventLoop, list[Any]]:
    loop = asyncio.new_event_loop()
    first, tasks = loop.run_until_complete(_queue_behind_a_held_batch(rt, gate, k))
    return loop, [first, *tasks]


def _gone(ref: weakref.ReferenceType[Any]) -> bool:
    for _ in range(3):
        gc.collect()
    return ref() is None


def test_a_loop_closed_before_its_wake_up_runs_keeps_nothing(unraisable: list[Any]) -> None:
    """Requests that end while their loop is stopped wait in its sink; closing the loop (which drops the
    queued wake-up unrun) empties the sink, and the loop and its sink are then collected."""
    gate = _Gate()
    sinks = _core.loop_sink_count()
    with pard.Runtime(_one_stage(), {"s": gate}, policy="naive") as rt:
        loop, tasks = _loop_with_pending_awaits(rt, gate, 10)
        sink = _core.loop_sink(loop)
        gate.release.set()
        assert rt._live.wait_idle(rt.now() + 10.0)
        assert sink.waiting == 11  # all ended; one wake-up is queued on the stopped loop
        loop.close()
        assert sink.waiting == 0
        assert rt.counts()["on_time"] == 11
    ref = weakref.ref(loop)
    del loop, tasks, sink
    assert _gone(ref)
    assert _core.loop_sink_count() == sinks
    assert unraisable == []


def test_requests_ending_after_their_loop_closed_are_dropped_quietly(unraisable: list[Any]) -> None:
    """A loop closed while its awaited requests still run: their ends find it closed, the sink drops
    them, and nothing is reported or kept."""
    gate = _Gate()
    sinks = _core.loop_sink_count()
    with pard.Runtime(_one_stage(), {"s": gate}, policy="naive") as rt:
        loop, tasks = _loop_with_pending_awaits(rt, gate, 10)
        sink = _core.loop_sink(loop)
        loop.close()
        gate.release.set()
        assert rt._live.wait_idle(rt.now() + 10.0)
        assert sink.waiting == 0
        assert rt.counts()["on_time"] == 11
    ref = weakref.ref(loop)
    del loop, tasks, sink
    assert _gone(ref)
    assert _core.loop_sink_count() == sinks
    assert unraisable == []


def test_several_event_loops_on_several_threads_await_one_runtime() -> None:
    """Four threads, each with its own loop, await 300 requests each on one runtime (one of them
    cancelling every tenth): every output reaches its own awaiter, and each loop's sink goes with it."""
    sinks = _core.loop_sink_count()

    async def client(t: int, rt: pard.Runtime) -> list[Any]:
        tasks = [asyncio.ensure_future(rt.infer((t, i))) for i in range(300)]
        if t == 3:
            await asyncio.sleep(0)  # every task has submitted its request
            for task in tasks[::10]:
                task.cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    with pard.Runtime(_two_stages(), {"a": lambda xs: list(xs), "b": lambda xs: list(xs)}) as rt:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda t: asyncio.run(client(t, rt)), range(4)))
        counts = rt.counts()
    for t, got in enumerate(results):
        for i, r in enumerate(got):
            if t == 3 and i % 10 == 0:
                assert isinstance(r, asyncio.CancelledError) or r == (t, i)
            else:
                assert r == (t, i)
    assert counts["submitted"] == 1200 and counts["pending"] == 0
    assert counts["on_time"] + counts["dropped"] == 1200
    gc.collect()
    assert _core.loop_sink_count() == sinks


def test_awaited_drops_leave_no_future_behind() -> None:
    """200 awaited requests dropped at once (deadline already past), their errors caught: once collected,
    none of their futures or asyncio futures survive (the cycle through the sink's fields is collectable)."""
    def alive() -> int:
        gc.collect()
        return sum(isinstance(o, _core.LiveFuture) for o in gc.get_objects())

    before = alive()
    with pard.Runtime(_two_stages(), {"a": lambda xs: list(xs), "b": lambda xs: list(xs)}) as rt:
        async def main() -> int:
            n = 0
            for _ in range(200):
                try:
                    await rt.infer(1, deadline=rt.now() - 1.0)
                except Dropped as e:
                    n += e.__traceback__ is not None
            return n

        assert asyncio.run(main()) == 200
    assert alive() == before


def test_watch_refuses_what_it_cannot_follow() -> None:
    """watch() wants a running loop, a RequestFuture and, while the request runs, one watcher; wrap_future
    falls back to asyncio.wrap_future for a future already watched; all of them follow the output."""
    gate = _Gate()
    with pard.Runtime(_one_stage(), {"s": gate}, policy="naive") as rt:
        fut = rt.submit(5)
        with pytest.raises(RuntimeError, match="no running event loop"):
            watch(fut)

        async def main() -> list[Any]:
            with pytest.raises(TypeError, match="RequestFuture"):
                watch(object())
            first = watch(fut)
            with pytest.raises(RuntimeError, match="already awaited"):
                watch(fut)
            second = wrap_future(fut)
            gate.release.set()
            assert fut.result(timeout=10) == 50
            return [await first, await second, await watch(fut), await watch(fut)]  # ended: settled at once

        assert asyncio.run(main()) == [50, 50, 50, 50]


def test_cancelled_awaits_free_their_places_at_once() -> None:
    """Cancelling 30 awaits queued behind a held batch takes them out of the queue before the loop turns
    again, and none of them is computed."""
    gate = _Gate()

    async def main() -> tuple[int, int, list[Any]]:
        rt = pard.Runtime(_one_stage(), {"s": gate}, policy="naive")
        first, tasks = await _queue_behind_a_held_batch(rt, gate, 30)
        for t in tasks:
            t.cancel()
        await asyncio.sleep(0)  # each task runs its cancellation once
        queued = rt.queued("s")
        gate.release.set()
        assert await first == -10
        await rt.aclose()
        return queued, rt.counts()["dropped"], [t.cancelled() for t in tasks]

    queued, dropped, cancelled = asyncio.run(main())
    assert queued == 0 and dropped == 30 and all(cancelled)
