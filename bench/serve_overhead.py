"""What the asyncio API and the HTTP front cost, against the embedded runtime, in one run (issue 12).

    python bench/serve_overhead.py [--out bench/serve_overhead.json]

Three measurements, each against its baseline measured in the same run on the same pipeline:

1. **asyncio API overhead per request**: N requests through a two-stage pipeline whose stages do no
   work, all in flight at once -- ``submit()`` from one thread then ``result()`` on each future
   (baseline) vs ``asyncio.gather`` of ``await rt.infer()`` -- and one at a time (round trip).
2. **HTTP front added latency**: Poisson arrivals at a low rate (no queueing) through two stages
   that sleep exactly their profile (5 ms + 5 ms at batch 1); latency measured by the client,
   embedded (``submit`` timed to its future's callback) vs over HTTP (httpx to ``pard serve`` on
   127.0.0.1, JSON body).  Added p50/p99 = HTTP minus embedded.
3. **Max sustainable rate on 2 cores**: the no-work pipeline, closed loop with C requests always
   in flight for T s: ``await rt.infer`` in the same process (embedded) vs httpx clients to
   ``pard serve`` (the server process and the client process pinned to the same 2 cores).  The
   client's own CPU (httpx: several ms per request) shares those cores, so the HTTP rate is a
   lower bound for a server whose clients run elsewhere.  Because the machine is shared, the
   CPU time per request is recorded too (the server process's from /proc, the client's and the
   embedded process's from ``time.process_time``), and the rate two otherwise idle cores would
   sustain is derived from it: ``2 / cpu_per_request``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import pard

__all__: list[str] = []

N_API = 4000
SLEEP_D_S = 0.005
LAT_RATE_REQ_S = 20.0
LAT_DURATION_S = 15.0
THROUGHPUT_S = 10.0
CONCURRENCY = 32


def _spec(d_s: float, slo: float = 30.0) -> pard.PipelineSpec:
    return pard.PipelineSpec(name="bench", slo=slo, stages=[
        pard.StageSpec(name="a", profile={1: max(d_s, 1e-5), 32: max(d_s, 1e-5) * 2}, max_batch=32,
                       successors=["b"]),
        pard.StageSpec(name="b", profile={1: max(d_s, 1e-5), 32: max(d_s, 1e-5) * 2}, max_batch=32),
    ])


def _echo(xs: list[Any]) -> list[Any]:
    return list(xs)


# ------------------------------------------------------------------ 1. asyncio API overhead
def api_overhead() -> dict[str, float]:
    x = np.zeros(4, dtype=np.float32)
    out: dict[str, float] = {}
    with pard.Runtime(_spec(0.0), {"a": _echo, "b": _echo}, blas_threads=None) as rt:
        for _ in range(2):  # warm both paths; keep the second round
            t = time.perf_counter()
            futs = [rt.submit(x) for _ in range(N_API)]
            for f in futs:
                f.result()
            out["submit_burst_us"] = (time.perf_counter() - t) / N_API * 1e6

            async def burst() -> float:
                t = time.perf_counter()
                await asyncio.gather(*(rt.infer(x) for _ in range(N_API)))
                return time.perf_counter() - t

            out["infer_burst_us"] = asyncio.run(burst()) / N_API * 1e6
        t = time.perf_counter()
        for _ in range(500):
            rt.submit(x).result()
        out["submit_roundtrip_us"] = (time.perf_counter() - t) / 500 * 1e6

        async def one_by_one() -> float:
            t = time.perf_counter()
            for _ in range(500):
                await rt.infer(x)
            return time.perf_counter() - t

        out["infer_roundtrip_us"] = asyncio.run(one_by_one()) / 500 * 1e6
    out["burst_overhead_us"] = out["infer_burst_us"] - out["submit_burst_us"]
    out["roundtrip_overhead_us"] = out["infer_roundtrip_us"] - out["submit_roundtrip_us"]
    return out


# ------------------------------------------------------------------ the server process
def _config(d_s: float, path: Path) -> Path:
    spec = _spec(d_s).to_dict()
    doc = {"pipeline": spec, "policy": "pard", "warmup": False,
           "stages": {"a": {"executor": "pard.serve.factories:sleep_profile", "kwargs": {"factor": 1.0 if d_s else 0.0}},
                      "b": {"executor": "pard.serve.factories:sleep_profile", "kwargs": {"factor": 1.0 if d_s else 0.0}}},
           "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
           "server": {"host": "127.0.0.1", "port": 0, "log_level": "warning", "drain_grace_s": 0.0}}
    path.write_text(yaml.safe_dump(doc))
    return path


class _Server:
    def __init__(self, config: Path, cpus: str | None) -> None:
        self.port_file = config.with_suffix(".port")
        self.port_file.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "pard.serve", str(config), "--port", "0", "--port-file", str(self.port_file)]
        if cpus:
            cmd = ["taskset", "-c", cpus, *cmd]
        self.proc = subprocess.Popen(cmd)
        end = time.monotonic() + 120
        while not self.port_file.exists():
            if time.monotonic() > end or self.proc.poll() is not None:
                raise RuntimeError("pard serve did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{int(self.port_file.read_text())}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def _body() -> dict[str, Any]:
    return {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [0.0, 1.0, 2.0, 3.0]}]}


# ------------------------------------------------------------------ 2. added latency
def _arrivals() -> np.ndarray:
    rng = np.random.default_rng(12)
    gaps = rng.exponential(1.0 / LAT_RATE_REQ_S, size=int(LAT_RATE_REQ_S * LAT_DURATION_S * 2))
    t = np.cumsum(gaps)
    return t[t < LAT_DURATION_S]


def embedded_latency(arrivals: np.ndarray) -> np.ndarray:
    x = np.zeros(4, dtype=np.float32)
    lat: list[float] = []
    done = threading.Event()
    left = [arrivals.size]
    lock = threading.Lock()
    from pard.serve.factories import sleep_profile

    spec = _spec(SLEEP_D_S)
    stages = {st.name: sleep_profile(stage=st) for st in spec.stages}  # the executors pard serve runs
    with pard.Runtime(spec, stages, blas_threads=None) as rt:
        t0 = time.perf_counter()
        for t in arrivals.tolist():
            delay = t - (time.perf_counter() - t0)
            if delay > 0:
                time.sleep(delay)
            sent = time.perf_counter()

            def finished(_: Any, sent: float = sent) -> None:
                with lock:
                    lat.append(time.perf_counter() - sent)
                    left[0] -= 1
                    if left[0] == 0:
                        done.set()

            rt.submit(x).add_done_callback(finished)
        done.wait(60)
    return np.asarray(lat)


async def _http_latency(url: str, arrivals: np.ndarray) -> np.ndarray:
    import httpx

    lat: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
        for _ in range(20):  # open connections and warm both ends
            await client.post("/v2/models/bench/infer", json=_body())

        async def one() -> None:
            sent = time.perf_counter()
            r = await client.post("/v2/models/bench/infer", json=_body())
            assert r.status_code == 200, r.text
            lat.append(time.perf_counter() - sent)

        tasks = []
        t0 = time.perf_counter()
        for t in arrivals.tolist():
            await asyncio.sleep(max(0.0, t - (time.perf_counter() - t0)))
            tasks.append(asyncio.ensure_future(one()))
        await asyncio.gather(*tasks)
    return np.asarray(lat)


# ------------------------------------------------------------------ 3. max sustainable rate
def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def embedded_rate() -> tuple[float, float]:
    """(requests/s, CPU s per request) of the closed loop on the embedded runtime."""
    x = np.zeros(4, dtype=np.float32)
    with pard.Runtime(_spec(0.0), {"a": _echo, "b": _echo}, blas_threads=None) as rt:
        async def closed_loop() -> float:
            count = 0
            end = time.perf_counter() + THROUGHPUT_S

            async def worker() -> None:
                nonlocal count
                while time.perf_counter() < end:
                    await rt.infer(x)
                    count += 1

            t = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
            return count / (time.perf_counter() - t), count

        c0 = time.process_time()
        rate, count = asyncio.run(closed_loop())
        return rate, (time.process_time() - c0) / count


async def _http_rate(url: str, pid: int) -> tuple[float, float, float]:
    """(requests/s, server CPU s per request, client CPU s per request) of the closed loop over HTTP."""
    import httpx

    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=url, timeout=30.0, limits=limits) as client:
        count = 0
        end = time.perf_counter() + THROUGHPUT_S

        async def worker() -> None:
            nonlocal count
            while time.perf_counter() < end:
                r = await client.post("/v2/models/bench/infer", json=_body())
                assert r.status_code == 200, r.text
                count += 1

        t = time.perf_counter()
        s0, c0 = _cpu_s(pid), time.process_time()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        rate = count / (time.perf_counter() - t)
        return rate, (_cpu_s(pid) - s0) / count, (time.process_time() - c0) / count


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q) * 1e3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/serve_overhead.json"))
    parser.add_argument("--cpus", default="0,1", help="the cores to pin to (taskset -c); '' to not pin")
    args = parser.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    res: dict[str, Any] = {"cpus": args.cpus, "load_average_before": os.getloadavg()}
    res["api"] = api_overhead()
    print("asyncio API:", json.dumps(res["api"], indent=1), flush=True)

    arrivals = _arrivals()
    emb = embedded_latency(arrivals)
    with tempfile.TemporaryDirectory() as tmp:
        srv = _Server(_config(SLEEP_D_S, Path(tmp) / "lat.yaml"), args.cpus)
        try:
            http = asyncio.run(_http_latency(srv.url, arrivals))
        finally:
            srv.stop()
        res["latency_ms"] = {
            "requests": int(arrivals.size), "rate_req_s": LAT_RATE_REQ_S, "stage_d_s": SLEEP_D_S,
            "embedded_p50": _pct(emb, 50), "embedded_p99": _pct(emb, 99),
            "http_p50": _pct(http, 50), "http_p99": _pct(http, 99),
        }
        lat = res["latency_ms"]
        lat["added_p50"] = lat["http_p50"] - lat["embedded_p50"]
        lat["added_p99"] = lat["http_p99"] - lat["embedded_p99"]
        print("latency:", json.dumps(lat, indent=1), flush=True)

        rate_emb, cpu_emb = embedded_rate()
        srv = _Server(_config(0.0, Path(tmp) / "rate.yaml"), args.cpus)
        try:
            rate_http, cpu_srv, cpu_cli = asyncio.run(_http_rate(srv.url, srv.proc.pid))
        finally:
            srv.stop()
    res["rate_req_s"] = {"embedded": rate_emb, "http": rate_http, "http_over_embedded": rate_http / rate_emb,
                         "concurrency": CONCURRENCY, "duration_s": THROUGHPUT_S}
    res["cpu_ms_per_request"] = {"embedded": cpu_emb * 1e3, "http_server": cpu_srv * 1e3,
                                 "http_client": cpu_cli * 1e3}
    res["rate_on_2_idle_cores_req_s"] = {
        "embedded": 2 / cpu_emb, "http_server_and_client": 2 / (cpu_srv + cpu_cli), "http_server_only": 2 / cpu_srv,
        "http_over_embedded": cpu_emb / (cpu_srv + cpu_cli)}
    res["load_average_after"] = os.getloadavg()
    print("rate:", json.dumps(res["rate_req_s"], indent=1), json.dumps(res["cpu_ms_per_request"], indent=1),
          json.dumps(res["rate_on_2_idle_cores_req_s"], indent=1), flush=True)
    args.out.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
