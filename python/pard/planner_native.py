"""The simulator's per-sync work in C++: :class:`~pard.planner.Planner` and :class:`~pard.recorder.RunRecorder`
transcribed operation for operation (``cpp/include/pard/sync_planner.hpp``, ``sim_recorder.hpp``).

Once per simulated second the Python planner and recorder cost more than the event loop itself (about
50 small NumPy calls each per sync).  :func:`pard.sim.simulate` therefore runs each sync interval as one
``Simulator.sync`` call: the event loop, the recorder's counters and bins, the planner's update and the
publish, in C++ with the GIL released.  The results are the same bits: the C++ code is built here from
the constructed Python objects (their tables, paths and options), sums in NumPy's pairwise order, and
draws the planner's Monte Carlo samples from the Python planner's own ``numpy.random.Generator`` (its bit
generator, with NumPy's bounded-integer rule).  ``tests/test_planner_native.py`` checks it against the
Python planner and recorder on random statistics and through ``simulate``.

The Python planner stays the one definition: a :class:`~pard.policies.PolicySpec` with fields this
transcription does not know gets ``None`` here and the Python planner serves it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from . import _core
from . import planner as _planner
from .planner import Planner
from .policies import PolicySpec
from .recorder import RunRecorder
from .utilisation import PRECOLLECTED_WAIT

__all__ = ["covers", "native_planner", "native_recorder", "KNOWN_POLICY_FIELDS"]

#: The PolicySpec fields the C++ planner was written against; a field added later disables it (the
#: Python planner then serves every run) until the transcription is checked and this set updated.
KNOWN_POLICY_FIELDS = frozenset({
    "name", "order", "drop", "downstream", "instant", "dagor_threshold_s", "dagor_alpha", "tiered", "reactive",
    "shed", "correct_durations", "coherent_branches",
    "mu_at_capacity", "coherent_paths", "max_queue", "max_queue_entry_only", "lam", "description",
    "idle_batch", "pace",
    "overload_upper",
    "mu_at_capacity_entry",
    "overload_below",  # read by the C++ stage scheduler alone (Policy.overload_below), not the planner
    "coherent_rank",  # read by the C++ stage scheduler alone (Policy.coherent_rank), not the planner
    "live_queues",  # read by the C++ stage scheduler alone (Policy.live_queues), not the planner
    "prior_terms",  # computed by the Python planner before the first interval (Planner.prior_terms)
})


def covers(policy: PolicySpec) -> bool:
    """True when the C++ planner computes ``policy``'s terms exactly as the Python planner does."""
    return {f.name for f in dataclasses.fields(PolicySpec)} == KNOWN_POLICY_FIELDS


def native_planner(planner: Planner) -> Any:
    """A ``pard._core.SyncPlanner`` equal to ``planner`` from its current (freshly constructed) state, or
    None when :func:`covers` is False.  It draws from ``planner``'s generator: use one or the other."""
    pol = planner.policy
    if not covers(pol):
        return None
    p: Any = planner  # its construction-time tables, read once (planner.py is the one definition)
    stages = p._stages
    return _core.SyncPlanner(
        paths=[[list(path) for path, _ in paths] for paths in p._paths],
        parallel=[list(x) for x in p._parallel], below=[list(x) for x in p._below],
        entry=[bool(st.entry) for st in stages], max_batch=p._max_batch.tolist(), full_d=p._full_d.tolist(),
        d_table=[np.asarray(t, dtype=np.float64).tolist() for t in p._d_table],
        pts_b=[st._points[0].tolist() for st in stages], pts_d=[st._points[1].tolist() for st in stages],
        drawn=list(p._drawn), mode=pol.downstream, instant=pol.instant, correct_durations=pol.correct_durations,
        mu_at_capacity=pol.mu_at_capacity, adapt_window=p._adapt, lam=p._lam,
        window_s=p._window0, samples=p._samples, cv_history_s=p._cv_history_s, min_cv_intervals=p._min_cv_intervals,
        constants=[_planner.SCALE_MIN, _planner.SCALE_MAX, PRECOLLECTED_WAIT],
        generator=p._rng, idle_batch=pol.idle_batch, half_life_s=p.durations.half_life_s,
        prior_batches=p.durations.prior_batches,
        pace_below=[list(x) for x in p._pace_below], overload_upper=pol.overload_upper,
        mu_at_capacity_entry=pol.mu_at_capacity_entry,
    )


def native_recorder(recorder: RunRecorder) -> Any:
    """A ``pard._core.SimRecorder`` for ``recorder``'s pipeline and origin; hand its ``totals()`` to
    :meth:`RunRecorder.absorb` at the end."""
    return _core.SimRecorder(recorder.origin_s, [recorder.duration_table(k).tolist() for k in
                                                 range(recorder.submitted.size)])
