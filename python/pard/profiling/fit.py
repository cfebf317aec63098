"""Fitting a profile to a run's measured batches, and how far a run drifted from its profile
(see :mod:`pard.profiling`)."""

from __future__ import annotations

from collections.abc import Mapping

from typing import TYPE_CHECKING

import numpy as np



if TYPE_CHECKING:  # pragma: no cover
    from ..config import PipelineSpec

__all__ = ["profile_from_batches", "profile_drift", "DRIFT_LIMIT"]

#: ``pard run`` warns and marks the cached profile stale when the bottleneck stage's batches ran
#: more than this fraction slower or faster than profiled (:func:`profile_drift`).
DRIFT_LIMIT = 0.25


def profile_from_batches(
    spec: PipelineSpec, batches: Mapping[str, np.ndarray], *, min_samples: int = 3
) -> PipelineSpec:
    """``spec`` with each stage's profile re-fitted to executed batches (e.g. ``Runtime.batches()``).

    For every stage and batch size seen at least ``min_samples`` times, the median duration
    becomes the profile point; sizes seen less often keep the spec's ``d(b)``; the result is made
    non-decreasing in ``b`` (running maximum).  Used to tell, after a live run, how much of a
    live-vs-simulated difference comes from the machine running slower or faster than profiled.
    An llm stage keeps its measured prefill and decode.

    Args:
        spec: the pipeline (stage order = the ``stage`` codes of ``batches``).
        batches: ``stage`` (int), ``size`` (int), ``duration_s`` (float) arrays of equal length.
    """
    st_idx = np.asarray(batches["stage"], dtype=np.int64)
    size = np.asarray(batches["size"], dtype=np.int64)
    dur = np.asarray(batches["duration_s"], dtype=np.float64)
    data = spec.to_dict()
    for k, st_data in enumerate(data["stages"]):
        st = spec.stages[k]
        if st.kind == "llm":  # its rows are engine steps, whose prefills they do not record: kept as measured
            continue
        here = st_idx == k
        points = {int(b): float(st.duration(int(b))) for b in st.profile}
        for b in np.unique(size[here]).tolist():
            sel = dur[here & (size == b)]
            if sel.size >= min_samples:
                points[int(b)] = float(np.median(sel))
        prof: dict[int, float] = {}
        running = 0.0
        for b in sorted(points):
            running = max(running, points[b])
            prof[b] = running
        st_data["profile"] = prof
    return type(spec).from_dict(data, source="profile fitted to batches")


def profile_drift(spec: PipelineSpec, batches: Mapping[str, np.ndarray], *, min_samples: int = 3) -> dict[str, float]:
    """How fast each stage ran against its profile: the median of ``duration / d(size)`` over its batches.

    1.0: as profiled; 1.4: batches took 40 % longer than the profile says (the machine is busier
    than when it was profiled); 0.7: 30 % shorter.  Every executed batch counts, whatever its
    size, so the check works under light load too (when no batch reaches ``max_batch``).

    Args:
        spec: the pipeline whose profiles are checked (stage order = the ``stage`` codes).
        batches: ``stage`` (int), ``size`` (int), ``duration_s`` (float) arrays of equal length,
            e.g. ``Runtime.batches()`` (several runs' arrays may be concatenated).
        min_samples: stages with fewer batches than this are left out, and llm stages (a step row's
            duration holds its joiners' prefills, which the row does not record).

    Returns:
        stage name -> ratio, for the stages with at least ``min_samples`` batches.
    """
    st_idx = np.asarray(batches["stage"], dtype=np.int64)
    size = np.asarray(batches["size"], dtype=np.int64)
    dur = np.asarray(batches["duration_s"], dtype=np.float64)
    out: dict[str, float] = {}
    for k, st in enumerate(spec.stages):
        here = st_idx == k
        if st.kind == "llm" or int(here.sum()) < max(1, min_samples):  # an llm stage's rows: see above
            continue
        sizes = size[here]
        expected = np.array([st.duration(int(b)) for b in sizes.tolist()])
        out[st.name] = float(np.median(dur[here] / expected))
    return out
