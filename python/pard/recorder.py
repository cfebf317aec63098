"""The run recorder: per-interval statistics in, a :class:`pard.report.Report` out (DESIGN §4).

The simulator, the live runtime and Ray feed one :class:`RunRecorder` the same way: once per planner
sync interval they hand it each stage's statistics for that interval, in the form
``pard._core.Simulator.take_stats()`` returns (``arrival_s``, ``qdelay_t_s``, ``qdelay_s``,
``batch_start_s``, ``batch_duration_s``, ``batch_size``, ``batch_wait_s``), and the workers serving; the
simulator does it inside ``Simulator.sync`` (:meth:`RunRecorder.native`). The counting is C++
(``cpp/include/pard/sim_recorder.hpp``); this class reads it back into the run's series and Report.
The recorder keeps counters and per-second bins only (not the samples), so its memory grows with
the run's span in seconds, not with its requests.  At the end :meth:`RunRecorder.report` joins them
with the per-request outcomes into a Report, with the goodput bound's capacity computed one way for
both (each stage at its best batch size, :func:`pard.profile.peak_throughput`, sped up where the
run's batches ran faster than profiled).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from . import _core
from .errors import PardValueError
from .outcomes import REASONS
from . import profile as _profile
from .profile import peak_throughput
from .report import Report

if TYPE_CHECKING:  # pragma: no cover
    from .config import PipelineSpec

__all__ = ["RunRecorder"]

F64 = npt.NDArray[np.float64]


class RunRecorder:
    """Counters and per-second bins of one run, fed once per sync interval.

    Args:
        spec: the pipeline run (profiles give the nominal ``d(b)`` of each executed batch).
        origin_s: the time of bin 0 (s); bins are whole seconds from it.
        workers: the workers per stage at the start (the series' value before the first sync).
        exec_scale: per stage, how much slower than profiled the executors are known to run (the
            simulator's ``exec_scale``; default 1 each): the bound's capacity is then the profile's over
            this, since a stage that is known to run at half speed can serve only half its profile.
        keep_s: keep the per-second bins of the most recent ``keep_s`` seconds at least, and at most twice
            that (None: every second of the run, the simulator's case).  A server's runtime runs for days,
            and at 8 bytes x (3 x stages + 1) a second the series of a 5-stage pipeline would grow by about
            11 MB a day.  Seconds older than that read as no queueing samples and the workers of the oldest
            second kept; the counters (``submitted``, ``executed``, ``compute_s``) cover the whole run.

    Raises:
        PardValueError: ``keep_s`` not None and not a finite number >= 1.
    """

    def __init__(self, spec: PipelineSpec, *, origin_s: float, workers: Sequence[float],
                 keep_s: float | None = None, exec_scale: Sequence[float] | None = None) -> None:
        if keep_s is not None and (isinstance(keep_s, bool) or not isinstance(keep_s, (int, float))
                                   or not (math.isfinite(keep_s) and keep_s >= 1)):
            raise PardValueError(f"keep_s must be None or a finite number of seconds >= 1, got {keep_s!r}")
        ns = len(spec.stages)
        self._spec = spec
        self.origin_s = float(origin_s)
        self.peak = np.array([peak_throughput(st.profile, st.max_batch) for st in spec.stages])
        self.exec_scale = np.ones(ns) if exec_scale is None else np.asarray(exec_scale, dtype=np.float64)
        self._initial = np.asarray(workers, dtype=np.float64)
        self._d_table = [np.zeros(0) for _ in range(ns)]  # per stage, d(b) at b = 0, 1, ... (s)
        keep = 0 if keep_s is None else int(math.ceil(keep_s))
        #: The seconds of bins kept at least (``keep_s`` rounded up; None: every second of the run).
        self.keep_s: int | None = keep or None
        self._core = _core.SimRecorder(self.origin_s, [self.duration_table(k).tolist() for k in range(ns)], keep)
        self._fed_in_cpp = False  # Simulator.sync records without telling: read the C++ side every time
        self._dirty = True
        self._read()

    # ------------------------------------------------------------------ feeding
    def record(self, stats: Sequence[Mapping[str, Any]], serving: Sequence[float], t_prev: float, t: float) -> None:
        """Add one interval ``(t_prev, t]``: each stage's statistics (float seconds, the keys of the module
        doc) and the workers serving at ``t``."""
        self._core.record_s([dict(s) for s in stats], [float(w) for w in serving], float(t_prev), float(t))
        self._dirty = True

    def native(self) -> Any:
        """The ``pard._core.SimRecorder`` this recorder reads: the simulator hands it to ``Simulator.sync``,
        which records each interval without Python."""
        self._fed_in_cpp = True
        return self._core

    def _read(self) -> None:
        """The counters and bins as recorded so far (read from C++ when something was recorded since)."""
        if not (self._dirty or self._fed_in_cpp):
            return
        self._dirty = False
        tot = self._core.totals()
        self._submitted = np.asarray(tot["submitted"], dtype=np.int64)
        self._executed = np.asarray(tot["executed"], dtype=np.int64)
        self._compute_s = np.asarray(tot["compute_s"], dtype=np.float64)
        self._nominal_s = np.asarray(tot["nominal_s"], dtype=np.float64)
        self._qsum = np.asarray(tot["qsum"], dtype=np.float64)
        self._qcnt = np.asarray(tot["qcnt"], dtype=np.float64)
        self._wsum = np.asarray(tot["wsum"], dtype=np.float64)
        self._wdt = np.asarray(tot["wdt"], dtype=np.float64)
        # The bins held are the absolute seconds [_base, _base + columns); _used is one past the last one
        # written; _carry the workers in force before _base (the oldest trimmed second's).
        self._base, self._used = int(tot["base"]), int(tot["used"])
        self._carry = self._initial if tot["carry"] is None else np.asarray(tot["carry"], dtype=np.float64)

    def duration_table(self, k: int, largest: int = 0) -> F64:
        """Stage ``k``'s profiled ``d(b)`` (s) at every whole ``b`` from 0 to at least ``max(largest, max_batch)``
        (StageSpec.duration's rule), computed once."""
        table = self._d_table[k]
        if table.size <= max(largest, 1):
            st = self._spec.stages[k]
            table = self._d_table[k] = np.asarray(
                _profile.duration(*_profile.points(st.batch_profile), np.arange(max(largest, st.max_batch) + 1)),
                dtype=np.float64)
        return table

    # ------------------------------------------------------------------ reading
    @property
    def held_s(self) -> int:
        """Per-second bins held now (with ``keep_s``, at most ``2 keep_s + 1``)."""
        return int(self._core.bins)

    @property
    def kept_from_s(self) -> int:
        """The first second (from ``origin_s``) whose bins are still held (0 until ``keep_s`` trims any)."""
        return int(self._core.base)

    @property
    def submitted(self) -> npt.NDArray[np.int64]:
        """Requests that arrived at each stage, the whole run, shape ``(stages,)``."""
        self._read()
        return self._submitted

    @property
    def executed(self) -> npt.NDArray[np.int64]:
        """Requests each stage executed (in batches), the whole run."""
        self._read()
        return self._executed

    @property
    def compute_s(self) -> F64:
        """Measured batch seconds per stage, the whole run."""
        self._read()
        return self._compute_s

    @property
    def nominal_s(self) -> F64:
        """Profiled ``d(b)`` of the executed batches per stage (s), the whole run."""
        self._read()
        return self._nominal_s

    def speedup(self) -> F64:
        """Per stage: profiled over measured duration of the executed batches (NaN before any ran)."""
        self._read()
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.compute_s > 0, self.nominal_s / np.where(self.compute_s > 0, self.compute_s, 1.0),
                            np.nan)

    def stage_capacity(self, workers: F64) -> F64:
        """Per stage (req/s): ``workers * peak / s * max(1, speed-up * s)``, ``s`` the known ``exec_scale``;
        ``workers`` shape ``(ns,)`` or ``(ns, nb)``.

        Batches slower than the known speed do not lower it: a bound must hold whatever the machine did.
        """
        known = self.peak / self.exec_scale
        up = np.maximum(np.nan_to_num(self.speedup() * self.exec_scale, nan=1.0), 1.0) * known
        return np.asarray(workers, dtype=np.float64) * (up if np.ndim(workers) == 1 else up[:, None])

    def series(self, t0_s: float, n_bins: int) -> tuple[F64, F64, F64]:
        """Queueing-delay sums, counts and workers per stage for ``n_bins`` seconds from ``t0_s``.

        Bins are whole seconds from ``origin_s``; ``t0_s`` is rounded to the nearest one.  A second
        no sync fell into takes the previous second's workers; a second before the origin the starting
        workers, and one before the seconds kept (``keep_s``) no samples and the oldest kept workers.
        """
        self._read()
        off = int(round(t0_s - self.origin_s))
        base, held = self._base, self._used - self._base
        ns = self._initial.size
        workers = np.zeros((ns, max(held, 0)))
        last = self._carry
        for j in range(held):
            if self._wdt[j] > 0:
                last = self._wsum[:, j] / self._wdt[j]
            workers[:, j] = last
        lo, hi = max(off, base), min(off + n_bins, base + held)  # the absolute seconds both cover

        def cut(a: F64) -> F64:
            out = np.zeros((ns, n_bins))
            if hi > lo:
                out[:, lo - off:hi - off] = a[:, lo - base:hi - base]
            return out

        w = cut(workers)
        before = min(max(base - off, 0), n_bins)  # requested seconds before the first one held
        w[:, :min(max(-off, 0), n_bins)] = self._initial[:, None]
        w[:, max(-off, 0):before] = self._carry[:, None]
        after = max(min(base + held, off + n_bins) - off, before)  # seconds after the last one written
        w[:, after:] = last[:, None]
        return cut(self._qsum), cut(self._qcnt), w

    def report(self, *, policy: str, outcomes: Mapping[str, Any], t0_s: float, n_bins: int,
               slo_s: Any, capacity_req_s: float | None = None, duration_s: float | None = None,
               compute_split: Mapping[str, Any] | None = None) -> Report:
        """The run's Report from ``outcomes`` (the ``Simulator.outcomes()`` form: ``send_s``, ``state``,
        ``finish_s``, ``drop_stage``, ``reason``, ``compute_s``; optional ``tier``, per-request tier codes,
        default 0) and what was recorded.

        The goodput bound's capacity per second is the minimum over stages of
        :meth:`stage_capacity` with that second's workers, or ``capacity_req_s`` when given.
        ``compute_split``: the engine's ``compute_split()`` (:mod:`pard.compute_split`), or None.
        """
        qsum, qcnt, workers = self.series(t0_s, n_bins)
        self._read()
        if capacity_req_s is None:
            capacity = self.stage_capacity(workers).min(axis=0)
        else:
            capacity = np.full(n_bins, float(capacity_req_s))
        spec = self._spec
        return Report(
            policy=policy, pipeline=spec.name, stage_names=[st.name for st in spec.stages],
            send_s=outcomes["send_s"], state=outcomes["state"], finish_s=outcomes["finish_s"],
            drop_stage=outcomes["drop_stage"], reason=outcomes["reason"], compute_s=outcomes["compute_s"],
            reasons=list(REASONS), stage_submitted=self.submitted, stage_executed=self.executed,
            stage_compute_s=self.compute_s, t0_s=t0_s, qdelay_sum_s=qsum, qdelay_count=qcnt,
            workers=workers, capacity=capacity, slo_s=slo_s, duration_s=duration_s, tier=outcomes.get("tier"),
            tier_names=list(spec.tiers), tier_weights=[float(w) for w in spec.tiers.values()],
            compute_split=compute_split,
        )
