"""The NumPy reference of the run recorder's counting (cpp/include/pard/sim_recorder.hpp, wrapped by
pard.recorder.RunRecorder), for tests only: the arithmetic the C++ recorder was transcribed from, operation
for operation (tests/test_planner_native.py requires equal bits)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pard import profile as _profile
from pard.errors import PardValueError

if TYPE_CHECKING:  # pragma: no cover
    from pard.config import PipelineSpec

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
        self.submitted = np.zeros(ns, dtype=np.int64)
        self.executed = np.zeros(ns, dtype=np.int64)
        self.compute_s = np.zeros(ns)
        self.nominal_s = np.zeros(ns)  # profiled d(b) of the executed batches, summed
        self._initial = np.asarray(workers, dtype=np.float64)
        self._qsum = np.zeros((ns, 0))
        self._qcnt = np.zeros((ns, 0))
        self._wsum = np.zeros((ns, 0))
        self._wdt = np.zeros(0)
        # The bins held are the absolute seconds [_base, _base + columns); _used is one past the last one
        # written; _carry the workers in force before _base (the oldest trimmed second's).
        self._keep = None if keep_s is None else int(math.ceil(keep_s))
        self._base = 0
        self._used = 0
        self._carry = self._initial
        self._d_table = [np.zeros(0) for _ in range(ns)]  # per stage, d(b) at b = 0, 1, ... (s)

    # ------------------------------------------------------------------ feeding
    def _grow(self, end: int) -> None:
        """Hold the absolute seconds up to ``end`` (exclusive)."""
        self._used = max(self._used, end)
        n = end - self._base
        have = self._wdt.size
        if n <= have:
            return
        cap = max(n, 2 * have, 64)
        if self._keep is not None:  # never more than _trim lets be held
            cap = max(n, min(cap, 2 * self._keep + 1))
        for name in ("_qsum", "_qcnt", "_wsum"):
            old = getattr(self, name)
            new = np.zeros((old.shape[0], cap))
            new[:, :have] = old
            setattr(self, name, new)
        wdt = np.zeros(cap)
        wdt[:have] = self._wdt
        self._wdt = wdt

    def _trim(self) -> None:
        """With ``keep_s``: once more than twice ``keep_s`` seconds are held, drop all but the last ``keep_s``
        (amortised: one copy per ``keep_s`` seconds of run)."""
        if self._keep is None or self._used - self._base <= 2 * self._keep:
            return
        cut = self._used - self._keep - self._base  # columns dropped
        seen = np.flatnonzero(self._wdt[:cut] > 0)
        if seen.size:  # the workers the oldest kept second inherits, as series() would have carried them
            self._carry = self._wsum[:, seen[-1]] / self._wdt[seen[-1]]
        for name in ("_qsum", "_qcnt", "_wsum"):
            setattr(self, name, getattr(self, name)[:, cut:].copy())
        self._wdt = self._wdt[cut:].copy()
        self._base += cut

    def record(self, stats: Sequence[Mapping[str, Any]], serving: Sequence[float], t_prev: float, t: float) -> None:
        """Add one interval ``(t_prev, t]``: each stage's statistics and the workers serving at ``t``."""
        times, delays, rows = [], [], []
        for k, s in enumerate(stats):
            self.submitted[k] += len(s["arrival_s"])
            bsz = np.asarray(s["batch_size"], dtype=np.int64)
            if bsz.size:
                self.executed[k] += int(bsz.sum())
                self.compute_s[k] += float(np.asarray(s["batch_duration_s"], dtype=np.float64).sum())
                self.nominal_s[k] += self._nominal(k, bsz)
            tq = np.asarray(s["qdelay_t_s"], dtype=np.float64)
            if tq.size:
                times.append(tq)
                delays.append(np.asarray(s["qdelay_s"], dtype=np.float64))
                rows.append(np.full(tq.size, k, dtype=np.int64))
        if times:  # per-second sums over the few seconds this interval touches, every stage in one bincount
            idx = np.floor(np.concatenate(times) - self.origin_s).astype(np.int64) - self._base
            q, row = np.concatenate(delays), np.concatenate(rows)
            lo, hi = int(idx.min()), int(idx.max())
            if lo < 0:  # before the origin, or before the seconds kept: not in any bin
                ok = idx >= 0
                idx, q, row = idx[ok], q[ok], row[ok]
                lo = int(idx.min()) if idx.size else 0
            if idx.size:
                self._grow(self._base + hi + 1)
                width = hi - lo + 1
                cell = row * width + (idx - lo)  # each bin's samples stay in their order: the same sums
                ns = self._qsum.shape[0]
                self._qsum[:, lo:hi + 1] += np.bincount(cell, weights=q, minlength=ns * width).reshape(ns, width)
                self._qcnt[:, lo:hi + 1] += np.bincount(cell, minlength=ns * width).reshape(ns, width)
        b = int(math.floor(0.5 * (t_prev + t) - self.origin_s))
        if b >= self._base:
            self._grow(b + 1)
            self._wsum[:, b - self._base] += np.asarray(serving, dtype=np.float64) * (t - t_prev)
            self._wdt[b - self._base] += t - t_prev
        self._trim()

    def _nominal(self, k: int, bsz: npt.NDArray[np.int64]) -> float:
        """Stage ``k``'s profiled duration of batches of sizes ``bsz`` (s, >= 1), summed as count x d(b)
        over the distinct sizes in ascending order (``np.add.accumulate`` adds in sequence, as ``sum`` would)."""
        hist = np.bincount(bsz)
        sizes = hist.nonzero()[0]
        table = self.duration_table(k, int(sizes[-1]))
        return float(np.add.accumulate(hist[sizes] * table[sizes])[-1])

    def duration_table(self, k: int, largest: int = 0) -> F64:
        """Stage ``k``'s profiled ``d(b)`` (s) at every whole ``b`` from 0 to at least ``max(largest, max_batch)``
        (StageSpec.duration's rule), computed once."""
        table = self._d_table[k]
        if table.size <= max(largest, 1):
            st = self._spec.stages[k]
            table = self._d_table[k] = np.asarray(
                _profile.duration(*_profile.points(st.profile), np.arange(max(largest, st.max_batch) + 1)),
                dtype=np.float64)
        return table

    def series(self, t0_s: float, n_bins: int) -> tuple[F64, F64, F64]:
        """Queueing-delay sums, counts and workers per stage for ``n_bins`` seconds from ``t0_s``.

        Bins are whole seconds from ``origin_s``; ``t0_s`` is rounded to the nearest one.  A second
        no sync fell into takes the previous second's workers; a second before the origin the starting
        workers, and one before the seconds kept (``keep_s``) no samples and the oldest kept workers.
        """
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
