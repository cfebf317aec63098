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

__all__ = ["create_app", "load_serve_config", "ServedPipeline", "serve"]


def __getattr__(name: str) -> object:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "load_serve_config":
        from .config import load_serve_config

        return load_serve_config
    if name == "ServedPipeline":
        from .service import ServedPipeline

        return ServedPipeline
    if name == "serve":
        from .server import serve

        return serve
    raise AttributeError(f"module 'pard.serve' has no attribute {name!r}")
