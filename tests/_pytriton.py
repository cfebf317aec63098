"""Test helper: a real Triton Inference Server (PyTriton, CPU only) in its own process and venv.

``nvidia-pytriton`` ships ``tritonserver`` in its wheel and runs it without a GPU, but only under a
Python whose stdlib matches the Python-backend stub it builds: Debian's ``/usr/bin/python3.11``
works; a pyenv-built 3.11.7 fails at model load (``'_thread.RLock' object has no attribute
'_recursion_count'``).  So the server runs from a venv of that interpreter, never in pytest's own:

* :func:`venv_python` -- the venv's python (``$PARD_PYTRITON_VENV``, default
  ``<repo>/build/pytriton-venv``), created on first use when missing and
  ``$PARD_PYTRITON_CREATE`` is not ``0`` (``python3.11 -m venv`` + ``pip install nvidia-pytriton
  numpy onnxruntime``, bounded in time); a clear skip reason when it cannot be made;
* :class:`PyTritonServer` -- starts ``tests/pytriton_server.py`` in that venv on free 127.0.0.1
  ports with the models given, waits (bounded) until every model is ready, and stops the whole
  process group on exit.

``.ci/run`` creates the venv before the tests, so CI never skips for want of it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SERVER_SCRIPT = Path(__file__).resolve().parent / "pytriton_server.py"
SYSTEM_PYTHON = Path(os.environ.get("PARD_PYTRITON_PYTHON", "/usr/bin/python3.11"))
_PACKAGES = ["nvidia-pytriton", "numpy", "onnxruntime"]


def venv_dir() -> Path:
    """``$PARD_PYTRITON_VENV`` or ``<repo>/build/pytriton-venv``."""
    return Path(os.environ.get("PARD_PYTRITON_VENV", str(REPO / "build" / "pytriton-venv")))


def _usable(python: Path) -> bool:
    if not python.is_file():
        return False
    probe = subprocess.run([str(python), "-c", "import pytriton, onnxruntime, numpy"], capture_output=True, timeout=120)
    return probe.returncode == 0


def venv_python(*, create_timeout_s: float = 900.0) -> tuple[Path | None, str]:
    """The PyTriton venv's python, creating the venv if needed; ``(None, reason)`` when impossible."""
    python = venv_dir() / "bin" / "python"
    if _usable(python):
        return python, ""
    if os.environ.get("PARD_PYTRITON_CREATE", "1") == "0":
        return None, f"no usable PyTriton venv at {venv_dir()} and PARD_PYTRITON_CREATE=0"
    if not SYSTEM_PYTHON.is_file():
        return None, (f"{SYSTEM_PYTHON} (Debian's Python 3.11, the one PyTriton's Python backend works with) is not "
                      f"installed; set PARD_PYTRITON_PYTHON or PARD_PYTRITON_VENV")
    end = time.monotonic() + create_timeout_s
    steps = [[str(SYSTEM_PYTHON), "-m", "venv", str(venv_dir())],
             [str(python), "-m", "pip", "install", "-q", *_PACKAGES]]
    for cmd in steps:
        left = end - time.monotonic()
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, left))
        except subprocess.TimeoutExpired:
            return None, f"creating the PyTriton venv timed out after {create_timeout_s:g} s at: {' '.join(cmd)}"
        if run.returncode != 0:
            tail = (run.stderr or run.stdout)[-600:]
            return None, f"creating the PyTriton venv failed at `{' '.join(cmd)}`: {tail}"
    return (python, "") if _usable(python) else (None, f"the venv at {venv_dir()} cannot import pytriton")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class PyTritonServer:
    """A PyTriton server serving ``models`` (entries as ``tests/pytriton_server.py`` documents).

    Use as a context manager; ``url`` is the gRPC ``127.0.0.1:port``.  Raises RuntimeError (with
    the server log's tail) when it exits early or is not ready within ``ready_timeout_s``.
    """

    def __init__(self, python: Path, models: list[dict[str, Any]], *, ready_timeout_s: float = 300.0) -> None:
        self.python = python
        self.models = models
        self.ready_timeout_s = ready_timeout_s
        self._dir = tempfile.TemporaryDirectory(prefix="pard-pytriton-")
        self.log_path = Path(self._dir.name) / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __enter__(self) -> PyTritonServer:
        grpc_port, http_port, metrics_port = _free_ports(3)
        spec = Path(self._dir.name) / "spec.json"
        spec.write_text(json.dumps({"grpc_port": grpc_port, "http_port": http_port, "metrics_port": metrics_port,
                                    "workspace": str(Path(self._dir.name) / "workspace"), "models": self.models}))
        self.url = f"127.0.0.1:{grpc_port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env["PATH"] = f"{self.python.parent}:{env.get('PATH', '')}"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([str(self.python), str(SERVER_SCRIPT), str(spec)], stdout=log,
                                         stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                         cwd=self._dir.name)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        import tritonclient.grpc as grpc

        client = grpc.InferenceServerClient(self.url)
        end = time.monotonic() + self.ready_timeout_s
        names = [m["name"] for m in self.models]
        try:
            while time.monotonic() < end:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the PyTriton server exited with {self.proc.returncode}: {self.log_tail()}")
                try:
                    if client.is_server_ready() and all(client.is_model_ready(n) for n in names):
                        return
                except Exception:  # noqa: BLE001 - not listening yet
                    pass
                time.sleep(0.5)
        finally:
            client.close()
        raise RuntimeError(f"the PyTriton server was not ready within {self.ready_timeout_s:g} s: {self.log_tail()}")

    def log_tail(self, n: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM the server's process group, then SIGKILL whatever of the group is left; idempotent.

        The group outlives the Python process: tritonserver and its Python-backend stubs (which
        ignore SIGTERM while their parent shuts down) are in it, so the group is always killed last.
        """
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._dir.cleanup()


if __name__ == "__main__":  # pragma: no cover - `python tests/_pytriton.py` prepares the venv (CI)
    py, why = venv_python()
    print(py if py is not None else f"cannot prepare the PyTriton venv: {why}")
    sys.exit(0 if py is not None else 1)
