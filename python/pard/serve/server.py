"""Run a served pipeline under uvicorn, with a graceful drain on SIGTERM / SIGINT.

On the first SIGTERM or SIGINT the server does not stop at once (uvicorn's own handler would
close the listening socket, so new requests would be refused rather than answered):

1. the pipeline stops admitting: ``/v2/health/ready`` fails and new inference requests get 503
   with ``Retry-After`` -- a load balancer sees the instance leave;
2. in-flight requests finish under the policy, within their budgets (they end by their deadline
   or are dropped), for at least ``server.drain_grace_s`` and at most ``server.drain_timeout_s``;
3. the runtime closes (every request terminal, every HTTP request answered), then uvicorn shuts
   down, and the process exits 0.

A second signal during the drain stops at once: requests still in flight are cancelled (their
clients get 503, reason ``cancelled``, within about a second), a batch still running -- a hung one
too -- is not waited for, and uvicorn gives open connections a second (exit status 130).

With ``server.grpc_port`` set, the gRPC front (:mod:`pard.serve.grpc_front`) listens too, in the same event
loop, on the same pipeline: it starts once the pipeline is ready, drains with it (new calls UNAVAILABLE,
in-flight ones answered) and stops, giving calls still open a second, before the pipeline closes.

Connections go through :mod:`pard.serve.connections` (a header-read timeout, a cap on open connections
below the open-file limit, which is raised to its hard limit at start); uvicorn's loop and HTTP parser
stay its "auto" choices (uvloop and httptools when installed).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import resource
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from .app import create_app
from .config import ServeConfig
from .connections import FD_HEADROOM, default_max_connections, guarded_protocol, raise_fd_limit
from .door import protocol_door
from .service import ServedPipeline

__all__ = ["DrainingServer", "serve"]


class DrainingServer(uvicorn.Server):
    """A :class:`uvicorn.Server` whose exit signals drain the pipeline first (module docstring)."""

    def __init__(self, config: uvicorn.Config, service: ServedPipeline, *, port_file: Path | None = None,
                 grpc_port: int | None = None, grpc_port_file: Path | None = None) -> None:
        super().__init__(config)
        self.service = service
        self.port_file = port_file
        self.grpc_port = grpc_port
        self.grpc_port_file = grpc_port_file
        self.grpc: Any = None  # the gRPC front's grpc.aio server, once started
        self.health: Any = None  # the health port's HealthServer, once started
        self.front_failed = False  # the gRPC front or the health port could not start: the server stops, status 1
        self.signals: list[int] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_task: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        if self.should_exit:  # the lifespan's startup failed
            return
        if self.grpc_port is not None:
            from .grpc_front import start_grpc  # noqa: PLC0415 - the grpc extra, only when configured

            try:
                self.grpc, bound = await start_grpc(self.service, self.config.host, self.grpc_port)
            except RuntimeError as exc:
                logging.getLogger("uvicorn.error").error("%s", exc)
                self.front_failed = True
                self.should_exit = True
                return
            logging.getLogger("uvicorn.error").info("gRPC front on %s:%d", self.config.host, bound)
            _write_port(self.grpc_port_file, bound)
        health_port = self.service.config.server.health_port
        if health_port is not None:
            from .health_port import HealthServer  # noqa: PLC0415 - only when configured

            try:
                self.health = HealthServer(self.service, self.config.host, health_port)
            except OSError as exc:
                logging.getLogger("uvicorn.error").error("server.health_port %d: %s", health_port, exc)
                self.front_failed = True
                self.should_exit = True
                return
            self.health.start()
        # What the process holds once started (models, modules, the pipeline) stays for its life: out of the
        # cyclic collector's reach, the full collections that in-flight requests trigger under load scan only
        # what requests leave behind.
        gc.collect()
        gc.freeze()
        if self.servers:
            _write_port(self.port_file, self.servers[0].sockets[0].getsockname()[1])

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.health is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.health.stop)
        if self.grpc is not None:  # before the pipeline closes (the lifespan's shutdown, in uvicorn's)
            await self.grpc.stop(1.0)
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Not appended to uvicorn's captured signals: it would re-raise them after shutdown and the
        # process would die of the signal instead of exiting 0.
        self.signals.append(sig)
        if self._loop is None:
            self.should_exit = True
            return
        self._loop.call_soon_threadsafe(self._start_drain if len(self.signals) == 1 else self._stop_now)

    def _start_drain(self) -> None:
        opts = self.service.config.server
        logging.getLogger("uvicorn.error").info(
            "Draining: readiness fails, new requests get 503; in-flight requests finish "
            "(grace %.1f s, at most %.1f s)", opts.drain_grace_s, opts.drain_timeout_s)
        self.service.begin_drain()
        self._drain_task = asyncio.ensure_future(self._drain_then_exit())

    def _stop_now(self) -> None:
        """The second signal: end the drain, cancel what is in flight (its clients get pard's 503 JSON, not
        uvicorn's plain 500 from a cancelled handler), then exit, giving open connections a second.
        A hung batch is not waited for: the first signal's drain would wait out server.drain_timeout_s."""
        logging.getLogger("uvicorn.error").info("Second signal: stopping now; in-flight requests are cancelled")
        self.service.forced = True  # before the drain task's cancellation runs its finally
        if self._drain_task is not None:
            self._drain_task.cancel()
        asyncio.ensure_future(self._stop_then_exit())

    async def _stop_then_exit(self) -> None:
        try:
            await self.service.stop_now()
        finally:
            # not uvicorn's force_exit: it would skip the lifespan's shutdown, whose task is then cancelled
            # with a traceback; the answers are out, so a second is enough for the connections
            self.config.timeout_graceful_shutdown = 1
            self.should_exit = True

    async def _drain_then_exit(self) -> None:
        try:
            await self.service.drain()
        finally:
            if self.service.forced:  # the second signal took over (_stop_now)
                return
            # uvicorn then waits for open connections (a client still sending its body) for what is left of
            # the drain's budget, not a fresh one: a whole drain_timeout_s more took the exit past
            # Kubernetes' 30 s grace period, and the pod was killed before it wrote its report.
            self.config.timeout_graceful_shutdown = max(1, math.ceil(self.service.drain_left_s()))
            self.should_exit = True


def _write_port(path: Path | None, port: int) -> None:
    if path is not None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(str(port))
        tmp.replace(path)  # readers never see a half-written file


def serve(config: ServeConfig, *, host: str | None = None, port: int | None = None,
          port_file: str | Path | None = None, report_file: str | Path | None = None,
          grpc_port: int | None = None, grpc_port_file: str | Path | None = None) -> int:
    """Serve ``config``'s pipeline until SIGTERM/SIGINT; returns the exit status (0 after a clean drain,
    130 when a second signal forced the stop, 1 when the server or its gRPC front did not start).

    Args:
        host, port: override ``server.host`` / ``server.port`` (port 0: any free port).
        port_file: write the port actually bound there once listening.
        grpc_port: override ``server.grpc_port`` (the gRPC front; None in both: no gRPC front).
        grpc_port_file: write the gRPC port actually bound there once listening.
        report_file: write :meth:`ServedPipeline.report` there (JSON) after the drain; ``"-"``: stdout
            (uvicorn logs to stderr, so stdout then holds the document alone).
    """
    service = ServedPipeline(config)
    service.prepare()  # a bad policy, worker count or factory fails here, before the port is bound
    app = create_app(config, service=service)
    opts = config.server
    before, soft, hard = raise_fd_limit()
    max_connections = opts.max_connections or default_max_connections(soft)
    uv = uvicorn.Config(app, host=host or opts.host, port=opts.port if port is None else port,
                        log_level=opts.log_level, lifespan="on", access_log=False,
                        # no X-Forwarded-* rewriting: nothing here reads the client address or the scheme
                        proxy_headers=False,
                        timeout_graceful_shutdown=int(opts.drain_timeout_s) + 1,
                        http=guarded_protocol(opts.header_timeout_s, max_connections, protocol_door(service)))
    log = logging.getLogger("uvicorn.error")  # configured by uvicorn.Config
    log.info("Open-file limit %d (was %d, hard %s); at most %d connections (server.max_connections), "
             "request headers within %g s (server.header_timeout_s)", soft, before,
             "unlimited" if hard == resource.RLIM_INFINITY else hard, max_connections, opts.header_timeout_s)
    if max_connections > soft - FD_HEADROOM:
        log.warning("server.max_connections %d leaves fewer than %d of the %d open files to the rest of the "
                    "process: accept() may fail with EMFILE", max_connections, FD_HEADROOM, soft)
    server = DrainingServer(uv, service, port_file=None if port_file is None else Path(port_file),
                            grpc_port=opts.grpc_port if grpc_port is None else grpc_port,
                            grpc_port_file=None if grpc_port_file is None else Path(grpc_port_file))
    server.run()
    report: dict[str, Any] = service.report()
    report["signals"] = [signal.Signals(s).name for s in server.signals]
    if report_file is not None:
        text = json.dumps(report, indent=2)
        if str(report_file) == "-":
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        else:
            Path(report_file).write_text(text)
    if not server.started or server.front_failed:
        return 1
    return 130 if len(server.signals) > 1 else 0  # a second signal forced the stop: not a clean drain
