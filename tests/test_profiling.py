"""Profiling: batch-size grids, worker sizing, busy cores, measured profiles, the cache, refits."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pard.config import PipelineSpec, StageSpec, builtin, load
from pard.profiling import (
    busy_cores,
    cached_profile,
    default_batch_sizes,
    measure_profile,
    profile_from_batches,
    size_workers,
)


def _spec(workers: tuple[int, ...] = (3, 1, 3)) -> PipelineSpec:
    names = ["a", "b", "c"]
    return PipelineSpec(name="three", slo=1.0, stages=[
        StageSpec(name=n, profile={1: 0.01 * (i + 1), 4: 0.02 * (i + 1)}, max_batch=4, workers=w,
                  successors=names[i + 1 : i + 2])
        for i, (n, w) in enumerate(zip(names, workers))
    ])


def test_default_batch_sizes() -> None:
    """Powers of two up to max_batch, plus max_batch itself."""
    assert default_batch_sizes(1) == [1]
    assert default_batch_sizes(16) == [1, 2, 4, 8, 16]
    assert default_batch_sizes(12) == [1, 2, 4, 8, 12]
    with pytest.raises(ValueError, match="max_batch"):
        default_batch_sizes(0)


def test_size_workers() -> None:
    """Counts are kept when they fit, scaled down (at least 1 each) when they do not."""
    spec = _spec((3, 1, 3))
    assert size_workers(spec, 16) == [3, 1, 3]
    assert size_workers(spec, 7) == [3, 1, 3]
    assert size_workers(spec, 4) == [2, 1, 1] or size_workers(spec, 4) == [1, 1, 2]
    assert sum(size_workers(spec, 5)) == 5
    assert size_workers(spec, 2) == [1, 1, 1]  # fewer cores than stages: one each
    with pytest.raises(ValueError, match="cores"):
        size_workers(spec, 0)


def test_busy_cores_closed_form() -> None:
    """At capacity the workers are busy X * d(b)/b per stage: here X = 1/0.005 and sum = X * 0.03."""
    spec = _spec((1, 1, 1))
    # per-request cost at max batch: 0.005, 0.010, 0.015 s; X = min(1/0.005, 1/0.01, 1/0.015) = 66.7/s
    x = 1 / 0.015
    assert busy_cores(spec) == pytest.approx(x * (0.005 + 0.010 + 0.015))
    assert busy_cores(spec, [1, 1, 2]) == pytest.approx((1 / 0.01) * 0.03)


class _Recorder:
    """A stage executor that sleeps a fixed time per batch and counts the batch sizes it saw."""

    def __init__(self, per_batch_s: float, per_item_s: float) -> None:
        self.a, self.b = per_batch_s, per_item_s
        self.sizes: Counter[int] = Counter()
        self.lock = threading.Lock()

    def __call__(self, xs: list[Any]) -> list[Any]:
        with self.lock:
            self.sizes[len(xs)] += 1
        time.sleep(self.a + self.b * len(xs))
        return list(xs)


@pytest.mark.parametrize("co_load", ["none", "capacity", "full"])
def test_measure_profile_custom_stages(co_load: str) -> None:
    """Every worker runs warm-up + repeats per batch size; medians track the sleep time; output is monotone."""
    spec = _spec((2, 1, 1))
    recs = {n: _Recorder(0.002, 0.001) for n in ("a", "b", "c")}
    inputs = {n: (lambda b: [0] * b) for n in recs}
    res = measure_profile(spec, recs, inputs=inputs, warmup=1, repeats=3, co_load=co_load,
                          batch_sizes={"a": [1, 4], "b": [2], "c": [1, 2, 4]})
    assert res.workers == [2, 1, 1]
    assert sorted(res.spec.stage("a").profile) == [1, 4]
    assert sorted(res.spec.stage("c").profile) == [1, 2, 4]
    # a has 2 workers: each times (1 + 3) runs per size; background runs (max size) only add more
    assert recs["a"].sizes[1] == 2 * 4
    assert recs["c"].sizes[1] == 4 and recs["c"].sizes[2] == 4
    assert len(res.samples["a"][4]) == 2 * 3
    for st in res.spec.stages:
        pts = sorted(st.profile.items())
        assert all(d1 >= d0 for (_, d0), (_, d1) in zip(pts, pts[1:]))
        for b, d in pts:
            assert d >= 0.002 + 0.001 * b  # a sleep never returns early
    assert [st.workers for st in res.spec.stages] == [2, 1, 1]
    assert res.spec.slo == spec.slo and [s.successors for s in res.spec.stages] == [s.successors for s in spec.stages]


def test_measure_profile_errors() -> None:
    """Bad options and an executor that raises are reported to the caller."""
    spec = _spec((1, 1, 1))
    with pytest.raises(ValueError, match="co_load"):
        measure_profile(spec, co_load="some")
    with pytest.raises(ValueError, match="repeats"):
        measure_profile(spec, repeats=0)
    with pytest.raises(ValueError, match="inputs"):
        measure_profile(spec, {n: (lambda xs: xs) for n in "abc"})

    def boom(xs: list[Any]) -> list[Any]:
        raise RuntimeError("stage exploded")

    with pytest.raises(RuntimeError, match="stage exploded"):
        measure_profile(spec, {"a": boom, "b": boom, "c": boom}, inputs={n: (lambda b: [0] * b) for n in "abc"},
                        warmup=0, repeats=1, co_load="none")


def test_reference_profile_cache(tmp_path: Path) -> None:
    """A measured profile is cached per machine/pipeline/options, reloaded as a valid spec, and refreshed on demand."""
    spec = builtin("tm")
    opts = {"scale": 0.01}
    first = cached_profile(spec, workers=[1, 1, 1], model_options=opts, directory=tmp_path, warmup=0, repeats=1,
                           co_load="none")
    assert not first.cached and first.path is not None and first.path.is_file()
    assert first.path.parent == tmp_path / "profiles"
    again = cached_profile(spec, workers=[1, 1, 1], model_options=opts, directory=tmp_path)
    assert again.cached and again.path == first.path
    assert again.spec.to_dict() == first.spec.to_dict()
    assert load(first.path).to_dict() == first.spec.to_dict()
    other = cached_profile(spec, workers=[1, 1, 1], model_options={"scale": 0.02}, directory=tmp_path,
                           warmup=0, repeats=1, co_load="none")
    assert not other.cached and other.path != first.path
    fresh = cached_profile(spec, workers=[1, 1, 1], model_options=opts, directory=tmp_path, refresh=True,
                           warmup=0, repeats=1, co_load="none")
    assert not fresh.cached and fresh.path == first.path
    for st in first.spec.stages:
        assert sorted(st.profile) == default_batch_sizes(st.max_batch)


def test_profile_from_batches() -> None:
    """Sizes seen often enough take the median observed duration; others keep the spec's; monotone."""
    spec = _spec((1, 1, 1))
    batches = {
        "stage": np.array([0, 0, 0, 0, 1, 1, 1, 2]),
        "size": np.array([4, 4, 4, 2, 1, 1, 1, 4]),
        "duration_s": np.array([0.05, 0.03, 0.04, 0.5, 0.001, 0.002, 0.003, 9.0]),
    }
    fitted = profile_from_batches(spec, batches)
    assert fitted.stage("a").profile == {1: 0.01, 4: 0.04}  # size 2 seen once: ignored
    assert fitted.stage("b").profile == {1: 0.002, 4: 0.04}
    assert fitted.stage("c").profile == {1: 0.03, 4: 0.06}  # one sample only: the spec's points
    slow_small = {"stage": np.zeros(3, int), "size": np.ones(3, int), "duration_s": np.array([0.07, 0.06, 0.05])}
    assert profile_from_batches(spec, slow_small).stage("a").profile == {1: 0.06, 4: 0.06}  # running maximum


def test_profile_drift_closed_form() -> None:
    """The drift is the median of duration / d(size) per stage; stages with too few batches are left out."""
    from pard.profiling import profile_drift

    spec = _spec((1, 1, 1))  # a: d(1) = 0.01, d(4) = 0.02; b: d(1) = 0.02
    batches = {
        "stage": np.array([0, 0, 0, 1, 1]),
        "size": np.array([1, 1, 4, 1, 1]),
        "duration_s": np.array([0.012, 0.013, 0.026, 0.5, 0.5]),
    }
    drift = profile_drift(spec, batches)
    assert set(drift) == {"a"}
    assert drift["a"] == pytest.approx(1.3)  # ratios 1.2, 1.3, 1.3
    assert profile_drift(spec, batches, min_samples=2)["b"] == pytest.approx(25.0)


def test_cache_stale_mark_and_age(tmp_path: Path) -> None:
    """A cached profile marked stale, or older than max_age_s, is measured afresh; otherwise it is reused."""
    import json

    from pard.profiling import mark_stale

    spec = builtin("tm")
    kw: dict[str, Any] = {"workers": [1, 1, 1], "model_options": {"scale": 0.01}, "directory": tmp_path,
                          "warmup": 0, "repeats": 1, "co_load": "none"}
    t_before = time.time()
    first = cached_profile(spec, **kw)
    assert first.path is not None and not first.cached and first.refreshed_because is None
    assert first.measured_at is not None and t_before <= first.measured_at <= time.time()
    again = cached_profile(spec, **kw)
    assert again.cached and again.measured_at == pytest.approx(first.measured_at)
    assert again.age_s is not None and again.age_s >= 0.0
    mark_stale(first.path, "bottleneck ran 40 % slower")
    redo = cached_profile(spec, **kw)
    assert not redo.cached and redo.refreshed_because is not None
    assert "marked stale" in redo.refreshed_because and "40 %" in redo.refreshed_because
    assert cached_profile(spec, **kw).cached  # the fresh measurement cleared the mark
    meta = first.path.with_name(first.path.name[: -len(".yaml")] + ".meta.json")
    doc = json.loads(meta.read_text())
    doc["measured_at"] = time.time() - 13 * 3600
    meta.write_text(json.dumps(doc))
    assert cached_profile(spec, **kw, max_age_s=None).cached
    old = cached_profile(spec, **kw)
    assert not old.cached and old.refreshed_because is not None and "older than 12 h" in old.refreshed_because


def test_measure_profile_runs_without_threadpoolctl(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without threadpoolctl (an embedder with only pard[onnx]) measure_profile still measures, leaving BLAS as it is."""
    import sys

    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # `import threadpoolctl` now raises ImportError
    res = measure_profile(_spec(workers=(1, 1, 1)), workers=[1, 1, 1], warmup=0, repeats=1,
                          batch_sizes={"a": [1], "b": [1], "c": [1]}, co_load="none", model_options={"scale": 0.05})
    assert [sorted(st.profile) for st in res.spec.stages] == [[1], [1], [1]]
    assert all(st.profile[1] > 0 for st in res.spec.stages)
