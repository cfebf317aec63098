"""Does ``pard serve``'s goodput plateau past the server's capacity, or collapse?

    python bench/served_overload.py --pipeline sleep [--pipeline tm] [--seconds 6] [--runs 2] [--json out.json]
    python bench/served_overload.py --quick                  # smoke: 2 s per level, 1 run, levels 0.5 and 10
    python bench/served_overload.py --soak 300               # pard at 10x for 300 s, per 30 s window

What it measures, per pipeline:

1. **Capacity**: a ``pard serve`` (policy pard) under a closed loop: ``--concurrency`` connections
   (default 32), each sending its next request when its answer comes, for ``--capacity-seconds``.
   The on-time 200s per second is the capacity ``C``.
2. **Overload sweep**: open-loop Poisson load at ``--levels`` x ``C`` (default 0.5, 1, 2, 4, 10),
   ``--seconds`` each, for each policy (default pard, nexus, naive).  Every (policy, level, run) gets
   a fresh ``pard serve`` subprocess (127.0.0.1, port 0, ``--port-file``), so no backlog carries from
   one level to the next.  Interleaving: at each level, ``--runs`` rounds of pard, nexus, naive in
   that order (ABC ABC), levels ascending; the policies of one round share one seeded arrival
   schedule (common random numbers), rounds use different seeds.
3. **Soak** (``--soak S``): one policy at one level for S s; per 30 s window the on-time/s, the late
   share of 200s and the server's RSS.

The client (``bench/served_overload_client.py``) is its own process: one epoll loop over raw
non-blocking sockets, keep-alive connections opened as needed up to ``--max-conns`` (then HTTP/1.1
pipelining), a pre-built v2 JSON POST per request.  A request's deadline is its send time plus the
pipeline's SLO (read from the model metadata); a 200 read by then is *on time*, a 200 read after it
is *late*; no answer by deadline + 1 s is *no answer*, whatever comes later.  The client reports its
own CPU time (``getrusage``), since it shares the machine's cores with the server.

Per (policy, level, run) it reports: offered req/s, on-time answers/s, late 200s and their share of
200s, 429/503/504 counts, no-answer count, p50/p99 of on-time answers, server CPU/s (``/proc``) and
client CPU/s, server CPU ms per request (the refusal cost: compare 10x with 0.5x), p50 latency of
the 429/503 answers (time to refuse), and stage speed: per stage, its measured batch durations over
its profile's ``d(b)`` for the same batches (1.0 = as profiled; > 1 slower); and a readiness probe
during the level (:class:`ReadyProbe`: a new connection and ``GET /v2/health/ready`` every 0.1 s, as a
kubelet probes), its p50/p99/max latency and the probes over 100 ms and over 1 s.

Stage speed needs batch durations, which neither ``/metrics`` (batch sizes only) nor the exit report
holds, so each stage's executor is wrapped by :func:`timed_stage` (this module, imported by the
server process through its served-pipeline file): it times the inner executor's call and adds
(batches, requests, seconds, profile seconds) to the stage's row of a small shared memory-mapped
file that this process reads before and after the level.  The wrapper costs two ``perf_counter``
calls and a lock per batch.

Cross-check: after each level, the server's ``pard_requests_total`` by outcome (``/metrics``, after
minus before) must match the client's answers by status (200 = on_time + late, with the late ones
matching ``X-Pard-Outcome: late``; 429 = rejected; 503/504/408 = dropped + unavailable; 500 = failed
+ output_error; 4xx = invalid): every request exactly one answer.  A mismatch prints loudly.

The done-when figure (printed last): for each pipeline and policy, the on-time/s at each level as a
ratio of that policy's best level, and pard / nexus per level.  A server that plateaus holds ~1.0
from 1x up; one that collapses falls towards 0 at 4x and 10x.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLIENT = HERE / "served_overload_client.py"
PROBE_COLUMNS = 4  # batches, requests, measured seconds, profile seconds

#: three stages that sleep their profile: peaks 1 000, 800, 1 333 req/s at batch 32; SLO 250 ms.  A closed
#: loop of 32 connections gets about 550-600 on-time req/s from it on 2 cores (latency-bound, not CPU-bound).
SLEEP_PIPELINE: dict[str, Any] = {
    "name": "trio", "slo": 0.25, "stages": [
        {"name": "decode", "profile": {1: 0.0025, 8: 0.010, 32: 0.032}, "max_batch": 32, "workers": 1,
         "successors": ["detect"]},
        {"name": "detect", "profile": {1: 0.003, 8: 0.012, 32: 0.040}, "max_batch": 32, "workers": 1,
         "successors": ["classify"]},
        {"name": "classify", "profile": {1: 0.002, 8: 0.006, 32: 0.024}, "max_batch": 32, "workers": 1},
    ],
}


# ====================================================================== the stage-timing probe
class _TimedStage:
    """Times each batch of ``inner`` and adds it to ``row`` = [batches, requests, seconds, profile seconds]."""

    def __init__(self, inner: Any, stage: Any, row: np.ndarray) -> None:
        self.inner, self.stage, self.row = inner, stage, row
        self.lock = threading.Lock()

    def __call__(self, payloads: list[Any]) -> Any:
        t = time.perf_counter()
        out = self.inner(payloads)
        took = time.perf_counter() - t
        b = len(payloads)
        with self.lock:
            self.row += (1.0, b, took, float(self.stage.duration(b)))
        return out


def timed_stage(*, stage: Any, pipeline: Any, inner: str, probe: str, row: int,
                inner_kwargs: dict[str, Any] | None = None) -> Any:
    """Executor factory (``served_overload:timed_stage``): ``inner`` (``module:factory``) built with
    ``inner_kwargs`` (plus ``stage``/``pipeline`` where it takes them), each batch timed into row ``row``
    of the float64 memory map at ``probe``."""
    import importlib
    import inspect

    module, _, attr = inner.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    kwargs = dict(inner_kwargs or {})
    params = inspect.signature(factory).parameters
    kwargs.update({k: v for k, v in (("stage", stage), ("pipeline", pipeline)) if k in params})
    table = np.memmap(probe, dtype=np.float64, mode="r+")
    return _TimedStage(factory(**kwargs), stage, table[row * PROBE_COLUMNS:(row + 1) * PROBE_COLUMNS])


def read_probe(path: Path, n_stages: int) -> np.ndarray:
    return np.array(np.memmap(path, dtype=np.float64, mode="r", shape=(n_stages, PROBE_COLUMNS)))


# ====================================================================== pipelines
@dataclass
class Pipeline:
    """A served-pipeline document (policy filled in per server), its stage order and one request body."""

    key: str
    doc: dict[str, Any]
    stages: list[str]
    body: bytes


def _timed_stages(stages: dict[str, dict[str, Any]], probe: Path) -> dict[str, Any]:
    """The ``stages`` field with each executor wrapped by :func:`timed_stage` (row = its position)."""
    return {name: {"executor": "served_overload:timed_stage",
                   "kwargs": {"inner": ref["executor"], "inner_kwargs": dict(ref.get("kwargs") or {}),
                              "probe": str(probe), "row": i}}
            for i, (name, ref) in enumerate(stages.items())}


def _v2_body(shape: list[int], seed: int) -> bytes:
    """A v2 JSON body with one FP32 input of ``shape``, seeded values in [0, 1) with 3 decimals."""
    rng = np.random.default_rng(seed)
    data = [round(float(v), 3) for v in rng.random(int(np.prod(shape)))]
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": shape, "datatype": "FP32", "data": data}]}).encode()


def sleep_pipeline() -> Pipeline:
    """Three stages that sleep exactly their profile (``pard.serve.factories:sleep_profile``), FP32 [4] input."""
    sleep = {"executor": "pard.serve.factories:sleep_profile"}
    names = [st["name"] for st in SLEEP_PIPELINE["stages"]]
    doc = {"pipeline": SLEEP_PIPELINE, "stages": {n: sleep for n in names},
           "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}]}
    return Pipeline("sleep", doc, names, _v2_body([4], 0))


def tm_pipeline() -> Pipeline:
    """examples/tm.yaml as it is (NumPy reference models, a 32x32x3 FP32 image, max_queue_size 256); a
    pipeline file it names (e.g. a measured profile) is resolved against examples/."""
    import yaml

    doc = yaml.safe_load((REPO / "examples" / "tm.yaml").read_text())
    if isinstance(doc["pipeline"], str) and (REPO / "examples" / doc["pipeline"]).is_file():
        doc["pipeline"] = str(REPO / "examples" / doc["pipeline"])
    return Pipeline("tm", doc, list(doc["stages"]), _v2_body(doc["inputs"][0]["shape"], 0))


PIPELINES = {"sleep": sleep_pipeline, "tm": tm_pipeline}
#: The readiness probe's period and timeout (s): Kubernetes' default timeout is 1 s.
PROBE_EVERY_S = 0.1
PROBE_TIMEOUT_S = 1.0


# ====================================================================== the server process
def _get(port: int, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _exceptions(log: str) -> dict[str, int]:
    """The last line of every traceback in ``log`` (the exception raised), counted."""
    out: dict[str, int] = {}
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):
            j = i + 1
            while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
                j += 1
            if j < len(lines):
                out[lines[j][:200]] = out.get(lines[j][:200], 0) + 1
    return out


class Server:
    """``python -m pard.serve`` on 127.0.0.1 port 0 for ``pipeline`` under ``policy``; :meth:`stop` returns
    its exit report (``--report``)."""

    def __init__(self, pipeline: Pipeline, policy: str, workdir: Path) -> None:
        import yaml

        self.pipeline = pipeline
        self.dir = workdir
        self.probe = workdir / "probe.f64"
        np.zeros(len(pipeline.stages) * PROBE_COLUMNS).tofile(self.probe)
        doc = json.loads(json.dumps(pipeline.doc))
        doc["stages"] = _timed_stages(doc["stages"], self.probe)
        doc["policy"] = policy
        doc["server"] = {**doc.get("server", {}), "host": "127.0.0.1", "port": 0, "log_level": "warning",
                         "drain_grace_s": 0.0, "drain_timeout_s": 15.0}
        config = workdir / "serve.yaml"
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        from pard.serve.config import load_serve_config

        self.config = load_serve_config(config)
        self.spec = self.config.pipeline_spec()
        self.port_file, self.report_file = workdir / "port", workdir / "report.json"
        for stale in (self.port_file, self.report_file):
            stale.unlink(missing_ok=True)
        self.log_path = workdir / "server.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)}
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pard.serve", str(config), "--port", "0", "--port-file", str(self.port_file),
                 "--report", str(self.report_file)], stdout=log, stderr=subprocess.STDOUT, env=env)
        self.port = self._wait_ready(120.0)
        status, body = _get(self.port, f"/v2/models/{self.model}")
        self.meta = json.loads(body)
        self.slo_s = float(self.meta["slo_s"])

    @property
    def model(self) -> str:
        return str(self.config.server.model_name or self.spec.name)

    def profile_peaks(self) -> dict[str, float]:
        """Per stage, its peak throughput by its profile: workers * max_b b / d(b) (req/s)."""
        workers = self.config.workers or {}
        return {st.name: int(workers.get(st.name, st.workers)) * max(b / float(st.duration(b))
                                                                     for b in range(1, int(st.max_batch) + 1))
                for st in self.spec.stages}

    def _wait_ready(self, timeout_s: float) -> int:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pard serve exited {self.proc.returncode}: {self.log_path.read_text()[-3000:]}")
            if self.port_file.exists():
                port = int(self.port_file.read_text())
                try:
                    if _get(port, "/v2/health/ready", 2.0)[0] == 200:
                        return port
                except OSError:
                    pass
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError(f"pard serve not ready after {timeout_s} s: {self.log_path.read_text()[-3000:]}")

    def cpu_s(self) -> float:
        return _proc_cpu_s(self.proc.pid)

    def rss_mb(self) -> float:
        return _proc_rss_mb(self.proc.pid)

    def probe_table(self) -> np.ndarray:
        return read_probe(self.probe, len(self.pipeline.stages))

    def metrics(self) -> dict[str, Any]:
        """``/metrics``: requests by outcome, drops by (stage, reason), batch-size sum/count per stage."""
        from prometheus_client.parser import text_string_to_metric_families

        _, text = _get(self.port, "/metrics")
        out: dict[str, Any] = {"requests": {}, "drops": {}, "batch_sum": {}, "batch_count": {}}
        for fam in text_string_to_metric_families(text.decode()):
            for s in fam.samples:
                if s.name == "pard_requests_total":
                    out["requests"][s.labels["outcome"]] = s.value
                elif s.name == "pard_drops_total":
                    out["drops"][f"{s.labels['stage']}/{s.labels['reason']}"] = s.value
                elif s.name == "pard_batch_size_sum":
                    out["batch_sum"][s.labels["stage"]] = s.value
                elif s.name == "pard_batch_size_count":
                    out["batch_count"][s.labels["stage"]] = s.value
        return out

    def stop(self) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(40.0)
            except subprocess.TimeoutExpired:
                print(f"!! pard serve did not exit 40 s after SIGTERM; killed (log {self.log_path})", flush=True)
                self.proc.kill()
                self.proc.wait(10.0)
        log = self.log_path.read_text()
        if self.proc.returncode != 0:
            print(f"!! pard serve exited {self.proc.returncode}; log tail:\n{log[-2000:]}", flush=True)
        elif "Traceback" in log or "ERROR" in log:
            print(f"!! pard serve logged {log.count('Traceback')} tracebacks; their exceptions: "
                  f"{_exceptions(log)}", flush=True)
        self.exceptions = _exceptions(log)
        try:
            return json.loads(self.report_file.read_text())
        except (OSError, ValueError):
            return {}


# ====================================================================== the client process
@dataclass
class ClientRun:
    """The client's per-request arrays (times in s from its start) and its meta (CPU, connections)."""

    sched_s: np.ndarray
    send_s: np.ndarray
    answer_s: np.ndarray
    status: np.ndarray
    verdict: np.ndarray
    meta: dict[str, Any]


def run_client(server: Server, out: Path, *, mode: str, seconds: float, rate: float = 0.0, concurrency: int = 32,
               seed: int = 1, max_conns: int = 2000) -> ClientRun:
    body = out.with_suffix(".body.json")
    body.write_bytes(server.pipeline.body)
    cmd = [sys.executable, str(CLIENT), "--port", str(server.port), "--path", f"/v2/models/{server.model}/infer",
           "--body-file", str(body), "--mode", mode, "--rate", str(rate), "--concurrency", str(concurrency),
           "--seconds", str(seconds), "--slo", str(server.slo_s), "--seed", str(seed), "--max-conns", str(max_conns),
           "--out", str(out)]
    subprocess.run(cmd, check=True)
    with np.load(out) as z:
        return ClientRun(z["sched_s"], z["send_s"], z["answer_s"], z["status"], z["verdict"], json.loads(str(z["meta"])))


# ====================================================================== figures
NO_ANSWER_AFTER_S = 1.0  # past its deadline: no answer, whatever comes later


def _pct_ms(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q) * 1e3) if x.size else float("nan")


def client_figures(c: ClientRun, slo_s: float, seconds: float) -> dict[str, Any]:
    """Per-request arrays -> the level's client-side figures (see the module docstring)."""
    lat = c.answer_s - c.send_s
    answered = ~np.isnan(c.answer_s) & (c.status > 0)
    in_time = answered & (lat <= slo_s)
    timely = answered & (lat <= slo_s + NO_ANSWER_AFTER_S)
    ok = c.status == 200
    on_time = ok & in_time
    late = ok & timely & ~in_time
    refused = timely & np.isin(c.status, (429, 503))
    n200 = int((ok & timely).sum())
    wall = c.meta["wall_s"]
    return {
        "sent": int(c.send_s.size), "offered_req_s": c.send_s.size / seconds,
        "on_time_req_s": int(on_time.sum()) / seconds, "on_time": int(on_time.sum()),
        "late_200": int(late.sum()), "late_share": int(late.sum()) / n200 if n200 else 0.0,
        "server_late_200": int((ok & (c.verdict == 2)).sum()),
        "n429": int((timely & (c.status == 429)).sum()), "n503": int((timely & (c.status == 503)).sum()),
        "n504": int((timely & (c.status == 504)).sum()),
        "other": int((timely & ~np.isin(c.status, (200, 429, 503, 504))).sum()),
        "no_answer": int((~timely).sum()), "never_answered": int((~answered).sum()),
        "p50_on_time_ms": _pct_ms(lat[on_time], 50), "p99_on_time_ms": _pct_ms(lat[on_time], 99),
        "p50_refusal_ms": _pct_ms(lat[refused], 50),
        "send_lag_p99_ms": _pct_ms(c.send_s - c.sched_s, 99),
        "client_cpu_s": c.meta["cpu_user_s"] + c.meta["cpu_sys_s"], "client_wall_s": wall,
        "client_cpu_per_s": (c.meta["cpu_user_s"] + c.meta["cpu_sys_s"]) / wall,
        "connections": c.meta["connections_opened"], "max_open": c.meta["max_open"],
        "pipelined": c.meta["pipelined"], "resets": c.meta["resets"],
    }


def stage_speed(before: np.ndarray, after: np.ndarray, stages: list[str]) -> dict[str, dict[str, float]]:
    """Per stage: batches, mean batch size, mean measured duration (ms), and measured / profile."""
    d = after - before
    out = {}
    for i, name in enumerate(stages):
        batches, reqs, took, profiled = d[i]
        out[name] = {"batches": int(batches), "mean_batch": reqs / batches if batches else float("nan"),
                     "mean_ms": took / batches * 1e3 if batches else float("nan"),
                     "vs_profile": took / profiled if profiled else float("nan")}
    return out


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, int]:
    return {k: int(round(v - before.get(k, 0.0))) for k, v in after.items() if round(v - before.get(k, 0.0))}


def cross_check(c: ClientRun, served: dict[str, int]) -> list[str]:
    """Mismatches between the client's answers by status and the server's ``pard_requests_total``."""
    s = c.status
    have = {
        "200 = on_time + late": (int((s == 200).sum()), served.get("on_time", 0) + served.get("late", 0)),
        "X-Pard-Outcome late = late": (int(((s == 200) & (c.verdict == 2)).sum()), served.get("late", 0)),
        "429 = rejected": (int((s == 429).sum()), served.get("rejected", 0)),
        "503/504/408 = dropped + unavailable": (int(np.isin(s, (503, 504, 408)).sum()),
                                                served.get("dropped", 0) + served.get("unavailable", 0)),
        "500 = failed + output_error": (int((s == 500).sum()), served.get("failed", 0) + served.get("output_error", 0)),
        "400/404/413 = invalid": (int(np.isin(s, (400, 404, 413)).sum()), served.get("invalid", 0)),
        "sent = counted": (int(s.size), sum(served.values())),
    }
    bad = [f"{name}: client {a}, server {b}" for name, (a, b) in have.items() if a != b]
    never = int((s == 0).sum())
    if bad and never:
        bad.append(f"({never} requests got no answer at all: the server counts those it received as dropped)")
    return bad


@dataclass
class LevelResult:
    pipeline: str
    policy: str
    level: float
    run: int
    rate: float
    figures: dict[str, Any] = field(default_factory=dict)


class ReadyProbe:
    """A readiness probe as a kubelet sends it, during a level: every :data:`PROBE_EVERY_S` a new connection,
    ``GET /v2/health/ready``, the time to its whole answer (s; ``inf`` for none within
    :data:`PROBE_TIMEOUT_S`, Kubernetes' default probe timeout)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.times: list[float] = []
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ready-probe", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(PROBE_TIMEOUT_S + 5.0)

    def _run(self) -> None:
        while not self._stop.wait(PROBE_EVERY_S):
            t0 = time.perf_counter()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=PROBE_TIMEOUT_S)
                conn.request("GET", "/v2/health/ready")
                r = conn.getresponse()
                r.read()
                conn.close()
                self.times.append(time.perf_counter() - t0)
                self.statuses.append(r.status)
            except OSError:
                self.times.append(math.inf)
                self.statuses.append(0)

    def figures(self) -> dict[str, Any]:
        """Probes sent, p50 / p99 / max latency (ms), how many took over 100 ms and over 1 s (or got none),
        and how many were not 200."""
        t = np.asarray(self.times, dtype=np.float64) * 1e3
        if t.size == 0:
            return {"probes": 0}
        return {"probes": int(t.size), "p50_ms": float(np.percentile(t, 50)), "p99_ms": float(np.percentile(t, 99)),
                "max_ms": float(t.max()), "over_100ms": int((t > 100).sum()), "over_1s": int((t > 1000).sum()),
                "not_200": int(sum(1 for s in self.statuses if s != 200))}


def run_level(pipe: Pipeline, policy: str, level: float, capacity: float, seconds: float, seed: int,
              workdir: Path, run: int, max_conns: int) -> LevelResult:
    """One fresh server under one open-loop level; every figure of the level."""
    rate = level * capacity
    server = Server(pipe, policy, workdir)
    probe = ReadyProbe(server.port)
    try:
        m0, p0, cpu0 = server.metrics(), server.probe_table(), server.cpu_s()
        probe.start()
        try:
            c = run_client(server, workdir / "client.npz", mode="open", seconds=seconds, rate=rate, seed=seed,
                           max_conns=max_conns)
        finally:
            probe.stop()
        cpu1, p1, m1 = server.cpu_s(), server.probe_table(), server.metrics()
    finally:
        report = server.stop()
    f = client_figures(c, server.slo_s, seconds)
    f["ready_probe"] = probe.figures()
    f["server_cpu_s"] = cpu1 - cpu0
    f["server_cpu_per_s"] = (cpu1 - cpu0) / c.meta["wall_s"]
    f["server_cpu_ms_per_req"] = (cpu1 - cpu0) / max(1, f["sent"]) * 1e3
    f["stages"] = stage_speed(p0, p1, pipe.stages)
    f["served"] = _delta(m1["requests"], m0["requests"])
    f["drops"] = _delta(m1["drops"], m0["drops"])
    f["report_outcomes"] = report.get("outcomes", {})
    f["report_http"] = report.get("http", {})
    # the pipeline's on_time answers that left after the deadline (the front's share of the lates; the rest
    # of the late 200s the pipeline itself finished late)
    f["late_answers"] = (report.get("server") or {}).get("late_answers")
    f["door"] = report.get("door")
    f["server_exceptions"] = server.exceptions
    f["mismatch"] = cross_check(c, f["served"])
    if f["mismatch"]:
        print(f"!!!! /metrics MISMATCH {pipe.key} {policy} {level}x run {run}: " + "; ".join(f["mismatch"]), flush=True)
    return LevelResult(pipe.key, policy, level, run, rate, f)


def measure_capacity(pipe: Pipeline, seconds: float, concurrency: int, workdir: Path) -> dict[str, Any]:
    """Closed loop against a pard server: on-time 200s per second."""
    server = Server(pipe, "pard", workdir)
    try:
        cpu0 = server.cpu_s()
        c = run_client(server, workdir / "capacity.npz", mode="closed", seconds=seconds, concurrency=concurrency)
        cpu1 = server.cpu_s()
    finally:
        server.stop()
    f = client_figures(c, server.slo_s, seconds)
    return {"req_s": f["on_time_req_s"], "concurrency": concurrency, "seconds": seconds, "slo_s": server.slo_s,
            "sent": f["sent"], "p50_ms": f["p50_on_time_ms"], "p99_ms": f["p99_on_time_ms"],
            "server_cpu_per_s": (cpu1 - cpu0) / c.meta["wall_s"], "client_cpu_per_s": f["client_cpu_per_s"],
            "profile_peak_req_s": server.profile_peaks()}


# ====================================================================== the sweep and the soak
def sweep(pipe: Pipeline, capacity: float, policies: list[str], levels: list[float], runs: int, seconds: float,
          seed: int, workdir: Path, max_conns: int) -> list[LevelResult]:
    """Levels ascending; at each, ``runs`` rounds of the policies in order (ABC ABC), one seed per round."""
    out = []
    for li, level in enumerate(levels):
        for run in range(runs):
            for policy in policies:
                r = run_level(pipe, policy, level, capacity, seconds, seed + 1000 * run + li, workdir, run, max_conns)
                f = r.figures
                print(f"  {pipe.key:5} {policy:6} {level:5g}x run {run}: offered {f['offered_req_s']:7.1f}/s  "
                      f"on-time {f['on_time_req_s']:7.1f}/s  late {f['late_share']:5.1%}  429 {f['n429']:5}  "
                      f"503 {f['n503']:5}  504 {f['n504']:5}  no-answer {f['no_answer']:5}", flush=True)
                out.append(r)
    return out


SOAK_WINDOW_S = 30.0


def soak(pipe: Pipeline, capacity: float, policy: str, level: float, seconds: float, seed: int, workdir: Path,
         max_conns: int) -> dict[str, Any]:
    """One server, one open-loop level for ``seconds``: per 30 s window on-time/s, late share, RSS."""
    server = Server(pipe, policy, workdir)
    rss: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample_rss() -> None:
        t0 = time.monotonic()
        while not stop.wait(5.0):
            rss.append((time.monotonic() - t0, server.rss_mb()))

    sampler = threading.Thread(target=sample_rss, daemon=True)
    try:
        m0, cpu0, rss0 = server.metrics(), server.cpu_s(), server.rss_mb()
        sampler.start()
        c = run_client(server, workdir / "soak.npz", mode="open", seconds=seconds, rate=level * capacity, seed=seed,
                       max_conns=max_conns)
        stop.set()
        cpu1, m1 = server.cpu_s(), server.metrics()
    finally:
        stop.set()
        server.stop()
    lat = c.answer_s - c.send_s
    windows = []
    for w0 in np.arange(0.0, seconds, SOAK_WINDOW_S):
        sel = (c.send_s >= w0) & (c.send_s < w0 + SOAK_WINDOW_S)
        ok = sel & (c.status == 200) & (lat <= server.slo_s + NO_ANSWER_AFTER_S)
        on_time = int((ok & (lat <= server.slo_s)).sum())
        n200 = int(ok.sum())
        span = min(SOAK_WINDOW_S, seconds - w0)
        inside = [mb for t, mb in rss if w0 <= t < w0 + SOAK_WINDOW_S] or [float("nan")]
        windows.append({"start_s": float(w0), "sent": int(sel.sum()), "on_time_req_s": on_time / span,
                        "late_share": (n200 - on_time) / n200 if n200 else 0.0, "rss_mb": inside[-1]})
    served = _delta(m1["requests"], m0["requests"])
    mismatch = cross_check(c, served)
    if mismatch:
        print("!!!! /metrics MISMATCH (soak): " + "; ".join(mismatch), flush=True)
    return {"pipeline": pipe.key, "policy": policy, "level": level, "rate": level * capacity, "seconds": seconds,
            "rss_start_mb": rss0, "windows": windows, "whole": client_figures(c, server.slo_s, seconds),
            "server_cpu_per_s": (cpu1 - cpu0) / c.meta["wall_s"], "served": served, "mismatch": mismatch}


# ====================================================================== output
def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.fmean(xs) if xs else float("nan")


def _fmt(x: Any, spec: str = ".1f") -> str:
    if isinstance(x, float) and math.isnan(x):
        return "-"
    return format(x, spec)


def _print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        print(f"\n{title}")
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for r in rows:
            print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        return
    from rich.markup import escape

    table = Table(title=escape(title), show_lines=False)
    for h in header:
        table.add_column(h, justify="right", no_wrap=False)
    for r in rows:
        table.add_row(*r)
    Console(width=250, highlight=False).print(table)


def print_levels(results: list[LevelResult]) -> None:
    header = ["pipe", "policy", "level", "run", "offered/s", "on-time/s", "late", "late%", "429", "503", "504",
              "no-ans", "p50 ms", "p99 ms", "refuse p50 ms", "srv CPU/s", "srv ms/req", "cli CPU/s", "stage speed",
              "ready p99 ms"]
    rows = []
    for r in results:
        f = r.figures
        speed = " ".join(f"{s['vs_profile']:.2f}" if not math.isnan(s["vs_profile"]) else "-"
                         for s in f["stages"].values())
        rows.append([r.pipeline, r.policy, f"{r.level:g}x", str(r.run), _fmt(f["offered_req_s"]),
                     _fmt(f["on_time_req_s"]), str(f["late_200"]), _fmt(100 * f["late_share"]), str(f["n429"]),
                     str(f["n503"]), str(f["n504"]), str(f["no_answer"]), _fmt(f["p50_on_time_ms"]),
                     _fmt(f["p99_on_time_ms"]), _fmt(f["p50_refusal_ms"]), _fmt(f["server_cpu_per_s"], ".2f"),
                     _fmt(f["server_cpu_ms_per_req"], ".2f"), _fmt(f["client_cpu_per_s"], ".2f"), speed,
                     _fmt(f.get("ready_probe", {}).get("p99_ms", math.nan))])
    _print_table("per (pipeline, policy, level, run); stage speed = measured batch time / profile d(b), "
                 "per stage in pipeline order", header, rows)


def done_when(results: list[LevelResult]) -> dict[str, Any]:
    """Per pipeline and policy: on-time/s per level (mean over runs), its ratio to the policy's best level,
    and pard / nexus per level."""
    out: dict[str, Any] = {}
    for pipe in dict.fromkeys(r.pipeline for r in results):
        levels = sorted({r.level for r in results if r.pipeline == pipe})
        per: dict[str, dict[float, float]] = {}
        for policy in dict.fromkeys(r.policy for r in results if r.pipeline == pipe):
            per[policy] = {lv: _mean([r.figures["on_time_req_s"] for r in results
                                      if (r.pipeline, r.policy, r.level) == (pipe, policy, lv)]) for lv in levels}
        doc: dict[str, Any] = {"levels": levels, "on_time_req_s": {p: list(v.values()) for p, v in per.items()},
                               "of_best": {}}
        for policy, v in per.items():
            best = max(v.values())
            doc["of_best"][policy] = [x / best if best > 0 else float("nan") for x in v.values()]
        if "pard" in per and "nexus" in per:
            doc["pard_over_nexus"] = [a / b if b > 0 else float("nan")
                                      for a, b in zip(per["pard"].values(), per["nexus"].values())]
        out[pipe] = doc
    return out


def print_done_when(doc: dict[str, Any]) -> None:
    for pipe, d in doc.items():
        header = ["policy", *(f"{lv:g}x" for lv in d["levels"])]
        rows = [[p, *(f"{x:.2f} ({y:.0f}/s)" for x, y in zip(d["of_best"][p], d["on_time_req_s"][p]))]
                for p in d["of_best"]]
        if "pard_over_nexus" in d:
            rows.append(["pard/nexus", *(_fmt(x, ".2f") for x in d["pard_over_nexus"])])
        _print_table(f"DONE-WHEN ({pipe}): on-time/s at each level / the policy's best level (on-time/s)",
                     header, rows)


def refusal_cost(results: list[LevelResult]) -> list[dict[str, Any]]:
    """Per pipeline and policy: server CPU ms per request at the highest level against the lowest (their
    ratio), and the p50 time to a 429/503 at the highest level (means over runs)."""
    out = []
    for pipe, policy in dict.fromkeys((r.pipeline, r.policy) for r in results):
        mine = [r for r in results if (r.pipeline, r.policy) == (pipe, policy)]
        lo, hi = min(r.level for r in mine), max(r.level for r in mine)
        cpu_lo = _mean([r.figures["server_cpu_ms_per_req"] for r in mine if r.level == lo])
        cpu_hi = _mean([r.figures["server_cpu_ms_per_req"] for r in mine if r.level == hi])
        out.append({"pipeline": pipe, "policy": policy, "low_level": lo, "high_level": hi,
                    "server_cpu_ms_per_req_low": cpu_lo, "server_cpu_ms_per_req_high": cpu_hi,
                    "high_over_low": cpu_hi / cpu_lo if cpu_lo > 0 else float("nan"),
                    "refusal_p50_ms_high": _mean([r.figures["p50_refusal_ms"] for r in mine if r.level == hi])})
    return out


def print_refusal_cost(rows: list[dict[str, Any]]) -> None:
    _print_table("refusal cost: server CPU per request at the highest level vs the lowest; time to a 429/503",
                 ["pipe", "policy", "levels", "srv ms/req low", "srv ms/req high", "high/low", "429/503 p50 ms"],
                 [[r["pipeline"], r["policy"], f"{r['low_level']:g}x / {r['high_level']:g}x",
                   _fmt(r["server_cpu_ms_per_req_low"], ".2f"), _fmt(r["server_cpu_ms_per_req_high"], ".2f"),
                   _fmt(r["high_over_low"], ".2f"), _fmt(r["refusal_p50_ms_high"])] for r in rows])


def print_capacity(pipe: str, cap: dict[str, Any]) -> None:
    peaks = ", ".join(f"{k} {v:.0f}" for k, v in cap["profile_peak_req_s"].items())
    print(f"[{pipe}] capacity {cap['req_s']:.1f} on-time req/s (closed loop, {cap['concurrency']} connections, "
          f"{cap['seconds']:g} s; p50 {cap['p50_ms']:.1f} ms, p99 {cap['p99_ms']:.1f} ms, SLO "
          f"{cap['slo_s'] * 1e3:.0f} ms; server CPU/s {cap['server_cpu_per_s']:.2f}, client CPU/s "
          f"{cap['client_cpu_per_s']:.2f}); profile peaks req/s: {peaks}", flush=True)


def print_soak(s: dict[str, Any]) -> None:
    rows = [[f"{w['start_s']:.0f}", str(w["sent"]), _fmt(w["on_time_req_s"]), _fmt(100 * w["late_share"]),
             _fmt(w["rss_mb"])] for w in s["windows"]]
    _print_table(f"SOAK ({s['pipeline']}) {s['policy']} at {s['level']:g}x ({s['rate']:.0f} req/s) for "
                 f"{s['seconds']:g} s; RSS at start {s['rss_start_mb']:.0f} MB",
                 ["window start s", "sent", "on-time/s", "late %", "RSS MB"], rows)


# ====================================================================== main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipeline", action="append", choices=sorted(PIPELINES),
                   help="sleep (three sleeping stages) or tm (examples/tm.yaml); repeatable; default sleep")
    p.add_argument("--policies", default="pard,nexus,naive")
    p.add_argument("--levels", default="0.5,1,2,4,10", help="multiples of the measured capacity")
    p.add_argument("--seconds", type=float, default=6.0, help="per level")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--capacity-seconds", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=32, help="closed-loop connections of the capacity probe")
    p.add_argument("--capacity", type=float, default=None, help="req/s: skip the probe, use this")
    p.add_argument("--max-conns", type=int, default=2000, help="client connections at most (then pipelining)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="2 s per level, 1 run, levels 0.5 and 10, 2 s capacity probe")
    p.add_argument("--soak", type=float, default=None, metavar="SECONDS", help="soak mode: one policy at one level")
    p.add_argument("--soak-policy", default="pard")
    p.add_argument("--soak-level", type=float, default=10.0)
    p.add_argument("--json", type=Path, default=None, help="write every figure here")
    a = p.parse_args(argv)
    if a.quick:
        a.seconds, a.runs, a.levels, a.capacity_seconds = 2.0, 1, "0.5,10", 2.0
    policies = [x for x in a.policies.split(",") if x]
    levels = [float(x) for x in a.levels.split(",") if x]
    doc: dict[str, Any] = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
                           "cpus": os.cpu_count(), "load_average_before": os.getloadavg(),
                           "interleaving": "levels ascending; at each level, runs x (policies in the given order), "
                                           "a fresh server each; one arrival seed per (level, run)",
                           "capacity": {}, "levels": [], "soak": None}
    results: list[LevelResult] = []
    with tempfile.TemporaryDirectory(prefix="served_overload.") as tmp:
        workdir = Path(tmp)
        for key in a.pipeline or ["sleep"]:
            pipe = PIPELINES[key]()
            if a.capacity is not None:
                cap = {"req_s": a.capacity, "given": True}
                print(f"[{key}] capacity given: {a.capacity:g} req/s", flush=True)
            else:
                cap = measure_capacity(pipe, a.capacity_seconds, a.concurrency, workdir)
                print_capacity(key, cap)
            doc["capacity"][key] = cap
            if a.soak is not None:
                doc["soak"] = soak(pipe, cap["req_s"], a.soak_policy, a.soak_level, a.soak, a.seed, workdir,
                                   a.max_conns)
                print_soak(doc["soak"])
                continue
            results += sweep(pipe, cap["req_s"], policies, levels, a.runs, a.seconds, a.seed, workdir, a.max_conns)
    doc["levels"] = [{"pipeline": r.pipeline, "policy": r.policy, "level": r.level, "run": r.run, "rate": r.rate,
                      **r.figures} for r in results]
    doc["load_average_after"] = os.getloadavg()
    mismatches = [r for r in results if r.figures["mismatch"]]
    if results:
        print_levels(results)
        doc["refusal_cost"] = refusal_cost(results)
        print_refusal_cost(doc["refusal_cost"])
        doc["done_when"] = done_when(results)
        print_done_when(doc["done_when"])
    if mismatches or (doc["soak"] and doc["soak"]["mismatch"]):
        print(f"!!!! {len(mismatches)} level(s) where /metrics disagrees with the client's answers (see above)")
    if a.json is not None:
        a.json.write_text(json.dumps(doc, indent=1, default=float))
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
