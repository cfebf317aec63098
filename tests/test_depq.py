"""Tests of pard._core.DEPQ, the min-max heap of a stage (DESIGN 3.4), against a SortedList oracle."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from _cpp import run_standalone_cpp_test
from pard import _core

OPS_PER_EXAMPLE = 10_000


def _keys(rng: np.random.Generator, n: int, key_range: int, id_range: int) -> tuple[np.ndarray, np.ndarray]:
    """n (deadline, id) keys; deadlines are multiples of 0.25 so duplicates are exact."""
    deadlines = rng.integers(0, key_range, size=n).astype(np.float64) * 0.25
    ids = rng.integers(0, id_range, size=n, dtype=np.uint64)
    return deadlines, ids


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    key_range=st.sampled_from([1, 2, 7, 100, 1_000_000]),
    id_range=st.sampled_from([1, 3, 2**64 - 1]),
    push_weight=st.integers(1, 6),
)
def test_random_operations_match_sortedlist(seed: int, key_range: int, id_range: int, push_weight: int) -> None:
    """Every operation of a 10 000-step random sequence (both ends, batches, drains) matches a SortedList."""
    rng = np.random.default_rng(seed)
    q = _core.DEPQ()
    oracle: SortedList = SortedList()
    # op codes: 0 push, 1 push_many, 2 pop_min, 3 pop_max, 4 pop_min_many, 5 pop_max_many, 6 drain
    weights = np.array([push_weight, 1, 2, 2, 1, 1, 1], dtype=np.float64)
    ops = rng.choice(7, size=OPS_PER_EXAMPLE, p=weights / weights.sum())
    for op in ops:
        if op == 0:
            (d,), (i,) = _keys(rng, 1, key_range, id_range)
            q.push(float(d), int(i))
            oracle.add((float(d), int(i)))
        elif op == 1:
            d, i = _keys(rng, int(rng.integers(0, 20)), key_range, id_range)
            q.push_many(d, i)
            oracle.update(zip(d.tolist(), i.tolist()))
        elif op in (2, 3):
            if not oracle:
                with pytest.raises(IndexError):
                    q.pop_min() if op == 2 else q.pop_max()
                continue
            got = q.pop_min() if op == 2 else q.pop_max()
            want = oracle.pop(0) if op == 2 else oracle.pop(-1)
            assert got == want
        elif op in (4, 5):
            k = int(rng.integers(0, 12))
            d, i = q.pop_min_many(k) if op == 4 else q.pop_max_many(k)
            want = [oracle.pop(0 if op == 4 else -1) for _ in range(min(k, len(oracle)))]
            assert list(zip(d.tolist(), i.tolist())) == want
            assert d.dtype == np.float64 and i.dtype == np.uint64
        else:
            threshold = float(rng.integers(0, key_range + 1)) * 0.25
            d, i = q.drain_min_while_below(threshold)
            cut = oracle.bisect_left((threshold, -1))
            want = list(oracle[:cut])
            del oracle[:cut]
            assert list(zip(d.tolist(), i.tolist())) == want
        assert len(q) == len(oracle)
        if oracle:
            assert q.min() == oracle[0]
            assert q.max() == oracle[-1]
    # Whatever remains comes out in order from alternating ends.
    while oracle:
        assert q.pop_max() == oracle.pop(-1)
        if oracle:
            assert q.pop_min() == oracle.pop(0)
    assert q.empty() and q.size() == 0


def test_duplicate_keys_all_come_out() -> None:
    """Many copies of one (deadline, id) key are all kept and all returned."""
    q = _core.DEPQ()
    for _ in range(1000):
        q.push(1.5, 7)
    q.push(1.0, 8)
    q.push(2.0, 9)
    assert len(q) == 1002
    assert q.pop_min() == (1.0, 8)
    assert q.pop_max() == (2.0, 9)
    d, i = q.pop_max_many(2000)
    assert d.shape == (1000,) and np.all(d == 1.5) and np.all(i == 7)
    assert q.empty()


def test_ties_on_deadline_break_by_id() -> None:
    """Equal deadlines order by id at both ends."""
    q = _core.DEPQ()
    q.push_many(np.full(5, 3.0), np.array([4, 2, 0, 3, 1], dtype=np.uint64))
    assert q.pop_min() == (3.0, 0)
    assert q.pop_max() == (3.0, 4)
    assert q.pop_min_many(3)[1].tolist() == [1, 2, 3]


def test_infinite_and_negative_deadlines_order_correctly() -> None:
    """-inf and +inf are valid deadlines and land at the right ends."""
    q = _core.DEPQ()
    q.push(math.inf, 1)
    q.push(-math.inf, 2)
    q.push(-5.0, 3)
    assert q.min() == (-math.inf, 2)
    assert q.max() == (math.inf, 1)
    assert q.drain_min_while_below(0.0)[1].tolist() == [2, 3]


def test_empty_queue_raises_index_error() -> None:
    """min/max/pop on an empty DEPQ raise IndexError; batch pops return empty arrays."""
    q = _core.DEPQ()
    for method in (q.min, q.max, q.pop_min, q.pop_max):
        with pytest.raises(IndexError, match="empty DEPQ"):
            method()
    d, i = q.pop_min_many(5)
    assert d.shape == (0,) and i.shape == (0,) and d.dtype == np.float64 and i.dtype == np.uint64
    d, i = q.drain_min_while_below(1e9)
    assert d.size == 0 and i.size == 0


def test_batch_arguments_are_validated() -> None:
    """Wrong dtype, shape, length, NaN or negative n raise TypeError/ValueError naming the argument."""
    q = _core.DEPQ()
    ids = np.arange(3, dtype=np.uint64)
    with pytest.raises(TypeError, match="push_many: 'ids' must be uint64, got float64"):
        q.push_many(np.zeros(3), np.zeros(3))
    with pytest.raises(TypeError, match="push_many: 'ids' must be uint64, got int64"):
        q.push_many(np.zeros(3), np.arange(3))
    with pytest.raises(TypeError, match="push_many: 'deadlines' must be float64, got float32"):
        q.push_many(np.zeros(3, dtype=np.float32), ids)
    with pytest.raises(TypeError, match="push_many: 'deadlines' must be a numpy.ndarray of float64, got list"):
        q.push_many([0.0, 1.0, 2.0], ids)
    with pytest.raises(TypeError, match="'deadlines' must be float64, got >f8"):
        q.push_many(np.zeros(3, dtype=">f8"), ids)
    with pytest.raises(ValueError, match=r"push_many: 'deadlines' must be 1-D, got shape \(3, 1\)"):
        q.push_many(np.zeros((3, 1)), ids)
    with pytest.raises(ValueError, match="same length, got 2 and 3"):
        q.push_many(np.zeros(2), ids)
    with pytest.raises(ValueError, match="NaN, found at index 1"):
        q.push_many(np.array([0.0, math.nan, 1.0]), ids)
    assert q.empty()  # nothing was pushed by any failed call
    with pytest.raises(ValueError, match="'n' must be >= 0, got -1"):
        q.pop_min_many(-1)
    with pytest.raises(ValueError, match="'n' must be >= 0"):
        q.pop_max_many(-3)
    with pytest.raises(ValueError, match="'deadline' must not be NaN"):
        q.push(math.nan, 1)
    with pytest.raises(ValueError, match="'threshold' must not be NaN"):
        q.drain_min_while_below(math.nan)
    with pytest.raises(TypeError):
        q.push(1.0, -1)  # ids are uint64


def test_strided_arrays_are_read_correctly() -> None:
    """Non-contiguous 1-D views are accepted and read element by element."""
    q = _core.DEPQ()
    d = np.arange(10, dtype=np.float64)[::-2]
    i = np.arange(20, dtype=np.uint64)[::4]
    q.push_many(d, i)
    got_d, got_i = q.pop_min_many(10)
    order = np.argsort(d)
    assert got_d.tolist() == d[order].tolist() and got_i.tolist() == i[order].tolist()


def test_shared_between_python_threads() -> None:
    """Concurrent batch and single-item calls from threads neither lose nor duplicate keys."""
    q = _core.DEPQ()
    per_thread = 20_000
    popped: list[list[int]] = [[] for _ in range(4)]

    def producer(t: int) -> None:
        ids = np.arange(t * per_thread, (t + 1) * per_thread, dtype=np.uint64)
        d = (ids % 97).astype(np.float64)
        for lo in range(0, per_thread, 1000):
            q.push_many(d[lo : lo + 1000], ids[lo : lo + 1000])
        for k in range(100):
            q.push(0.5, 10**9 + t * 100 + k)

    def consumer(t: int) -> None:
        for _ in range(300):
            popped[t].extend(q.pop_min_many(17)[1].tolist())
            try:
                popped[t].append(q.pop_max()[1])
            except IndexError:
                pass

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(2)]
    threads += [threading.Thread(target=consumer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    rest = q.pop_min_many(len(q))[1].tolist()
    everything = sorted(sum(popped, []) + rest)
    expected = sorted(list(range(2 * per_thread)) + [10**9 + t * 100 + k for t in range(2) for k in range(100)])
    assert everything == expected


def test_standalone_cpp_depq(tmp_path: Path) -> None:
    """The C++ test of MinMaxHeap (multiset oracle, Request ordering, lifetimes) passes."""
    run_standalone_cpp_test("test_depq", tmp_path)
