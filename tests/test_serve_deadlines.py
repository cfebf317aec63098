"""A served request's deadline from every source on the wire: the v2 ``parameters.timeout``, ``X-Request-Timeout-Ms``,
Envoy's ``X-Envoy-Expected-Rq-Timeout-Ms`` and a gRPC call's own deadline; the earliest wins."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("starlette")
import httpx  # noqa: E402

from pard.serve.app import create_app  # noqa: E402
from pard.serve.config import parse_serve_config  # noqa: E402
from pard.serve.params import body_wait_s, door_deadline, request_deadline  # noqa: E402
from pard.serve.protocol import InferRequest, ProtocolError  # noqa: E402

from _serve import config, v2_body  # noqa: E402

ENVOY = "x-envoy-expected-rq-timeout-ms"


def _req(**parameters: Any) -> InferRequest:
    return InferRequest(id="", inputs={}, parameters=parameters)


@pytest.mark.parametrize("headers, params, transport_at, allow, budget", [
    ({}, {}, None, True, 0.3),                                                   # the default SLO
    ({ENVOY: "150"}, {}, None, True, 0.15),                                      # Envoy's, shorter
    ({ENVOY: "5000"}, {}, None, True, 0.3),                                      # Envoy's, longer: the SLO
    ({ENVOY: "5000", "x-request-timeout-ms": "2000"}, {}, None, True, 2.0),      # the client's own, shorter
    ({ENVOY: "80", "x-request-timeout-ms": "2000"}, {"timeout": 900_000}, None, True, 0.08),
    ({"x-request-timeout-ms": "2000"}, {"timeout": 900_000}, None, True, 0.9),   # both the client's: smaller
    ({ENVOY: "120"}, {"timeout": 900_000}, None, False, 0.12),                   # no override; Envoy's still bounds
    ({}, {"timeout": 900_000}, 10.5, True, 0.5),                                 # a gRPC deadline, earlier
    ({ENVOY: "100"}, {"timeout": 900_000}, 10.5, True, 0.1),
    ({}, {}, 15.0, True, 0.3),                                                   # a gRPC deadline, later
])
def test_the_earliest_deadline_wins(headers: dict[str, str], params: dict[str, Any], transport_at: float | None,
                                    allow: bool, budget: float) -> None:
    """request_deadline: the request's own timeout (or the default SLO), bounded by the transport's deadlines."""
    slo, deadline = request_deadline(_req(**params), headers, 10.0, 0.3, allow, transport_at)
    assert slo == pytest.approx(budget) and deadline == pytest.approx(10.0 + budget)


def test_the_door_and_the_body_wait_read_envoys_header_too() -> None:
    """Before the body, the door's deadline and the body's wait follow Envoy's header as the route will."""
    assert door_deadline({ENVOY: "40"}, 5.0, 0.3, True, {})[0] == pytest.approx(5.04)
    assert door_deadline({ENVOY: "40"}, 5.0, 0.3, False, {})[0] == pytest.approx(5.04)
    assert door_deadline({ENVOY: "4000", "x-request-timeout-ms": "1000"}, 5.0, 0.3, True, {})[0] == pytest.approx(6.0)
    assert door_deadline({ENVOY: "junk"}, 5.0, 0.3, True, {})[0] == pytest.approx(5.3)  # 400 once the body is read
    assert body_wait_s({ENVOY: "40"}, 0.3, 0.3, True) == pytest.approx(0.34)
    assert body_wait_s({}, 0.3, 0.3, True) == pytest.approx(0.6)


@pytest.mark.parametrize("raw", ["junk", "0", "-5", "nan", "1e20"])
def test_a_bad_envoy_header_is_named(raw: str) -> None:
    """A value that is not a finite positive number of ms is a ProtocolError naming the header."""
    with pytest.raises(ProtocolError, match="X-Envoy-Expected-Rq-Timeout-Ms"):
        request_deadline(_req(), {ENVOY: raw}, 0.0, 0.3, True)


def _run(body: Any) -> Any:
    app = create_app(parse_serve_config(config()))

    async def main() -> Any:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30.0) as client:
                return await body(client)

    return asyncio.run(main())


def test_envoys_header_over_http() -> None:
    """Through the app: Envoy's 20 ms (shorter than the 50 ms fastest path) is refused at the door without
    Retry-After, though the client asks for 10 s; Envoy's 5 s with the default SLO is served; a bad value is a
    400 naming the header."""
    async def body(c: httpx.AsyncClient) -> None:
        url = "/v2/models/duo/infer"
        r = await c.post(url, json=v2_body([1, 2, 3, 4]), headers={ENVOY: "20", "x-request-timeout-ms": "10000"})
        assert r.status_code == 429 and r.json()["reason"] == "infeasible" and "retry-after" not in r.headers
        r = await c.post(url, json=v2_body([1, 2, 3, 4]), headers={ENVOY: "5000"})
        assert r.status_code == 200 and r.json()["outputs"][0]["data"] == [1, 2, 3, 4]
        r = await c.post(url, json=v2_body([1, 2, 3, 4]), headers={ENVOY: "soon"})
        assert r.status_code == 400 and "X-Envoy-Expected-Rq-Timeout-Ms" in r.json()["error"]

    _run(body)
