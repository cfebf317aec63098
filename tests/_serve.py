"""Helpers of the pard serve tests: a small served pipeline of sleeping stages, a real server process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import yaml

def pipeline(slow: float = 1.0) -> dict[str, Any]:
    """Two stages that sleep exactly their profile (pard.serve.factories:sleep_profile), every
    duration and the SLO times ``slow``: capacity min(8 / 0.08, 8 / 0.03) / slow = 100 / slow req/s,
    SLO 0.3 * slow s; the payload is one FP32 vector of 4."""
    return {
        "name": "duo", "slo": 0.3 * slow, "stages": [
            {"name": "detect", "profile": {1: 0.04 * slow, 4: 0.06 * slow, 8: 0.08 * slow}, "max_batch": 8,
             "workers": 1, "successors": ["classify"]},
            {"name": "classify", "profile": {1: 0.01 * slow, 8: 0.03 * slow}, "max_batch": 8, "workers": 1},
        ],
    }


PIPELINE = pipeline()
CAPACITY_REQ_S = 100.0


def config(slow: float = 1.0, **changes: Any) -> dict[str, Any]:
    """The served-pipeline mapping of :func:`pipeline` ``(slow)`` (sleep executors), with top-level ``changes``."""
    sleep = {"executor": "pard.serve.factories:sleep_profile"}
    doc: dict[str, Any] = {
        "pipeline": pipeline(slow), "policy": "pard", "planner": {"sync_interval_s": 0.5},
        "stages": {"detect": sleep, "classify": sleep},
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
        "server": {"host": "127.0.0.1", "port": 0, "drain_grace_s": 1.0, "drain_timeout_s": 20.0,
                   "log_level": "warning"},
    }
    doc.update(changes)
    return doc


def v2_body(x: list[float], **extra: Any) -> dict[str, Any]:
    """A v2 JSON inference body with one FP32 [4] input."""
    return {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": x}], **extra}


class ServerProcess:
    """``python -m pard.serve CONFIG --port 0`` in a subprocess, stopped (SIGTERM, then kill) on exit."""

    def __init__(self, tmp: Path, doc: dict[str, Any] | None = None, *, config_path: Path | None = None,
                 command: list[str] | None = None, args: list[str] | None = None) -> None:
        self.tmp = tmp
        if config_path is None:
            config_path = tmp / "serve.yaml"
            config_path.write_text(yaml.safe_dump(doc))
        self.port_file = tmp / "port"
        self.report_file = tmp / "report.json"
        for stale in (self.port_file, self.report_file):
            stale.unlink(missing_ok=True)
        self.log = open(tmp / "server.log", "w")  # noqa: SIM115 - closed in stop()
        cmd = command or [sys.executable, "-m", "pard.serve"]
        self.proc = subprocess.Popen([*cmd, str(config_path), "--port", "0", "--port-file", str(self.port_file),
                                      "--report", str(self.report_file), *(args or [])], stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.port = self._wait_port(120.0)

    def _wait_port(self, timeout_s: float) -> int:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.port_file.exists():
                return int(self.port_file.read_text())
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"server did not start: {(self.tmp / 'server.log').read_text()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float = 60.0) -> int:
        try:
            return self.proc.wait(timeout_s)
        finally:
            self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10.0)
        self.log.close()

    def report(self) -> dict[str, Any]:
        return json.loads(self.report_file.read_text())

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Gate:
    """A stage executor that records payloads and blocks until :attr:`release` is set (tests only)."""

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()
        self.started = threading.Event()
        self.seen: list[Any] = []

    def __call__(self, xs: list[Any]) -> list[Any]:
        self.seen.extend(x.tolist() for x in xs)
        self.started.set()
        assert self.release.wait(20.0), "test gate never released"
        return list(xs)


GATES: dict[str, Gate] = {}


def gate(*, key: str) -> Gate:
    """Factory ``_serve:gate``: the Gate registered under ``key`` (created on first use)."""
    return GATES.setdefault(key, Gate())


#: what ``_serve:failing``'s KeyError says (a 500's body carries it only with server.error_detail)
FAILING_TEXT = "weights not found"


def failing() -> Any:
    """Factory ``_serve:failing``: an executor whose every batch raises KeyError."""
    def fail(xs: list[Any]) -> list[Any]:
        raise KeyError(FAILING_TEXT)
    return fail


def unencodable() -> Any:
    """Factory ``_serve:unencodable``: echoes its payloads, except that a payload whose first element is 9
    becomes a complex array, which the v2 codec cannot encode (a 500 output_error)."""
    def run(xs: list[Any]) -> list[Any]:
        return [np.array([1 + 2j]) if float(np.asarray(x).ravel()[0]) == 9.0 else x for x in xs]
    return run


def hanging(seconds: float = 1.5, then_raise: bool = False) -> Any:
    """Factory ``_serve:hanging``: echoes its payloads, but a batch holding a payload whose first element
    is 7 first sleeps ``seconds`` (a model call that hangs), then raises RuntimeError if ``then_raise``."""
    def run(xs: list[Any]) -> list[Any]:
        if any(float(np.asarray(x).ravel()[0]) == 7.0 for x in xs):
            time.sleep(seconds)
            if then_raise:
                raise RuntimeError("the hung model gave up")
        return list(xs)
    return run


def read_answer(s: socket.socket, timeout_s: float = 20.0) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response from ``s`` (Content-Length bodies): status, headers, body."""
    s.settimeout(timeout_s)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, f"the server closed the connection before answering: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = s.recv(65536)
        assert chunk, "the server closed the connection inside its answer"
        body += chunk
    return int(lines[0].split()[1]), headers, body
