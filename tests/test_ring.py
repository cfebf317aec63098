"""Tests of pard._core.MpmcRing, the lock-free submit ring of a stage (DESIGN 3.4)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from _cpp import run_standalone_cpp_test
from pard import _core

SHIFT = 40  # ring_stress items are (producer << 40) | sequence number


@pytest.mark.parametrize("bad", [0, 1, 3, 6, 1000, -4])
def test_capacity_must_be_power_of_two(bad: int) -> None:
    """A capacity that is not a power of two >= 2 raises ValueError quoting it."""
    with pytest.raises(ValueError, match=f"'capacity' must be a power of two .*got {bad}"):
        _core.MpmcRing(bad)


def test_single_thread_fifo_full_and_empty() -> None:
    """Items leave in push order; a full ring refuses without losing anything; empty pops give None."""
    r = _core.MpmcRing(8)
    assert r.capacity == 8
    assert r.try_pop() is None
    assert [r.try_push(i) for i in range(10)] == [True] * 8 + [False, False]
    assert r.size_approx() == 8
    assert [r.try_pop() for _ in range(9)] == list(range(8)) + [None]
    assert r.size_approx() == 0
    # Wraparound over many laps with a varying fill level.
    nxt_in = nxt_out = 0
    for lap in range(500):
        k = 1 + lap % 8
        for _ in range(k):
            assert r.try_push(nxt_in)
            nxt_in += 1
        for _ in range(k):
            assert r.try_pop() == nxt_out
            nxt_out += 1


def test_full_uint64_range_round_trips() -> None:
    """0 and 2**64 - 1 travel unchanged; negative or oversized items raise TypeError."""
    r = _core.MpmcRing(2)
    assert r.try_push(0) and r.try_push(2**64 - 1)
    assert (r.try_pop(), r.try_pop()) == (0, 2**64 - 1)
    with pytest.raises(TypeError):
        r.try_push(-1)
    with pytest.raises(TypeError):
        r.try_push(2**64)


@pytest.mark.parametrize("producers", [1, 2, 4])
@pytest.mark.parametrize("consumers", [1, 2, 4])
def test_stress_cpp_threads_exactly_once_fifo(producers: int, consumers: int) -> None:
    """P x C C++ threads move 10^6 items: each exactly once, FIFO per producer, sums match closed forms."""
    n = 1_000_000 // producers
    r = _core.ring_stress(producers, consumers, n, 1024)
    total = producers * n
    assert total >= 1_000_000
    assert r["expected"] == total
    assert r["received"] == total
    assert r["duplicates"] == 0
    assert r["missing"] == 0
    assert r["out_of_range"] == 0
    assert r["fifo_violations"] == 0
    assert r["seq_sum"] == producers * (n * (n - 1) // 2)
    assert r["producer_sum"] == n * (producers * (producers - 1) // 2)


def test_stress_tiny_ring() -> None:
    """A 2-slot ring under 4 x 4 threads (constant full/empty, many laps) still delivers exactly once."""
    n = 50_000
    r = _core.ring_stress(4, 4, n, 2)
    assert (r["received"], r["duplicates"], r["missing"], r["fifo_violations"]) == (4 * n, 0, 0, 0)
    assert r["seq_sum"] == 4 * (n * (n - 1) // 2)


def test_stress_arguments_are_validated() -> None:
    """ring_stress rejects out-of-range thread counts, item counts and capacities by name."""
    with pytest.raises(ValueError, match="'producers' must be in"):
        _core.ring_stress(0, 1, 10, 8)
    with pytest.raises(ValueError, match="'consumers' must be in"):
        _core.ring_stress(1, 300, 10, 8)
    with pytest.raises(ValueError, match="'items_per_producer' must be in"):
        _core.ring_stress(1, 1, -1, 8)
    with pytest.raises(ValueError, match="'capacity' must be a power of two"):
        _core.ring_stress(1, 1, 10, 12)
    assert _core.ring_stress(2, 3, 0, 8)["received"] == 0


def test_python_threads_exactly_once_fifo() -> None:
    """4 Python producer and 4 consumer threads on a small ring: exactly once, FIFO per producer."""
    producers, consumers, n = 4, 4, 20_000
    r = _core.MpmcRing(64)
    done = threading.Event()
    received: list[list[int]] = [[] for _ in range(consumers)]
    full_seen = [0] * producers

    def produce(p: int) -> None:
        tag = p << SHIFT
        for s in range(n):
            while not r.try_push(tag | s):
                full_seen[p] += 1
                time.sleep(0)  # let a consumer have the GIL

    def consume(c: int) -> None:
        mine = received[c]
        while True:
            item = r.try_pop()
            if item is not None:
                mine.append(item)
                continue
            if not done.is_set():
                time.sleep(0)  # let a producer have the GIL
            else:
                item = r.try_pop()  # all pushes have completed: a miss now means empty
                if item is None:
                    return
                mine.append(item)

    ps = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    cs = [threading.Thread(target=consume, args=(c,)) for c in range(consumers)]
    for t in ps + cs:
        t.start()
    for t in ps:
        t.join()
    done.set()
    for t in cs:
        t.join()

    everything = sorted(x for mine in received for x in mine)
    assert everything == sorted((p << SHIFT) | s for p in range(producers) for s in range(n))
    for mine in received:
        last = [-1] * producers
        for x in mine:
            p, s = x >> SHIFT, x & ((1 << SHIFT) - 1)
            assert s > last[p], "a consumer saw one producer's items out of order"
            last[p] = s
    assert r.size_approx() == 0


def test_standalone_cpp_ring(tmp_path: Path) -> None:
    """The C++ ring test (contract, counted element lifetimes, P x C stress) passes."""
    run_standalone_cpp_test("test_ring", tmp_path)
