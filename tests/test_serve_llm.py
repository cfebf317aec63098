"""An LLM pipeline served by ``pard serve``: the request's tokens come from its v2 ``parameters`` (HTTP and
gRPC), the llm stage runs on its engine (the profiled stand-in here), the answer carries the generated
token ids, and pipelines without executors give an llm stage the stand-in engine, not a DNN network.

A real server process on 127.0.0.1 (HTTP, httpx) and a real grpcio front (tritonclient), each bounded."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

sys.path.insert(0, str(Path(__file__).parent))

import pard  # noqa: E402
from pard.errors import ConfigError  # noqa: E402

from _serve import ServerProcess  # noqa: E402

SLEEP = {"executor": "pard.serve.factories:sleep_profile"}
LLM = {"executor": "pard.serve.factories:profiled_llm"}


def _doc(**server: Any) -> dict[str, Any]:
    """embed (sleeps its profile, echoes the token ids) -> generate (llm, the profiled stand-in)."""
    return {
        "pipeline": {"name": "chat", "slo": 5.0, "stages": [
            {"name": "embed", "profile": {1: 0.002, 8: 0.004}, "max_batch": 8, "successors": ["generate"]},
            {"name": "generate", "kind": "llm", "prefill": {"base": 0.002, "per_token": 1e-5},
             "decode": {1: 0.002, 8: 0.003}, "max_seqs": 8, "kv_tokens": 40, "max_output_tokens": 8},
        ]},
        "policy": "pard", "stages": {"embed": SLEEP, "generate": LLM},
        "inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [-1]}],
        "server": {"host": "127.0.0.1", "port": 0, "log_level": "warning", "drain_grace_s": 0.0, **server},
    }


def _body(ids: list[int], **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [len(ids)], "data": ids}]}
    if params:
        body["parameters"] = params
    return body


def test_http_tokens_from_parameters_and_the_generated_ids_come_back(tmp_path: Path) -> None:
    """max_tokens caps the answer's length; the prompt's length defaults to the input's token ids (15 ids
    plus the cap 8 fit kv_tokens 40, 35 do not); bad values are a 400 naming the field; the report counts
    every answer once."""
    with ServerProcess(tmp_path, _doc()) as srv:
        url = srv.url + "/v2/models/chat/infer"
        meta = httpx.get(srv.url + "/v2/models/chat", timeout=30.0).json()
        assert meta["outputs"] == [{"name": "OUTPUT0", "datatype": "INT64", "shape": [-1]}]
        r = httpx.post(url, json=_body(list(range(15)), max_tokens=3), timeout=30.0)
        assert r.status_code == 200, r.text
        out = r.json()["outputs"][0]
        assert out["datatype"] == "INT64" and out["shape"] == [3] and len(out["data"]) == 3
        r = httpx.post(url, json=_body([1, 2]), timeout=30.0)  # no cap: the stage's max_output_tokens
        assert r.status_code == 200 and r.json()["outputs"][0]["shape"] == [8]
        r = httpx.post(url, json=_body(list(range(35))), timeout=30.0)  # 35 ids + cap 8 > kv_tokens 40
        assert r.status_code == 400 and "in_tokens=35" in r.json()["error"] and "kv_tokens=40" in r.json()["error"]
        r = httpx.post(url, json=_body([1], in_tokens=35), timeout=30.0)  # the parameter wins over the ids
        assert r.status_code == 400 and "in_tokens=35" in r.json()["error"]
        for bad in ("x", -1, 0, 2.5, True, 2**31):
            r = httpx.post(url, json=_body([1], max_tokens=bad), timeout=30.0)
            assert r.status_code == 400 and "parameters.max_tokens" in r.json()["error"], (bad, r.text)
        srv.terminate()
        assert srv.wait() == 0
        report = srv.report()
    assert report["runtime"]["on_time"] == 2 and report["runtime"]["submitted"] == 2
    assert report["http"] == {"200": 2, "400": 8}


def test_grpc_tokens_from_parameters() -> None:
    """Over gRPC (tritonclient.grpc), ``parameters`` carry max_tokens the same way."""
    tg = pytest.importorskip("tritonclient.grpc")
    import test_serve_grpc as g

    with g.Front(_doc()) as f:
        c = tg.InferenceServerClient(f.url)
        x = tg.InferInput("INPUT0", [4], "INT32")
        x.set_data_from_numpy(np.arange(4, dtype=np.int32))
        r = c.infer("chat", [x], parameters={"max_tokens": 2})
        assert r.as_numpy("OUTPUT0").shape == (2,)
        assert f.report()["grpc"] == {"OK": 1}


def test_an_llm_stage_without_executors_gets_the_profiled_engine() -> None:
    """``pard.Runtime("rag")`` with no stages serves: the llm stage runs the profiled stand-in engine (it once
    got a DNN reference network and its worker died), and the answer is ``max_tokens`` token ids."""
    from pard.models import INPUT_SHAPE

    with pard.Runtime("rag") as rt:
        fut = rt.submit(np.zeros(INPUT_SHAPE, np.float32), in_tokens=100, max_tokens=5)
        assert list(fut.result(30.0)) == [0] * 5
        assert rt.counts()["on_time"] == 1


def test_a_cold_llm_stage_refuses_what_the_lengths_seen_say_cannot_finish() -> None:
    """Before the length model has its samples, a request is priced at the mean length finished so far: after
    one request of 200 tokens, another capped at 200 with a 0.2 s SLO (200 decode steps of about 7 ms) is
    dropped before any stage spends on it, not decoded to a late answer."""
    from pard.models import INPUT_SHAPE

    x = np.zeros(INPUT_SHAPE, np.float32)
    with pard.Runtime("rag") as rt:
        assert len(rt.submit(x, in_tokens=100, max_tokens=200).result(60.0)) == 200
        with pytest.raises(pard.Dropped, match="infeasible"):
            rt.submit(x, in_tokens=100, max_tokens=200, slo=0.2).result(60.0)
        assert rt.counts()["late"] == 0


def test_a_dnn_stage_below_an_llm_stage_needs_executors() -> None:
    """The reference networks cannot take token ids: a DNN stage below an llm stage is named."""
    spec = pard.PipelineSpec.from_dict({"name": "asr_llm_tts", "slo": 5.0, "stages": [
        {"name": "asr", "profile": {1: 0.01}, "max_batch": 1, "successors": ["llm"]},
        {"name": "llm", "kind": "llm", "prefill": {"base": 0.01, "per_token": 1e-5}, "decode": {1: 0.01},
         "max_seqs": 4, "kv_tokens": 4000, "max_output_tokens": 64, "successors": ["tts"]},
        {"name": "tts", "profile": {1: 0.01}, "max_batch": 1}]})
    with pytest.raises(ConfigError, match=r"\['tts'\] run below an llm stage"):
        pard.Runtime(spec)


def test_a_prompt_the_engine_refuses_fails_alone_and_the_llm_stage_is_in_metrics(tmp_path: Path) -> None:
    """``pard serve`` on llama.cpp (the tiny random-weight llama): one request with a token id outside the
    vocabulary, sent with eight good ones at once, gets a 400 naming it (the refusal is about the request's own
    prompt: shown without server.error_detail) while the good ones get 200 and their whole answers; /metrics has the llm stage's queueing delays (one per joiner) and its batch sizes (sequences per
    engine step, so their sum is the tokens generated)."""
    pytest.importorskip("gguf")
    pytest.importorskip("llama_cpp")
    from concurrent.futures import ThreadPoolExecutor

    from prometheus_client.parser import text_string_to_metric_families

    from pard.models.tiny_llama import write_tiny_llama

    model = write_tiny_llama(tmp_path / "tiny.gguf", context=512)
    doc = _doc()
    doc["pipeline"]["stages"][1].update(kv_tokens=512, max_seqs=4, decode={1: 0.002, 4: 0.003})
    doc["stages"]["generate"] = {"executor": "pard.executors.llama_cpp:LlamaCppEngine",
                                 "kwargs": {"model_path": str(model), "max_seqs": 4, "context": 512}}
    caps = [1 + i for i in range(8)]  # within the stage's max_output_tokens 8
    with ServerProcess(tmp_path, doc) as srv:
        url = srv.url + "/v2/models/chat/infer"
        bodies = [_body([1, 2, 999], max_tokens=4)] + [_body([5 + i, 6, 7], max_tokens=c) for i, c in enumerate(caps)]
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = list(pool.map(lambda b: httpx.post(url, json=b, timeout=30.0), bodies))
        bad, good = answers[0], answers[1:]
        assert bad.status_code == 400, bad.text
        assert "PromptRefused" in bad.json()["error"] and "the join's prompt has token id 999, outside the vocabulary" in bad.json()["error"]
        assert bad.json()["stage"] == "generate"
        for r, cap in zip(good, caps):
            assert r.status_code == 200, r.text
            assert r.json()["outputs"][0]["shape"] == [cap]
        m = {(s.name, s.labels.get("stage")): s.value
             for fam in text_string_to_metric_families(httpx.get(srv.url + "/metrics", timeout=30.0).text)
             for s in fam.samples}
        srv.terminate()
        assert srv.wait() == 0
        report = srv.report()
    assert m[("pard_queue_duration_seconds_count", "generate")] == len(bodies)
    assert m[("pard_batch_size_sum", "generate")] == sum(caps)
    assert 0 < m[("pard_batch_size_count", "generate")] <= sum(caps)
    assert m[("pard_batch_size_count", "embed")] > 0  # the DNN stage, as before
    rt = report["runtime"]
    assert (rt["submitted"], rt["on_time"], rt["failed"]) == (9, 8, 1)
    assert report["http"] == {"200": 8, "400": 1}
