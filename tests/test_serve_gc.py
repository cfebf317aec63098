"""Past a server's capacity the event loop must not pause for the garbage collector: a request answered by
``pard serve`` -- served, dropped by the pipeline -- leaves no reference cycle behind, so refcounting frees
it and the collector's full passes (tens of milliseconds each on a busy server's heap, on the loop's thread)
have nothing to find.  Checked in process (the collector's own count of unreachable objects) and on a real
server (its ``python_gc_objects_collected_total``)."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from _serve import ServerProcess, config, read_answer, v2_body  # noqa: E402
from pard.serve.config import parse_serve_config  # noqa: E402
from pard.serve.service import ServedPipeline  # noqa: E402

BODY = json.dumps(v2_body([1.0, 2.0, 3.0, 4.0])).encode()


def test_requests_the_pipeline_drops_leave_no_reference_cycle() -> None:
    """200 requests whose 5 ms deadline no batch of the 40 ms first stage can meet: each is answered 503
    (dropped by the pipeline, reason infeasible), and the collector then finds (almost) nothing unreachable.
    With a cycle per dropped request (its exception's traceback holding the frames that hold its future)
    it finds thousands of objects."""
    async def main() -> tuple[list[int], int]:
        svc = ServedPipeline(parse_serve_config(config(warmup=False)))
        svc.prepare()
        await svc.start()
        try:
            headers = {"content-type": "application/json", "x-request-timeout-ms": "5"}
            await svc.infer("duo", BODY, headers)  # the first request's one-time allocations
            gc.collect()
            gc.disable()
            try:
                answers = await asyncio.gather(*(svc.infer("duo", BODY, headers) for _ in range(200)))
                return [a.status for a in answers], gc.collect()
            finally:
                gc.enable()
        finally:
            await svc.aclose()

    statuses, unreachable = asyncio.run(main())
    assert statuses == [503] * 200
    assert unreachable < 40, unreachable


def _collected(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30.0).text
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == "python_gc_objects_collected_total")


def test_served_requests_leave_no_reference_cycle_on_a_real_server(tmp_path: Path) -> None:
    """300 requests served one after another on one kept-alive connection to a real server (each a 200 through
    the protocol's door and the infer route): the server's collector frees fewer objects meanwhile than there
    were requests.  A cycle per request (its scope holding callables that hold the request's state, which
    holds the scope) left about 25 objects a request to it."""
    n = 300
    with ServerProcess(tmp_path, config(warmup=False)) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30.0) as sock:
            def post() -> int:
                sock.sendall((f"POST /v2/models/duo/infer HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: "
                              f"application/json\r\ncontent-length: {len(BODY)}\r\n\r\n").encode() + BODY)
                return read_answer(sock)[0]

            assert [post() for _ in range(20)] == [200] * 20  # the first requests' one-time allocations
            before = _collected(srv.port)
            assert [post() for _ in range(n)] == [200] * n
            freed = _collected(srv.port) - before
    assert freed < n, freed
