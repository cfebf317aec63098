"""The ASGI app of ``pard serve``: the Open Inference Protocol's HTTP routes (KServe v2 / Triton).

=====================================================  ============================================
``GET  /v2/health/live``                               200 while the process serves HTTP
``GET  /v2/health/ready``                              200 once the executors are warm and the
                                                       runtime runs; 503 before, while draining, and
                                                       while a stage is hung (:mod:`pard.serve.stall`)
``GET  /v2``                                           server metadata (name, version, extensions)
``GET  /v2/models/{model}[/versions/{v}]``             model metadata: inputs, outputs, policy, stages
``GET  /v2/models/{model}[/versions/{v}]/ready``       200 / 503 as ``/v2/health/ready``
``POST /v2/models/{model}[/versions/{v}]/infer``       one inference request (JSON, or JSON + binary
                                                       tensors with ``Inference-Header-Content-Length``)
``GET  /metrics``                                      Prometheus text format (:mod:`pard.serve.metrics`)
=====================================================  ============================================

The routes only translate HTTP to and from :class:`pard.serve.service.ServedPipeline`, which
decides every answer.  The app's lifespan starts the pipeline (executors built and warmed, runtime
started) and closes it.  The inference route is served outside Starlette's router, after the door
(:mod:`pard.serve.door`, :mod:`pard.serve.infer_route`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._version import __version__
from .config import ServeConfig, TensorSpec
from .door import DoorMiddleware
from .metrics import make_registry
from .service import ServedPipeline, serving

__all__ = ["create_app"]


def _tensor(t: TensorSpec) -> dict[str, Any]:
    """A tensor's v2 metadata (``[-1]``: a shape not known in advance)."""
    return {"name": t.name, "datatype": t.datatype, "shape": list(t.shape) if t.shape is not None else [-1]}


def create_app(config: ServeConfig, *, service: ServedPipeline | None = None) -> DoorMiddleware:
    """The ASGI app serving ``config``'s pipeline; ``app.state.service`` is its ServedPipeline.

    The inference route meets the door first and is served outside Starlette (:class:`DoorMiddleware`,
    the outermost layer); every other route, the lifespan and the error pages are the Starlette app's
    (``app.app``).

    Raises: ServeConfigError (via :class:`ServedPipeline`) for a bad pipeline reference.
    """
    svc = service if service is not None else ServedPipeline(config)
    registry = make_registry(svc)

    def ready_answer() -> Response:
        return Response(status_code=200 if serving(svc) else 503)

    async def live(request: Request) -> Response:
        return Response(status_code=200)

    async def ready(request: Request) -> Response:
        return ready_answer()

    async def server_metadata(request: Request) -> Response:
        return JSONResponse({"name": "pard", "version": __version__, "extensions": ["binary_tensor_data"]})

    def unknown(model: str) -> Response:
        return JSONResponse({"error": f"unknown model {model!r}; this server serves {svc.model_name!r}"},
                            status_code=404)

    def missing(request: Request) -> Response | None:
        """404 for another model, or for a version other than the one served ("1"), as Triton does."""
        model, version = request.path_params["model"], request.path_params.get("version")
        if model != svc.model_name:
            return unknown(model)
        if version is not None and version != "1":
            return JSONResponse({"error": f"model {model!r} has no version {version!r}; its versions: ['1']"},
                                status_code=404)
        return None

    async def model_metadata(request: Request) -> Response:
        if (gone := missing(request)) is not None:
            return gone
        rt = svc.runtime
        doc: dict[str, Any] = {
            "name": svc.model_name, "versions": ["1"], "platform": "pard",
            "inputs": [_tensor(t) for t in svc.inputs], "outputs": [_tensor(t) for t in svc.outputs],
            "policy": config.policy, "slo_s": svc.default_slo_s,
            "stages": [{"name": st.name, "max_batch": int(st.max_batch),
                        "workers": int(rt.workers[st.name]) if rt is not None else int(st.workers),
                        "successors": list(st.successors)} for st in svc.spec.stages],
        }
        return JSONResponse(doc)

    async def model_ready(request: Request) -> Response:
        gone = missing(request)
        return gone if gone is not None else ready_answer()

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), headers={"content-type": CONTENT_TYPE_LATEST})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await svc.start()
        try:
            yield
        finally:
            await svc.aclose()

    model = "/v2/models/{model}"
    version = "/v2/models/{model}/versions/{version}"
    routes = [
        Route("/v2/health/live", live), Route("/v2/health/ready", ready), Route("/v2", server_metadata),
        Route(model, model_metadata), Route(version, model_metadata),
        Route(model + "/ready", model_ready), Route(version + "/ready", model_ready),
        Route("/metrics", metrics),
    ]
    async def http_error(request: Request, exc: Exception) -> Response:
        # unknown routes and methods answer JSON {"error": ...} like every other error of this server
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", "") or "error"
        return JSONResponse({"error": f"{detail}: {request.method} {request.url.path}"}, status_code=status,
                            headers=getattr(exc, "headers", None))

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: http_error, 405: http_error})
    app.state.service = svc
    app.state.registry = registry
    return DoorMiddleware(app, svc)
