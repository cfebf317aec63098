"""pard serve as users run it: a real uvicorn server on 127.0.0.1, a trace replayed over HTTP, SIGTERM.

The server is ``python -m pard.serve CONFIG --port 0`` in a subprocess; the client is an async httpx
client replaying 30 s of the bundled Azure LLM conversation trace at 1.2x the pipeline's capacity
(two stages that sleep exactly their profile, capacity 25 req/s, so about 900 requests: httpx
costs the client about 5 ms of CPU per request, and the test must not depend on a busy 2-core
machine keeping up with more).  Every test bounds its request count and its time, and stops its
server.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette")
import httpx  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from pard import workloads  # noqa: E402

from _serve import CAPACITY_REQ_S, PIPELINE, ServerProcess, config, v2_body  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LOAD = 1.2
SLOW = 4.0  # the test pipeline's durations x 4: capacity 25 req/s, SLO 1.2 s
#: The trace window `pard run` uses (1170 s in, where the 10 s envelope swings 0.7x..1.4x its mean).
START_S, DURATION_S = 1170.0, 30.0
MAX_REQUESTS = 2000


def _arrivals(duration_s: float = DURATION_S) -> np.ndarray:
    cut = workloads.window(workloads.azure_llm_conv(), START_S, duration_s)
    arr = workloads.scale(cut, LOAD * CAPACITY_REQ_S / SLOW, seed=1)
    assert 0 < arr.size <= MAX_REQUESTS
    return arr


async def _replay(url: str, arrivals: np.ndarray, *, stop_on_draining: bool = False,
                  on_time_s: tuple[float, Any] | None = None) -> tuple[Counter[int], Counter[str], list[Any]]:
    """POST one request per arrival (in wall-clock time); returns (statuses, transport errors by type, 503 bodies).

    With ``stop_on_draining``, stops sending once an answer says the server drains (as a load
    balancer would); ``on_time_s = (t, callback)`` calls ``callback()`` once ``t`` s into the replay.
    """
    statuses: Counter[int] = Counter()
    errors: Counter[str] = Counter()
    drops: list[Any] = []
    draining = asyncio.Event()
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=400)

    async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as client:
        async def one(i: int) -> None:
            try:
                r = await client.post("/v2/models/duo/infer", json=v2_body([float(i), 0, 0, 0]))
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] += 1
                return
            statuses[r.status_code] += 1
            if r.status_code == 503:
                doc = r.json()
                drops.append(doc)
                if doc.get("reason") == "draining":
                    draining.set()

        tasks = []
        t0 = time.perf_counter()
        fired = False
        for i, t in enumerate(arrivals.tolist()):
            if stop_on_draining and draining.is_set():
                break
            if on_time_s is not None and not fired and t >= on_time_s[0]:
                on_time_s[1]()
                fired = True
            # always yield, also when behind schedule, so answers (a draining 503) are seen
            await asyncio.sleep(max(0.0, t - (time.perf_counter() - t0)))
            tasks.append(asyncio.ensure_future(one(i)))
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=120.0)
        return statuses, errors, drops


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(url + "/metrics", timeout=30.0).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _check_exact(statuses: Counter[int], outcomes: dict[str, int]) -> None:
    """HTTP answers by status equal the server's outcomes, exactly."""
    assert statuses[200] == outcomes["on_time"] + outcomes["late"]
    assert statuses[503] == outcomes["dropped"] + outcomes["unavailable"]
    assert statuses[429] == outcomes["rejected"]
    assert statuses[500] == outcomes["failed"]
    assert statuses[400] == outcomes["invalid"] == 0
    assert outcomes["pending"] == 0
    assert sum(statuses.values()) == sum(outcomes[k] for k in (
        "on_time", "late", "dropped", "rejected", "failed", "invalid", "unavailable"))


def test_trace_replay_over_http_counts_and_metrics_agree_with_the_report(tmp_path: Path) -> None:
    """30 s of the trace at load 1.2: every request answered; 200/503/429/500 equal the report and /metrics exactly."""
    arrivals = _arrivals()
    with ServerProcess(tmp_path, config(SLOW)) as srv:
        statuses, errors, drops = asyncio.run(_replay(srv.url, arrivals))
        metrics = _scrape(srv.url)
        srv.terminate()
        assert srv.wait(60.0) == 0
        report = srv.report()
    assert not errors and sum(statuses.values()) == arrivals.size
    out = report["outcomes"]
    _check_exact(statuses, out)
    # the runtime saw every request the door admitted; what never reached it is the server's own count
    srv = report["server"]
    never = srv["busy"] + srv["body_timeout"] + srv["queue_full"] + srv["invalid"] + srv["unavailable"]
    assert report["runtime"]["submitted"] + never == arrivals.size
    assert out["dropped"] > 0 and out["on_time"] > 0  # load 1.2 overloads the pipeline: pard drops
    assert all(d["stage"] in ("detect", "classify") and d["reason"] and d["retry_after_s"] > 0 for d in drops)
    for outcome in ("on_time", "late", "dropped", "rejected", "failed", "invalid", "unavailable"):
        assert metrics[("pard_requests_total", (("outcome", outcome), ("pipeline", "duo")))] == out[outcome]
    dropped = sum(v for (name, _), v in metrics.items() if name == "pard_drops_total")
    assert dropped == out["dropped"] == Counter(d["reason"] != "draining" for d in drops)[True]
    assert metrics[("pard_request_duration_seconds_count", (("pipeline", "duo"),))] == statuses[200]


def test_sigterm_mid_replay_answers_every_request_and_exits_0(tmp_path: Path) -> None:
    """SIGTERM 4 s into a replay: ready fails, new requests get 503 draining, in-flight ones finish, exit 0."""
    arrivals = _arrivals(10.0)  # one 10 s bin of the envelope
    # a 3 s grace: the time a load balancer (here the client) has to see readiness fail and stop
    doc = config(SLOW, server={"host": "127.0.0.1", "port": 0, "drain_grace_s": 3.0, "drain_timeout_s": 20.0,
                               "log_level": "warning"})
    with ServerProcess(tmp_path, doc) as srv:
        statuses, errors, drops = asyncio.run(_replay(srv.url, arrivals, stop_on_draining=True,
                                                      on_time_s=(4.0, srv.terminate)))
        code = srv.wait(60.0)
        report = srv.report()
    assert code == 0 and report["signals"] == ["SIGTERM"]
    assert not errors  # every request sent got an HTTP answer
    out = report["outcomes"]
    _check_exact(statuses, out)
    assert out["unavailable"] >= 1 and any(d.get("reason") == "draining" for d in drops)
    assert report["runtime"]["pending"] == 0
    assert report["runtime"]["submitted"] == sum(report["runtime"][k] for k in (
        "on_time", "late", "dropped", "rejected", "failed"))


def test_a_second_sigterm_with_a_stage_hung_stops_now_and_answers_in_json(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch hangs 60 s (SLO 30 s, drain_timeout_s 50). SIGTERM, then SIGTERM again: the process stops
    now (exit 130), well before the drain's 50 s; the in-flight client gets pard's 503 JSON (reason
    cancelled), not uvicorn's plain-text 500 from a cancelled handler (a fresh user's report: the
    second signal waited out the whole drain)."""
    import os
    import signal
    import threading

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    doc = config(stages={"detect": {"executor": "pard.serve.factories:sleep_profile"},
                         "classify": {"executor": "_serve:hanging", "kwargs": {"seconds": 60.0}}},
                 warmup=False, policy="naive",
                 server={"host": "127.0.0.1", "port": 0, "drain_grace_s": 0.0, "drain_timeout_s": 50.0,
                         "log_level": "warning"})
    doc["pipeline"] = {**doc["pipeline"], "slo": 30.0}
    answers: list[httpx.Response] = []
    with ServerProcess(tmp_path, doc) as srv:
        t = threading.Thread(target=lambda: answers.append(
            httpx.post(srv.url + "/v2/models/duo/infer", json=v2_body([7, 0, 0, 0]), timeout=40.0)))
        t.start()
        for _ in range(400):  # the request is in the hung batch at classify
            m = _scrape(srv.url)
            if m.get(("pard_queue_duration_seconds_count", (("pipeline", "duo"), ("stage", "classify"))), 0) >= 1:
                break
            time.sleep(0.05)
        srv.terminate()
        time.sleep(0.5)
        srv.proc.send_signal(signal.SIGTERM)
        code = srv.wait(30.0)  # the drain alone would take 50 s: a hang here is the old behaviour
        t.join(10.0)
        report = srv.report()
    assert code == 130 and report["signals"] == ["SIGTERM", "SIGTERM"]
    assert len(answers) == 1 and answers[0].status_code == 503, answers
    assert answers[0].json()["reason"] == "cancelled"
    assert report["outcomes"]["dropped"] == 1 and report["runtime"]["pending"] == 0


def test_tritonclient_against_pard_serve(tmp_path: Path) -> None:
    """A tritonclient.http user's calls work: health, metadata, binary and JSON infer, timeout -> 503 with reason."""
    th = pytest.importorskip("tritonclient.http")
    from tritonclient.utils import InferenceServerException

    with ServerProcess(tmp_path, config(SLOW)) as srv:
        client = th.InferenceServerClient(url=f"127.0.0.1:{srv.port}")
        try:
            assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("duo")
            meta = client.get_model_metadata("duo")
            assert meta["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}]
            x = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
            for binary in (True, False):
                inp = th.InferInput("INPUT0", [4], "FP32")
                inp.set_data_from_numpy(x, binary_data=binary)
                out = th.InferRequestedOutput("OUTPUT0", binary_data=binary)
                res = client.infer("duo", [inp], outputs=[out], request_id="t1", timeout=2_000_000)
                np.testing.assert_array_equal(res.as_numpy("OUTPUT0"), x)
                assert res.get_response()["id"] == "t1"
            with pytest.raises(InferenceServerException) as info:  # 5 ms < one 160 ms batch: dropped
                client.infer("duo", [inp], timeout=5_000)
            assert info.value.status() == "503" and "infeasible" in info.value.message()
        finally:
            client.close()
        srv.terminate()
        assert srv.wait(60.0) == 0
    assert srv.report()["outcomes"]["dropped"] == 1


def test_pard_serve_example_answers_a_curl_style_request(tmp_path: Path) -> None:
    """`pard serve examples/tm.yaml` serves the README's JSON request (a 32x32x3 image) and reports it."""
    from pard.serve.config import load_serve_config

    cfg = load_serve_config(ROOT / "examples" / "tm.yaml")
    with ServerProcess(tmp_path, config_path=ROOT / "examples" / "tm.yaml",
                       command=[_pard_command(), "serve"]) as srv:
        body = {"inputs": [{"name": "INPUT0", "shape": [32, 32, 3], "datatype": "FP32", "data": [0.5] * 3072}]}
        r = httpx.post(srv.url + "/v2/models/tm/infer", json=body, timeout=30.0)
        assert r.status_code == 200, r.text
        assert r.json()["outputs"][0]["name"] == "OUTPUT0"
        srv.terminate()
        assert srv.wait(60.0) == 0
    assert cfg.pipeline_spec().name == "tm" and srv.report()["outcomes"]["on_time"] + \
        srv.report()["outcomes"]["late"] == 1


def _pard_command() -> str:
    import shutil
    import sys

    found = shutil.which("pard", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("the pard console script is not installed next to this Python")
    return found


def test_report_dash_writes_the_report_alone_to_stdout(tmp_path: Path) -> None:
    """``--report -``: after SIGTERM the process's stdout is the report's JSON and nothing else (uvicorn
    logs to stderr); its per-tier table counts the two gold and one free requests sent."""
    import json
    import os
    import signal
    import subprocess
    import sys

    import yaml

    doc = config(pipeline=dict(PIPELINE, tiers={"gold": 3.0, "free": 1.0}))
    cfg, port_file = tmp_path / "serve.yaml", tmp_path / "port"
    cfg.write_text(yaml.safe_dump(doc))
    with open(tmp_path / "server.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "pard.serve", str(cfg), "--port", "0", "--port-file",
                                 str(port_file), "--report", "-"], stdout=subprocess.PIPE, stderr=log,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            end = time.monotonic() + 120.0
            while not port_file.exists() and proc.poll() is None and time.monotonic() < end:
                time.sleep(0.05)
            url = f"http://127.0.0.1:{int(port_file.read_text())}/v2/models/duo/infer"
            for tier in ("gold", "gold", "free"):
                assert httpx.post(url, json=v2_body([1, 2, 3, 4]), headers={"X-Pard-Tier": tier},
                                  timeout=30.0).status_code == 200
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60.0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10.0)
    assert proc.returncode == 0
    report = json.loads(out)
    assert report["outcomes"]["on_time"] + report["outcomes"]["late"] == 3
    tiers = report["tiers"]
    assert tiers["gold"]["on_time"] + tiers["gold"]["late"] == 2 and tiers["gold"]["weight"] == 3.0
    assert tiers["free"]["on_time"] + tiers["free"]["late"] == 1
    assert tiers["gold"]["weighted_on_time"] == 3.0 * tiers["gold"]["on_time"]
