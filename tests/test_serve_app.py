"""The pard serve ASGI app in-process (httpx's ASGI transport): routes, answers, metrics, drain."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette")
import httpx  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from pard.serve.app import create_app  # noqa: E402
from pard.serve.config import parse_serve_config  # noqa: E402
from pard.serve.metrics import PipelineCollector  # noqa: E402

import _serve  # noqa: E402
from _serve import FAILING_TEXT, config, v2_body  # noqa: E402

Client = Callable[..., Awaitable[Any]]


def _run(doc: dict[str, Any], body: Callable[[httpx.AsyncClient, Any], Awaitable[Any]]) -> Any:
    """Start the app's lifespan, run ``body(client, app)``, stop it; returns what ``body`` returned."""
    app = create_app(parse_serve_config(doc))

    async def main() -> Any:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30.0) as client:
                return await body(client, app)

    return asyncio.run(main())


def _metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_health_metadata_and_an_echo_inference() -> None:
    """Live and ready answer 200; metadata lists the tensors, policy and stages; infer echoes the payload."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        assert (await c.get("/v2/health/live")).status_code == 200
        assert (await c.get("/v2/health/ready")).status_code == 200
        assert (await c.get("/v2/models/duo/ready")).status_code == 200
        meta = (await c.get("/v2/models/duo")).json()
        assert meta["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}]
        assert meta["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}]
        assert meta["policy"] == "pard" and [s["name"] for s in meta["stages"]] == ["detect", "classify"]
        assert (await c.get("/v2")).json()["extensions"] == ["binary_tensor_data"]
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4.5], id="q7"))
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["id"] == "q7" and doc["outputs"][0]["data"] == [1, 2, 3, 4.5]
        r = await c.post("/v2/models/duo/versions/1/infer", json=v2_body([0, 0, 0, 1]))
        assert r.status_code == 200

    _run(config(), body)


def test_binary_request_and_binary_response() -> None:
    """A binary-tensor request (Inference-Header-Content-Length) gets the FP32 output back as raw bytes."""
    x = np.array([0.5, -1, 2, 8], dtype="<f4")

    async def body(c: httpx.AsyncClient, app: Any) -> None:
        header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32",
                                         "parameters": {"binary_data_size": 16}}],
                             "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
        r = await c.post("/v2/models/duo/infer", content=header + x.tobytes(),
                         headers={"Inference-Header-Content-Length": str(len(header))})
        assert r.status_code == 200, r.text
        n = int(r.headers["inference-header-content-length"])
        doc = json.loads(r.content[:n])
        assert doc["outputs"][0]["parameters"] == {"binary_data_size": 16}
        np.testing.assert_array_equal(np.frombuffer(r.content[n:], dtype="<f4"), x)

    _run(config(), body)


def test_a_client_deadline_shorter_than_any_path_is_refused_without_retry_after() -> None:
    """X-Request-Timeout-Ms 5 against a 40 ms stage is refused at the door (429, reason infeasible) before its
    body is read; parameters.timeout 5000 µs (in the body) is dropped by the entry stage (503, stage, reason).
    Neither gets Retry-After: no retry can meet a deadline shorter than the pipeline's fastest path."""
    async def body(c: httpx.AsyncClient, app: Any) -> list[httpx.Response]:
        a = await c.post("/v2/models/duo/infer", json=v2_body([1, 1, 1, 1]), headers={"X-Request-Timeout-Ms": "5"})
        b = await c.post("/v2/models/duo/infer", json=v2_body([1, 1, 1, 1], parameters={"timeout": 5000}))
        ok = await c.post("/v2/models/duo/infer", json=v2_body([1, 1, 1, 1]), headers={"X-Request-Timeout-Ms": "1000"})
        assert ok.status_code == 200
        counts = app.state.service.runtime.counts()
        assert (counts["submitted"], counts["on_time"], counts["dropped"]) == (2, 1, 1)  # a never reached it
        return [a, b]

    a, b = _run(config(), body)
    assert a.status_code == 429 and "retry-after" not in a.headers
    assert a.json()["reason"] == "infeasible" and "fastest path" in a.json()["error"]
    assert b.status_code == 503 and "retry-after" not in b.headers
    doc = b.json()
    assert (doc["stage"], doc["reason"]) == ("detect", "infeasible")
    assert isinstance(doc["request_id"], int)
    assert b.headers["x-pard-request-id"] == str(doc["request_id"])


@pytest.mark.parametrize(("request_kw", "status", "text"), [
    ({"json": v2_body([1, 2, 3])}, 400, "inputs[0].data holds 3"),
    ({"json": {"inputs": [{"name": "INPUT0", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]}]}},
     400, "inputs[0].shape"),
    ({"json": {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "INT32", "data": [1, 2, 3, 4]}]}},
     400, "inputs[0].datatype"),
    ({"json": {"inputs": [{"name": "IMG", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}},
     400, "unknown ['IMG']"),
    ({"json": v2_body([1, 2, 3, 4]), "headers": {"X-Request-Timeout-Ms": "soon"}}, 400, "X-Request-Timeout-Ms"),
    ({"json": v2_body([1, 2, 3, 4]), "headers": {"X-Pard-Tier": "-1"}}, 400, "X-Pard-Tier"),
    ({"json": v2_body([1, 2, 3, 4]), "headers": {"X-Pard-Tier": "99"}}, 400, "tier code in"),
    ({"json": v2_body([1, 2, 3, 4], parameters={"timeout": -5})}, 400, "parameters.timeout"),
    ({"json": v2_body([1, 2, 3, 4], outputs=[{"name": "NOPE"}])}, 400, "unknown output(s) ['NOPE']"),
    ({"content": b"[1, 2"}, 400, "not valid JSON"),
    ({"content": b"x" * 2048}, 413, "max_body_bytes"),
    ({"json": v2_body([1, 2, 3, 4]), "url": "/v2/models/duo/versions/2/infer"}, 404, "version"),
])
def test_bad_requests_are_answered_with_the_field_named(request_kw: dict, status: int, text: str) -> None:
    """Malformed, mistyped and oversized requests, and an unknown version, get 400/413/404 naming the field,
    and are counted as invalid once, in the report and in pard_requests_total alike."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        kw = dict(request_kw)
        r = await c.post(kw.pop("url", "/v2/models/duo/infer"), **kw)
        assert r.status_code == status and text in r.json()["error"], r.text
        rep = app.state.service.report()
        assert rep["outcomes"]["invalid"] == 1 and rep["runtime"]["submitted"] == 0
        m = _metrics((await c.get("/metrics")).text)
        assert m[("pard_requests_total", (("outcome", "invalid"), ("pipeline", "duo")))] == 1

    _run(config(server={"max_body_bytes": 1024, "log_level": "warning"}), body)


def test_unknown_model_is_404() -> None:
    """Metadata, readiness and inference of another model name answer 404 naming the served one."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        for r in (await c.get("/v2/models/tm"), await c.get("/v2/models/tm/ready"),
                  await c.post("/v2/models/tm/infer", json=v2_body([1, 2, 3, 4]))):
            assert r.status_code == 404 and "'duo'" in r.json()["error"]

    _run(config(), body)


def test_queue_limit_answers_429_with_retry_after_and_counts_add_up() -> None:
    """With max_queue_size 3 and the entry stage blocked, 30 requests: those beyond the queue get 429 + Retry-After."""
    gate = _serve.gate(key="queue-limit")
    doc = config(stages={"detect": {"executor": "_serve:gate", "kwargs": {"key": "queue-limit"}},
                         "classify": {"executor": "pard.serve.factories:sleep_profile"}},
                 queue={"max_queue_size": 3}, warmup=False)

    async def body(c: httpx.AsyncClient, app: Any) -> list[int]:
        svc = app.state.service
        tasks = [asyncio.ensure_future(c.post("/v2/models/duo/infer", json=v2_body([i, 0, 0, 0]),
                                              headers={"X-Request-Timeout-Ms": "20000"})) for i in range(30)]
        for _ in range(500):  # until every request is either answered or inside the pipeline
            if svc.counts["queue_full"] + svc.runtime.counts()["pending"] == 30:
                break
            await asyncio.sleep(0.01)
        gate.release.set()
        statuses = [(await t).status_code for t in tasks]
        r429 = next(r for r in [await t for t in tasks] if r.status_code == 429)
        assert int(r429.headers["retry-after"]) >= 1 and r429.json()["reason"] == "queue_full"
        rep = svc.report()
        assert rep["outcomes"]["rejected"] == statuses.count(429)
        assert rep["runtime"]["on_time"] + rep["runtime"]["late"] == statuses.count(200)
        return statuses

    statuses = _run(doc, body)
    # the blocked worker holds its running batch and the next one (at most 8 each), 3 more may
    # queue: at most 19 are served, the other 11 or more are refused
    assert statuses.count(429) >= 11 and statuses.count(200) + statuses.count(429) == 30


def test_executor_failure_is_500_with_the_request_id() -> None:
    """A stage whose executor raises answers 500 naming the request id; the runtime counts it failed."""
    # naive: no policy drop, so a slow first batch on a busy machine cannot turn the 500 into a 503
    doc = config(stages={"detect": {"executor": "pard.serve.factories:sleep_profile"},
                         "classify": {"executor": "_serve:failing"}}, warmup=False, policy="naive")

    async def body(c: httpx.AsyncClient, app: Any) -> None:
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
        doc = r.json()
        assert r.status_code == 500 and doc["request_id"] == 0 and doc["stage"] == "classify"
        assert doc["error_type"] == "KeyError" and FAILING_TEXT not in doc["error"]  # the text stays in the log
        assert app.state.service.runtime.counts()["failed"] == 1

    _run(doc, body)


def test_executor_failure_text_reaches_the_body_only_with_error_detail() -> None:
    """server.error_detail: true puts the executor's exception text in the 500's body."""
    doc = config(stages={"detect": {"executor": "pard.serve.factories:sleep_profile"},
                         "classify": {"executor": "_serve:failing"}}, warmup=False, policy="naive",
                 server={**config()["server"], "error_detail": True})

    async def body(c: httpx.AsyncClient, app: Any) -> None:
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
        assert r.status_code == 500 and FAILING_TEXT in r.json()["error"] and r.json()["stage"] == "classify"

    _run(doc, body)


def test_an_output_that_cannot_be_encoded_is_counted_once_as_output_error() -> None:
    """The pipeline finishes both requests; one output cannot be encoded (500).  The report and /metrics
    count that one under output_error alone, so the outcomes add up to the answers sent."""
    doc = config(stages={"detect": {"executor": "pard.serve.factories:sleep_profile"},
                         "classify": {"executor": "_serve:unencodable"}}, warmup=False, policy="naive")

    async def body(c: httpx.AsyncClient, app: Any) -> tuple[list[int], dict[str, Any], str]:
        statuses = [(await c.post("/v2/models/duo/infer", json=v2_body([v, 0, 0, 0]))).status_code for v in (1, 9)]
        return statuses, app.state.service.report(), (await c.get("/metrics")).text

    statuses, rep, text = _run(doc, body)
    out, m = rep["outcomes"], _metrics(text)
    assert statuses == [200, 500] and rep["runtime"]["on_time"] + rep["runtime"]["late"] == 2
    assert out["output_error"] == 1 and out["on_time"] + out["late"] == 1
    assert sum(v for k, v in out.items() if k != "pending") == len(statuses) == sum(rep["http"].values())
    for outcome in ("on_time", "late", "output_error"):
        assert m[("pard_requests_total", (("outcome", outcome), ("pipeline", "duo")))] == out[outcome]


def test_a_hung_stage_is_answered_504_past_the_deadline_and_counted_dropped() -> None:
    """A batch that hangs 1.5 s (SLO 0.3 s, server.answer_grace_s 0.1): its request is answered 504
    (reason deadline) once 0.1 s past its deadline, not when the model returns; the model's late result
    is then counted dropped (no one was answered with it), so the outcomes still equal the answers."""
    doc = config(stages={"detect": {"executor": "pard.serve.factories:sleep_profile"},
                         "classify": {"executor": "_serve:hanging"}}, warmup=False, policy="naive",
                 server={**config()["server"], "answer_grace_s": 0.1})
    doc["pipeline"] = {**doc["pipeline"], "slo": 0.3}

    async def body(c: httpx.AsyncClient, app: Any) -> tuple[list[httpx.Response], dict[str, Any], dict[Any, float]]:
        hung, ok = await asyncio.gather(c.post("/v2/models/duo/infer", json=v2_body([7, 0, 0, 0])),
                                        c.post("/v2/models/duo/infer", json=v2_body([1, 0, 0, 0])))
        await asyncio.sleep(0)
        svc = app.state.service
        assert svc.runtime.counts()["pending"] >= 1  # the hung batch is still running
        early = _metrics((await c.get("/metrics")).text)
        await svc.drain(grace_s=0.0)  # waits for the hung batch to end
        return [hung, ok], svc.report(), early

    (hung, ok), rep, early = _run(doc, body)
    # the 504 is in pard_requests_total when it is sent, not once the hung model returns (if ever)
    assert early[("pard_requests_total", (("outcome", "dropped"), ("pipeline", "duo")))] == \
        [hung.status_code, ok.status_code].count(504) >= 1
    assert hung.status_code == 504 and hung.json()["reason"] == "deadline"
    assert ok.status_code in (200, 504)  # batched with the hung payload or not
    statuses = [hung.status_code, ok.status_code]
    out = rep["outcomes"]
    assert out["dropped"] == statuses.count(504) and out["on_time"] + out["late"] == statuses.count(200)
    assert sum(v for k, v in out.items() if k != "pending") == 2 and out["pending"] == 0


def test_a_hung_batch_that_then_raises_after_its_504_is_counted_dropped_once() -> None:
    """A batch hangs 1 s (SLO 0.3 s, answer_grace_s 0.1), so its request is answered 504; then the model
    raises. The runtime counts the request failed, but the client got the 504: the report counts it
    dropped, as /metrics does, and nothing failed."""
    doc = config(stages={"detect": {"executor": "pard.serve.factories:sleep_profile"},
                         "classify": {"executor": "_serve:hanging", "kwargs": {"seconds": 1.0, "then_raise": True}}},
                 warmup=False, policy="naive", server={**config()["server"], "answer_grace_s": 0.1})
    doc["pipeline"] = {**doc["pipeline"], "slo": 0.3}

    async def body(c: httpx.AsyncClient, app: Any) -> tuple[int, dict[str, Any], dict[Any, float]]:
        r = await c.post("/v2/models/duo/infer", json=v2_body([7, 0, 0, 0]))
        svc = app.state.service
        for _ in range(500):  # the hung batch ends (raising) after the 504
            if svc.runtime.counts()["pending"] == 0:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # its done-callback runs on a runtime thread
        return r.status_code, svc.report(), _metrics((await c.get("/metrics")).text)

    status, rep, m = _run(doc, body)
    assert status == 504 and rep["runtime"]["failed"] == 1  # the runtime's own verdict
    out = rep["outcomes"]
    assert out["dropped"] == 1 and out["failed"] == 0 and sum(v for k, v in out.items() if k != "pending") == 1
    assert m[("pard_requests_total", (("outcome", "dropped"), ("pipeline", "duo")))] == 1
    assert m.get(("pard_requests_total", (("outcome", "failed"), ("pipeline", "duo"))), 0) == 0


def test_a_hung_stage_fails_readiness_until_its_batch_returns() -> None:
    """detect's batch is held (a hung model; SLO 0.3 s, answer_grace_s 0.1): the request is answered 504,
    and from then on /ready is 503 while the runtime still holds the request and has finished nothing.
    Once the held batch returns (the runtime counts its request), /ready is 200 again."""
    key = "stall"
    gate = _serve.gate(key=key)
    doc = config(stages={"detect": {"executor": "_serve:gate", "kwargs": {"key": key}},
                         "classify": {"executor": "pard.serve.factories:sleep_profile"}}, warmup=False,
                 policy="naive", server={**config()["server"], "answer_grace_s": 0.1})
    doc["pipeline"] = {**doc["pipeline"], "slo": 0.3}

    async def body(c: httpx.AsyncClient, app: Any) -> dict[str, Any]:
        before = (await c.get("/v2/health/ready")).status_code
        hung = await c.post("/v2/models/duo/infer", json=v2_body([1, 0, 0, 0]))
        during = [(await c.get(u)).status_code for u in ("/v2/health/ready", "/v2/models/duo/ready")]
        pending = app.state.service.runtime.counts()["pending"]
        gate.release.set()
        for _ in range(500):
            if app.state.service.runtime.counts()["pending"] == 0:
                break
            await asyncio.sleep(0.01)
        after = (await c.get("/v2/health/ready")).status_code
        ok = (await c.post("/v2/models/duo/infer", json=v2_body([1, 0, 0, 0]))).status_code
        return {"before": before, "hung": hung, "during": during, "pending": pending, "after": after, "ok": ok}

    res = _run(doc, body)
    assert res["before"] == 200
    assert res["hung"].status_code == 504 and res["hung"].json()["reason"] == "deadline"
    assert res["pending"] == 1 and res["during"] == [503, 503]
    assert res["after"] == 200 and res["ok"] == 200


def test_stall_watch_against_scripted_runtime_counts() -> None:
    """StallWatch by hand: a give-up with nothing held is no stall; a give-up while work is held and
    nothing finishes is, until one request finishes (and stays over once it is)."""
    from pard.serve.stall import StallWatch

    now = {"on_time": 5, "late": 1, "pending": 0}
    w = StallWatch(lambda: dict(now))
    assert not w.stalled
    w.gave_up()
    assert not w.stalled  # nothing held: nothing is hung
    now["pending"] = 2
    w.gave_up()
    assert w.stalled and w.stalled  # reading it changes nothing
    now["late"] += 1  # the held batch returned, late
    assert not w.stalled
    now["late"] -= 1  # counts as at the give-up again: the stall was ended, not re-armed
    assert not w.stalled


@pytest.mark.parametrize("output, status, words", [
    ({"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}, 200, ""),
    ({"name": "OUTPUT0", "shape": [-1]}, 200, ""),  # a variable dimension; no datatype set: no promise
    ({"name": "OUTPUT0", "datatype": "FP32", "shape": [3]}, 500, "shape [4], but outputs declares [3]"),
    ({"name": "OUTPUT0", "datatype": "FP32", "shape": [4, 1]}, 500, "shape [4], but outputs declares [4, 1]"),
    ({"name": "OUTPUT0", "datatype": "INT64", "shape": [4]}, 500, "is FP32, but outputs declares datatype INT64"),
])
def test_answers_are_checked_against_the_declared_outputs(output: dict[str, Any], status: int, words: str) -> None:
    """The stages echo the FP32 [4] input. An answer that breaks the file's declared output (shape, or a
    datatype the file sets) is a 500 output_error naming the output; one that keeps it is a 200."""
    doc = config(outputs=[output], warmup=False)

    async def body(c: httpx.AsyncClient, app: Any) -> tuple[httpx.Response, dict[str, Any]]:
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
        return r, app.state.service.report()

    r, rep = _run(doc, body)
    assert r.status_code == status
    if status == 200:
        assert r.json()["outputs"][0]["data"] == [1, 2, 3, 4]
    else:
        assert "'OUTPUT0'" in r.json()["error"] and words in r.json()["error"]
        assert rep["outcomes"]["output_error"] == 1 and rep["runtime"]["on_time"] + rep["runtime"]["late"] == 1


def _infer_scope(content_length: int) -> dict[str, Any]:
    """The ASGI scope of a POST to duo's infer route whose body is content_length bytes (for tests that feed
    the body message by message)."""
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/v2/models/duo/infer", "raw_path": b"/v2/models/duo/infer",
            "query_string": b"", "root_path": "", "server": ("test", 80), "client": ("127.0.0.1", 1),
            "headers": [(b"host", b"test"), (b"content-type", b"application/json"),
                        (b"content-length", str(content_length).encode())]}


def test_a_body_that_never_finishes_arriving_is_answered_408_and_counted_dropped() -> None:
    """A client sends half its body and stops (a slowloris). SLO 0.3 s, answer_grace_s 0.1: the route stops
    waiting 0.4 s after the request arrived, answers 408 (reason body_timeout), and counts it dropped in
    the report and in pard_requests_total; the runtime never saw it. A whole body is still served."""
    doc = config(server={**config()["server"], "answer_grace_s": 0.1})
    doc["pipeline"] = {**doc["pipeline"], "slo": 0.3}
    app = create_app(parse_serve_config(doc))
    body = json.dumps(v2_body([1, 2, 3, 4])).encode()

    async def stalled_post() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        parts = [{"type": "http.request", "body": body[:10], "more_body": True}]

        async def receive() -> dict[str, Any]:
            if parts:
                return parts.pop(0)
            await asyncio.sleep(3600)  # the rest of the body never comes
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = _infer_scope(len(body))
        await asyncio.wait_for(app(scope, receive, send), 10.0)
        return sent

    async def main() -> dict[str, Any]:
        async with app.router.lifespan_context(app):
            sent = await stalled_post()
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                ok = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
                m = _metrics((await c.get("/metrics")).text)
            return {"sent": sent, "ok": ok.status_code, "report": app.state.service.report(), "metrics": m}

    res = asyncio.run(main())
    start = next(x for x in res["sent"] if x["type"] == "http.response.start")
    doc_out = json.loads(b"".join(x.get("body", b"") for x in res["sent"] if x["type"] == "http.response.body"))
    assert start["status"] == 408 and doc_out["reason"] == "body_timeout"
    assert res["ok"] == 200
    rep = res["report"]
    assert rep["outcomes"]["dropped"] == 1 and rep["runtime"]["submitted"] == 1  # the 200 alone reached it
    assert sum(v for k, v in rep["outcomes"].items() if k != "pending") == 2 == sum(rep["http"].values())
    assert res["metrics"][("pard_requests_total", (("outcome", "dropped"), ("pipeline", "duo")))] == 1


def test_drain_fails_readiness_and_answers_new_requests_503() -> None:
    """After begin_drain, /ready is 503 and an inference gets 503 reason draining with Retry-After."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        assert (await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))).status_code == 200
        app.state.service.begin_drain()
        assert (await c.get("/v2/health/ready")).status_code == 503
        assert (await c.get("/v2/health/live")).status_code == 200
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
        assert r.status_code == 503 and r.json()["reason"] == "draining" and "retry-after" in r.headers
        await app.state.service.drain(grace_s=0.0)
        rep = app.state.service.report()
        assert rep["outcomes"]["unavailable"] == 1 and rep["runtime"]["submitted"] == 1
        assert app.state.service.runtime.closed

    _run(config(), body)


def _gated_app(key: str) -> tuple[Any, Any]:
    """The app with a held ``detect`` stage (``_serve:gate`` under ``key``): its first batch waits for the gate."""
    doc = config(stages={"detect": {"executor": "_serve:gate", "kwargs": {"key": key}},
                         "classify": {"executor": "pard.serve.factories:sleep_profile"}}, warmup=False)
    return _serve.gate(key=key), create_app(parse_serve_config(doc))


def test_a_client_that_disconnects_cancels_its_request_inside_the_pipeline() -> None:
    """A request whose client leaves while it waits is cancelled (dropped, reason cancelled) and never computed."""
    gate, app = _gated_app("disconnect")

    async def main() -> dict[str, Any]:
        async with app.router.lifespan_context(app):
            svc = app.state.service
            body = json.dumps(v2_body([1, 0, 0, 0])).encode()
            first = asyncio.ensure_future(svc.infer("duo", body, {}))
            await asyncio.to_thread(gate.started.wait, 10.0)
            left = asyncio.Event()
            second = asyncio.ensure_future(svc.infer("duo", json.dumps(v2_body([2, 0, 0, 0])).encode(), {},
                                                     left.wait))
            for _ in range(200):
                if svc.runtime.queued() == 1:
                    break
                await asyncio.sleep(0.01)
            left.set()
            answer = await second
            queued = svc.runtime.queued()
            gate.release.set()
            assert (await first).status == 200
            out = svc.runtime.outcomes()
            return {"answer": answer, "queued": queued, "out": out, "report": svc.report()}

    res = asyncio.run(main())
    assert res["answer"].status == 499 and res["answer"].outcome == "client_closed"
    assert res["queued"] == 0
    assert gate.seen == [[1.0, 0.0, 0.0, 0.0]]
    from pard import _core

    assert _core.REASONS[int(res["out"]["reason"][1])] == "cancelled"
    assert res["report"]["server"]["client_closed"] == 1


def test_a_client_that_leaves_after_its_batch_was_collected_is_counted_dropped_not_served() -> None:
    """The running batch runs on (it cannot be interrupted), but the request ends there, cancelled: the next
    stage never spends on it, the runtime counts it dropped at detect, and the report and /metrics count
    it dropped with the 499, so that outcomes agree with the HTTP answers and the runtime."""
    gate, app = _gated_app("orphan")

    async def main() -> dict[str, Any]:
        async with app.router.lifespan_context(app):
            svc = app.state.service
            left = asyncio.Event()
            served = asyncio.ensure_future(svc.infer("duo", json.dumps(v2_body([1, 0, 0, 0])).encode(), {},
                                                     left.wait))
            await asyncio.to_thread(gate.started.wait, 10.0)  # its batch is running at detect
            left.set()
            answer = await served
            gate.release.set()
            for _ in range(500):  # the runtime finishes it after the client has gone
                if svc.runtime.counts()["pending"] == 0:
                    break
                await asyncio.sleep(0.01)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
                text = (await c.get("/metrics")).text
            return {"answer": answer, "report": svc.report(), "metrics": _metrics(text),
                    "drops": svc.runtime.drop_counts()}

    res = asyncio.run(main())
    rep = res["report"]
    assert res["answer"].status == 499
    assert rep["runtime"]["on_time"] + rep["runtime"]["late"] == 0 and rep["runtime"]["dropped"] == 1
    assert res["drops"] == {("detect", "cancelled"): 1}  # ended as detect's batch did; classify never ran it
    assert rep["server"]["closed_after_collected"] == 0  # nothing finished for a client that had gone
    assert rep["outcomes"]["on_time"] + rep["outcomes"]["late"] == rep["http"].get("200", 0) == 0
    assert rep["outcomes"]["dropped"] == 1
    m = res["metrics"]
    assert m[("pard_requests_total", (("outcome", "on_time"), ("pipeline", "duo")))] == 0
    assert m[("pard_requests_total", (("outcome", "dropped"), ("pipeline", "duo")))] == 1


def test_metrics_parse_and_agree_with_the_report() -> None:
    """/metrics parses with prometheus-client's parser; requests, drops, door refusals, latencies and batches
    match the report."""
    def post(c: httpx.AsyncClient, i: int) -> Any:
        if i % 4 == 0:  # a 5 ms deadline in the body: the entry stage drops it
            return c.post("/v2/models/duo/infer", json=v2_body([i, 0, 0, 0], parameters={"timeout": 5000}))
        header = "5" if i % 4 == 1 else "1000"  # 5 ms in the header: refused at the door
        return c.post("/v2/models/duo/infer", json=v2_body([i, 0, 0, 0]), headers={"X-Request-Timeout-Ms": header})

    async def body(c: httpx.AsyncClient, app: Any) -> tuple[str, dict[str, Any], Any]:
        answers = list(await asyncio.gather(*[post(c, i) for i in range(40)]))
        answers.append(await c.post("/v2/models/duo/infer", json=v2_body([1])))  # malformed, once the rest left
        text = (await c.get("/metrics")).text
        return text, app.state.service.report(), answers

    text, rep, answers = _run(config(), body)
    m = _metrics(text)
    statuses = [a.status_code for a in answers]
    out = rep["outcomes"]
    for outcome in ("on_time", "late", "dropped", "rejected", "failed", "invalid", "unavailable"):
        assert m[("pard_requests_total", (("outcome", outcome), ("pipeline", "duo")))] == out[outcome]
    assert out["on_time"] + out["late"] == statuses.count(200)
    # the 5 ms budgets in the body pass the door (or are refused there, as requests in front of them fill the
    # pipeline's 0.3 s) and the entry stage drops those it sees
    assert out["dropped"] == statuses.count(503) >= 1 and out["invalid"] == statuses.count(400) == 1
    assert out["rejected"] == statuses.count(429) >= 10 and rep["runtime"]["rejected"] == 0
    drops = sum(v for (name, _), v in m.items() if name == "pard_drops_total")
    assert drops == out["dropped"]
    assert m[("pard_drops_total", (("pipeline", "duo"), ("reason", "infeasible"), ("stage", "detect")))] >= 1
    assert m[("pard_request_duration_seconds_count", (("pipeline", "duo"),))] == statuses.count(200)
    assert m[("pard_request_duration_seconds_bucket", (("le", "0.3"), ("pipeline", "duo")))] <= statuses.count(200)
    executed = {st: m[("pard_batch_size_sum", (("pipeline", "duo"), ("stage", st)))] for st in ("detect", "classify")}
    assert executed["classify"] == statuses.count(200)  # every served request passed both stages
    assert executed["detect"] >= statuses.count(200)
    for st in ("detect", "classify"):
        orders = [m[("pard_stage_order", (("order", o), ("pipeline", "duo"), ("stage", st)))] for o in ("lbf", "hbf", "fcfs")]
        assert sorted(orders) == [0.0, 0.0, 1.0]
    assert ("pard_goodput", (("pipeline", "duo"),)) in m
    # the 5 ms budgets the entry stage drops were never computed; served requests' batch time is useful
    shed = m[("pard_shed_total", (("pipeline", "duo"),))]
    assert shed == rep["runtime"]["dropped"] + rep["runtime"]["rejected"]
    assert 1 <= m[("pard_drops_before_compute_total", (("pipeline", "duo"),))] <= shed
    for st in ("detect", "classify"):
        useful = m[("pard_compute_seconds_total", (("pipeline", "duo"), ("stage", st), ("use", "useful")))]
        assert useful > 0 and ("pard_compute_seconds_total", (("pipeline", "duo"), ("stage", st), ("use", "wasted"))) in m
        assert m[("pard_compute_unresolved_seconds", (("pipeline", "duo"), ("stage", st)))] >= 0


def test_metrics_stay_monotonic_and_complete_past_the_runtime_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the runtime holding only its last 16 request records, 90 requests later the counters and
    histograms still equal the true totals (from the HTTP answers) and none went down between scrapes."""
    import pard.serve.service as service

    monkeypatch.setattr(service, "Runtime", functools.partial(service.Runtime, history=16))

    async def wave(c: httpx.AsyncClient, start: int) -> list[int]:
        # a 5 ms budget in the body passes the door (which reads headers only) and the entry stage drops it
        posts = [c.post("/v2/models/duo/infer", json=v2_body([i, 0, 0, 0], parameters={"timeout": 5000})
                        if i % 3 == 0 else v2_body([i, 0, 0, 0]), headers={"X-Request-Timeout-Ms": "1000"})
                 for i in range(start, start + 45)]
        return [a.status_code for a in await asyncio.gather(*posts)]

    async def body(c: httpx.AsyncClient, app: Any) -> tuple[list[str], list[int], dict[str, Any]]:
        texts, statuses = [], []
        for start in (0, 45):
            statuses += await wave(c, start)
            texts.append((await c.get("/metrics")).text)
        assert app.state.service.runtime.outcomes()["state"].size == 16  # the window really is smaller
        return texts, statuses, app.state.service.report()

    texts, statuses, rep = _run(config(), body)
    first, last = _metrics(texts[0]), _metrics(texts[1])
    served, dropped, refused = statuses.count(200), statuses.count(503), statuses.count(429)
    # every 5 ms budget is infeasible (d(1) = 40 ms); on a busy machine the door may refuse a few of the 45
    # sent at once (429), before the pipeline sees them
    assert served + dropped + refused == 90 and dropped + refused >= 30
    assert last[("pard_requests_total", (("outcome", "rejected"), ("pipeline", "duo")))] == refused
    assert last[("pard_requests_total", (("outcome", "on_time"), ("pipeline", "duo")))] + \
        last[("pard_requests_total", (("outcome", "late"), ("pipeline", "duo")))] == served
    assert last[("pard_requests_total", (("outcome", "dropped"), ("pipeline", "duo")))] == dropped
    assert sum(v for (name, _), v in last.items() if name == "pard_drops_total") == dropped
    assert last[("pard_request_duration_seconds_count", (("pipeline", "duo"),))] == served
    assert last[("pard_batch_size_sum", (("pipeline", "duo"), ("stage", "classify")))] == served
    queued = last[("pard_queue_duration_seconds_count", (("pipeline", "duo"), ("stage", "classify")))]
    assert queued == served  # every served request was taken into exactly one classify batch
    for key, value in first.items():
        if key[0].endswith(("_total", "_count", "_sum", "_bucket")):
            assert last[key] >= value, key
    assert rep["outcomes"]["dropped"] == dropped


def test_only_version_1_is_served() -> None:
    """Metadata, readiness and inference of a version other than "1" are 404s naming the version, as in Triton."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        assert (await c.get("/v2/models/duo/versions/1")).status_code == 200
        for r in (await c.get("/v2/models/duo/versions/7"), await c.get("/v2/models/duo/versions/7/ready"),
                  await c.post("/v2/models/duo/versions/7/infer", json=v2_body([1, 2, 3, 4]))):
            assert r.status_code == 404 and "no version '7'" in r.json()["error"]
        assert app.state.service.runtime.counts()["submitted"] == 0

    _run(config(), body)


def test_an_answer_ready_only_after_its_deadline_is_late_though_the_pipeline_finished_in_time() -> None:
    """The pipeline finishes a request in ~0.05 s of its 0.3 s SLO; when the event loop then takes 0.4 s
    more to produce the answer (here: encoding blocks it, as 1 500 requests at once did on 2 cores), the
    client gets it after its deadline: answered 200 with ``X-Pard-Outcome: late`` and counted late,
    where the runtime alone counts it on time.  A request answered at once is on time."""
    import time as _time

    import pard.serve.service as service

    async def body(c: httpx.AsyncClient, app: Any) -> None:
        svc = app.state.service
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
        assert r.status_code == 200 and r.headers["x-pard-outcome"] == "on_time"
        encode = service._encode
        mid: list[dict[str, float]] = []

        def slow_encode(*args: Any) -> Any:  # a scrape while the late answer is being made
            family = next(iter(PipelineCollector(svc).collect()))
            mid.append({smp.labels["outcome"]: smp.value for smp in family.samples})
            _time.sleep(0.4)
            return encode(*args)

        service._encode = slow_encode
        try:
            r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
        finally:
            service._encode = encode
        assert r.status_code == 200 and r.headers["x-pard-outcome"] == "late"
        # the runtime had already counted it on time; the counter had not, so it never goes down
        assert (mid[0]["on_time"], mid[0]["late"]) == (1.0, 0.0)
        assert svc.runtime.counts()["on_time"] == 2  # the pipeline finished both in time
        rep = svc.report()["outcomes"]
        assert (rep["on_time"], rep["late"]) == (1, 1)
        m = _metrics((await c.get("/metrics")).text)
        assert m[("pard_requests_total", (("outcome", "late"), ("pipeline", "duo")))] == 1.0

    _run(config(), body)


def test_an_answer_the_pipeline_finished_past_its_margin_but_ready_by_the_deadline_is_on_time() -> None:
    """The runtime is handed a deadline earlier than the client's by the expected cost of answering (here
    set to 0.28 s of the 0.3 s SLO); under naive (no drops) the pipeline finishes the request after that
    deadline and counts it late, but its answer leaves well before the client's deadline: answered 200 with
    ``X-Pard-Outcome: on_time`` and counted on time in the report and ``/metrics``."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        svc = app.state.service
        svc.door.egress_s = 0.28
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
        assert r.status_code == 200 and r.headers["x-pard-outcome"] == "on_time"
        assert svc.runtime.counts()["late"] == 1  # past the deadline the runtime was handed
        rep = svc.report()
        assert (rep["outcomes"]["on_time"], rep["outcomes"]["late"]) == (1, 0)
        assert rep["server"]["timely_answers"] == 1 and rep["server"]["late_answers"] == 0
        m = _metrics((await c.get("/metrics")).text)
        assert m[("pard_requests_total", (("outcome", "on_time"), ("pipeline", "duo")))] == 1.0
        assert m[("pard_requests_total", (("outcome", "late"), ("pipeline", "duo")))] == 0.0

    _run(config(policy="naive"), body)


def test_the_slo_counts_from_when_the_route_received_the_request() -> None:
    """``arrived_s`` 0.35 s ago with a 0.3 s SLO: the deadline has passed before the pipeline sees the
    request, so a stage drops it (503); 0.1 s ago it has 0.2 s left, enough for ~0.05 s of work (200)."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        svc = app.state.service
        raw = json.dumps(v2_body([1, 2, 3, 4])).encode()
        late = await svc.infer("duo", raw, {}, arrived_s=svc.arrival() - 0.35)
        assert late.status == 503 and json.loads(late.body)["reason"] in ("infeasible", "expired", "shed")
        ok = await svc.infer("duo", raw, {}, arrived_s=svc.arrival() - 0.1)
        assert ok.status == 200 and ok.headers["x-pard-outcome"] == "on_time"

    _run(config(), body)


def test_json_nested_too_deeply_is_a_400_counted_invalid() -> None:
    """'[' * 100 000 exhausts json's recursion: a 400 naming the nesting, counted once as invalid."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        deep = "[" * 100_000 + "]" * 100_000
        r = await c.post("/v2/models/duo/infer", content=deep, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "nested too deeply" in r.json()["error"]
        rep = app.state.service.report()
        assert rep["outcomes"]["invalid"] == 1 and rep["http"] == {"400": 1}

    _run(config(), body)


def test_unknown_routes_and_methods_answer_json_and_every_infer_404_is_counted() -> None:
    """An unknown path is a JSON 404, a GET on the infer route a JSON 405; an infer request for an
    unknown version is counted invalid like one for an unknown model."""
    async def body(c: httpx.AsyncClient, app: Any) -> None:
        r = await c.get("/v2/nothing/here")
        assert r.status_code == 404 and "/v2/nothing/here" in r.json()["error"]
        r = await c.get("/v2/models/duo/infer")
        assert r.status_code == 405 and "GET" in r.json()["error"]
        for path in ("/v2/models/tm/infer", "/v2/models/duo/versions/7/infer"):
            assert (await c.post(path, json=v2_body([1, 2, 3, 4]))).status_code == 404
        rep = app.state.service.report()
        assert rep["outcomes"]["invalid"] == 2 and rep["http"] == {"404": 2}

    _run(config(), body)


def test_x_pard_tier_takes_a_tier_name_or_code() -> None:
    """With tiers {gold: 3, free: 1}: ``X-Pard-Tier: free`` and ``1`` both reach code 1; an unknown name
    is a 400 listing the tiers."""
    tiered = dict(_serve.PIPELINE, tiers={"gold": 3.0, "free": 1.0})

    async def body(c: httpx.AsyncClient, app: Any) -> None:
        for tier in ("free", "1"):
            r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]), headers={"X-Pard-Tier": tier})
            assert r.status_code == 200
            assert int(app.state.service.runtime.outcomes()["tier"][-1]) == 1
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]), headers={"X-Pard-Tier": "silver"})
        assert r.status_code == 400 and "['gold', 'free']" in r.json()["error"]

    _run(config(pipeline=tiered), body)


def test_per_tier_counts_in_the_report_and_the_metrics() -> None:
    """Three gold and two free requests answered: the report's tier table and pard_tier_requests_total
    count them by tier (a tier-less pipeline has one tier, "default"); a malformed request is in no tier."""
    tiered = dict(_serve.PIPELINE, tiers={"gold": 3.0, "free": 1.0})

    async def body(c: httpx.AsyncClient, app: Any) -> None:
        for tier in ("gold", "gold", "gold", "free", "free"):
            r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]), headers={"X-Pard-Tier": tier})
            assert r.status_code == 200
        assert (await c.post("/v2/models/duo/infer", content=b"{")).status_code == 400
        tiers = app.state.service.report()["tiers"]
        served = {name: row["on_time"] + row["late"] for name, row in tiers.items()}
        assert served == {"gold": 3, "free": 2}
        assert sum(row["invalid"] for row in tiers.values()) == 0
        m = _metrics((await c.get("/metrics")).text)
        got = {t: m[("pard_tier_requests_total", (("outcome", "on_time"), ("pipeline", "duo"), ("tier", t)))] +
               m[("pard_tier_requests_total", (("outcome", "late"), ("pipeline", "duo"), ("tier", t)))]
               for t in ("gold", "free")}
        assert got == {"gold": 3.0, "free": 2.0}

    _run(config(pipeline=tiered), body)
    _run(config(), lambda c, app: _one_default(c, app))


async def _one_default(c: httpx.AsyncClient, app: Any) -> None:
    assert (await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))).status_code == 200
    row = app.state.service.report()["tiers"]["default"]
    assert row["weight"] == 1.0 and row["on_time"] + row["late"] == 1


def test_a_lagging_event_loop_sheds_at_the_door_and_recovers() -> None:
    """With ``max_loop_lag_s`` 0.05: right after the loop was blocked for 0.3 s, a request is refused 429
    (``server_busy``, Retry-After) before its body is read, counted rejected; once the loop has caught up
    (the door budgets an answer's wait at the lag's recent peak, but only up to max_loop_lag_s) the next
    request is served."""
    import time as _time

    async def body(c: httpx.AsyncClient, app: Any) -> None:
        svc = app.state.service
        assert svc.max_loop_lag_s == pytest.approx(0.05)
        _time.sleep(0.3)  # the loop is blocked: the lag monitor's wake-up is 0.3 s overdue
        r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
        assert r.status_code == 429 and r.json()["reason"] == "server_busy" and r.headers["retry-after"] == "1"
        await asyncio.sleep(0.1)
        assert svc.door.loop_lag.now() < 0.05
        assert (await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))).status_code == 200
        rep = svc.report()
        assert rep["outcomes"]["rejected"] == 1 and rep["http"] == {"200": 1, "429": 1}
        m = _metrics((await c.get("/metrics")).text)  # the 429 at the door is in pard_requests_total too
        assert m[("pard_requests_total", (("outcome", "rejected"), ("pipeline", "duo")))] == 1
        assert svc.runtime.counts()["submitted"] == 1  # the refused one never reached the pipeline

    server = {"host": "127.0.0.1", "port": 0, "log_level": "warning", "max_loop_lag_s": 0.05}
    _run(config(server=server), body)


def test_max_loop_lag_defaults_to_half_the_slo_and_zero_turns_it_off() -> None:
    """The default threshold is half the pipeline's SLO (0.3 s -> 0.15 s); 0 never sheds for the lag itself
    (reason server_busy), though the lag still counts in the door's estimate of when an answer can leave."""
    def check(expected: float) -> Callable[[httpx.AsyncClient, Any], Awaitable[None]]:
        async def body(c: httpx.AsyncClient, app: Any) -> None:
            assert app.state.service.max_loop_lag_s == pytest.approx(expected)
            if expected == 0:
                import time as _time
                _time.sleep(0.2)
                r = await c.post("/v2/models/duo/infer", json=v2_body([1, 2, 3, 4]))
                assert r.status_code == 200 or r.json()["reason"] != "server_busy"
        return body

    _run(config(), check(0.15))
    _run(config(server={"host": "127.0.0.1", "port": 0, "log_level": "warning", "max_loop_lag_s": 0}), check(0.0))


def test_uvicorn_waits_for_open_connections_only_for_what_is_left_of_the_drain() -> None:
    """After the drain, uvicorn's graceful shutdown (open connections: a client still sending its body) gets
    what is left of server.drain_timeout_s, rounded up, at least 1 s: it used to get the whole
    drain_timeout_s + 1 again, so a drain of 10 s exited after 21 s.  drain_left_s is the full budget before
    the drain and counts down from its start."""
    import time as _time

    import uvicorn

    from pard.serve.server import DrainingServer
    from pard.serve.service import ServedPipeline

    cfg = parse_serve_config(config(server={**config()["server"], "drain_timeout_s": 10.0}), source="t.yaml")
    service = ServedPipeline(cfg)
    assert service.drain_left_s() == 10.0
    service.begin_drain()
    service._drain_started = _time.monotonic() - 7.6  # the drain ran 7.6 s of its 10
    assert 2.3 <= service.drain_left_s() <= 2.4 + 1e-6

    async def no_drain() -> None:
        return None

    service.drain = no_drain  # type: ignore[method-assign]
    server = DrainingServer(uvicorn.Config(create_app(cfg, service=service), timeout_graceful_shutdown=11), service)
    asyncio.run(server._drain_then_exit())
    assert server.should_exit and server.config.timeout_graceful_shutdown == 3


def test_a_client_that_closes_mid_body_is_counted_client_closed_not_timed_out() -> None:
    """A client sends part of its body and disconnects: no 408 (no one waited for a timeout), the request
    counts client_closed (dropped in the merged outcomes) once, and the runtime never saw it."""
    app = create_app(parse_serve_config(config()))
    body = json.dumps(v2_body([1, 2, 3, 4])).encode()

    async def main() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        parts = [{"type": "http.request", "body": body[:10], "more_body": True}, {"type": "http.disconnect"}]

        async def receive() -> dict[str, Any]:
            return parts.pop(0) if parts else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = _infer_scope(len(body))
        async with app.router.lifespan_context(app):
            await asyncio.wait_for(app(scope, receive, send), 10.0)
            return sent, app.state.service.report()

    sent, rep = asyncio.run(main())
    start = next(x for x in sent if x["type"] == "http.response.start")
    assert start["status"] == 499
    assert rep["server"]["client_closed"] == 1 == rep["server"]["closed_mid_body"] and rep["server"]["body_timeout"] == 0
    assert rep["runtime"]["submitted"] == 0 and rep["outcomes"]["dropped"] == 1
    assert sum(v for k, v in rep["outcomes"].items() if k != "pending") == 1 == sum(rep["http"].values())
