"""pard serve exposed directly: does a well-behaved client still get served while others attack it?

    python bench/serve_hardening.py [--duration-s 30] [--fd-limit 1024] [--unprotected] [--json]

Starts ``python -m pard.serve`` on a two-stage pipeline whose stages sleep exactly their profile
(capacity 100 req/s, SLO 0.3 s; the input is one FP32 [4] vector), with the server's open-file limit
(soft and hard) set to ``--fd-limit``, then for ``--duration-s`` runs three clients at once:

* **half-open**: keeps ``--half-open`` connections (2 000) open, each having sent half a request header,
  re-opening those the server closes (at most ``--churn`` a second);
* **big bodies**: sends 60 MiB JSON bodies one after another, alternately with ``Content-Length`` and
  chunked, reading any early answer (413) between 1 MiB chunks;
* **well-behaved**: open loop, ``--rate`` (20) small requests a second on a keep-alive pool; a request is
  on time when it is answered 200 within the SLO, measured by the client.  A readiness probe
  (``/v2/health/ready``) every 0.5 s records its worst latency.

Reports the well-behaved client's on-time share, the readiness probe's worst latency, the big-body
client's answers, the server's peak RSS (``VmHWM`` from /proc) and peak open descriptors, and the size of
the server's log.  ``--unprotected`` runs the same against the limits of an unhardened server
(``header_timeout_s`` 3 600, ``max_connections`` 100 000, ``max_body_bytes`` 64 MiB), for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import yaml

__all__: list[str] = []

SLO_S = 0.3
INFER = "/v2/models/duo/infer"
HALF_HEADER = f"POST {INFER} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl".encode()
BIG_BODY_BYTES = 60 * 2**20
CHUNK = 2**20


def _config(unprotected: bool) -> dict[str, Any]:
    sleep = {"executor": "pard.serve.factories:sleep_profile"}
    server: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "log_level": "info", "drain_grace_s": 0.5}
    if unprotected:
        server.update(header_timeout_s=3600.0, max_connections=100_000, max_body_bytes=64 * 2**20)
    return {
        "pipeline": {"name": "duo", "slo": SLO_S, "stages": [
            {"name": "detect", "profile": {1: 0.04, 4: 0.06, 8: 0.08}, "max_batch": 8, "successors": ["classify"]},
            {"name": "classify", "profile": {1: 0.01, 8: 0.03}, "max_batch": 8}]},
        "policy": "pard", "stages": {"detect": sleep, "classify": sleep},
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}], "server": server,
    }


def _big_body() -> bytes:
    """A valid v2 JSON body of about 60 MiB (its shape is not the declared one: decoded, it is a 400)."""
    n = BIG_BODY_BYTES // 4
    head = f'{{"inputs":[{{"name":"INPUT0","shape":[{n}],"datatype":"FP32","data":['.encode()
    return head + b"0.5," * (n - 1) + b"0.5]}]}"


class _Stop:
    def __init__(self) -> None:
        self.event = threading.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()


def _readable(socks: list[socket.socket], timeout_s: float) -> list[socket.socket]:
    """The sockets of ``socks`` with data or EOF to read (poll: descriptors past 1 024 are fine)."""
    if not socks:
        return []
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    return [by_fd[fd] for fd, _ in poller.poll(timeout_s * 1000)]


def _half_open(port: int, count: int, churn: float, stop: _Stop, stats: Counter[str]) -> None:
    """Keep ``count`` connections open with half a header sent; re-open those the server closes."""
    conns: list[socket.socket] = []
    budget, last = 0.0, time.monotonic()
    while not stop:
        now = time.monotonic()
        budget = min(churn, budget + (now - last) * churn)
        last = now
        while len(conns) < count and budget >= 1 and not stop:
            budget -= 1
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2.0)
                s.sendall(HALF_HEADER)
                conns.append(s)
                stats["opened"] += 1
            except OSError:
                stats["connect_failed"] += 1
                break
        for s in _readable(conns, 0.05):
            try:
                s.recv(4096)
            except OSError:
                pass
            s.close()
            conns.remove(s)
            stats["closed_by_server"] += 1
        if not conns:
            time.sleep(0.05)
    for s in conns:
        s.close()


def _big_bodies(port: int, body: bytes, stop: _Stop, stats: Counter[str]) -> None:
    """Send ``body`` again and again, alternately with Content-Length and chunked; count the answers."""
    i = 0
    while not stop:
        i += 1
        chunked = i % 2 == 0
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30.0)
        except OSError:
            stats["connect_failed"] += 1
            time.sleep(0.1)
            continue
        answer = b""
        try:
            s.sendall(f"POST {INFER} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"{framing}\r\n\r\n".encode())
            for pos in range(0, len(body), CHUNK):
                if _readable([s], 0):  # answered early (413): stop sending
                    break
                part = body[pos:pos + CHUNK]
                s.sendall(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
            else:
                if chunked:
                    s.sendall(b"0\r\n\r\n")
            s.settimeout(60.0)
            while b"\r\n" not in answer:
                got = s.recv(4096)
                if not got:
                    break
                answer += got
        except OSError as exc:
            stats[f"error_{type(exc).__name__}"] += 1
        finally:
            s.close()
        status = answer.split(b" ", 2)[1].decode() if answer.count(b" ") >= 2 else "none"
        stats[f"{'chunked' if chunked else 'length'}_{status}"] += 1


async def _well_behaved(url: str, rate: float, duration_s: float) -> dict[str, Any]:
    """Open loop at ``rate`` req/s for ``duration_s``; plus a readiness probe every 0.5 s."""
    outcomes: Counter[str] = Counter()
    ready_worst = 0.0
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
    async with httpx.AsyncClient(base_url=url, timeout=10.0, limits=limits) as client:
        async def one(i: int) -> None:
            t0 = time.perf_counter()
            body = {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [float(i), 0, 0, 0]}]}
            try:
                r = await client.post(INFER, json=body)
            except httpx.HTTPError as exc:
                outcomes[f"error_{type(exc).__name__}"] += 1
                return
            late = time.perf_counter() - t0 > SLO_S
            kind = "on_time" if r.status_code == 200 and not late else f"{r.status_code}{'_late' if late else ''}"
            outcomes[kind] += 1

        async def probe() -> None:
            nonlocal ready_worst
            end = time.perf_counter() + duration_s
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                try:
                    await client.get("/v2/health/ready")
                except httpx.HTTPError:
                    pass
                ready_worst = max(ready_worst, time.perf_counter() - t0)
                await asyncio.sleep(0.5)

        prober = asyncio.ensure_future(probe())
        tasks, t0 = [], time.perf_counter()
        n = int(rate * duration_s)
        for i in range(n):
            await asyncio.sleep(max(0.0, i / rate - (time.perf_counter() - t0)))
            tasks.append(asyncio.ensure_future(one(i)))
        await asyncio.gather(*tasks, prober)
    return {"sent": n, "outcomes": dict(outcomes), "on_time_share": outcomes["on_time"] / max(n, 1),
            "ready_worst_s": ready_worst}


def _proc(pid: int) -> tuple[int, int]:
    """(VmHWM in bytes, open descriptors) of ``pid``."""
    hwm = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = 0
    return hwm, fds


def run(duration_s: float, fd_limit: int, half_open: int, churn: float, rate: float,
        unprotected: bool) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this process holds the half-open connections
    tmp = Path(tempfile.mkdtemp(prefix="pard-hardening-"))
    (tmp / "serve.yaml").write_text(yaml.safe_dump(_config(unprotected)))
    log_path = tmp / "server.log"
    port_file = tmp / "port"

    def limit_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "pard.serve", str(tmp / "serve.yaml"), "--port", "0",
                                 "--port-file", str(port_file)], stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=limit_fds, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            end = time.monotonic() + 120
            while not port_file.exists():
                if proc.poll() is not None or time.monotonic() > end:
                    raise SystemExit(f"the server did not start: {log_path.read_text()}")
                time.sleep(0.05)
            port = int(port_file.read_text())
            url = f"http://127.0.0.1:{port}"
            stop = _Stop()
            half_stats: Counter[str] = Counter()
            big_stats: Counter[str] = Counter()
            body = _big_body()
            peak_fds = 0

            def sample() -> None:
                nonlocal peak_fds
                while not stop:
                    peak_fds = max(peak_fds, _proc(proc.pid)[1])
                    time.sleep(0.2)

            threads = [threading.Thread(target=_half_open, args=(port, half_open, churn, stop, half_stats)),
                       threading.Thread(target=_big_bodies, args=(port, body, stop, big_stats)),
                       threading.Thread(target=sample)]
            for t in threads:
                t.start()
            time.sleep(2.0)  # the attack is under way before the measured client starts
            try:
                good = asyncio.run(_well_behaved(url, rate, duration_s))
            finally:
                stop.event.set()
                for t in threads:
                    t.join(90)
            peak_rss, _ = _proc(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    text = log_path.read_text(errors="replace")
    return {
        "unprotected": unprotected, "duration_s": duration_s, "fd_limit": fd_limit, "rate_req_s": rate,
        "half_open_target": half_open, "well_behaved": good, "half_open": dict(half_stats),
        "big_bodies": dict(big_stats), "server_peak_rss_mib": round(peak_rss / 2**20, 1),
        "server_peak_fds": peak_fds, "server_log_bytes": log_path.stat().st_size,
        "server_log_tracebacks": text.count("Traceback"), "server_log_tail": text.splitlines()[-8:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=30.0)
    parser.add_argument("--fd-limit", type=int, default=1024, help="the server's RLIMIT_NOFILE (soft and hard)")
    parser.add_argument("--half-open", type=int, default=2000)
    parser.add_argument("--churn", type=float, default=500.0, help="half-open re-opens per second at most")
    parser.add_argument("--rate", type=float, default=20.0, help="the well-behaved client's requests per second")
    parser.add_argument("--unprotected", action="store_true", help="an unhardened server's limits, for comparison")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = run(args.duration_s, args.fd_limit, args.half_open, args.churn, args.rate, args.unprotected)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    good = result["well_behaved"]
    print(f"{'unprotected' if args.unprotected else 'hardened'} server, fd limit {args.fd_limit}, "
          f"{args.half_open} half-open connections, 60 MiB bodies, {args.duration_s:g} s")
    print(f"  well-behaved: {good['on_time_share']:.1%} on time of {good['sent']} ({good['outcomes']}); "
          f"worst /v2/health/ready {good['ready_worst_s'] * 1e3:.0f} ms")
    print(f"  half-open: {result['half_open']}")
    print(f"  big bodies: {result['big_bodies']}")
    print(f"  server: peak RSS {result['server_peak_rss_mib']} MiB, peak fds {result['server_peak_fds']}, "
          f"log {result['server_log_bytes']} bytes, {result['server_log_tracebacks']} tracebacks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
