"""A stage's latency profile ``d(b)``, its best batch size and peak throughput: the one home of these
rules (DESIGN §2, §3.1).

A profile is a set of measured points ``(b_i, d_i)``: batch sizes (ints >= 1, strictly increasing)
and durations in seconds (> 0, non-decreasing).  :func:`duration` evaluates ``d(b)`` the way the C++
core's ``Profile`` does (``cpp/include/pard/profile.hpp``), so the planner's downstream sums, the
config's capacity and the scheduler's drop rule all use one function:

* ``b`` at or below the first point: the first duration (a smaller batch is never assumed faster
  than the smallest one measured);
* ``b`` between two points: linear interpolation;
* ``b`` past the last point: the last segment's slope continues;
* **a single-point profile is constant**: ``{4: 0.010}`` gives ``d(8) = 0.010`` s.  One point says
  nothing about how the duration grows, and the C++ scheduler (what actually drops requests) keeps
  it constant, so every Python caller does too.

The C++ core rounds each duration to whole nanoseconds; this function computes in float seconds, so
the two agree to within a nanosecond (checked by a hypothesis test against ``pard._core.Profile``).
Fractional ``b`` (the planner's recent mean batch size) is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["best_batch", "duration", "peak_throughput", "points"]

F64 = npt.NDArray[np.float64]


def points(profile: Mapping[int, float]) -> tuple[F64, F64]:
    """A ``{batch: duration_s}`` mapping as sorted float arrays ``(batch_sizes, durations_s)``."""
    pts = sorted((int(b), float(d)) for b, d in profile.items())
    return (np.asarray([b for b, _ in pts], dtype=np.float64), np.asarray([d for _, d in pts], dtype=np.float64))


def duration(batch_sizes: F64, durations_s: F64, batch: float | npt.ArrayLike) -> Any:
    """``d(b)`` in seconds for a batch size ``b`` (scalar or array, may be fractional).

    Args:
        batch_sizes, durations_s: the profile's points, sorted by batch size, shape ``(p,)``, p >= 1.
        batch: the batch size(s).

    Returns:
        a float for a scalar ``batch``, else an array of ``batch``'s shape.
    """
    b = np.asarray(batch, dtype=np.float64)
    out = np.interp(b, batch_sizes, durations_s)  # flat below the first point (and past a single one)
    if batch_sizes.size > 1:
        slope = (durations_s[-1] - durations_s[-2]) / (batch_sizes[-1] - batch_sizes[-2])
        out = np.where(b > batch_sizes[-1], durations_s[-1] + slope * (b - batch_sizes[-1]), out)
    return out if out.ndim else float(out)


def best_batch(profile: Mapping[int, float], max_batch: int) -> int:
    """The batch size in ``1 .. max_batch`` with the highest throughput ``b / d(b)`` (ties: the largest).

    This is the largest batch a stage forms (DESIGN §3.1): a batch past it finishes fewer requests per
    second, so a stage that formed it on a long queue would drain the queue more slowly and, once behind,
    stay behind (a CPU profile measured here ran a batch of 16 in 3.4x a batch of 8's time). For a profile
    whose throughput grows with the batch, as a GPU's does (every built-in one), it is ``max_batch``.
    ``d`` is piecewise linear between the profiled points, where ``b / d(b)`` is monotone, so the
    profiled points up to ``max_batch`` and ``max_batch`` itself are the only candidates.
    """
    bs, ds = points(profile)
    cands = [int(b) for b in bs if b <= max_batch] + [int(max_batch)]
    thr = np.asarray(cands, dtype=np.float64) / duration(bs, ds, np.asarray(cands, dtype=np.float64))
    best = float(np.max(thr))
    return max(b for b, t in zip(cands, thr.tolist()) if t == best)


def peak_throughput(profile: Mapping[int, float], max_batch: int) -> float:
    """One worker's best throughput ``max_b b / d(b)`` over batch sizes ``1 .. max_batch`` (req/s): at
    :func:`best_batch`."""
    b = best_batch(profile, max_batch)
    return float(b / duration(*points(profile), b))
