"""Reference models: the layers against brute-force loops, shapes through each pipeline graph, seeding."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from pard.models import reference as models
from pard.models import INPUT_SHAPE, join_inputs, reference_models, sample_inputs


@dataclass
class _Stage:
    name: str
    successors: list[str] = field(default_factory=list)


@dataclass
class _Spec:
    """A duck-typed pipeline graph (name, successors; topological_order), independent of pard.config."""

    stages: list[_Stage]

    def topological_order(self) -> list[_Stage]:
        return list(self.stages)


def _chain(n: int) -> _Spec:
    names = [f"s{i}" for i in range(n)]
    return _Spec([_Stage(names[i], names[i + 1 : i + 2]) for i in range(n)])


def _diamond() -> _Spec:
    return _Spec([_Stage("a", ["b", "c"]), _Stage("b", ["d"]), _Stage("c", ["d"]), _Stage("d", [])])


def _conv3x3_loops(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, h, wd, c = x.shape
    k = w.reshape(3, 3, c, -1)
    p = np.zeros((n, h + 2, wd + 2, c), dtype=np.float64)
    p[:, 1:-1, 1:-1, :] = x
    out = np.zeros((n, h, wd, k.shape[-1]))
    for i in range(h):
        for j in range(wd):
            for di in range(3):
                for dj in range(3):
                    out[:, i, j, :] += p[:, i + di, j + dj, :] @ k[di, dj]
    return np.maximum(out + b, 0)


def _patchify_loops(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, h, wd, c = x.shape
    k = w.reshape(2, 2, c, -1)
    out = np.zeros((n, h // 2, wd // 2, k.shape[-1]))
    for i in range(h // 2):
        for j in range(wd // 2):
            for di in range(2):
                for dj in range(2):
                    out[:, i, j, :] += x[:, 2 * i + di, 2 * j + dj, :] @ k[di, dj]
    return np.maximum(out + b, 0)


def test_conv3x3_matches_loops() -> None:
    """The im2col 3x3 convolution equals a direct nested-loop convolution with zero padding."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    w = rng.standard_normal((27, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = models._conv3x3(np, x, w, b)
    np.testing.assert_allclose(got, _conv3x3_loops(x, w, b), rtol=1e-4, atol=1e-4)


def test_patchify_matches_loops() -> None:
    """The reshape-based 2x2 stride-2 convolution equals a direct loop over patches."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 6, 2)).astype(np.float32)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    got = models._patchify(np, x, w, b)
    np.testing.assert_allclose(got, _patchify_loops(x, w, b), rtol=1e-4, atol=1e-4)


def test_chain_shapes_feed_each_other() -> None:
    """Each stage's input shape is its predecessor's output shape, entry stages take INPUT_SHAPE."""
    ms = reference_models(_chain(5), scale=0.01)
    names = list(ms)
    assert names == ["s0", "s1", "s2", "s3", "s4"]
    assert ms["s0"].input_shape == INPUT_SHAPE
    x = sample_inputs(3, seed=0)
    for prev, cur in zip(names, names[1:]):
        assert ms[cur].input_shape == ms[prev].output_shape
    for name in names:
        x = ms[name](x)
        assert x.shape == (3, *ms[name].output_shape)
        assert x.dtype == np.float32 and np.isfinite(x).all()
    assert [ms[n].kind for n in names] == ["conv", "conv", "conv", "mlp", "mlp"]


def test_batching_does_not_change_results() -> None:
    """Running a batch gives, row by row, what running each request alone gives."""
    ms = reference_models(_chain(4), scale=0.01)
    x = sample_inputs(4, seed=3)
    for m in ms.values():
        whole = m(x)
        for i in range(len(x)):
            np.testing.assert_allclose(whole[i], m(x[i : i + 1])[0], rtol=1e-4, atol=1e-5)
        x = whole


def test_join_concatenates_predecessors() -> None:
    """A join stage takes its predecessors' maps concatenated along channels, in topological order."""
    ms = reference_models(_diamond(), scale=0.01)
    x = sample_inputs(2, seed=4)
    a = ms["a"](x)
    b, c = ms["b"](a), ms["c"](a)
    assert ms["d"].input_shape == (*b.shape[1:3], b.shape[3] + c.shape[3])
    joined = np.stack([join_inputs([b[i], c[i]]) for i in range(2)])
    np.testing.assert_array_equal(joined[..., : b.shape[3]], b)
    np.testing.assert_array_equal(joined[..., b.shape[3] :], c)
    assert ms["d"](joined).shape == (2, *ms["d"].output_shape)
    flat = join_inputs([np.arange(3.0), np.ones((2, 2))])
    np.testing.assert_array_equal(flat, [0, 1, 2, 1, 1, 1, 1])


def test_seeded_weights() -> None:
    """The same seed gives the same weights; another seed gives different ones."""
    a = reference_models(_chain(2), seed=5, scale=0.01)
    b = reference_models(_chain(2), seed=5, scale=0.01)
    c = reference_models(_chain(2), seed=6, scale=0.01)
    for name in a:
        for p, q in zip(a[name].params, b[name].params):
            np.testing.assert_array_equal(p, q)
    assert not np.array_equal(a["s0"].params[0], c["s0"].params[0])


def test_work_follows_scale_and_profile() -> None:
    """Work per request is scale x relative profile cost x 64 M multiply-adds, within channel rounding."""
    from pard.config import builtin

    spec = builtin("tm")
    ms = reference_models(spec, scale=0.05)
    per_req = {st.name: st.duration(st.max_batch) / st.max_batch for st in spec.stages}
    top = max(per_req.values())
    for name, m in ms.items():
        want = 0.05 * 64e6 * per_req[name] / top
        assert abs(m.macs_per_request - want) / want < 0.15, (name, m.macs_per_request, want)
    equal = reference_models(spec, scale=0.05, balance="equal")
    for m in equal.values():
        assert abs(m.macs_per_request - 0.05 * 64e6) / (0.05 * 64e6) < 0.15


def test_builtin_pipelines_run_end_to_end() -> None:
    """Every built-in pipeline's models accept their predecessors' outputs, joins included."""
    from pard.config import builtin

    for name in ("tm", "lv", "ga", "da"):
        spec = builtin(name)
        ms = reference_models(spec, scale=0.01)
        outs: dict[str, np.ndarray] = {}
        x = sample_inputs(2, seed=1)
        for stage in spec.topological_order():
            preds = spec.predecessors(stage)
            if not preds:
                inp = x
            elif len(preds) == 1:
                inp = outs[preds[0]]
            else:
                order = [p for p in spec.topological_order() if p in preds]
                inp = np.stack([join_inputs([outs[p][i] for p in order]) for i in range(2)])
            outs[stage] = ms[stage](inp)
            assert outs[stage].shape == (2, *ms[stage].output_shape)
            assert np.isfinite(outs[stage]).all()


def test_join_pools_to_the_smallest_map() -> None:
    """Maps of different sides are average-pooled to the smallest side before the channel concat."""
    a = np.arange(4 * 4 * 1, dtype=np.float32).reshape(4, 4, 1)
    b = np.ones((2, 2, 3), dtype=np.float32)
    j = join_inputs([a, b])
    assert j.shape == (2, 2, 4)
    want = np.array([[a[0:2, 0:2].mean(), a[0:2, 2:4].mean()], [a[2:4, 0:2].mean(), a[2:4, 2:4].mean()]])
    np.testing.assert_allclose(j[..., 0], want)
    np.testing.assert_array_equal(j[..., 1:], b)


def test_bad_inputs() -> None:
    """A batch of the wrong shape and bad options get a ValueError naming the problem."""
    ms = reference_models(_chain(1), scale=0.01)
    with pytest.raises(ValueError, match="expects a batch of shape"):
        ms["s0"](np.zeros((2, 8, 8, 3), np.float32))
    with pytest.raises(ValueError, match="scale"):
        reference_models(_chain(1), scale=float("nan"))
    with pytest.raises(ValueError, match="balance"):
        reference_models(_chain(1), balance="fair")
    with pytest.raises(ValueError, match="n >= 1"):
        sample_inputs(0)
    with pytest.raises(ValueError, match="at least one part"):
        join_inputs([])


@pytest.mark.parametrize("scale", [1000.0, 1e9, 1e300])
def test_huge_scale_refused_before_allocating(scale: float) -> None:
    """A scale whose weights exceed MAX_MODEL_BYTES is a PardError naming scale, raised before any weight is allocated."""
    import tracemalloc

    import pard

    tracemalloc.start()
    try:
        with pytest.raises(pard.PardError, match="scale"):
            reference_models("lv", scale=scale)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_weights_at_a_moderate_scale_match_the_plan() -> None:
    """At scale 10 the weights are allocated, and their bytes stay far under MAX_MODEL_BYTES."""
    ms = reference_models("tm", scale=10.0)
    nbytes = sum(p.nbytes for m in ms.values() for p in m.params)
    assert 0 < nbytes < models.MAX_MODEL_BYTES
