"""``pard serve``: a pipeline behind an HTTP server speaking the Open Inference Protocol.

One concept per module: :mod:`~pard.serve.protocol` (v2 tensors, JSON and binary),
:mod:`~pard.serve.config` (the served-pipeline file), :mod:`~pard.serve.params` (a request's deadline and
tier), :mod:`~pard.serve.service` (admission, answers, drain and accounting of one served pipeline),
:mod:`~pard.serve.metrics` (Prometheus),
:mod:`~pard.serve.app` (the Starlette routes), :mod:`~pard.serve.server` (uvicorn and signals),
:mod:`~pard.serve.cli` (the command), :mod:`~pard.serve.factories` (stage executors for files).
Needs the ``serve`` extra: ``pip install 'pard[serve]'``.
"""

from __future__ import annotations

from .._lazy import lazy_attributes

__all__ = ["create_app", "load_serve_config", "ServedPipeline", "serve"]


__getattr__, __dir__ = lazy_attributes("pard.serve", {
    "create_app": "pard.serve.app", "load_serve_config": "pard.serve.config",
    "ServedPipeline": "pard.serve.service", "serve": "pard.serve.server"}, globals())
