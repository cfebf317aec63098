"""``pard serve``'s door against a real server on 127.0.0.1: a refusal comes before the body is read, and
under a short overload every request gets exactly one answer that /metrics counts as the client does.

The plateau itself (goodput past capacity) is measured in ``bench/served_overload.py``, not here: these
tests assert accounting and order of events, never a timing.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from _serve import CAPACITY_REQ_S, ServerProcess, config, read_answer as _read_answer  # noqa: E402

BODY = json.dumps({"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}).encode()
PATH = "/v2/models/duo/infer"


def _request(port: int, extra: str = "", body: bytes = BODY) -> bytes:
    return (f"POST {PATH} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n").encode() + body


def _metrics(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=30.0).text
    return {s.labels["outcome"]: s.value for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name == "pard_requests_total"}


def test_a_request_no_retry_can_serve_is_refused_before_its_body_is_sent(tmp_path: Path) -> None:
    """A request whose header deadline (1 ms) is shorter than the pipeline's fastest path is answered 429
    (reason infeasible, no Retry-After) before its body is sent; the body sent afterwards is skipped, the same
    connection then serves a whole request 200, and /metrics counts one rejected and one on time or late."""
    with ServerProcess(tmp_path, config()) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30.0) as sock:
            whole = _request(srv.port, "x-request-timeout-ms: 1\r\n")
            head, body = whole[:-len(BODY)], whole[-len(BODY):]
            sock.sendall(head)
            status, headers, answer = _read_answer(sock)
            assert status == 429 and "retry-after" not in headers
            assert json.loads(answer)["reason"] == "infeasible"
            sock.sendall(body + _request(srv.port))
            status, headers, _ = _read_answer(sock)
            assert status == 200 and headers["x-pard-outcome"] in ("on_time", "late")
        counts = _metrics(srv.url)
        assert counts["rejected"] == 1 and counts["on_time"] + counts["late"] == 1


def test_a_refused_request_sent_whole_with_a_large_body_keeps_its_connection(tmp_path: Path) -> None:
    """A client that writes a refused request's whole 200 KB body before it reads (as http.client and
    requests do) gets its 429, and the same connection then serves the next request: the body's bytes
    are skipped, not taken for an over-long header."""
    with ServerProcess(tmp_path, config()) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30.0) as sock:
            padded = BODY + b" " * 200_000
            sock.sendall(_request(srv.port, "x-request-timeout-ms: 1\r\n", padded) + _request(srv.port))
            assert _read_answer(sock)[0] == 429
            status, headers, _ = _read_answer(sock)
            assert status == 200 and headers["x-pard-outcome"] in ("on_time", "late")


def test_a_tier_header_int_cannot_read_is_passed_over_at_the_door(tmp_path: Path) -> None:
    """X-Pard-Tier values that look like digits to str.isdigit but are no int ('\\xb9', 5 000 nines) get the
    JSON 400 naming the header, as other bad tiers do, with no traceback in the log."""
    with ServerProcess(tmp_path, config()) as srv:
        for tier in ("\xb9", "9" * 5000):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=30.0) as sock:
                raw = _request(srv.port, "x-pard-tier: " + tier + "\r\n")
                sock.sendall(raw.decode("utf-8").encode("latin-1"))  # the header's byte as sent: 0xb9
                status, _, body = _read_answer(sock)
                assert status == 400 and "X-Pard-Tier" in json.loads(body)["error"]
        srv.terminate()
        srv.wait(60.0)
        assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_a_refusal_arrives_while_the_body_is_still_unsent(tmp_path: Path) -> None:
    """With the pipeline's queue past what it can serve in its 0.3 s SLO, a request that declares a 1 MiB body
    and sends none of it is refused at the door: its 429 arrives though the server never read its body."""
    doc = config(server={"host": "127.0.0.1", "port": 0, "log_level": "warning", "max_body_bytes": 4 * 2**20,
                         "drain_grace_s": 0.1, "drain_timeout_s": 5.0})
    with ServerProcess(tmp_path, doc) as srv:
        socks = []
        try:
            for _ in range(80):  # 80 at once against 100 req/s: the queue holds more than 0.3 s of work
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=30.0)
                s.sendall(_request(srv.port))
                socks.append(s)
            head = (f"POST {PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    f"content-length: {2**20}\r\n\r\n").encode()
            refused = None
            for _ in range(40):  # until the door sees the queue (each try a fresh request on its own socket)
                probe = socket.create_connection(("127.0.0.1", srv.port), timeout=30.0)
                socks.append(probe)
                probe.sendall(head)
                status, _, body = _read_answer(probe)
                if status == 429:
                    refused = json.loads(body)
                    break
            assert refused is not None and refused["reason"] == "infeasible"
        finally:
            for s in socks:
                s.close()


async def _burst(port: int, rate: float, seconds: float, conns: int) -> Counter[int]:
    """An open-loop Poisson burst over ``conns`` keep-alive connections (round robin); each answer's status."""
    rng = random.Random(7)
    statuses: Counter[int] = Counter()
    pool = [await asyncio.open_connection("127.0.0.1", port) for _ in range(conns)]
    queues: list[asyncio.Queue[None]] = [asyncio.Queue() for _ in pool]

    async def reader(i: int) -> None:
        r, _ = pool[i]
        while True:
            await queues[i].get()
            line = await r.readline()
            status = int(line.split()[1])
            length = 0
            while (h := await r.readline()) not in (b"\r\n", b""):
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":")[1])
            await r.readexactly(length)
            statuses[status] += 1
            queues[i].task_done()

    readers = [asyncio.ensure_future(reader(i)) for i in range(conns)]
    loop = asyncio.get_running_loop()
    t, end, k = loop.time(), loop.time() + seconds, 0
    req = _request(port)
    while t < end:
        t += rng.expovariate(rate)
        await asyncio.sleep(max(0.0, t - loop.time()))
        i = k % conns
        pool[i][1].write(req)
        queues[i].put_nowait(None)
        k += 1
    await asyncio.wait_for(asyncio.gather(*(q.join() for q in queues)), 60.0)
    for task in readers:
        task.cancel()
    for _, w in pool:
        w.close()
    assert sum(statuses.values()) == k
    return statuses


@pytest.mark.parametrize("load", [0.5, 10.0])
def test_every_request_of_a_short_overload_gets_one_answer_that_metrics_counts(tmp_path: Path, load: float) -> None:
    """2 s of Poisson arrivals at 0.5x and 10x the pipeline's capacity: every request gets exactly one answer;
    200s, 429s and 503s equal /metrics' on_time + late, rejected and dropped; at 10x the door refuses some
    (429) and the pipeline still serves some (200)."""
    with ServerProcess(tmp_path, config()) as srv:
        statuses = asyncio.run(_burst(srv.port, load * CAPACITY_REQ_S, 2.0, 64))
        counts = _metrics(srv.url)
        srv.terminate()
        assert srv.wait(60.0) == 0
        report = srv.report()
    assert set(statuses) <= {200, 429, 503}
    assert statuses[200] == counts["on_time"] + counts["late"]
    assert statuses[429] == counts["rejected"] and statuses[503] == counts["dropped"]
    out = report["outcomes"]
    assert sum(out[k] for k in ("on_time", "late", "dropped", "rejected")) == sum(statuses.values())
    assert report["door"]["in_front"] == 0  # every admitted request reached the pipeline
    if load > 1:
        assert statuses[429] > 0 and statuses[200] > 0


def test_a_stalled_body_is_answered_408_however_long_its_header_timeout(tmp_path: Path) -> None:
    """A client that asks for a 1e12 ms timeout and stalls its body after 10 bytes is answered 408
    (body_timeout) once the longer of server.header_timeout_s and the SLO plus grace has passed, not held
    for the timeout it asked for."""
    doc = config(server={"host": "127.0.0.1", "port": 0, "log_level": "warning", "header_timeout_s": 0.5,
                         "drain_grace_s": 0.1, "drain_timeout_s": 5.0})
    with ServerProcess(tmp_path, doc) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30.0) as sock:
            head = (f"POST {PATH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    f"x-request-timeout-ms: 1000000000000\r\ncontent-length: 1000\r\n\r\n").encode()
            sock.sendall(head + b'{"inputs": ')
            status, _, body = _read_answer(sock)
            assert status == 408 and json.loads(body)["reason"] == "body_timeout"
        counts = _metrics(srv.url)
        assert counts["dropped"] == 1
