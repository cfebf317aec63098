"""``server.health_port``: the health routes on a port of their own, answered by a thread, not the event loop.

The HTTP port answers ``/v2/health/live`` and ``/v2/health/ready`` inside uvicorn's protocol, before any
inference work (:mod:`pard.serve.door`), but still on the event loop: a flood of connections far past the
server's capacity (a retry storm of closed-loop clients) keeps the loop's one core busy refusing them, and a
probe waits its turn behind them.  Kubernetes restarts a pod whose liveness probe times out (1 s by
default), in the middle of the overload the server is shedding.  Probes pointed at ``health_port`` are
answered by a small threaded server of the standard library: it waits for the interpreter's lock at most a
switch interval at a time (5 ms), not behind the loop's backlog, and reads only the service's flags.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .service import ServedPipeline, serving

__all__ = ["HealthServer"]

_LIVE, _READY = "/v2/health/live", "/v2/health/ready"


class HealthServer:
    """``GET /v2/health/live`` (200 while the process serves) and ``GET /v2/health/ready`` (200 while
    :func:`pard.serve.service.serving`, else 503) on ``host:port`` (0: any free port), from a daemon thread;
    anything else is a 404.  :attr:`port` is the port bound.

    Raises:
        OSError: the port cannot be bound (in use, not permitted).
    """

    def __init__(self, service: ServedPipeline, host: str, port: int) -> None:
        svc = service

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 5.0  # a connection idle this long (s) is closed: its thread must not wait forever

            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                path = self.path.split("?", 1)[0]
                if path == _LIVE:
                    status = 200
                elif path == _READY:
                    status = 200 if serving(svc) else 503
                else:
                    status = 404
                self.send_response_only(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the probes would flood the log
                pass

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="pard-health", daemon=True)

    def start(self) -> None:
        self._thread.start()
        logging.getLogger("uvicorn.error").info("health routes on port %d (a thread of their own)", self.port)

    def stop(self) -> None:
        """Stop serving and close the port (blocks up to the poll interval)."""
        self._httpd.shutdown()
        self._httpd.server_close()
