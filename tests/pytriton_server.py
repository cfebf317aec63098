"""A PyTriton server process for pard's Triton tests: serves the models a JSON file lists, until killed.

Run by ``tests/_pytriton.py`` with the Python of a venv that holds nvidia-pytriton (Debian's
/usr/bin/python3.11: PyTriton's Python-backend stub fails under a pyenv-built 3.11), never imported
by pard or pytest.  Usage: ``python pytriton_server.py SPEC.json``; the spec is
``{"grpc_port", "http_port", "metrics_port", "workspace", "models": [...]}`` (``workspace``: where
PyTriton keeps its sockets and model store; optional) with one entry per model:

* ``{"name", "kind": "onnx", "path", "max_batch", "delay_us"}`` -- runs the ONNX file with
  onnxruntime (one CPU thread) on each batch Triton hands over;
* ``{"name", "kind": "flaky", "shape", "max_batch", "delay_us"}`` -- returns its input times 2, but
  raises (a server error for the whole request) when any request's first value is negative, and
  sleeps ``sleep_s`` (default 2 s) first when any request's first value is >= 1000.

``delay_us`` is the dynamic batcher's ``max_queue_delay_microseconds`` (0 for pard: pard forms the
batches).  Inputs are named ``x`` and outputs ``y``, float32, batch axis first.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig


def _onnx_fn(path: str) -> tuple[Any, tuple[int, ...], tuple[int, ...]]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
    inp, out = sess.get_inputs()[0], sess.get_outputs()[0]

    @batch
    def infer(x: np.ndarray) -> dict[str, np.ndarray]:
        return {"y": sess.run([out.name], {inp.name: x.astype(np.float32, copy=False)})[0]}

    return infer, tuple(inp.shape[1:]), tuple(out.shape[1:])


def _flaky_fn(sleep_s: float) -> Any:
    @batch
    def infer(x: np.ndarray) -> dict[str, np.ndarray]:
        first = x.reshape(x.shape[0], -1)[:, 0]
        if (first < 0).any():
            raise ValueError("flaky model: a negative first value in the batch")
        if (first >= 1000).any():
            time.sleep(sleep_s)
        return {"y": x * np.float32(2.0)}

    return infer


def main(spec_path: str) -> None:
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    config = TritonConfig(grpc_address="127.0.0.1", grpc_port=int(spec["grpc_port"]),
                          http_address="127.0.0.1", http_port=int(spec["http_port"]),
                          metrics_port=int(spec["metrics_port"]), allow_metrics=False, exit_timeout_secs=2)
    # PyTriton guards shared memory and statistics with an access token by default; this server
    # listens on 127.0.0.1 only, for a test, so those two stay open (pard registers its input
    # regions and the tests read per-model inference counts).
    security = TritonSecurityConfig(restricted_endpoints=["model-repository", "trace", "logging"])
    workspace = spec.get("workspace")  # in the caller's temporary directory: removed even after a SIGKILL
    with Triton(config=config, workspace=workspace, security_config=security) as triton:
        for m in spec["models"]:
            kind = m["kind"]
            if kind == "onnx":
                fn, in_shape, out_shape = _onnx_fn(m["path"])
            elif kind == "flaky":
                fn, in_shape, out_shape = _flaky_fn(float(m.get("sleep_s", 2.0))), tuple(m["shape"]), tuple(m["shape"])
            else:
                raise SystemExit(f"unknown model kind {kind!r}")
            triton.bind(
                model_name=m["name"], infer_func=fn,
                inputs=[Tensor(name="x", dtype=np.float32, shape=in_shape)],
                outputs=[Tensor(name="y", dtype=np.float32, shape=out_shape)],
                config=ModelConfig(max_batch_size=int(m["max_batch"]),
                                   batcher=DynamicBatcher(max_queue_delay_microseconds=int(m.get("delay_us", 0)))),
                strict=False,
            )
        print("pytriton: models bound, serving", flush=True)
        triton.serve()


if __name__ == "__main__":
    main(sys.argv[1])
