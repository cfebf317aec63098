"""RunRecorder's keep_s: a runtime that serves for days holds a bounded per-second series, and what it
holds is exactly what an unbounded recorder fed the same statistics holds for those seconds."""

from __future__ import annotations

import numpy as np
import pytest

from pard import config
from pard.errors import PardValueError
from pard.recorder import RunRecorder
from pard.runtime import facade


def _interval(rng: np.random.Generator, n_stages: int, t_prev: float, t: float) -> list[dict]:
    """One interval's statistics per stage, as Simulator.take_stats gives them (seconds)."""
    out = []
    for _ in range(n_stages):
        nq = int(rng.integers(0, 40))
        nb = int(rng.integers(0, 6))
        out.append({
            "arrival_s": np.sort(rng.uniform(t_prev, t, int(rng.integers(0, 40)))),
            "qdelay_t_s": rng.uniform(t_prev, t, nq), "qdelay_s": rng.uniform(0.0, 0.3, nq),
            "batch_start_s": np.sort(rng.uniform(t_prev, t, nb)), "batch_size": rng.integers(1, 9, nb),
            "batch_duration_s": rng.uniform(0.002, 0.08, nb), "batch_wait_s": np.zeros(nb),
        })
    return out


def _feed(keep_s: float | None, seconds: float, seed: int = 5) -> tuple[RunRecorder, int]:
    spec = config.builtin("tm")
    rng = np.random.default_rng(seed)
    rec = RunRecorder(spec, origin_s=0.0, workers=[3.0, 1.0, 3.0], keep_s=keep_s)
    held = 0
    t_prev, t = 0.0, 0.0
    while t < seconds:
        t = t_prev + float(rng.uniform(0.3, 1.7))  # irregular syncs, some seconds without one
        rec.record(_interval(rng, 3, t_prev, t), [float(w) for w in rng.integers(1, 5, 3)], t_prev, t)
        held = max(held, rec.held_s)
        t_prev = t
    return rec, held


def test_kept_seconds_match_an_unbounded_recorder_and_memory_is_bounded() -> None:
    keep = 40.0
    full, _ = _feed(None, 600.0)
    kept, held = _feed(keep, 600.0)
    assert held <= 2 * keep + 1  # the columns ever held (plus the one being written)
    for name in ("submitted", "executed", "compute_s", "nominal_s"):  # counters cover the whole run
        assert np.array_equal(getattr(full, name), getattr(kept, name)), name
    end = int(np.ceil(600.0)) + 2
    lo = end - int(keep) - 2  # the last keep_s seconds the run wrote, and two past its end
    for a, b in zip(full.series(float(lo), end - lo), kept.series(float(lo), end - lo)):
        assert np.array_equal(a, b)


def test_seconds_before_those_kept_read_as_no_samples_and_the_oldest_kept_workers() -> None:
    full, _ = _feed(None, 300.0)
    kept, _ = _feed(20.0, 300.0)
    base = kept.kept_from_s
    assert base > 0
    q_full, c_full, w_full = full.series(0.0, 300)
    q, c, w = kept.series(0.0, 300)
    assert not q[:, :base].any() and not c[:, :base].any()
    assert np.array_equal(q[:, base:], q_full[:, base:]) and np.array_equal(c[:, base:], c_full[:, base:])
    assert np.array_equal(w[:, base:], w_full[:, base:])
    # before the kept seconds: the workers the unbounded recorder had in force at the first kept second's eve
    assert np.array_equal(w[:, :base], np.repeat(w_full[:, base - 1:base], base, axis=1))


@pytest.mark.parametrize("bad", [0.5, 0, -3.0, float("nan"), float("inf"), True, "60"])
def test_bad_keep_s_is_a_pard_error_naming_it(bad: object) -> None:
    with pytest.raises(PardValueError, match="keep_s"):
        RunRecorder(config.builtin("tm"), origin_s=0.0, workers=[1.0, 1.0, 1.0], keep_s=bad)  # type: ignore[arg-type]


def test_the_runtime_keeps_a_bounded_series() -> None:
    assert 0 < facade.SERIES_KEEP_S < 86_400  # under a day: the unbounded series grew ~11 MB a day (5 stages)
    spec = config.builtin("tm")
    with facade.Runtime(spec, {st.name: list for st in spec.stages}, policy="naive") as rt:
        assert rt._loop.recorder.keep_s == int(facade.SERIES_KEEP_S)
