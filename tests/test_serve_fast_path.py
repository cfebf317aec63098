"""``pard serve``'s inference answers on a real server on 127.0.0.1, read from a raw socket: a whole
HTTP/1.1 response with the server's own headers, kept-alive connections that carry one request after
another, and a client that hangs up while its request waits has the request cancelled in the pipeline
(no task watches for it: the connection's close does).  The speed of this path is measured in
``bench/``; here only what a client sees and what the server counts."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from _serve import ServerProcess, config, read_answer  # noqa: E402

PATH = "/v2/models/duo/infer"


def _body(first: float) -> bytes:
    return json.dumps({"id": f"r{first:g}", "inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32",
                                                       "data": [first, 2, 3, 4]}]}).encode()


def _request(port: int, body: bytes, extra: str = "") -> bytes:
    return (f"POST {PATH} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n").encode() + body


def _wait_for(url: str, name: str, value: float) -> None:
    """Poll /metrics until the ``detect`` stage's sample ``name`` equals ``value`` (20 s at most)."""
    end = time.monotonic() + 20.0
    while time.monotonic() < end:
        text = httpx.get(url + "/metrics", timeout=10.0).text
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == name and s.labels.get("stage") == "detect" and s.value == value:
                    return
        time.sleep(0.02)
    raise AssertionError(f"{name} never reached {value}")


def test_answers_are_whole_responses_on_a_kept_alive_connection(tmp_path: Path) -> None:
    """Three requests one after another on one connection each get a 200 whose headers carry the date,
    the content type and a content length equal to the body's, and whose body echoes the request's id
    and tensor; a fourth that asks to close gets ``connection: close`` and the server then closes."""
    with ServerProcess(tmp_path, config()) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30.0) as sock:
            for i in range(3):
                sock.sendall(_request(srv.port, _body(float(i))))
                status, headers, body = read_answer(sock)
                assert status == 200
                assert headers["content-type"] == "application/json"
                assert int(headers["content-length"]) == len(body)
                assert headers["date"].endswith("GMT")
                assert headers["x-pard-outcome"] in ("on_time", "late")
                doc = json.loads(body)
                assert doc["id"] == f"r{i}" and doc["model_name"] == "duo"
                assert doc["outputs"][0]["data"] == [float(i), 2.0, 3.0, 4.0]
            sock.sendall(_request(srv.port, _body(9.0), "connection: close\r\n"))
            status, headers, _ = read_answer(sock)
            assert status == 200 and headers["connection"] == "close"
            sock.settimeout(20.0)
            assert sock.recv(1) == b""  # closed by the server after the answer


def test_a_client_that_hangs_up_while_its_request_waits_has_it_cancelled(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry stage is held for 3 s by a first request (a payload starting with 7); a second request,
    queued behind it, loses its client.  The server cancels it in the pipeline at once: when the held batch
    ends, the stage runs no batch for it, the runtime counts it dropped (cancelled), and the server counts
    one client that closed; the first request is answered 200."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    doc = config(slow=20.0, stages={"detect": {"executor": "_serve:hanging", "kwargs": {"seconds": 3.0}},
                                    "classify": {"executor": "pard.serve.factories:sleep_profile"}},
                 policy="naive", warmup=False)
    doc["pipeline"]["stages"][0]["max_batch"] = 1
    doc["pipeline"]["stages"][0]["profile"] = {1: 0.01}
    with ServerProcess(tmp_path, doc) as srv:
        held = socket.create_connection(("127.0.0.1", srv.port), timeout=30.0)
        held.sendall(_request(srv.port, _body(7.0)))
        _wait_for(srv.url, "pard_queue_duration_seconds_count", 1.0)  # the held batch is formed, running
        gone = socket.create_connection(("127.0.0.1", srv.port), timeout=30.0)
        gone.sendall(_request(srv.port, _body(1.0)))
        _wait_for(srv.url, "pard_stage_queued", 1.0)  # the second waits behind it
        gone.close()
        status, _, body = read_answer(held)
        assert status == 200 and json.loads(body)["outputs"][0]["data"][0] == 7.0
        held.close()
        srv.terminate()
        assert srv.wait() == 0
        rep = srv.report()
    assert rep["runtime"]["submitted"] == 2
    assert rep["runtime"]["dropped"] == 1  # the second, cancelled before any batch took it
    assert rep["server"]["client_closed"] == 1
    assert rep["outcomes"]["on_time"] + rep["outcomes"]["late"] == 1


def test_health_probes_are_answered_by_the_protocol_as_the_routes_answer_them(tmp_path: Path) -> None:
    """GET /v2/health/live and /v2/health/ready answer 200 with an empty body on a kept-alive connection;
    once the server is told to stop, ready answers 503 (draining) while live still answers 200."""
    doc = config()
    doc["server"]["drain_grace_s"] = 3.0
    with ServerProcess(tmp_path, doc) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30.0) as sock:
            for path in ("/v2/health/live", "/v2/health/ready", "/v2/health/live"):
                sock.sendall(f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
                status, headers, body = read_answer(sock)
                assert (status, body, headers["content-length"]) == (200, b"", "0")
            srv.terminate()
            end = time.monotonic() + 20.0
            ready = 200
            while ready == 200 and time.monotonic() < end:
                sock.sendall(b"GET /v2/health/ready HTTP/1.1\r\nhost: x\r\n\r\n")
                ready = read_answer(sock)[0]
            assert ready == 503
            sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nhost: x\r\n\r\n")
            assert read_answer(sock)[0] == 200
        assert srv.wait() == 0


def test_a_raw_answer_with_a_status_http_does_not_name_has_an_empty_reason_phrase() -> None:
    """499 (the client closed first) has no standard phrase: its status line is ``HTTP/1.1 499 `` and the
    rest of the answer as for any other, not an error."""
    from pard.serve.infer_route import raw_answer
    from pard.serve.service import Answer

    raw = raw_answer(Answer(499, b"", {}, "client_closed"), True, [(b"date", b"Sun, 06 Dec 2026 08:00:00 GMT")])
    assert raw == b"HTTP/1.1 499 \r\ndate: Sun, 06 Dec 2026 08:00:00 GMT\r\ncontent-length: 0\r\n\r\n"
    assert raw_answer(Answer(200, b"{}", {"content-type": "application/json"}), False).startswith(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n")
