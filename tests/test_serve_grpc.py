"""pard serve's gRPC front (KServe v2 GRPCInferenceService) driven by tritonclient.grpc against a real server on
127.0.0.1: health, metadata, inference in two datatypes and both content forms, deadlines, the door,
cancellation, drops, bad input, and every call counted once."""

from __future__ import annotations

import asyncio
import collections
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc", reason="grpcio is not installed (pip install 'pard[grpc]')")
pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is not installed (pip install 'pard[grpc]')")
pytest.importorskip("starlette")

import grpc  # noqa: E402
import tritonclient.grpc as tg  # noqa: E402
import tritonclient.grpc.aio as tga  # noqa: E402
from tritonclient.grpc import service_pb2 as pb  # noqa: E402
from tritonclient.grpc import service_pb2_grpc as pb_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from pard.serve.config import parse_serve_config  # noqa: E402
from pard.serve.grpc_front import start_grpc  # noqa: E402
from pard.serve.service import ServedPipeline  # noqa: E402

import _serve  # noqa: E402
from _serve import ServerProcess, config  # noqa: E402

#: every test's own bound (s): a hung server fails the test instead of the run
LIMIT_S = 60.0


class Front:
    """A ServedPipeline and its gRPC front on 127.0.0.1 in a background event loop (real sockets, real grpcio)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.svc = ServedPipeline(parse_serve_config(doc))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="grpc-front", daemon=True)
        self.thread.start()

        async def up() -> tuple[Any, int]:
            await self.svc.start()
            return await start_grpc(self.svc, "127.0.0.1", 0)

        self.server, self.port = self.call(up())
        self.url = f"127.0.0.1:{self.port}"

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(LIMIT_S)

    def on_loop(self, fn: Callable[[], Any]) -> Any:
        async def run() -> Any:
            return fn()
        return self.call(run())

    def report(self) -> dict[str, Any]:
        return dict(self.on_loop(self.svc.report))

    def close(self) -> None:
        async def down() -> None:
            await self.server.stop(1.0)
            await self.svc.aclose()
        try:
            self.call(down())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10.0)
            if not self.thread.is_alive():
                self.loop.close()  # else its self-pipe and the loop itself are left to the garbage collector

    def __enter__(self) -> Front:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _input(x: np.ndarray, datatype: str = "FP32") -> Any:
    inp = tg.InferInput("INPUT0", list(x.shape), datatype)
    inp.set_data_from_numpy(x)
    return inp


def _typed_input(values: list[Any], field: str, datatype: str, shape: list[int] | None = None) -> Any:
    """An input whose data travels in the typed ``contents`` field (tritonclient itself always sends raw)."""
    inp = tg.InferInput("INPUT0", shape or [len(values)], datatype)
    getattr(inp._get_tensor().contents, field).extend(values)
    return inp


def _code(exc: InferenceServerException) -> str:
    return str(exc.status()).replace("StatusCode.", "")


def _stub(url: str) -> tuple[Any, Any]:
    channel = grpc.insecure_channel(url)
    return channel, pb_grpc.GRPCInferenceServiceStub(channel)


def _raw_request(x: np.ndarray, **params: Any) -> Any:
    req = pb.ModelInferRequest(model_name="duo")
    t = req.inputs.add()
    t.name, t.datatype = "INPUT0", "FP32"
    t.shape.extend(x.shape)
    req.raw_input_contents.append(x.astype("<f4").tobytes())
    for k, v in params.items():
        req.parameters[k].int64_param = v
    return req


def _wait(cond: Callable[[], bool], what: str, limit_s: float = 20.0) -> None:
    end = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_health_and_metadata() -> None:
    """Live, ready and model-ready are true; server metadata lists no extension; model metadata lists the
    tensors; another model is NOT_FOUND."""
    with Front(config()) as f:
        c = tg.InferenceServerClient(f.url)
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("duo")
        meta = c.get_server_metadata(as_json=True)
        assert meta["name"] == "pard" and meta.get("extensions", []) == []
        model = c.get_model_metadata("duo", as_json=True)
        assert model["name"] == "duo" and model["versions"] == ["1"] and model["platform"] == "pard"
        assert model["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": ["4"]}]
        assert model["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": ["4"]}]
        with pytest.raises(InferenceServerException) as info:
            c.get_model_metadata("nope")
        assert _code(info.value) == "NOT_FOUND" and "'duo'" in info.value.message()
        with pytest.raises(InferenceServerException) as info:
            c.is_model_ready("duo", "2")
        assert _code(info.value) == "NOT_FOUND"


def test_fp32_infer_raw_and_typed_contents() -> None:
    """An FP32 tensor sent raw (tritonclient's way) or as typed fp32_contents comes back exactly, with the id."""
    x = np.array([0.5, -1.0, 2.25, 8.0], np.float32)
    with Front(config()) as f:
        c = tg.InferenceServerClient(f.url)
        r = c.infer("duo", [_input(x)], request_id="q7")
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)
        assert r.get_response().id == "q7" and r.get_response().model_name == "duo"
        r = c.infer("duo", [_typed_input([3.0, 1.5, -2.0, 0.0], "fp32_contents", "FP32")],
                    outputs=[tg.InferRequestedOutput("OUTPUT0")])
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), np.array([3.0, 1.5, -2.0, 0.0], np.float32))
        assert f.report()["grpc"] == {"OK": 2}


def test_uint8_infer_raw_and_typed_and_out_of_range() -> None:
    """A UINT8 model: raw and typed (uint_contents) inputs come back as UINT8; 300 in uint_contents is
    INVALID_ARGUMENT naming the element."""
    doc = config(inputs=[{"name": "INPUT0", "datatype": "UINT8", "shape": [4]}])
    with Front(doc) as f:
        c = tg.InferenceServerClient(f.url)
        x = np.array([0, 7, 200, 255], np.uint8)
        out = c.infer("duo", [_input(x, "UINT8")]).as_numpy("OUTPUT0")
        assert out.dtype == np.uint8
        np.testing.assert_array_equal(out, x)
        out = c.infer("duo", [_typed_input([1, 2, 3, 250], "uint_contents", "UINT8")]).as_numpy("OUTPUT0")
        np.testing.assert_array_equal(out, np.array([1, 2, 3, 250], np.uint8))
        with pytest.raises(InferenceServerException) as info:
            c.infer("duo", [_typed_input([1, 2, 300, 4], "uint_contents", "UINT8")])
        assert _code(info.value) == "INVALID_ARGUMENT"
        assert "inputs[0].contents.uint_contents[2] = 300" in info.value.message()


@pytest.mark.parametrize("make, needle", [
    (lambda: [_input(np.zeros(4, np.int32), "INT32")], "inputs[0].datatype"),
    (lambda: [_input(np.zeros(5, np.float32))], "inputs[0].shape"),
    (lambda: [_typed_input([1.0, 2.0], "fp32_contents", "FP32", [4])], "inputs[0].contents.fp32_contents holds 2"),
    (lambda: [_typed_input([1, 2, 3, 4], "int_contents", "FP32")], "inputs[0].contents"),
    (lambda: [_input(np.zeros(4, np.float16), "FP16")], "inputs[0].datatype"),
])
def test_bad_input_is_invalid_argument_naming_the_field(make: Callable[[], list[Any]], needle: str) -> None:
    """A malformed tensor is INVALID_ARGUMENT whose message names the field; it never reaches the runtime."""
    with Front(config()) as f:
        c = tg.InferenceServerClient(f.url)
        with pytest.raises(InferenceServerException) as info:
            c.infer("duo", make())
        assert _code(info.value) == "INVALID_ARGUMENT" and needle in info.value.message()
        rep = f.report()
        assert rep["grpc"] == {"INVALID_ARGUMENT": 1} and rep["outcomes"]["invalid"] == 1
        assert rep["runtime"]["submitted"] == 0


def test_raw_contents_of_the_wrong_size_and_bad_parameters_are_named() -> None:
    """raw_input_contents of the wrong size, a negative timeout and an unknown model, each named."""
    with Front(config()) as f:
        channel, stub = _stub(f.url)
        with channel:
            req = _raw_request(np.zeros(4))
            req.raw_input_contents[0] = b"\0" * 12
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelInfer(req, timeout=LIMIT_S)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "raw_input_contents[0] holds 12 bytes" in info.value.details()
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelInfer(_raw_request(np.zeros(4), timeout=-5), timeout=LIMIT_S)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "parameters.timeout" in info.value.details()
            req = _raw_request(np.zeros(4))
            req.model_name = "other"
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelInfer(req, timeout=LIMIT_S)
            assert info.value.code() == grpc.StatusCode.NOT_FOUND
        rep = f.report()
        assert rep["grpc"] == {"INVALID_ARGUMENT": 2, "NOT_FOUND": 1} and rep["outcomes"]["invalid"] == 3


def test_a_deadline_shorter_than_the_fastest_path_is_refused_at_the_door() -> None:
    """A 20 ms deadline (the fastest path takes 50 ms) is refused at the door, from the call's own
    deadline (client_timeout) or from Triton's timeout parameter: RESOURCE_EXHAUSTED, reason infeasible, no
    retry hint (or the client's own DEADLINE_EXCEEDED, should the call's deadline pass on the way)."""
    x = np.zeros(4, np.float32)
    with Front(config()) as f:
        c = tg.InferenceServerClient(f.url)
        with pytest.raises(InferenceServerException) as info:
            c.infer("duo", [_input(x)], timeout=20_000)  # µs
        assert _code(info.value) == "RESOURCE_EXHAUSTED" and "fastest path" in info.value.message()
        with pytest.raises(InferenceServerException) as info:
            c.infer("duo", [_input(x)], client_timeout=0.02)
        assert _code(info.value) in ("RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED")
        first = _code(info.value)
        channel, stub = _stub(f.url)
        with channel:
            with pytest.raises(grpc.RpcError) as err:
                stub.ModelInfer(_raw_request(x), timeout=0.02)
            meta = dict(err.value.trailing_metadata() or ())
        if err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            assert meta["pard-reason"] == "infeasible" and "retry-after" not in meta
        rep = f.report()
        assert rep["runtime"]["submitted"] == 0  # none of them reached a stage
        assert rep["grpc"].get("RESOURCE_EXHAUSTED", 0) == 1 + (first == "RESOURCE_EXHAUSTED") + (
            err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED)


def test_a_long_deadline_is_served_and_the_earliest_deadline_wins() -> None:
    """Triton's timeout of 10 s with a 20 ms call deadline is refused (the earliest wins); with a 10 s call
    deadline and a 20 ms timeout parameter too; both long: served."""
    x = np.ones(4, np.float32)
    with Front(config()) as f:
        c = tg.InferenceServerClient(f.url)
        for timeout_us, client_s in ((10_000_000, 0.02), (20_000, 10.0)):
            with pytest.raises(InferenceServerException) as info:
                c.infer("duo", [_input(x)], timeout=timeout_us, client_timeout=client_s)
            assert _code(info.value) in ("RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED")
        r = c.infer("duo", [_input(x)], timeout=10_000_000, client_timeout=10.0)
        np.testing.assert_array_equal(r.as_numpy("OUTPUT0"), x)


def _gated(key: str, policy: str = "pard") -> dict[str, Any]:
    return config(stages={"detect": {"executor": "_serve:gate", "kwargs": {"key": key}},
                          "classify": {"executor": "pard.serve.factories:sleep_profile"}},
                  warmup=False, policy=policy)


def test_a_cancel_through_tritonclient_aio_cancels_the_request_in_the_pipeline() -> None:
    """While detect holds a batch, a queued request whose tritonclient.grpc.aio call is cancelled is dropped
    (reason cancelled) at once and never reaches the model; the held one is answered; each counted once."""
    gate = _serve.gate(key="grpc-cancel")
    with Front(_gated("grpc-cancel")) as f:
        async def client() -> tuple[Any, BaseException | None]:
            async with tga.InferenceServerClient(f.url) as c:
                held = asyncio.ensure_future(c.infer("duo", [_input(np.full(4, 1.0, np.float32))], timeout=10_000_000))
                await asyncio.to_thread(gate.started.wait, 20.0)
                queued = asyncio.ensure_future(c.infer("duo", [_input(np.full(4, 2.0, np.float32))],
                                                       timeout=10_000_000))
                await asyncio.to_thread(_wait, lambda: f.svc.runtime.queued("detect") == 1, "the queued request")
                queued.cancel()
                await asyncio.to_thread(_wait, lambda: f.svc.runtime.counts()["dropped"] == 1, "the cancel")
                assert f.svc.runtime.queued("detect") == 0
                gate.release.set()
                result = await held
                try:
                    await queued
                except asyncio.CancelledError as exc:
                    return result, exc
                return result, None

        result, cancelled = asyncio.run(asyncio.wait_for(client(), LIMIT_S))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full(4, 1.0, np.float32))
        assert isinstance(cancelled, asyncio.CancelledError)
        assert gate.seen == [[1.0] * 4]  # the cancelled request never reached the model
        _wait(lambda: sum(f.report()["grpc"].values()) == 2, "both answers counted")
        rep = f.report()
        assert rep["grpc"] == {"CANCELLED": 1, "OK": 1}
        assert f.svc.runtime.drop_counts() == {("detect", "cancelled"): 1}
        assert rep["outcomes"]["dropped"] == 1 and rep["outcomes"]["on_time"] + rep["outcomes"]["late"] == 1


@pytest.mark.parametrize("grace_s, hold_s, code", [(1.0, 0.4, "UNAVAILABLE"), (0.1, 1.0, "DEADLINE_EXCEEDED")])
def test_a_drop_is_unavailable_and_no_answer_by_the_deadline_is_deadline_exceeded(grace_s: float, hold_s: float,
                                                                                  code: str) -> None:
    """A request (deadline 200 ms) queued behind a batch detect holds for ``hold_s``: released within
    server.answer_grace_s past its deadline, detect drops it: UNAVAILABLE with pard-stage, pard-reason,
    retry-after and grpc-retry-pushback-ms in trailing metadata; held longer, it is answered
    DEADLINE_EXCEEDED (reason deadline) at its deadline plus the grace, and cancelled.  Counted once either way."""
    key = f"grpc-drop-{code}"
    gate = _serve.gate(key=key)
    doc = _gated(key, policy="clipper++")
    doc["server"]["answer_grace_s"] = grace_s
    with Front(doc) as f:
        held: dict[str, Any] = {}

        def hold() -> None:
            held["r"] = tg.InferenceServerClient(f.url).infer("duo", [_input(np.ones(4, np.float32))],
                                                              timeout=10_000_000)
        t = threading.Thread(target=hold)
        t.start()
        assert gate.started.wait(20.0)
        channel, stub = _stub(f.url)
        with channel:
            call = stub.ModelInfer.future(_raw_request(np.full(4, 5.0), timeout=200_000), timeout=LIMIT_S)
            time.sleep(hold_s)
            gate.release.set()
            with pytest.raises(grpc.RpcError) as info:
                call.result(LIMIT_S)
            meta = dict(info.value.trailing_metadata() or ())
        t.join(LIMIT_S)
        assert info.value.code().name == code, info.value.details()
        if code == "UNAVAILABLE":
            assert meta["pard-stage"] == "detect" and meta["pard-reason"]
            assert int(meta["retry-after"]) >= 1 and int(meta["grpc-retry-pushback-ms"]) >= 1
            assert "pard-request-id" in meta
        else:
            assert meta["pard-reason"] == "deadline" and "retry-after" not in meta
        _wait(lambda: sum(f.svc.runtime.drop_counts().values()) == 1, "the runtime's drop")
        rep = f.report()
        assert rep["grpc"] == {"OK": 1, code: 1}
        assert rep["outcomes"]["dropped"] == 1
        np.testing.assert_array_equal(held["r"].as_numpy("OUTPUT0"), np.ones(4, np.float32))
        assert gate.seen == [[1.0] * 4]  # the dropped request never reached the model


def test_a_burst_is_answered_once_each_and_the_report_equals_the_clients_counts() -> None:
    """Three malformed calls, then 240 at once from 4 tritonclient.grpc.aio clients (2.4 s of the pipeline's
    capacity) with mixed deadlines: every call gets one status, and the report's counts (by code and by
    outcome, the runtime's included) equal what the clients saw."""
    doc = config()
    doc["server"]["max_loop_lag_s"] = 2.0  # the accounting is under test, not the lag guard of a busy machine
    with Front(doc) as f:
        async def one(c: Any, i: int, x: np.ndarray) -> str:
            try:
                await c.infer("duo", [_input(x)], timeout=[300_000, 100_000, 2_000_000][i % 3], client_timeout=LIMIT_S)
            except InferenceServerException as exc:
                return _code(exc)
            return "OK"

        async def burst() -> list[str]:
            clients = [tga.InferenceServerClient(f.url) for _ in range(4)]
            try:
                bad = [await one(clients[0], 2, np.zeros(3, np.float32)) for _ in range(3)]
                return bad + list(await asyncio.gather(*(one(clients[i % 4], i, np.full(4, float(i), np.float32))
                                                         for i in range(240))))
            finally:
                for c in clients:
                    await c.close()

        codes = asyncio.run(asyncio.wait_for(burst(), LIMIT_S))
        rep = f.report()
    seen = collections.Counter(codes)
    assert codes[:3] == ["INVALID_ARGUMENT"] * 3 and sum(seen.values()) == 243 and seen["OK"] > 0
    assert seen["RESOURCE_EXHAUSTED"] + seen["UNAVAILABLE"] > 0  # past capacity: the door or the stages shed
    assert set(seen) <= {"OK", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "DEADLINE_EXCEEDED", "INVALID_ARGUMENT"}
    assert rep["grpc"] == dict(seen)
    out, rt = rep["outcomes"], rep["runtime"]
    assert out["on_time"] + out["late"] == seen["OK"]
    assert out["rejected"] == seen["RESOURCE_EXHAUSTED"] and out["invalid"] == seen["INVALID_ARGUMENT"] == 3
    assert out["dropped"] == seen["UNAVAILABLE"] + seen["DEADLINE_EXCEEDED"]
    assert rt["submitted"] == rt["on_time"] + rt["late"] + rt["dropped"] + rt["rejected"] + rt["failed"]
    assert rt["on_time"] + rt["late"] == seen["OK"] and out["pending"] == 0


def test_pard_serve_serves_http_and_grpc_together_and_drains_on_sigterm(tmp_path: Path) -> None:
    """``pard serve`` with server.grpc_port: both fronts answer the same pipeline; SIGTERM drains it (exit 0)
    and the report counts the HTTP and the gRPC answers apart."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    doc = config()
    doc["server"]["grpc_port"] = 0
    with ServerProcess(tmp_path, doc, args=["--grpc-port-file", str(tmp_path / "grpc_port")]) as srv:
        url = f"127.0.0.1:{int((tmp_path / 'grpc_port').read_text())}"
        c = tg.InferenceServerClient(url)
        assert c.is_server_ready()
        x = np.array([1, 2, 3, 4], np.float32)
        np.testing.assert_array_equal(c.infer("duo", [_input(x)]).as_numpy("OUTPUT0"), x)
        r = httpx.post(f"{srv.url}/v2/models/duo/infer", json=_serve.v2_body([1, 2, 3, 4]), timeout=LIMIT_S)
        assert r.status_code == 200
        metrics = httpx.get(f"{srv.url}/metrics", timeout=LIMIT_S).text
        on_time = [s.value for fam in text_string_to_metric_families(metrics) for s in fam.samples
                   if s.name == "pard_requests_total" and s.labels["outcome"] == "on_time"]
        assert on_time == [2.0]  # the same counter for both fronts
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.wait(LIMIT_S) == 0
        rep = srv.report()
    assert rep["grpc"] == {"OK": 1} and rep["http"] == {"200": 1} and rep["outcomes"]["on_time"] == 2


def test_http_and_grpc_at_once_under_10x_overload_answer_every_request_once(tmp_path: Path) -> None:
    """``pard serve`` with both fronts, 2 s of Poisson arrivals at 5x the pipeline's capacity through HTTP
    (64 keep-alive connections) and 5x through gRPC (4 tritonclient.grpc.aio clients) at once: every request
    gets exactly one answer, /metrics' outcome counters equal what the clients of both fronts saw, and the
    report counts the two fronts' answers apart, as the clients saw them."""
    import random

    import httpx
    from prometheus_client.parser import text_string_to_metric_families
    from test_serve_door import _burst

    doc = config()
    doc["server"]["grpc_port"] = 0
    doc["server"]["max_loop_lag_s"] = 2.0  # the accounting is under test, not the lag guard of a busy machine
    rate = 5 * _serve.CAPACITY_REQ_S

    async def grpc_burst(url: str) -> collections.Counter[str]:
        rng = random.Random(11)
        clients = [tga.InferenceServerClient(url) for _ in range(4)]
        x = np.ones(4, np.float32)

        async def one(c: Any) -> str:
            try:
                await c.infer("duo", [_input(x)], client_timeout=LIMIT_S)
            except InferenceServerException as exc:
                return _code(exc)
            return "OK"

        loop = asyncio.get_running_loop()
        t, end, calls = loop.time(), loop.time() + 2.0, []
        try:
            while t < end:
                t += rng.expovariate(rate)
                await asyncio.sleep(max(0.0, t - loop.time()))
                calls.append(asyncio.ensure_future(one(clients[len(calls) % 4])))
            return collections.Counter(await asyncio.gather(*calls))
        finally:
            for c in clients:
                await c.close()

    with ServerProcess(tmp_path, doc, args=["--grpc-port-file", str(tmp_path / "grpc_port")]) as srv:
        url = f"127.0.0.1:{int((tmp_path / 'grpc_port').read_text())}"

        async def both() -> tuple[Any, Any]:
            return await asyncio.gather(_burst(srv.port, rate, 2.0, 64), grpc_burst(url))

        http_seen, grpc_seen = asyncio.run(asyncio.wait_for(both(), LIMIT_S))
        text = httpx.get(f"{srv.url}/metrics", timeout=LIMIT_S).text
        counts = collections.Counter({s.labels["outcome"]: s.value for fam in text_string_to_metric_families(text)
                                      for s in fam.samples if s.name == "pard_requests_total"})
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.wait(LIMIT_S) == 0
        rep = srv.report()
    assert set(http_seen) <= {200, 429, 503} and set(grpc_seen) <= {"OK", "RESOURCE_EXHAUSTED", "UNAVAILABLE",
                                                                      "DEADLINE_EXCEEDED"}
    assert http_seen[200] > 0 and grpc_seen["OK"] > 0  # both fronts served
    assert http_seen[429] + grpc_seen["RESOURCE_EXHAUSTED"] + http_seen[503] + grpc_seen["UNAVAILABLE"] > 0
    assert counts["on_time"] + counts["late"] == http_seen[200] + grpc_seen["OK"]
    assert counts["rejected"] == http_seen[429] + grpc_seen["RESOURCE_EXHAUSTED"]
    assert counts["dropped"] == http_seen[503] + grpc_seen["UNAVAILABLE"] + grpc_seen["DEADLINE_EXCEEDED"]
    assert sum(counts.values()) == sum(http_seen.values()) + sum(grpc_seen.values())
    assert rep["grpc"] == dict(grpc_seen) and rep["http"] == {str(k): v for k, v in http_seen.items()}
