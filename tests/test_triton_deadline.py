"""TritonExecutor sends each batch with the batch's remaining budget as the gRPC call's deadline (``grpc-timeout``
on the wire), read by a stand-in Triton server that records what every call carried; and against a real Triton
(PyTriton), a call past that budget fails with the budget it was given."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc", reason="grpcio is not installed (pip install 'pard[triton]')")
pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is not installed (pip install 'pard[triton]')")

import grpc  # noqa: E402
from tritonclient.grpc import model_config_pb2 as mc  # noqa: E402
from tritonclient.grpc import service_pb2 as pb  # noqa: E402
from tritonclient.grpc import service_pb2_grpc as pb_grpc  # noqa: E402

import pard  # noqa: E402
from pard.executors import TritonExecutor  # noqa: E402


class Recording(pb_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
    """A Triton stand-in with one model, ``echo`` (FP32 [-1, 4], max_batch_size 8): answers what it is sent
    and records each ModelInfer's remaining deadline (s, None without one) and batch size."""

    def __init__(self) -> None:
        self.calls: list[tuple[float | None, int]] = []
        self.lock = threading.Lock()
        self.hold_first = False  # hold the first call until ``release`` is set
        self.release = threading.Event()

    def ServerLive(self, request: Any, context: Any) -> Any:  # noqa: N802
        return pb.ServerLiveResponse(live=True)

    def ModelReady(self, request: Any, context: Any) -> Any:  # noqa: N802
        return pb.ModelReadyResponse(ready=request.name == "echo")

    def ModelConfig(self, request: Any, context: Any) -> Any:  # noqa: N802
        cfg = mc.ModelConfig(name="echo", max_batch_size=8)
        cfg.input.add(name="IN", data_type=mc.TYPE_FP32, dims=[4])
        cfg.output.add(name="OUT", data_type=mc.TYPE_FP32, dims=[4])
        return pb.ModelConfigResponse(config=cfg)

    def ModelMetadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        t = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(name="echo", versions=["1"], platform="stand-in",
                                        inputs=[t(name="IN", datatype="FP32", shape=[-1, 4])],
                                        outputs=[t(name="OUT", datatype="FP32", shape=[-1, 4])])

    def ModelInfer(self, request: Any, context: Any) -> Any:  # noqa: N802
        with self.lock:
            self.calls.append((context.time_remaining(), int(request.inputs[0].shape[0])))
            first = len(self.calls) == 1
        if first and self.hold_first:
            self.release.wait(10.0)
        out = pb.ModelInferResponse(model_name="echo", model_version="1")
        t = out.outputs.add(name="OUT", datatype="FP32")
        t.shape.extend(request.inputs[0].shape)
        out.raw_output_contents.append(request.raw_input_contents[0])
        return out


@pytest.fixture()
def stand_in() -> Any:
    servicer = Recording()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def _at_most(budget_s: float) -> float:
    """``budget_s`` plus what grpc-timeout's coarse encoding (rounded up) may add to a deadline on the wire."""
    return budget_s * 1.02 + 0.01


def _spec() -> pard.PipelineSpec:
    return pard.PipelineSpec(name="remote", slo=0.3, stages=[
        pard.StageSpec(name="echo", profile={1: 0.001, 8: 0.002}, max_batch=8, workers=1)])


def test_each_call_carries_its_requests_remaining_budget_as_its_grpc_deadline(stand_in: Any) -> None:
    """A request with a 0.8 s SLO, then one with an absolute deadline 0.25 s ahead: each call's gRPC deadline on
    the wire is that request's remaining budget (at most what it had when submitted, more than what is left
    once its answer is back); none carries the executor's 30 s fallback."""
    servicer, url = stand_in
    ex = TritonExecutor(url, "echo", shared_memory="off")
    try:
        with pard.Runtime(_spec(), {"echo": ex}, policy="naive") as rt:
            x = np.arange(4, dtype=np.float32)
            t0 = rt.now()
            np.testing.assert_array_equal(rt.submit(x, slo=0.8).result(timeout=30), x)
            left_first = 0.8 - (rt.now() - t0)
            deadline = rt.now() + 0.25
            np.testing.assert_array_equal(rt.submit(x + 1, deadline=deadline).result(timeout=30), x + 1)
            left_second = deadline - rt.now()
    finally:
        ex.close()
    (first, n1), (second, n2) = servicer.calls
    assert (n1, n2) == (1, 1)
    assert first is not None and left_first < first <= _at_most(0.8)
    assert second is not None and left_second < second <= _at_most(0.25)


def test_a_batch_carries_the_latest_deadline_of_its_requests(stand_in: Any) -> None:
    """Requests batched together: the call's deadline is the latest of theirs (a result is worth having until
    the last of them is due), not the executor's fallback."""
    servicer, url = stand_in
    servicer.hold_first = True  # the first batch is held, so the next three queue and form one batch
    ex = TritonExecutor(url, "echo", shared_memory="off")
    try:
        with pard.Runtime(_spec(), {"echo": ex}, policy="naive") as rt:
            x = np.zeros(4, np.float32)
            futs = [rt.submit(x, slo=5.0)]
            while not servicer.calls:
                time.sleep(0.005)
            futs += [rt.submit(x + i, slo=s) for i, s in ((1, 1.0), (2, 2.0), (3, 1.5))]
            servicer.release.set()
            for f in futs:
                f.result(timeout=30)
    finally:
        ex.close()
    assert [n for _, n in servicer.calls] == [1, 3]
    remaining = servicer.calls[1][0]
    assert remaining is not None and 1.5 < remaining <= _at_most(2.0)  # the 2 s request's, not the 1 s or 1.5 s ones'
