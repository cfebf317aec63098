"""Executors: stack/compute/split, errors, plain callables, and the CuPy path where a GPU exists."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pard.executors import ArrayExecutor, CallableExecutor, as_executor, gpu_available


def test_array_executor_stacks_and_splits() -> None:
    """fn sees one (B, ...) array and each request gets its own row of the result."""
    seen: list[tuple[int, ...]] = []

    def fn(batch: np.ndarray) -> np.ndarray:
        seen.append(batch.shape)
        return batch.sum(axis=(1, 2))[:, None] * np.arange(3)

    ex = ArrayExecutor(fn, device="cpu")
    payloads = [np.full((2, 2), float(i)) for i in range(5)]
    out = ex(payloads)
    assert seen == [(5, 2, 2)]
    assert len(out) == 5
    for i, o in enumerate(out):
        np.testing.assert_array_equal(o, [0.0, 4.0 * i, 8.0 * i])
    assert ex([]) == []


def test_array_executor_casts_to_dtype() -> None:
    """Payloads are stacked in the executor's dtype (float32 by default)."""
    ex = ArrayExecutor(lambda b: b, device="cpu")
    out = ex([np.array([1, 2], dtype=np.int64), [3, 4]])
    assert out[0].dtype == np.float32
    np.testing.assert_array_equal(np.stack(out), [[1, 2], [3, 4]])


def test_array_executor_errors() -> None:
    """Mismatched payloads, a wrong-length result and fn's own exception all raise to the caller."""
    ex = ArrayExecutor(lambda b: b[:1], device="cpu")
    with pytest.raises(ValueError, match="expected first axis 2"):
        ex([np.zeros(2), np.zeros(2)])
    with pytest.raises(ValueError):
        ArrayExecutor(lambda b: b, device="cpu")([np.zeros(2), np.zeros(3)])

    def boom(b: np.ndarray) -> np.ndarray:
        raise RuntimeError("model exploded")

    with pytest.raises(RuntimeError, match="model exploded"):
        ArrayExecutor(boom, device="cpu")([np.zeros(1)])
    with pytest.raises(ValueError, match="device"):
        ArrayExecutor(lambda b: b, device="tpu")
    with pytest.raises(TypeError, match="callable"):
        ArrayExecutor(42)  # type: ignore[arg-type]


def test_callable_executor_modes() -> None:
    """A batched callable maps list to list; per_request calls fn once per payload."""
    calls: list[int] = []

    def per(x: int) -> int:
        calls.append(x)
        return x * 10

    assert list(CallableExecutor(per, per_request=True)([1, 2, 3])) == [10, 20, 30]
    assert calls == [1, 2, 3]
    assert list(CallableExecutor(lambda xs: [x + 1 for x in xs])([1, 2])) == [2, 3]
    with pytest.raises(ValueError, match="returned 1 outputs for 2 payloads"):
        CallableExecutor(lambda xs: [0])([1, 2])
    with pytest.raises(ValueError, match="expected a sequence"):
        CallableExecutor(lambda xs: 5)([1])
    # sized, with as many items as payloads, but not one output per payload (a new user's dict and str)
    for wrong in ({0: "a", 1: "b"}, "ab", b"ab"):
        with pytest.raises(ValueError, match=f"returned a {type(wrong).__name__}, expected a sequence"):
            CallableExecutor(lambda xs, w=wrong: w)([1, 2])
    assert list(CallableExecutor(lambda xs: np.array([7, 8]))([1, 2])) == [7, 8]  # an array is one
    assert isinstance(as_executor(lambda xs: xs), CallableExecutor)
    ex = ArrayExecutor(lambda b: b, device="cpu")
    assert as_executor(ex) is ex
    with pytest.raises(TypeError, match="must be callable"):
        as_executor("not a function")


def test_array_executor_thread_safe() -> None:
    """Several worker threads calling one executor each get their own correct rows."""
    ex = ArrayExecutor(lambda b: b * 2.0, device="cpu")
    errors: list[str] = []

    def worker(k: int) -> None:
        for j in range(200):
            vals = [np.full(4, float(k * 1000 + j + i)) for i in range(3)]
            out = ex(vals)
            for i, o in enumerate(out):
                if not np.array_equal(o, 2.0 * vals[i].astype(np.float32)):
                    errors.append(f"{k} {j} {i}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.skipif(not gpu_available(), reason="CuPy and a CUDA GPU are not available")
def test_cupy_path_matches_numpy() -> None:
    """On a GPU, the reference model run through ArrayExecutor matches the NumPy result, per worker stream."""
    import cupy

    from pard.models import sample_inputs
    from pard.models.reference import _build

    m = _build("s0", (32, 32, 3), np.random.default_rng(0), 0.25)
    gpu = ArrayExecutor(m, device="gpu")
    assert gpu.device == "gpu"
    x = sample_inputs(6, seed=7)
    want = m(x)
    results: dict[int, list[object]] = {}

    def worker(k: int) -> None:
        results[k] = list(gpu(list(x)))
        results[-k - 1] = [gpu._local.stream]  # keep the stream object alive for the comparison

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        got = np.stack([cupy.asnumpy(o) for o in results[k]])
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    assert results[-1][0] is not results[-2][0]  # one stream per worker thread
    host = ArrayExecutor(m, device="gpu", to_host=True)(list(x[:2]))
    assert isinstance(host[0], np.ndarray)
    # device outputs feed the next stage's executor without a trip through the host
    m2 = _build("s1", m.output_shape, np.random.default_rng(1), 0.05)
    on_device = gpu(list(x))
    assert isinstance(on_device[0], cupy.ndarray)
    second = ArrayExecutor(m2, device="gpu", to_host=True)(on_device)
    np.testing.assert_allclose(np.stack(second), m2(want), rtol=1e-3, atol=1e-3)


def test_array_executor_shape_error_names_payload_and_shapes() -> None:
    """A payload of another shape raises ValueError naming its index and both shapes, before fn runs."""
    calls: list[int] = []

    def fn(b: np.ndarray) -> np.ndarray:
        calls.append(len(b))
        return b

    ex = ArrayExecutor(fn, device="cpu")
    with pytest.raises(ValueError, match=r"payload 2 of the batch has shape \(4,\), expected payload 0's shape \(3,\)"):
        ex([np.zeros(3), np.zeros(3), np.zeros(4)])
    fixed = ArrayExecutor(fn, device="cpu", payload_shape=(2,))
    with pytest.raises(ValueError, match=r"payload 0 of the batch has shape \(3,\), expected payload_shape \(2,\)"):
        fixed([np.zeros(3), np.zeros(3)])
    assert calls == []


def test_array_executor_bad_payload_shape_named() -> None:
    """ArrayExecutor(payload_shape="x") raises TypeError naming payload_shape and the value."""
    from pard.executors import ArrayExecutor

    with pytest.raises(TypeError, match=r"payload_shape.*'x'"):
        ArrayExecutor(lambda b: b, device="cpu", payload_shape="x")


def test_runtime_binds_engine_executors_and_passes_the_budget() -> None:
    """The runtime calls bind(stage, workers, threads) once per stage and hands accepts_budget executors the batch's budget."""
    import pard
    from pard.executors import BatchExecutor

    class Probe(BatchExecutor):
        accepts_budget = True

        def __init__(self) -> None:
            self.bound: list[tuple[str, int, int | None]] = []
            self.budgets: list[float] = []

        def bind(self, stage: object, *, workers: int, threads: int | None = None) -> None:
            self.bound.append((stage.name, workers, threads))  # type: ignore[attr-defined]

        def __call__(self, payloads: list[object], *, budget_s: float | None = None) -> list[object]:
            assert budget_s is not None
            self.budgets.append(budget_s)
            return list(payloads)

    spec = pard.PipelineSpec(name="hooks", slo=5.0, stages=[
        pard.StageSpec(name="a", profile={1: 0.001, 4: 0.002}, max_batch=4, workers=2, successors=["b"]),
        pard.StageSpec(name="b", profile={1: 0.001, 4: 0.002}, max_batch=4, workers=1)])
    a, b = Probe(), Probe()
    with pard.Runtime(spec, {"a": a, "b": b}, policy="naive", blas_threads=None) as rt:
        assert a.bound == [("a", 2, None)] and b.bound == [("b", 1, None)]
        outs = [rt.submit(np.full(2, float(i)), slo=3.0).result(timeout=30) for i in range(5)]
    assert [float(o[0]) for o in outs] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert len(a.budgets) >= 1 and len(b.budgets) >= 1
    assert all(0.0 < x <= 3.0 for x in a.budgets + b.budgets)  # deadline - now of a fresh 3 s SLO
