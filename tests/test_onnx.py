"""OnnxExecutor and the ONNX stage models: against onnx's reference evaluator and closed forms, shapes, errors."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install 'pard[onnx]')")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'pard[onnx]')")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import pard  # noqa: E402
from pard.executors import OnnxExecutor  # noqa: E402
from pard.executors.onnx import cuda_provider_available  # noqa: E402
from pard.models.onnx import ONNX_INPUT_SHAPE, onnx_models, stage_kind  # noqa: E402


def _affine_model(w: np.ndarray, b: np.ndarray, *, batch: object = "N", two_inputs: bool = False) -> bytes:
    """y = x @ w + b as an ONNX graph (MatMul + Add), batch axis ``batch``."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, w.shape[0]])]
    if two_inputs:
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 1]))
    g = helper.make_graph(nodes, "affine", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, w.shape[1]])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_onnx_executor_computes_the_closed_form() -> None:
    """A MatMul+Add graph through OnnxExecutor gives x @ w + b per request, in order."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    ex = OnnxExecutor(_affine_model(w, b), providers="cpu")
    assert ex.payload_shape == (5,) and ex.device == "cpu"
    xs = [rng.standard_normal(5).astype(np.float32) for _ in range(7)]
    out = ex(xs)
    assert len(out) == 7
    np.testing.assert_allclose(np.stack(out), np.stack(xs) @ w + b, rtol=1e-5, atol=1e-5)
    assert ex([]) == []


def test_onnx_executor_errors_name_the_problem() -> None:
    """Fixed batch axes, ambiguous inputs, bad names, providers and payload shapes are clear errors."""
    w, b = np.ones((2, 2), np.float32), np.zeros(2, np.float32)
    with pytest.raises(pard.ConfigError, match="fixed batch axis of 1"):
        OnnxExecutor(_affine_model(w, b, batch=1))
    with pytest.raises(pard.ConfigError, match="has 2 inputs"):
        OnnxExecutor(_affine_model(w, b, two_inputs=True))
    with pytest.raises(pard.ConfigError, match="output_name 'nope'"):
        OnnxExecutor(_affine_model(w, b), output_name="nope")
    with pytest.raises(pard.ConfigError, match="providers must be"):
        OnnxExecutor(_affine_model(w, b), providers="tpu")
    with pytest.raises(pard.ConfigError, match="intra_op_threads"):
        OnnxExecutor(_affine_model(w, b), intra_op_threads=0)
    with pytest.raises(pard.ConfigError, match="does not exist"):
        OnnxExecutor("/nonexistent/model.onnx")
    with pytest.raises(pard.ConfigError, match="could not load"):
        OnnxExecutor(b"not an onnx model")
    if not cuda_provider_available():
        with pytest.raises(pard.ConfigError, match="providers='cuda'"):
            OnnxExecutor(_affine_model(w, b), providers="cuda")
    ex = OnnxExecutor(_affine_model(w, b))
    with pytest.raises(ValueError, match=r"payload 1 of the batch has shape \(3,\)"):
        ex([np.zeros(2), np.zeros(3)])


def test_one_session_per_worker_thread_with_the_bound_thread_count() -> None:
    """bind() makes one session per worker with pard's cores per worker; each calling thread keeps its own."""
    w, b = np.eye(3, dtype=np.float32), np.zeros(3, np.float32)
    ex = OnnxExecutor(_affine_model(w, b))
    stage = pard.StageSpec(name="s", profile={1: 0.001}, max_batch=4)
    ex.bind(stage, workers=3, threads=2)
    assert ex.sessions == 3 and ex.intra_op_threads == 2
    used: list[int] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        for _ in range(5):
            out = ex([np.full(3, float(k), np.float32)])
            assert np.array_equal(out[0], np.full(3, float(k), np.float32))
        with lock:
            used.append(id(ex._local.session))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(used)) == 3 and ex.sessions == 3  # three threads, three distinct sessions, none extra
    fixed = OnnxExecutor(_affine_model(w, b), intra_op_threads=1)
    fixed.bind(stage, workers=1, threads=4)
    assert fixed.intra_op_threads == 1  # an explicit count wins over pard's


def test_stage_kinds_of_the_builtin_pipelines() -> None:
    """Stage names map to the documented kinds (detector / classifier / recogniser)."""
    assert [stage_kind(s.name) for s in pard.config.builtin("tm").stages] == ["detector", "classifier", "recogniser"]
    assert [stage_kind(s.name) for s in pard.config.builtin("lv").stages] == [
        "detector", "detector", "detector", "classifier", "classifier"]


@pytest.mark.parametrize("pipeline", ["tm", "lv", "da"])
def test_stage_models_chain_and_match_onnx_reference(pipeline: str, tmp_path: Path) -> None:
    """Each stage's output shape is the next one's input (joins too); ORT agrees with onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    from pard.models import join_inputs

    spec = pard.config.builtin(pipeline)
    models = onnx_models(spec, scale=0.02, directory=tmp_path)
    assert list(models) == list(spec.topological_order())
    rng = np.random.default_rng(1)
    x = rng.random((2, *ONNX_INPUT_SHAPE), dtype=np.float32)
    outs: dict[str, list[np.ndarray]] = {}
    for name, m in models.items():
        preds = sorted(spec.predecessors(name), key=list(models).index)
        if not preds:
            inp = list(x)
        elif len(preds) == 1:
            inp = outs[preds[0]]
        else:
            inp = [join_inputs([outs[p][i] for p in preds]) for i in range(2)]
        assert tuple(inp[0].shape) == m.input_shape, name
        got = OnnxExecutor(m.path, providers="cpu")(inp)
        assert tuple(got[0].shape) == m.output_shape, name
        ref = ReferenceEvaluator(str(m.path)).run(None, {"x": np.stack(inp)})[0]
        np.testing.assert_allclose(np.stack(got), ref, rtol=2e-3, atol=2e-4, err_msg=name)
        outs[name] = got


def test_stage_models_are_seeded_cached_and_batch_independent(tmp_path: Path) -> None:
    """Same seed: same files, reused from the cache; other seed: other weights; a batch's row i = request i alone."""
    a = onnx_models("tm", scale=0.02, directory=tmp_path)
    stamp = {n: m.path.stat().st_mtime_ns for n, m in a.items()}
    again = onnx_models("tm", scale=0.02, directory=tmp_path)
    assert {n: m.path.stat().st_mtime_ns for n, m in again.items()} == stamp
    other = onnx_models("tm", seed=1, scale=0.02, directory=tmp_path)
    assert other["vehicle_detect"].path != a["vehicle_detect"].path
    assert other["vehicle_detect"].path.read_bytes() != a["vehicle_detect"].path.read_bytes()
    ex = OnnxExecutor(a["vehicle_detect"].path, providers="cpu")
    xs = list(np.random.default_rng(2).random((5, *ONNX_INPUT_SHAPE), dtype=np.float32))
    batched = ex(xs)
    for i, xi in enumerate(xs):
        np.testing.assert_allclose(batched[i], ex([xi])[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(pard.ConfigError, match="scale"):
        onnx_models("tm", scale=0.0, directory=tmp_path)
    with pytest.raises(pard.ConfigError, match="past MAX_MODEL_BYTES"):  # refused before any weight exists
        onnx_models("tm", scale=1000.0, directory=tmp_path / "huge")
    assert not (tmp_path / "huge").exists()


def test_tm_on_onnx_runtime_through_pard(tmp_path: Path) -> None:
    """tm's ONNX stages under pard.Runtime: every request terminal, outputs equal the chain run directly."""
    spec = pard.config.builtin("tm")
    models = onnx_models(spec, scale=0.02, directory=tmp_path)
    stages = {n: OnnxExecutor(m.path, payload_shape=m.input_shape) for n, m in models.items()}
    xs = np.random.default_rng(4).random((40, *ONNX_INPUT_SHAPE), dtype=np.float32)
    with pard.Runtime(spec, stages, policy="pard", workers=[1, 1, 1]) as rt:
        futs = [rt.submit(x, slo=30.0) for x in xs]
        got = [f.result(timeout=60) for f in futs]
    c = rt.counts()
    assert c["on_time"] == 40 and c["submitted"] == 40
    want = list(xs)
    for n, m in models.items():
        want = OnnxExecutor(m.path, providers="cpu")(want)
    np.testing.assert_allclose(np.stack(got), np.stack(want), rtol=1e-3, atol=1e-4)


@pytest.mark.skipif(not cuda_provider_available(), reason="onnxruntime's CUDA provider is not available")
def test_cuda_provider_matches_cpu(tmp_path: Path) -> None:
    """On a GPU, the CUDA provider's outputs match the CPU provider's for a tm stage."""
    m = onnx_models("tm", scale=0.05, directory=tmp_path)["vehicle_detect"]
    xs = list(np.random.default_rng(5).random((4, *ONNX_INPUT_SHAPE), dtype=np.float32))
    gpu = OnnxExecutor(m.path, providers="cuda")
    assert gpu.device == "gpu"
    np.testing.assert_allclose(np.stack(gpu(xs)), np.stack(OnnxExecutor(m.path, providers="cpu")(xs)),
                               rtol=1e-2, atol=1e-3)


def test_stage_set_builds_either_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stage_set gives one executor per stage of the kind asked, with the entry shape; a bad kind is a ConfigError."""
    monkeypatch.setenv("PARD_CACHE_DIR", str(tmp_path))
    from pard.executors import ArrayExecutor
    from pard.models import INPUT_SHAPE, stage_set

    onnx_set = stage_set("tm", "onnx", scale=0.02)
    assert list(onnx_set.executors) == ["vehicle_detect", "vehicle_classify", "plate_ocr"]
    assert all(isinstance(e, OnnxExecutor) for e in onnx_set.executors.values())
    assert onnx_set.entry_shape == ONNX_INPUT_SHAPE
    numpy_set = stage_set("tm", "numpy", scale=0.1)
    assert all(isinstance(e, ArrayExecutor) for e in numpy_set.executors.values())
    assert numpy_set.entry_shape == INPUT_SHAPE
    with pytest.raises(pard.ConfigError, match="models must be one of onnx, numpy, got 'torch'"):
        stage_set("tm", "torch")


def test_models_option_defaults_to_onnx_and_falls_back_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    """--models: onnx by default; without onnxruntime the default becomes numpy with a note, an explicit onnx a UsageError."""
    import argparse

    import pard.models
    from pard.cli.parsers import models_arg

    notes: list[str] = []

    class Err:
        def print(self, msg: str) -> None:
            notes.append(msg)

    assert models_arg(argparse.Namespace(models=None), Err()) == "onnx"
    assert models_arg(argparse.Namespace(models="numpy"), Err()) == "numpy"
    monkeypatch.setattr(pard.models, "onnx_installed", lambda: False)
    assert models_arg(argparse.Namespace(models=None), Err()) == "numpy"
    assert len(notes) == 1 and "pip install 'pard[onnx]'" in notes[0]
    with pytest.raises(pard.errors.UsageError, match="--models onnx needs the onnx and onnxruntime packages"):
        models_arg(argparse.Namespace(models="onnx"), Err())


def test_engine_executors_are_public_names() -> None:
    """pard.OnnxExecutor and pard.TritonExecutor resolve lazily to the executors package's classes."""
    assert pard.OnnxExecutor is OnnxExecutor
    from pard.executors.triton import TritonExecutor

    assert pard.TritonExecutor is TritonExecutor
    assert {"OnnxExecutor", "TritonExecutor"} <= set(dir(pard))
