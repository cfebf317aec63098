"""The ``pard serve CONFIG`` command: serve a pipeline over HTTP (Open Inference Protocol).

Wired into pard's CLI by ``add_parser(subparsers)`` and ``run(args)``; ``python -m pard.serve``
runs it alone.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

from .._extras import require
from ..errors import PardError, PardValueError

__all__ = ["add_parser", "run", "main"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``serve`` command to an ``argparse`` sub-parser set; returns its parser."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="serve a pipeline over HTTP (KServe v2 / Triton protocol)",
        description="Serve the pipeline a served-pipeline file describes (see docs/serve.md), until "
                    "SIGTERM/SIGINT, which drains it: readiness fails, new requests get 503, in-flight "
                    "ones finish, exit 0.")
    p.add_argument("config", metavar="CONFIG", help="the served-pipeline file (.yaml, .toml or .json)")
    p.add_argument("--host", default=None, help="listen address (default: the file's server.host)")
    p.add_argument("--port", type=int, default=None, help="listen port; 0: any free port (default: server.port)")
    p.add_argument("--port-file", default=None, help="write the port bound to this file once listening")
    p.add_argument("--grpc-port", type=int, default=None,
                   help="serve gRPC (KServe v2) on this port too; 0: any free port (default: server.grpc_port)")
    p.add_argument("--grpc-port-file", default=None, help="write the gRPC port bound to this file once listening")
    p.add_argument("--report", default=None, metavar="FILE",
                   help="write the outcome counts (JSON) to FILE after the drain; '-': stdout")
    p.set_defaults(func=run)
    return p


def check_host(host: str, where: str) -> None:
    """PardValueError naming ``where`` when ``host`` resolves to no address to listen on (uvicorn would
    only log ``[Errno -2] Name or service not known``, naming neither the file nor the field)."""
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise PardValueError(f"{where} {host!r} is not an address or a host name this machine can resolve "
                             f"({reason}); e.g. 127.0.0.1, 0.0.0.0 or ::1") from None


def check_port(host: str, port: int, where: str) -> None:
    """PardValueError naming ``where`` when ``port`` on ``host`` is taken (uvicorn would log ``[Errno 98]``
    after building the pipeline and exit 1, naming neither the option nor what to do).  Binds every address
    ``host`` resolves to, as asyncio's ``create_server`` under uvicorn does (``SO_REUSEADDR``; IPv6 sockets
    v6-only), so a port in TIME_WAIT passes; port 0 always passes."""
    if port == 0:
        return
    for family, kind, proto, _, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                raise PardValueError(f"{where} {port} on {host} cannot be listened on ({exc.strerror}); another "
                                     f"server may hold it: stop it, or pick a free port (--port, or 0 for any "
                                     f"free one)") from None


def run(args: argparse.Namespace) -> int:
    """Run ``pard serve`` for parsed ``args``; returns the exit status (2 for a bad file or option)."""
    for module in ("starlette", "uvicorn", "prometheus_client", "yaml"):
        require(module, "serve", "pard serve")  # MissingExtraError: one line naming pard[serve]
    from .config import load_serve_config  # noqa: PLC0415 - after the extra is known to be there
    from .server import serve  # noqa: PLC0415
    for flag, value in (("--port", args.port), ("--grpc-port", args.grpc_port)):
        if value is not None and not 0 <= value <= 65535:
            print(f"pard serve: error: {flag} must be in [0, 65535], got {value}", file=sys.stderr)
            return 2
    try:
        config = load_serve_config(args.config)
        host = args.host or config.server.host
        check_host(host, "--host" if args.host else f"{args.config}: server.host")
        check_port(host, config.server.port if args.port is None else args.port,
                   "--port" if args.port is not None else f"{args.config}: server.port")
        grpc_port = config.server.grpc_port if args.grpc_port is None else args.grpc_port
        http_port = config.server.port if args.port is None else args.port
        if grpc_port is not None and grpc_port != 0 and grpc_port == http_port:
            print(f"pard serve: error: the gRPC port ({'--grpc-port' if args.grpc_port is not None else 'server.grpc_port'}"
                  f" {grpc_port}) must differ from the HTTP port ({'--port' if args.port is not None else 'server.port'}"
                  f" {http_port})", file=sys.stderr)
            return 2
        if grpc_port is not None:
            for module in ("grpc", "tritonclient.grpc"):
                require(module, "grpc", "pard serve's gRPC front")
            check_port(host, grpc_port, "--grpc-port" if args.grpc_port is not None else
                       f"{args.config}: server.grpc_port")
    except PardError as exc:
        print(f"pard serve: error: {exc}", file=sys.stderr)  # the prefix of every pard command's usage errors
        return 2
    return serve(config, host=args.host, port=args.port, port_file=args.port_file, report_file=args.report,
                 grpc_port=args.grpc_port, grpc_port_file=args.grpc_port_file)


def main(argv: list[str] | None = None) -> int:
    """``python -m pard.serve CONFIG [options]``."""
    parser = argparse.ArgumentParser(prog="pard")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except PardError as exc:  # a missing extra
        print(f"pard serve: error: {exc}", file=sys.stderr)
        return 1
