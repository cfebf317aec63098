"""TritonExecutor against a real Triton server (PyTriton, CPU only): the tm pipeline end to end through pard."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is not installed (pip install 'pard[triton]')")
pytest.importorskip("onnx", reason="onnx is not installed (pip install 'pard[onnx]')")
pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'pard[onnx]')")

import tritonclient.grpc as grpcclient  # noqa: E402

import pard  # noqa: E402
from pard.executors import OnnxExecutor, TritonExecutor  # noqa: E402
from pard.models.onnx import onnx_models  # noqa: E402

from _pytriton import PyTritonServer, venv_python  # noqa: E402

TM = pard.config.builtin("tm")
FLAKY_SHAPE = [4]


def _tm_models(root: Path) -> dict[str, Any]:
    return onnx_models(TM, scale=0.05, directory=root)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One PyTriton server for the module: tm's three ONNX stages, a flaky model and a misconfigured one."""
    python, why = venv_python()
    if python is None:
        if os.environ.get("PARD_REQUIRE_TRITON") == "1":  # CI prepared the venv: not starting is a failure
            pytest.fail(f"PARD_REQUIRE_TRITON=1 but no Triton server can start: {why}")
        pytest.skip(f"no Triton server can start here: {why}")
    models = _tm_models(tmp_path_factory.mktemp("onnx"))
    spec = [{"name": n, "kind": "onnx", "path": str(m.path), "max_batch": TM.stage(n).max_batch, "delay_us": 0}
            for n, m in models.items()]
    spec += [{"name": "flaky", "kind": "flaky", "shape": FLAKY_SHAPE, "max_batch": 8, "delay_us": 0, "sleep_s": 2.0},
             {"name": "delayed", "kind": "flaky", "shape": FLAKY_SHAPE, "max_batch": 8, "delay_us": 500}]
    srv = PyTritonServer(python, spec)
    try:
        srv.__enter__()
    except RuntimeError as exc:  # the process exited or never became ready: its log says why
        if os.environ.get("PARD_REQUIRE_TRITON") == "1":
            raise
        pytest.skip(f"the PyTriton server could not start here: {exc}")
    try:
        srv.onnx = models  # type: ignore[attr-defined]
        yield srv
    finally:
        srv.__exit__(None, None, None)


def _stats(url: str, model: str) -> tuple[int, int]:
    """(inference_count, execution_count) of ``model`` on the server: requests and batches it ran."""
    c = grpcclient.InferenceServerClient(url)
    try:
        st = c.get_inference_statistics(model, as_json=True)["model_stats"][0]
    finally:
        c.close()
    return int(st.get("inference_count", 0)), int(st.get("execution_count", 0))


def _settled_stats(url: str, model: str, expected_inferences: int, limit_s: float = 10.0) -> tuple[int, int]:
    """:func:`_stats` once its inference count reaches ``expected_inferences`` (at most ``limit_s``):
    the server may answer a request before its statistics count it (seen at load 8 on 2 cores)."""
    deadline = time.monotonic() + limit_s
    while True:
        got = _stats(url, model)
        if got[0] >= expected_inferences or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_start_up_check_rejects_a_config_that_hides_pards_decisions(server: Any) -> None:
    """A dynamic-batcher delay or a max_batch_size unequal to the stage's max_batch is a ConfigError naming both."""
    with pytest.raises(pard.ConfigError, match="max_queue_delay_microseconds 500"):
        TritonExecutor(server.url, "delayed")
    with pytest.raises(pard.ConfigError, match="max_batch_size 8 but the stage's max_batch is 4"):
        TritonExecutor(server.url, "flaky", max_batch=4)
    ex = TritonExecutor(server.url, "vehicle_detect")
    try:
        wrong = pard.StageSpec(name="vehicle_detect", profile={1: 0.01, 8: 0.02}, max_batch=8)
        with pytest.raises(pard.ConfigError, match="'vehicle_detect' max_batch is 8"):
            ex.bind(wrong, workers=1)
        ex.bind(TM.stage("vehicle_detect"), workers=1)  # 16 == 16: accepted
    finally:
        ex.close()


def test_unreachable_server_is_a_bounded_config_error() -> None:
    """No server at the URL: construction fails within startup_timeout_s with a ConfigError, not a hang."""
    with pytest.raises(pard.ConfigError, match="not ready within startup_timeout_s=0.5"):
        TritonExecutor("127.0.0.1:9", "m", startup_timeout_s=0.5)


def test_server_error_and_timeout_fail_only_that_batch(server: Any) -> None:
    """A server error and a call past its budget raise ExecutorError; the next batch on the same thread succeeds."""
    ex = TritonExecutor(server.url, "flaky")
    try:
        ok = [np.full(4, float(i), np.float32) for i in range(3)]
        np.testing.assert_array_equal(np.stack(ex(ok)), 2 * np.stack(ok))
        with pytest.raises(pard.ExecutorError, match="server returned an error"):
            ex([np.full(4, -1.0, np.float32), ok[0]])
        with pytest.raises(pard.ExecutorError, match="timeout of 0.200 s"):
            ex([np.full(4, 1000.0, np.float32)], budget_s=0.2)
        np.testing.assert_array_equal(np.stack(ex(ok, budget_s=30.0)), 2 * np.stack(ok))
        with pytest.raises(ValueError, match="exceeds the model's max_batch_size 8"):
            ex([ok[0]] * 9)
    finally:
        ex.close()


def test_shared_memory_carries_the_input_on_a_local_server(server: Any) -> None:
    """On 127.0.0.1 the input goes through a registered shared-memory region, and the outputs are right."""
    ex = TritonExecutor(server.url, "flaky", shared_memory="on")
    seen: list[list[str]] = []
    try:
        assert ex.shared_memory
        xs = [np.arange(4, dtype=np.float32) + i for i in range(5)]
        np.testing.assert_array_equal(np.stack(ex(xs)), 2 * np.stack(xs))
        c = grpcclient.InferenceServerClient(server.url)
        status = c.get_system_shared_memory_status(as_json=True)
        c.close()
        seen.append([r["name"] for r in status.get("regions", {}).values()] if isinstance(status.get("regions"), dict)
                    else [r["name"] for r in status.get("regions", [])])
        assert any(name.startswith("pard-") for name in seen[0])
    finally:
        ex.close()
    off = TritonExecutor(server.url, "flaky", shared_memory="off")
    try:
        assert not off.shared_memory
        np.testing.assert_array_equal(off([np.ones(4, np.float32)])[0], np.full(4, 2.0, np.float32))
    finally:
        off.close()


def _triton_stages(url: str, **kw: Any) -> dict[str, TritonExecutor]:
    return {st.name: TritonExecutor(url, st.name, **kw) for st in TM.stages}


def test_tm_through_pard_on_triton_conservation_and_drops(server: Any) -> None:
    """tm profiled on Triton, then overloaded: conservation exact, Triton ran exactly pard's batches, outputs right."""
    # budget_timeout=False: a batch that overruns its deadlines ends late (not failed), so every
    # request sent is executed by the server and the counts below are exact
    stages = _triton_stages(server.url, budget_timeout=False)
    try:
        shapes = {n: tuple(m.input_shape) for n, m in server.onnx.items()}

        def maker(shape: tuple[int, ...], seed: int) -> Any:
            rng = np.random.default_rng(seed)
            return lambda b: list(rng.random((b, *shape), dtype=np.float32))

        ones = TM.to_dict()
        for st in ones["stages"]:
            st["workers"] = 1
        spec1 = pard.PipelineSpec.from_dict(ones)
        from pard.profiling import measure_profile

        prof = measure_profile(
            spec1, stages, inputs={n: maker(s, i) for i, (n, s) in enumerate(shapes.items())},
            warmup=1, repeats=2, co_load="none", batch_sizes={st.name: [1, 4, st.max_batch] for st in TM.stages})
        spec = prof.spec
        for st in spec.stages:  # measured: positive and non-decreasing in b
            ds = [st.profile[b] for b in sorted(st.profile)]
            assert ds[0] > 0 and ds == sorted(ds)
        before = {n: _stats(server.url, n) for n in stages}
        n_req, n_easy = 300, 8
        rng = np.random.default_rng(3)
        xs = rng.random((n_req, *shapes["vehicle_detect"]), dtype=np.float32)
        with pard.Runtime(spec, stages, policy="pard", workers=[1, 1, 1]) as rt:
            # first a few with a generous SLO, whose outputs are checked below
            easy = [rt.submit(x, slo=60.0) for x in xs[:n_easy]]
            results = {i: f.result(timeout=120) for i, f in enumerate(easy)}
            # then a burst of everything at once with an SLO of about a tenth of the time the pipeline
            # needs for it: pard must drop a large share, and decide where. The time is taken at the speed
            # the easy batches just ran (bound_capacity), not the profile's alone: a profile measured on a
            # busier machine ran 2-3x slow, and at its word the whole burst fit (no drops; failed twice).
            # The batches pard forms are at most each stage's batch_limit (the profile's best batch size).
            cap = rt.bound_capacity()
            fast = {n: max(1.0, s or 1.0) for n, s in cap["speedup_by_stage"].items()}
            path_s = sum(st.duration(st.batch_limit) / fast[st.name] for st in spec.stages)
            slo = 2 * path_s + n_req / cap["req_s"] / 10
            futs = [rt.submit(x, slo=slo) for x in xs[n_easy:]]
            drops: dict[int, tuple[str, str]] = {}
            for i, f in enumerate(futs, start=n_easy):
                try:
                    f.result(timeout=120)
                except pard.Dropped as d:
                    drops[i] = (d.stage, d.reason)
        c = rt.counts()
        assert c["submitted"] == n_req
        assert c["submitted"] == c["on_time"] + c["late"] + c["dropped"] + c["rejected"] + c["failed"]
        assert c["failed"] == 0 and c["rejected"] == 0 and c["pending"] == 0
        assert c["dropped"] == len(drops) > 0 and c["on_time"] >= n_easy
        assert {stage for stage, _ in drops.values()} <= {st.name for st in TM.stages}
        # Triton executed exactly the requests and batches pard sent to each stage, nothing else
        b = rt.batches()
        for k, name in enumerate(stages):
            inf0, ex0 = before[name]
            here = b["stage"] == k
            inf1, ex1 = _settled_stats(server.url, name, inf0 + int(b["size"][here].sum()))
            assert inf1 - inf0 == int(b["size"][here].sum()), name
            assert ex1 - ex0 == int(here.sum()), name  # one worker per stage: no merging in Triton
        # a request pard dropped at stage k never reached stage k's model: per stage, the requests
        # executed = those that entered it minus those dropped there (or before)
        entered = n_req
        for k, name in enumerate(stages):
            dropped_here = sum(1 for s, _ in drops.values() if s == name)
            assert int(b["size"][b["stage"] == k].sum()) == entered - dropped_here, name
            entered -= dropped_here
        # the answers are the tm chain's, run locally by ONNX Runtime
        local = {n: OnnxExecutor(m.path, providers="cpu") for n, m in server.onnx.items()}
        some = sorted(results)
        want = [xs[i] for i in some]
        for name in stages:
            want = local[name](want)
        np.testing.assert_allclose(np.stack([results[i] for i in some]), np.stack(want), rtol=1e-3, atol=1e-4)
    finally:
        for ex in stages.values():
            ex.close()


def test_runtime_fails_exactly_the_batches_the_server_failed(server: Any) -> None:
    """Through the runtime, a server error fails its batch's requests only; the worker serves the next ones."""
    spec = pard.PipelineSpec(name="one", slo=30.0, stages=[
        pard.StageSpec(name="flaky", profile={1: 0.005, 8: 0.01}, max_batch=8, workers=1)])
    ex = TritonExecutor(server.url, "flaky", timeout_s=10.0)
    try:
        with pard.Runtime(spec, {"flaky": ex}, policy="naive") as rt:
            outcomes = []
            for i in range(6):  # one at a time, so each batch holds one request
                x = np.full(4, -1.0 if i % 3 == 0 else float(i), np.float32)
                f = rt.submit(x)
                try:
                    outcomes.append(("ok", f.result(timeout=60)))
                except pard.ExecutorError as e:
                    outcomes.append(("failed", str(e)))
        c = rt.counts()
        assert [o[0] for o in outcomes] == ["failed", "ok", "ok", "failed", "ok", "ok"]
        assert c["failed"] == 2 and c["on_time"] + c["late"] == 4
        assert c["submitted"] == c["on_time"] + c["late"] + c["dropped"] + c["rejected"] + c["failed"]
    finally:
        ex.close()


def test_runtime_turns_a_batch_past_its_budget_into_failed_requests(server: Any) -> None:
    """Through the runtime the client timeout is the batch's remaining budget: a slow call fails its batch, bounded."""
    spec = pard.PipelineSpec(name="one", slo=0.3, stages=[
        pard.StageSpec(name="flaky", profile={1: 0.005, 8: 0.01}, max_batch=8, workers=1)])
    ex = TritonExecutor(server.url, "flaky")
    try:
        with pard.Runtime(spec, {"flaky": ex}, policy="naive") as rt:
            slow = rt.submit(np.full(4, 1000.0, np.float32))  # the model sleeps 2 s on this one
            with pytest.raises(pard.ExecutorError, match="remaining budget"):
                slow.result(timeout=60)
            fine = rt.submit(np.full(4, 1.0, np.float32), slo=30.0)
            np.testing.assert_array_equal(fine.result(timeout=60), np.full(4, 2.0, np.float32))
        c = rt.counts()
        assert c["failed"] == 1 and c["on_time"] == 1 and c["submitted"] == 2
    finally:
        ex.close()


def test_many_workers_share_one_executor(server: Any) -> None:
    """Threads calling one TritonExecutor at once each get their own rows back (one shm region per thread)."""
    ex = TritonExecutor(server.url, "flaky")
    errors: list[str] = []

    def worker(k: int) -> None:
        for j in range(10):
            xs = [np.full(4, float(k * 100 + j), np.float32), np.full(4, float(k), np.float32)]
            got = np.stack(ex(xs))
            if not np.array_equal(got, 2 * np.stack(xs)):
                errors.append(f"{k}/{j}")

    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == [] and not any(t.is_alive() for t in threads)
    finally:
        ex.close()
