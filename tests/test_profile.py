"""The one d(b) rule: pard.profile.duration against the C++ core's Profile, and everything that uses it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pard import _core
from pard import profile as prof
from pard.config import StageSpec
from pard.planner import PlannerStage


@st.composite
def _profiles(draw: st.DrawFn) -> dict[int, float]:
    """Random valid profiles: 1..6 points (single-point ones included), strictly increasing batch sizes,
    non-decreasing durations between 10 us and a few seconds."""
    n = draw(st.integers(1, 6))
    sizes = sorted(draw(st.sets(st.integers(1, 300), min_size=n, max_size=n)))
    steps = draw(st.lists(st.floats(0.0, 0.5, allow_nan=False), min_size=n, max_size=n))
    d0 = draw(st.floats(1e-5, 2.0, allow_nan=False))
    durations = list(np.cumsum([d0] + steps[1:]))
    return {b: float(d) for b, d in zip(sizes, durations)}


@settings(max_examples=300, deadline=None)
@given(profile=_profiles(), batch=st.integers(1, 700))
def test_duration_matches_core_profile(profile: dict[int, float], batch: int) -> None:
    """For any valid profile and batch size, Python's d(b) equals the C++ Profile's to within its 1 ns rounding.

    The core rounds each point to whole nanoseconds before it extrapolates, so past the last point the
    comparison uses the core's own (rounded) points; within the profiled range the given ones.
    """
    core = _core.Profile(list(profile), list(profile.values()))
    expected = core.duration(batch)
    rounded = dict(zip(*core.points()))
    source = profile if batch <= max(profile) else rounded
    bs, ds = prof.points(source)
    assert prof.duration(bs, ds, batch) == pytest.approx(expected, abs=1.5e-9, rel=1e-12)
    # the config and the planner use the same function
    spec = StageSpec(name="s", profile=source, max_batch=max(source))
    assert spec.duration(batch) == pytest.approx(expected, abs=1.5e-9, rel=1e-12)
    ps = PlannerStage.from_profile("s", source, max(source))
    assert ps.duration(batch) == pytest.approx(expected, abs=1.5e-9, rel=1e-12)


def test_single_point_profile_is_constant() -> None:
    """A single-point profile keeps its duration at every batch size (the issue's {4: 0.010} at b = 8)."""
    ps = PlannerStage.from_profile("s", {4: 0.010}, 8)
    assert ps.duration(8) == pytest.approx(0.010)
    assert StageSpec(name="s", profile={4: 0.010}, max_batch=8).duration(8) == pytest.approx(0.010)
    assert _core.Profile([4], [0.010]).duration(8) == pytest.approx(0.010)


def test_fractional_and_array_batches() -> None:
    """d(b) takes the planner's fractional mean batch and arrays: interpolation by hand, slope past the last point."""
    bs, ds = prof.points({2: 0.010, 6: 0.030})
    assert prof.duration(bs, ds, 4.5) == pytest.approx(0.010 + 2.5 * 0.005)
    np.testing.assert_allclose(prof.duration(bs, ds, np.array([1.0, 2.0, 8.0])), [0.010, 0.010, 0.040])


def test_peak_throughput_by_hand() -> None:
    """A worker's peak throughput is max b/d(b) over the profiled points up to max_batch and max_batch itself."""
    # b/d: 1/0.01 = 100, 4/0.02 = 200, 8/0.06 = 133; max_batch 6 -> d(6) = 0.04, 6/0.04 = 150
    assert prof.peak_throughput({1: 0.01, 4: 0.02, 8: 0.06}, 6) == pytest.approx(200.0)
    assert prof.peak_throughput({4: 0.010}, 8) == pytest.approx(800.0)  # constant past a single point


def test_dense_profile_one_point_per_batch_size() -> None:
    """A profile with a point at every batch size up to 2**17 (as a sweep of every size measures): d(b)
    hits each point exactly and interpolates between sparse ones.  The core fills its table by a binary
    search per batch size; a linear scan made this quadratic (a 10**6-point profile never finished)."""
    n = 1 << 17
    sizes = np.arange(1, n + 1)
    durations = 0.01 + sizes * 1e-6
    core = _core.Profile(sizes.tolist(), durations.tolist())
    for b in (1, 2, 3, 1000, 65_537, n - 1, n):
        assert core.duration(b) == pytest.approx(0.01 + b * 1e-6, abs=1e-9)
    sparse = _core.Profile([1, 10, n], [0.01, 0.02, 0.5])
    assert sparse.duration(5) == pytest.approx(0.01 + 4 * 0.01 / 9, abs=1e-9)
    assert sparse.duration(n // 2) == pytest.approx(0.02 + (n // 2 - 10) * 0.48 / (n - 10), abs=1e-9)
