"""What a TritonExecutor batch call costs on top of the model: a PyTriton server (CPU) on this host.

Starts the test server of ``tests/_pytriton.py`` (the PyTriton venv of Debian's python3.11) with
the ``flaky`` model (y = 2x, no sleep for these inputs) and tm's ONNX ``vehicle_detect`` stage
(scale 0.05), then times, per batch size, the median of ``--calls`` calls of

* ``TritonExecutor`` with shared-memory input (``shared_memory="on"``) and over the socket (``"off"``);
* the baseline in this process: the same computation without the server (``2 * x`` in NumPy, and
  ``OnnxExecutor`` on the same ONNX file).

The difference is the cost of going through Triton (gRPC, the Python backend's IPC, scheduling).
Usage: ``python bench/triton_call.py [--calls 50] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def _median_ms(fn: Any, calls: int) -> float:
    for _ in range(3):
        fn()
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    from _pytriton import PyTritonServer, venv_python

    import pard
    from pard.executors import OnnxExecutor, TritonExecutor
    from pard.models.onnx import onnx_models

    python, why = venv_python()
    if python is None:
        print(f"no PyTriton server can start here: {why}")
        return 1
    tmp = tempfile.TemporaryDirectory(prefix="pard-bench-")
    det = onnx_models(pard.config.builtin("tm"), scale=0.05, directory=Path(tmp.name))["vehicle_detect"]
    spec = [{"name": "flaky", "kind": "flaky", "shape": [1024], "max_batch": 16, "delay_us": 0},
            {"name": "vehicle_detect", "kind": "onnx", "path": str(det.path), "max_batch": 16, "delay_us": 0}]
    rows: list[dict[str, Any]] = []
    with PyTritonServer(python, spec) as srv:
        local_onnx = OnnxExecutor(det.path, providers="cpu", intra_op_threads=1)
        for model, shape, local in (("flaky", (1024,), lambda xs: [2 * x for x in xs]),
                                    ("vehicle_detect", det.input_shape, local_onnx)):
            shm_on = TritonExecutor(srv.url, model, shared_memory="on")
            shm_off = TritonExecutor(srv.url, model, shared_memory="off")
            try:
                for b in (1, 4, 16):
                    xs = list(np.random.default_rng(b).random((b, *shape), dtype=np.float32))
                    row = {"model": model, "batch": b,
                           "local_ms": _median_ms(lambda: local(xs), args.calls),
                           "triton_shm_ms": _median_ms(lambda: shm_on(xs), args.calls),
                           "triton_socket_ms": _median_ms(lambda: shm_off(xs), args.calls)}
                    row["overhead_shm_ms"] = row["triton_shm_ms"] - row["local_ms"]
                    row["overhead_socket_ms"] = row["triton_socket_ms"] - row["local_ms"]
                    rows.append(row)
                    print(f"{model:15s} b={b:2d}  local {row['local_ms']:7.2f} ms   triton shm {row['triton_shm_ms']:7.2f} ms"
                          f"   socket {row['triton_socket_ms']:7.2f} ms   (+{row['overhead_shm_ms']:.2f} / "
                          f"+{row['overhead_socket_ms']:.2f} ms)")
            finally:
                shm_on.close()
                shm_off.close()
    if args.json:
        args.json.write_text(json.dumps({"calls": args.calls, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
