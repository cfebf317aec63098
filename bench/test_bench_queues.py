"""Benchmarks of the queues of issue 2: the DEPQ (min-max heap) and the MPMC ring.

Each timed call handles ``items`` push+pop pairs; the summary table (bench/conftest.py) reports
median ns per pair and ratios against baselines measured in the same run: ``heapq`` (min end only)
and ``sortedcontainers.SortedList`` for the DEPQ, ``queue.SimpleQueue`` and ``collections.deque``
for the ring. C++-side figures come from ``_core_bench.bench_depq`` / ``_core_bench.bench_ring`` /
``_core.ring_stress``, which time their own loops with the GIL released.
"""

from __future__ import annotations

import collections
import heapq
import queue
import threading
import time
from typing import Any, Callable

import numpy as np
import pytest
from sortedcontainers import SortedList

from pard import _core, _core_bench

__all__: list[str] = []

K = 1000  # push+pop pairs per timed call
SIZES = [1_000, 10_000, 100_000]
CPP_OPS = 1_000_000


def _initial(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return rng.random(n), np.arange(n, dtype=np.uint64)


def _stream(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n + 1)
    return rng.random(K), np.arange(n, n + K, dtype=np.uint64)


def _run(benchmark: Any, fn: Callable[[], Any], *, label: str, baseline: bool = False) -> None:
    benchmark.extra_info.update(items=K, label=label, baseline=baseline)
    benchmark.pedantic(fn, rounds=30, warmup_rounds=2)


# ---- DEPQ: push + pop at one end, queue size held at n ----------------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("end", ["min", "max"])
def test_depq_pard_single(benchmark: Any, n: int, end: str) -> None:
    benchmark.group = f"depq-{end}-n{n}"
    q = _core.DEPQ()
    q.push_many(*_initial(n))
    d, i = _stream(n)
    pairs = list(zip(d.tolist(), i.tolist()))
    push, pop = q.push, (q.pop_min if end == "min" else q.pop_max)

    def work() -> None:
        for dl, ident in pairs:
            push(dl, ident)
            pop()

    _run(benchmark, work, label=f"pard DEPQ single-item push+pop_{end}")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("end", ["min", "max"])
def test_depq_pard_batch(benchmark: Any, n: int, end: str) -> None:
    benchmark.group = f"depq-{end}-n{n}"
    q = _core.DEPQ()
    q.push_many(*_initial(n))
    d, i = _stream(n)
    pop_many = q.pop_min_many if end == "min" else q.pop_max_many

    def work() -> None:
        q.push_many(d, i)
        pop_many(K)

    _run(benchmark, work, label=f"pard DEPQ batch push_many+pop_{end}_many")


@pytest.mark.parametrize("n", SIZES)
def test_depq_heapq(benchmark: Any, n: int) -> None:
    benchmark.group = f"depq-min-n{n}"
    d0, i0 = _initial(n)
    h = list(zip(d0.tolist(), i0.tolist()))
    heapq.heapify(h)
    d, i = _stream(n)
    pairs = list(zip(d.tolist(), i.tolist()))

    def work() -> None:
        for p in pairs:
            heapq.heappush(h, p)
            heapq.heappop(h)

    _run(benchmark, work, label="heapq heappush+heappop", baseline=True)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("end", ["min", "max"])
def test_depq_sortedlist(benchmark: Any, n: int, end: str) -> None:
    benchmark.group = f"depq-{end}-n{n}"
    d0, i0 = _initial(n)
    sl = SortedList(zip(d0.tolist(), i0.tolist()))
    d, i = _stream(n)
    pairs = list(zip(d.tolist(), i.tolist()))
    index = 0 if end == "min" else -1

    def work() -> None:
        for p in pairs:
            sl.add(p)
            sl.pop(index)

    # heapq has no max end, so SortedList is the baseline of the max groups.
    _run(benchmark, work, label=f"SortedList add+pop({index})", baseline=(end == "max"))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("end", ["min", "max"])
def test_depq_cpp(benchmark: Any, n: int, end: str) -> None:
    benchmark.group = f"depq-{end}-n{n}"
    results: list[float] = []
    benchmark.extra_info.update(label=f"C++ MinMaxHeap push+pop_{end} (no binding)", cpp_ns=results)
    benchmark.pedantic(lambda: results.append(_core_bench.bench_depq(n, CPP_OPS, end)), rounds=5)


# ---- DEPQ in C++ against std::priority_queue of the same key (issue 15: <= 1.5x, both ends) ----

CPP_PAIR_OPS = 50_000  # push+pop pairs per round and queue
CPP_PAIR_ROUNDS = 41  # rounds, alternating which queue goes first


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("end", ["min", "max"])
def test_depq_cpp_vs_std_priority_queue(benchmark: Any, n: int, end: str) -> None:
    """RequestDepq and std::priority_queue<(deadline_ns, id)> timed in alternating rounds of one C++ call."""
    benchmark.group = f"depq-vs-std-{end}-n{n}"
    runs: list[dict[str, list[float]]] = []
    benchmark.pedantic(lambda: runs.append(_core_bench.bench_depq_vs_std(n, CPP_PAIR_OPS, end, CPP_PAIR_ROUNDS)), rounds=1)
    r = runs[-1]
    ratios = [d / s for d, s in zip(r["depq_ns"], r["std_ns"])]
    benchmark.extra_info.update(
        label=f"C++ RequestDepq push+pop_{end} (interleaved)",
        cpp_ns=r["depq_ns"],
        paired_ns=r["std_ns"],
        paired_label="std::priority_queue same key (baseline)",
        ratio_median=sorted(ratios)[len(ratios) // 2],
    )


# ---- ring: one thread ----------------------------------------------------------------------


def test_ring_pard_single_thread(benchmark: Any) -> None:
    benchmark.group = "ring-1thread"
    r = _core.MpmcRing(1024)
    push, pop = r.try_push, r.try_pop
    items = list(range(K))

    def work() -> None:
        for x in items:
            push(x)
            pop()

    _run(benchmark, work, label="pard MpmcRing try_push+try_pop")


def test_ring_simplequeue_single_thread(benchmark: Any) -> None:
    benchmark.group = "ring-1thread"
    q: queue.SimpleQueue[int] = queue.SimpleQueue()
    put, get = q.put_nowait, q.get_nowait
    items = list(range(K))

    def work() -> None:
        for x in items:
            put(x)
            get()

    _run(benchmark, work, label="queue.SimpleQueue put+get", baseline=True)


def test_ring_deque_single_thread(benchmark: Any) -> None:
    benchmark.group = "ring-1thread"
    q: collections.deque[int] = collections.deque()
    put, get = q.append, q.popleft
    items = list(range(K))

    def work() -> None:
        for x in items:
            put(x)
            get()

    _run(benchmark, work, label="collections.deque append+popleft")


def test_ring_cpp_single_thread(benchmark: Any) -> None:
    benchmark.group = "ring-1thread"
    results: list[float] = []
    benchmark.extra_info.update(label="C++ MpmcRing try_push+try_pop (no binding)", cpp_ns=results)
    benchmark.pedantic(lambda: results.append(_core_bench.bench_ring(10_000_000, 1024)), rounds=5)


# ---- ring: one producer thread, one consumer thread ----------------------------------------

M = 200_000  # items per two-thread run
RING_2T_CAPACITY = 1 << 18


def _two_threads(produce: Callable[[], None], consume: Callable[[], None]) -> None:
    tp = threading.Thread(target=produce)
    tc = threading.Thread(target=consume)
    tp.start()
    tc.start()
    tp.join()
    tc.join()


def _two_thread_bench(benchmark: Any, work: Callable[[], None], label: str, baseline: bool = False) -> None:
    benchmark.group = "ring-2threads"
    benchmark.extra_info.update(items=M, label=label, baseline=baseline)
    benchmark.pedantic(work, rounds=5, warmup_rounds=1)


def test_ring_pard_two_threads(benchmark: Any) -> None:
    def work() -> None:
        # Capacity above M, so the producer never finds it full: the baselines are unbounded.
        r = _core.MpmcRing(RING_2T_CAPACITY)

        def produce() -> None:
            for x in range(M):
                while not r.try_push(x):
                    time.sleep(0)

        def consume() -> None:
            got = 0
            while got < M:
                if r.try_pop() is not None:
                    got += 1

        _two_threads(produce, consume)

    _two_thread_bench(benchmark, work, "pard MpmcRing (Python threads)")


def test_ring_simplequeue_two_threads(benchmark: Any) -> None:
    def work() -> None:
        q: queue.SimpleQueue[int] = queue.SimpleQueue()

        def produce() -> None:
            for x in range(M):
                q.put(x)

        def consume() -> None:
            for _ in range(M):
                q.get()

        _two_threads(produce, consume)

    _two_thread_bench(benchmark, work, "queue.SimpleQueue put/get (blocking)", baseline=True)


def test_ring_deque_two_threads(benchmark: Any) -> None:
    def work() -> None:
        q: collections.deque[int] = collections.deque()

        def produce() -> None:
            for x in range(M):
                q.append(x)

        def consume() -> None:
            got = 0
            while got < M:
                try:
                    q.popleft()
                    got += 1
                except IndexError:
                    pass

        _two_threads(produce, consume)

    _two_thread_bench(benchmark, work, "collections.deque append/popleft (spin)")


def test_ring_cpp_two_threads(benchmark: Any) -> None:
    benchmark.group = "ring-2threads"
    results: list[float] = []
    benchmark.extra_info.update(label="C++ MpmcRing 1 producer + 1 consumer thread", cpp_ns=results)

    def run() -> None:
        r = _core.ring_stress(1, 1, 1_000_000, 1024)
        assert r["received"] == 1_000_000 and r["duplicates"] == 0
        results.append(r["seconds"] * 1e9 / r["received"])

    benchmark.pedantic(run, rounds=5)
