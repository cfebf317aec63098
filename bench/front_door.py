"""What each door in front of a pipeline costs: the same small OIP request through five servers, in one run.

    python bench/front_door.py [--quick] [--json OUT.json]

The request: one FP32 [4] tensor (JSON over HTTP, raw contents over gRPC), echoed back.  The servers, each in
its own process, pinned nowhere:

(a) ``asgi``      a bare ASGI callable on uvicorn (uvloop + httptools) that decodes the v2 request and encodes
                  the answer with pard's codec (:mod:`pard.serve.protocol`): the floor of an HTTP front
(b) ``starlette`` the same handler as a Starlette route
(c) ``pard_http`` ``pard serve``'s HTTP front, on a pipeline of two stages that do no work
(d) ``pard_grpc`` ``pard serve``'s gRPC front, the same process and pipeline (``server.grpc_port``)
(e) ``grpc_echo`` a bare ``grpc.aio`` server of the same service (uvloop) whose ModelInfer decodes and encodes
                  with pard's gRPC codec (:mod:`pard.serve.grpc_codec`): the floor of a gRPC front

HTTP load comes from ``wrk`` (a Lua script POSTs the body); gRPC load from a client in its own process
(``grpc.aio``, one channel, a prebuilt request), whose CPU is measured and reported beside the server's.
For each: requests/s with 32 connections (gRPC: 32 calls in flight) for ``duration`` seconds, the server's CPU
per request (utime + stime from /proc/PID/stat before and after), and p50/p99 latency at one connection.
The machine may be shared: ``--rounds R`` measures every server R times, interleaved, and reports each figure's
median (and every round's).  Then ``await rt.infer(x)`` in a burst of N against a hand-written two-stage ``asyncio.Queue`` pipeline, per
request.  Ratios are against the baseline measured in the same run (``pard_grpc`` / ``grpc_echo``,
``pard_http`` / ``asgi``).  ``wrk`` is the Debian package (``apt-get install -y wrk``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

__all__: list[str] = []

MODEL = "bench"
BODY = json.dumps({"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [0.0, 1.0, 2.0, 3.0]}]})
CONNECTIONS = 32
LUA = """wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
""" % BODY


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, its threads included (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _write_port(path: str, port: int) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(str(port))
    tmp.replace(path)


# ------------------------------------------------------------------ the bare servers (run as --role ...)
def _echo_http(body: bytes) -> bytes:
    from pard.serve.protocol import decode_request, encode_response

    req = decode_request(body)
    out, _ = encode_response(MODEL, req.id, [("OUTPUT0", req.inputs["INPUT0"])], req)
    return out


def _asgi_app() -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan: nothing to start
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
                await receive()
                await send({"type": "lifespan.shutdown.complete"})
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        out = _echo_http(b"".join(chunks))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
        await send({"type": "http.response.body", "body": out})
    return app


def _starlette_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def infer(request: Request) -> Response:
        return Response(_echo_http(await request.body()), media_type="application/json")

    return Starlette(routes=[Route(f"/v2/models/{MODEL}/infer", infer, methods=["POST"])])


def _serve_http(app: Any, port_file: str) -> None:
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            _write_port(port_file, self.servers[0].sockets[0].getsockname()[1])

    Server(uvicorn.Config(app, host="127.0.0.1", port=0, loop="uvloop", http="httptools", log_level="warning",
                          access_log=False, lifespan="on")).run()


def _grpc_echo(port_file: str) -> None:
    import grpc
    import uvloop
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pb_grpc

    from pard.serve.grpc_codec import decode_infer, encode_infer

    class Echo(pb_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
        async def ModelInfer(self, request: Any, context: Any) -> Any:  # noqa: N802
            req = decode_infer(request)
            return encode_infer(pb, MODEL, req.id, [("OUTPUT0", req.inputs["INPUT0"])])

    async def main() -> None:
        server = grpc.aio.server()
        pb_grpc.add_GRPCInferenceServiceServicer_to_server(Echo(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        _write_port(port_file, port)
        await server.wait_for_termination()

    uvloop.install()
    asyncio.run(main())


# ------------------------------------------------------------------ the gRPC load client (--role grpc-client)
def _grpc_client(url: str, calls_in_flight: int, duration_s: float) -> None:
    """Print one JSON line: calls, errors, seconds, this process's CPU seconds, latencies' p50/p99 (ms)."""
    import grpc
    import uvloop
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pb_grpc

    req = pb.ModelInferRequest(model_name=MODEL)
    t = req.inputs.add(name="INPUT0", datatype="FP32")
    t.shape.extend([4])
    req.raw_input_contents.append(np.arange(4, dtype="<f4").tobytes())

    async def main() -> dict[str, Any]:
        async with grpc.aio.insecure_channel(url) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            for _ in range(200):  # warm the channel and both ends
                await stub.ModelInfer(req, timeout=30)
            lat: list[float] = []
            errors = 0
            end = time.perf_counter() + duration_s

            async def loop() -> None:
                nonlocal errors
                while time.perf_counter() < end:
                    t0 = time.perf_counter()
                    try:
                        await stub.ModelInfer(req, timeout=30)
                    except grpc.aio.AioRpcError:
                        errors += 1
                    lat.append(time.perf_counter() - t0)

            c0, t0 = time.process_time(), time.perf_counter()
            await asyncio.gather(*(loop() for _ in range(calls_in_flight)))
            seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
            a = np.array(lat)
            return {"calls": len(lat), "errors": errors, "seconds": seconds, "client_cpu_s": cpu,
                    "p50_ms": float(np.percentile(a, 50) * 1e3), "p99_ms": float(np.percentile(a, 99) * 1e3)}

    uvloop.install()
    print(json.dumps(asyncio.run(main())), flush=True)


# ------------------------------------------------------------------ the driver
class _Proc:
    """A server subprocess that writes its port to a file once listening; SIGTERM on stop."""

    def __init__(self, cmd: list[str], port_files: list[Path], env: dict[str, str] | None = None) -> None:
        for p in port_files:
            p.unlink(missing_ok=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        end = time.monotonic() + 120
        while not all(p.exists() for p in port_files):
            if time.monotonic() > end or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"{cmd} did not start")
            time.sleep(0.05)
        self.ports = [int(p.read_text()) for p in port_files]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def echo() -> Any:
    """Factory ``front_door:echo`` (the served pipeline's stages): an executor that returns its payloads."""
    def run(xs: list[Any]) -> list[Any]:
        return list(xs)
    return run


def _pard_config(path: Path) -> Path:
    stage = {"profile": {1: 1e-5, 32: 2e-5}, "max_batch": 32, "workers": 1}
    factory = {"executor": "front_door:echo"}  # no work, not even sleep(0), which hands the GIL over
    doc = {"pipeline": {"name": MODEL, "slo": 30.0, "stages": [{"name": "a", **stage, "successors": ["b"]},
                                                                {"name": "b", **stage}]},
           "policy": "pard", "warmup": False, "stages": {"a": factory, "b": factory},
           "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
           "server": {"host": "127.0.0.1", "port": 0, "grpc_port": 0, "log_level": "warning", "drain_grace_s": 0.0}}
    path.write_text(yaml.safe_dump(doc))
    return path


_WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}


def _wrk(url: str, lua: Path, connections: int, duration_s: float) -> dict[str, Any]:
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{duration_s:g}s", "--latency", "-s", str(lua), url]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=duration_s + 60).stdout
    total = int(re.search(r"(\d+) requests in", text).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out: dict[str, Any] = {"requests": total, "errors": int(bad.group(1)) if bad else 0,
                           "req_s": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))}  # type: ignore[union-attr]
    for q in ("50", "99"):
        m = re.search(rf"^\s+{q}(?:\.000)?%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M)
        out[f"p{q}_ms"] = float(m.group(1)) * _WRK_UNITS[m.group(2)] if m else None
    return out


def _grpc_load(url: str, calls_in_flight: int, duration_s: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--role", "grpc-client", url, str(calls_in_flight), str(duration_s)]
    run = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=duration_s + 120)
    res = json.loads(run.stdout.strip().splitlines()[-1])
    res["req_s"] = res["calls"] / res["seconds"]
    res["requests"] = res["calls"]
    return res


def _measure(name: str, pid: int, load: Any, duration_s: float) -> dict[str, Any]:
    """32 connections: req/s and the server's CPU per request; then p50/p99 at one connection."""
    load(1, min(1.0, duration_s))  # warm-up
    s0 = _cpu_s(pid)
    rate = load(CONNECTIONS, duration_s)
    server_cpu = _cpu_s(pid) - s0
    one = load(1, duration_s)
    out = {"req_s": rate["req_s"], "requests": rate["requests"], "errors": rate["errors"] + one["errors"],
           "server_cpu_us_per_req": server_cpu / max(rate["requests"], 1) * 1e6,
           "p50_ms_1conn": one["p50_ms"], "p99_ms_1conn": one["p99_ms"]}
    if "client_cpu_s" in rate:
        out["client_cpu_us_per_req"] = rate["client_cpu_s"] / max(rate["requests"], 1) * 1e6
    print(f"{name:10s} {out['req_s']:9.0f} req/s  server {out['server_cpu_us_per_req']:6.0f} us CPU/req"
          + (f"  client {out['client_cpu_us_per_req']:6.0f} us CPU/req" if "client_cpu_us_per_req" in out else "")
          + f"  1 conn p50 {out['p50_ms_1conn']:.3f} ms p99 {out['p99_ms_1conn']:.3f} ms  errors {out['errors']}",
          file=sys.stderr, flush=True)
    return out


ALL_FRONTS = ("asgi", "starlette", "grpc_echo", "pard_http", "pard_grpc")


def fronts(duration_s: float, names: tuple[str, ...] = ALL_FRONTS) -> dict[str, Any]:
    if shutil.which("wrk") is None:
        raise SystemExit("front_door.py: wrk is not installed (Debian: apt-get install -y wrk)")
    me = [sys.executable, __file__, "--role"]
    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        lua = tmp / "post.lua"
        lua.write_text(LUA)

        def http(port: int) -> Any:
            url = f"http://127.0.0.1:{port}/v2/models/{MODEL}/infer"
            return lambda c, d: _wrk(url, lua, c, d)

        def grpc_(port: int) -> Any:
            return lambda c, d: _grpc_load(f"127.0.0.1:{port}", c, d)

        for name, role in (("asgi", "asgi"), ("starlette", "starlette"), ("grpc_echo", "grpc-echo")):
            if name not in names:
                continue
            srv = _Proc([*me, role, str(tmp / name)], [tmp / name])
            try:
                load = grpc_(srv.ports[0]) if role == "grpc-echo" else http(srv.ports[0])
                res[name] = _measure(name, srv.proc.pid, load, duration_s)
            finally:
                srv.stop()
        cfg = _pard_config(tmp / "pard.yaml")
        srv = _Proc([sys.executable, "-m", "pard.serve", str(cfg), "--port-file", str(tmp / "http"),
                     "--grpc-port-file", str(tmp / "grpc")], [tmp / "http", tmp / "grpc"],
                    env={**os.environ, "PYTHONPATH": os.pathsep.join(
                        [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")])})
        try:
            if "pard_http" in names:
                res["pard_http"] = _measure("pard_http", srv.proc.pid, http(srv.ports[0]), duration_s)
            if "pard_grpc" in names:
                res["pard_grpc"] = _measure("pard_grpc", srv.proc.pid, grpc_(srv.ports[1]), duration_s)
        finally:
            srv.stop()
    return res


def _median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each front's figures as the median over ``rounds`` (every round kept under ``rounds``), and the ratios."""
    out: dict[str, Any] = {}
    for name in rounds[0]:
        keys = [k for k, v in rounds[0][name].items() if isinstance(v, (int, float))]
        out[name] = {k: float(np.median([r[name][k] for r in rounds if r[name].get(k) is not None]))
                     for k in keys}
        out[name]["rounds_req_s"] = [r[name]["req_s"] for r in rounds]
    # a ratio per round (its two servers measured minutes apart at most), then their median: on a shared
    # machine the load moves between rounds more than between the two measures of one round
    pairs = [(a, b) for a, b in (("pard_grpc", "grpc_echo"), ("pard_http", "asgi"), ("starlette", "asgi"),
                                 ("pard_grpc", "pard_http")) if a in out and b in out]
    out["ratios"] = {f"{a}_over_{b}_req_s": float(np.median([r[a]["req_s"] / r[b]["req_s"] for r in rounds]))
                     for a, b in pairs}
    out["ratios_each_round"] = {f"{a}_over_{b}_req_s": [r[a]["req_s"] / r[b]["req_s"] for r in rounds]
                                for a, b in pairs}
    out["ratios"].update({f"{a}_over_{b}_server_cpu_per_req": float(np.median(
        [r[a]["server_cpu_us_per_req"] / r[b]["server_cpu_us_per_req"] for r in rounds]))
        for a, b in (("pard_grpc", "grpc_echo"), ("pard_http", "asgi")) if a in out and b in out})
    return out


async def _queue_pipeline_burst(n: int) -> float:
    """Seconds for ``n`` requests through two asyncio.Queue stages that do no work, all sent at once."""
    loop = asyncio.get_running_loop()
    q1: asyncio.Queue[Any] = asyncio.Queue()
    q2: asyncio.Queue[Any] = asyncio.Queue()

    async def stage(inbox: asyncio.Queue[Any], outbox: asyncio.Queue[Any] | None) -> None:
        while True:
            x, fut = await inbox.get()
            if outbox is None:
                fut.set_result(x)
            else:
                outbox.put_nowait((x, fut))

    workers = [asyncio.ensure_future(stage(q1, q2)), asyncio.ensure_future(stage(q2, None))]

    async def infer(x: Any) -> Any:
        fut = loop.create_future()
        q1.put_nowait((x, fut))
        return await fut

    x = np.zeros(4, np.float32)
    t = time.perf_counter()
    await asyncio.gather(*(infer(x) for _ in range(n)))
    elapsed = time.perf_counter() - t
    for w in workers:
        w.cancel()
    return elapsed


#: Rounds of each burst, the best kept: a burst lasts a tenth of a second, and on a shared 2-vCPU machine an
#: occasional round runs several times slower, for either side.
BURST_ROUNDS = 5


def runtime_burst(n: int) -> dict[str, float]:
    """``await rt.infer(x)`` of ``n`` requests at once through pard's two no-work stages, against the same burst
    through :func:`_queue_pipeline_burst` (µs per request; the best of BURST_ROUNDS rounds each, interleaved)."""
    import pard

    def echo(xs: list[Any]) -> list[Any]:
        return list(xs)

    spec = pard.PipelineSpec(name=MODEL, slo=30.0, stages=[
        pard.StageSpec(name="a", profile={1: 1e-5, 32: 2e-5}, max_batch=32, successors=["b"]),
        pard.StageSpec(name="b", profile={1: 1e-5, 32: 2e-5}, max_batch=32)])
    x = np.zeros(4, np.float32)
    best_rt = best_q = float("inf")
    with pard.Runtime(spec, {"a": echo, "b": echo}, blas_threads=None) as rt:
        async def burst() -> float:
            t = time.perf_counter()
            await asyncio.gather(*(rt.infer(x) for _ in range(n)))
            return time.perf_counter() - t

        for _ in range(BURST_ROUNDS):
            best_rt = min(best_rt, asyncio.run(burst()))
            best_q = min(best_q, asyncio.run(_queue_pipeline_burst(n)))
    out = {"requests": n, "pard_runtime_us_per_req": best_rt / n * 1e6, "asyncio_queues_us_per_req": best_q / n * 1e6}
    out["pard_over_queues"] = out["pard_runtime_us_per_req"] / out["asyncio_queues_us_per_req"]
    print(f"burst of {n}: rt.infer {out['pard_runtime_us_per_req']:.1f} us/req, asyncio.Queue pipeline "
          f"{out['asyncio_queues_us_per_req']:.1f} us/req", file=sys.stderr, flush=True)
    return out


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--role":
        role, rest = sys.argv[2], sys.argv[3:]
        if role == "asgi":
            _serve_http(_asgi_app(), rest[0])
        elif role == "starlette":
            _serve_http(_starlette_app(), rest[0])
        elif role == "grpc-echo":
            _grpc_echo(rest[0])
        elif role == "grpc-client":
            _grpc_client(rest[0], int(rest[1]), float(rest[2]))
        else:
            raise SystemExit(f"unknown role {role!r}")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 s per measure and a burst of 2 000 (default 10 s, 10 000)")
    parser.add_argument("--fronts", default=",".join(ALL_FRONTS),
                        help=f"the servers to measure, comma-separated (default: all of {','.join(ALL_FRONTS)})")
    parser.add_argument("--duration", type=float, default=None, help="seconds per measure (default 10; --quick: 3)")
    parser.add_argument("--rounds", type=int, default=None, help="measure every server this many times, "
                        "interleaved, and report medians (default 3; --quick: 1)")
    parser.add_argument("--no-burst", action="store_true", help="skip the rt.infer burst")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the results here as JSON")
    args = parser.parse_args()
    duration = args.duration or (3.0 if args.quick else 10.0)
    res: dict[str, Any] = {"cpus": os.cpu_count(), "load_average_before": os.getloadavg(), "duration_s": duration,
                           "connections": CONNECTIONS}
    names = tuple(n for n in args.fronts.split(",") if n)
    unknown = sorted(set(names) - set(ALL_FRONTS))
    if unknown:
        parser.error(f"--fronts: unknown {unknown}; choose from {list(ALL_FRONTS)}")
    rounds = args.rounds or (1 if args.quick else 3)
    res["rounds"] = rounds
    res["fronts"] = _median_of([fronts(duration, names) for _ in range(rounds)])
    if not args.no_burst:
        res["burst"] = runtime_burst(2000 if args.quick else 10000)
    res["load_average_after"] = os.getloadavg()
    text = json.dumps(res, indent=2)
    if args.json is not None:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
