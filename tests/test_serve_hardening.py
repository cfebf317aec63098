"""pard serve exposed directly: stalled connections, the derived body limit and hostile numbers.

Against a real server (``python -m pard.serve`` in a subprocess on 127.0.0.1, tests/_serve.py): a crowd
of connections that never finish their headers is capped and timed out while a well-behaved client is
still served; a body past the limit derived from the declared inputs is refused 413 before it is sent;
numbers no datatype holds are 400s naming the input, with no traceback in the log.  Every wait is
bounded; nothing asserts how fast the server is.  The config loader's checks of the new ``server``
fields are unit tests.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
import httpx  # noqa: E402
import yaml  # noqa: E402

from pard.serve.config import (  # noqa: E402
    DEFAULT_MAX_BODY_BYTES, MIN_BODY_BYTES, ServeConfigError, ServerOptions, body_limit_for, parse_serve_config,
)
from pard.serve.connections import default_max_connections  # noqa: E402

from _serve import ServerProcess, config, v2_body, read_answer as _read_answer  # noqa: E402

INFER = "/v2/models/duo/infer"
HALF_HEADER = f"POST {INFER} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl".encode()


def _doc(**server: Any) -> dict[str, Any]:
    doc = config()
    doc["server"] = {**doc["server"], **server}
    return doc


def _connect(port: int, timeout_s: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _closed_by_server(s: socket.socket) -> bool:
    """Whether the server has closed ``s`` (EOF or reset), without blocking."""
    if not select.select([s], [], [], 0)[0]:
        return False
    try:
        return s.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def _log(server: ServerProcess) -> str:
    server.log.flush()
    return (server.tmp / "server.log").read_text()


def test_stalled_connections_past_the_cap_do_not_lock_out_a_client(tmp_path: Path) -> None:
    """200 connections that stall mid-header against max_connections 50 are closed oldest first, a well-behaved
    request is answered 200, and the log stays short with no traceback."""
    with ServerProcess(tmp_path, _doc(max_connections=50, header_timeout_s=60.0)) as server:
        stalled = []
        try:
            for _ in range(200):
                s = _connect(server.port)
                s.sendall(HALF_HEADER)
                stalled.append(s)
            answer = httpx.post(server.url + INFER, json=v2_body([1.0, 2.0, 3.0, 4.0]), timeout=30.0)
            assert answer.status_code == 200, answer.text
            closed = set()
            end = time.monotonic() + 30.0
            while len(closed) < 150 and time.monotonic() < end:  # the cap closed all but the newest ones
                closed |= {i for i, s in enumerate(stalled) if i not in closed and _closed_by_server(s)}
                time.sleep(0.05)
            assert len(closed) >= 150, len(closed)
            assert min(set(range(200)) - closed) >= 100, "the oldest half-open connections go first"
        finally:
            for s in stalled:
                s.close()
        log = _log(server)
    assert "Traceback" not in log and "Error" not in log, log
    assert len(log) < 4000, log


def test_a_new_connection_is_refused_503_when_every_connection_holds_a_request(tmp_path: Path) -> None:
    """With max_connections 3 taken by requests whose bodies are still arriving, a fourth connection is answered 503
    and closed, and served once one of them finishes."""
    with ServerProcess(tmp_path, _doc(max_connections=3)) as server:
        body = json.dumps(v2_body([1.0, 2.0, 3.0, 4.0])).encode()
        head = (f"POST {INFER} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nX-Request-Timeout-Ms: 20000\r\n\r\n").encode()
        busy = [_connect(server.port) for _ in range(3)]
        try:
            for s in busy:
                s.sendall(head + body[:10])  # headers complete, body pending: a request in progress
            time.sleep(0.5)  # not a timing assertion: lets the server read those headers first
            extra = _connect(server.port)
            extra.sendall("GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            status, headers, answer = _read_answer(extra)
            assert status == 503 and headers.get("retry-after") == "1", answer
            assert json.loads(answer)["reason"] == "server_busy"
            extra.close()
            busy[0].sendall(body[10:])
            assert _read_answer(busy[0])[0] == 200
        finally:
            for s in busy:
                s.close()
        answer2 = httpx.get(server.url + "/v2/health/live", timeout=30.0)
        assert answer2.status_code == 200


def test_a_connection_that_never_finishes_its_headers_is_closed_after_the_header_timeout(tmp_path: Path) -> None:
    """With header_timeout_s 0.5, a connection stalled mid-header, and a kept-alive one idle after its answer, are
    closed by the server."""
    with ServerProcess(tmp_path, _doc(header_timeout_s=0.5)) as server:
        half = _connect(server.port, timeout_s=20.0)
        half.sendall(HALF_HEADER)
        idle = _connect(server.port, timeout_s=20.0)
        idle.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answer(idle)[0] == 200
        for s in (half, idle):
            s.settimeout(20.0)  # generous: the server closes them after about 0.5 s
            try:
                assert s.recv(65536) == b""
            except ConnectionResetError:
                pass
            s.close()
        assert "Traceback" not in _log(server)


def test_headers_past_the_size_bound_are_answered_431(tmp_path: Path) -> None:
    """A request whose headers pass 64 KiB is answered 431 and closed, not buffered without end."""
    with ServerProcess(tmp_path, _doc()) as server:
        s = _connect(server.port, timeout_s=20.0)
        try:
            s.sendall(f"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Pad: {'a' * 100_000}".encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still sending: the answer may be lost, the close is what counts
        status, _, _ = _read_answer(s)
        assert status == 431
        s.close()


def test_the_body_limit_derived_from_the_inputs_refuses_a_huge_body_before_it_is_sent(tmp_path: Path) -> None:
    """The derived server.max_body_bytes answers 413 to a body declared as 1 GB after 1 KiB of it, while a pretty-
    printed JSON body for the declared input is served."""
    doc = _doc()
    limit = parse_serve_config(doc).server.max_body_bytes
    assert MIN_BODY_BYTES <= limit < 2 * MIN_BODY_BYTES  # FP32 [4]: about the floor, not 64 MiB
    with ServerProcess(tmp_path, doc) as server:
        s = _connect(server.port, timeout_s=20.0)
        s.sendall((f"POST {INFER} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {10**9}\r\n\r\n").encode() + b" " * 1024)
        status, _, body = _read_answer(s)
        assert status == 413 and "max_body_bytes" in json.loads(body)["error"]
        s.close()
        x = [-2.2250738585072014e-308, 1.7976931348623157e+308 / 1e270, 0.10000000149011612, -3.4e38]
        pretty = json.dumps(v2_body(x, id="a" * 200, parameters={"timeout": 10**12}), indent=8).encode()
        answer = httpx.post(server.url + INFER, content=pretty, timeout=30.0,
                            headers={"content-type": "application/json"})
        assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("number", ["9" * 5001, "-" + "9" * 5001, "1e400", "-1e400"])
def test_numbers_no_datatype_holds_are_400_naming_the_input(tmp_path: Path, number: str) -> None:
    """A 5 001-digit integer or 1e400 in data is a 400 naming inputs[0].data, with no traceback in the server log."""
    with ServerProcess(tmp_path, _doc()) as server:
        body = json.dumps(v2_body([1.0, 2.0, 3.0, 0.0])).replace("0.0]", number + "]")
        for _ in range(3):
            answer = httpx.post(server.url + INFER, content=body.encode(), timeout=30.0,
                                headers={"content-type": "application/json"})
            assert answer.status_code == 400, answer.text
            assert "inputs[0].data[3]" in answer.json()["error"], answer.text
        log = _log(server)
    assert "Traceback" not in log, log


@pytest.mark.parametrize(("server", "field", "value"), [
    ({"header_timeout_s": 0}, "server.header_timeout_s", "0"),
    ({"header_timeout_s": -1.5}, "server.header_timeout_s", "-1.5"),
    ({"header_timeout_s": float("inf")}, "server.header_timeout_s", "inf"),
    ({"header_timeout_s": "5"}, "server.header_timeout_s", "'5'"),
    ({"max_connections": 0}, "server.max_connections", "0"),
    ({"max_connections": -10}, "server.max_connections", "-10"),
    ({"max_connections": 2.5}, "server.max_connections", "2.5"),
    ({"max_connections": True}, "server.max_connections", "True"),
    ({"max_body_bytes": 0}, "server.max_body_bytes", "0"),
])
def test_bad_connection_limits_are_named_with_their_value(server: dict[str, Any], field: str, value: str) -> None:
    """Each bad header_timeout_s, max_connections or max_body_bytes raises ServeConfigError naming the file, the field
    and the value."""
    with pytest.raises(ServeConfigError) as info:
        parse_serve_config(_doc(**server), source="test.yaml")
    msg = str(info.value)
    assert "test.yaml" in msg and field in msg and value in msg, msg


def test_the_connection_limits_default_and_explicit_values_load() -> None:
    """header_timeout_s defaults to 5 s and max_connections to null (derived: min(10 000, soft limit - 100)); explicit
    values load."""
    cfg = parse_serve_config(config())
    assert cfg.server.header_timeout_s == 5.0 and cfg.server.max_connections is None
    cfg = parse_serve_config(_doc(header_timeout_s=0.25, max_connections=7))
    assert cfg.server.header_timeout_s == 0.25 and cfg.server.max_connections == 7
    assert default_max_connections(1024) == 924 and default_max_connections(1 << 20) == 10_000
    assert default_max_connections(50) == 1


def test_the_body_limit_is_derived_from_the_inputs_and_an_explicit_one_wins() -> None:
    """max_body_bytes not given: the largest JSON body for fixed-shape inputs (at least 256 KiB), 16 MiB when a size
    is unknown; given: that value."""
    image = [{"name": "INPUT0", "datatype": "FP32", "shape": [32, 32, 3]}]
    cfg = parse_serve_config(config(inputs=image))
    assert 3072 * 24 + 64 * 1024 < cfg.server.max_body_bytes < 1024 * 1024  # 3 072 numbers of JSON, not 64 MiB
    assert cfg.server.max_body_bytes == body_limit_for(cfg.inputs)
    assert parse_serve_config(config(inputs=[{"name": "x", "shape": [-1, 3]}])).server.max_body_bytes \
        == DEFAULT_MAX_BODY_BYTES
    assert parse_serve_config({"pipeline": "tm"}).server.max_body_bytes == DEFAULT_MAX_BODY_BYTES
    assert parse_serve_config(_doc(max_body_bytes=5000)).server.max_body_bytes == 5000
    assert ServerOptions().max_body_bytes == DEFAULT_MAX_BODY_BYTES


def test_inputs_that_fit_alone_but_not_together_are_refused_at_load() -> None:
    """Two fixed-shape inputs whose raw bytes together pass an explicit max_body_bytes raise ServeConfigError naming
    inputs."""
    two = [{"name": "a", "datatype": "FP32", "shape": [200]}, {"name": "b", "datatype": "FP32", "shape": [200]}]
    with pytest.raises(ServeConfigError, match=r"inputs: .*1.6e\+03 bytes .*max_body_bytes 1000"):
        parse_serve_config(config(inputs=two, server={**config()["server"], "max_body_bytes": 1000}),
                           source="test.yaml")


def test_headers_past_the_size_bound_in_one_complete_chunk_are_answered_431(tmp_path: Path) -> None:
    """Headers of 70 000 bytes that arrive whole, their end included, in one write (as a client's one
    ``send`` of a request puts them) are answered 431 too; a request whose headers stay under 64 KiB is
    answered as usual on its own connection."""
    with ServerProcess(tmp_path, _doc()) as server:
        s = _connect(server.port, timeout_s=20.0)
        try:
            s.sendall(f"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Pad: {'a' * 70_000}\r\n\r\n".encode())
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert _read_answer(s)[0] == 431
        s.close()
        s = _connect(server.port, timeout_s=20.0)
        s.sendall(f"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Pad: {'a' * 60_000}\r\n\r\n".encode())
        assert _read_answer(s)[0] == 200
        s.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_health_port_answers_the_probes_from_a_thread_of_its_own(tmp_path: Path) -> None:
    """``server.health_port``: live 200, ready 200 while serving and 503 once draining (SIGTERM with a 2 s
    grace), any other path 404; the HTTP port's own routes still answer.  A taken port stops the server with
    status 1 and a log line naming server.health_port."""
    port = _free_port()
    doc = _doc(health_port=port, drain_grace_s=2.0)
    with ServerProcess(tmp_path, doc) as server:
        def get(path: str) -> int:
            return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10.0).status_code
        assert (get("/v2/health/live"), get("/v2/health/ready"), get("/metrics")) == (200, 200, 404)
        assert httpx.get(server.url + "/v2/health/ready", timeout=10.0).status_code == 200
        assert httpx.post(server.url + INFER, json=v2_body([1, 2, 3, 4]), timeout=10.0).status_code == 200
        server.terminate()
        ready = 200
        for _ in range(100):  # the drain begins within a few loop turns of the signal
            ready = get("/v2/health/ready")
            if ready == 503:
                break
            time.sleep(0.02)
        assert ready == 503 and get("/v2/health/live") == 200
        assert server.wait() == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        path = tmp_path / "busy.yaml"
        path.write_text(yaml.safe_dump(_doc(health_port=int(taken.getsockname()[1]))))
        out = subprocess.run([sys.executable, "-m", "pard.serve", str(path), "--port", "0"], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 1 and "server.health_port" in out.stdout + out.stderr


def test_one_timer_closes_each_header_wait_when_its_own_timeout_runs_out() -> None:
    """The guard's single timer closes waits oldest first, each no sooner than header_timeout_s after it began
    (a wait that ended and began again counts from the new start), and one that ended is never closed."""
    import asyncio  # noqa: PLC0415

    from pard.serve.connections import _Guard  # noqa: PLC0415

    closed: list[tuple[str, float]] = []

    class Waiter:  # what the guard calls on a GuardedProtocol whose wait ran out
        def __init__(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
            self.name, self.loop = name, loop

        def header_timeout(self) -> None:
            closed.append((self.name, self.loop.time()))

    async def run() -> dict[str, float]:
        loop = asyncio.get_running_loop()
        guard = _Guard(header_timeout_s=1.0, max_connections=10)
        a, b, c, d = (Waiter(n, loop) for n in "abcd")
        began = {}
        for w in (a, b, c):
            guard.wait(w, loop)
            began[w.name] = loop.time()
            await asyncio.sleep(0.05)
        guard.waiting.pop(b)  # b's headers arrived: its wait ends
        await asyncio.sleep(0.1)
        guard.wait(a, loop)  # a's next request: its wait begins again, now the newest
        began["a"] = loop.time()
        guard.wait(d, loop)
        began["d"] = loop.time()
        await asyncio.sleep(1.8)
        return began

    began = asyncio.run(run())
    assert [name for name, _ in closed] == ["c", "a", "d"]
    for name, at in closed:
        assert at >= began[name] + 1.0 - 2e-3, (name, at - began[name])
