"""Helper for the tests: build and run one standalone C++ test executable (cpp/tests/) from pytest.

DESIGN 6: C++ tests run under ctest and must also be reached by pytest. The build goes to a pytest
temporary directory, so the source tree stays clean.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["run_standalone_cpp_test"]


def _cmake() -> str | None:
    exe = shutil.which("cmake") or str(Path(sys.executable).with_name("cmake"))
    return exe if Path(exe).exists() else None


def run_standalone_cpp_test(name: str, tmp_path: Path, args: tuple[str, ...] = (), timeout_s: float = 300.0) -> None:
    """Configure the C++ test build in tmp_path, build target `name` and run it with `args` (fails on a
    non-zero exit or after timeout_s seconds)."""
    root = Path(__file__).resolve().parents[1]
    cmake = _cmake()
    if not (root / "cpp" / "tests" / f"{name}.cpp").exists() or cmake is None:
        pytest.skip("standalone C++ tests need the source tree and cmake")
    if shutil.which(os.environ.get("CXX", "c++")) is None and shutil.which("g++") is None:
        pytest.skip("standalone C++ tests need a C++ compiler")
    build = tmp_path / "build"
    gen = ["-G", "Ninja"] if shutil.which("ninja") or Path(sys.executable).with_name("ninja").exists() else []
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run(
        [cmake, "-S", str(root), "-B", str(build), *gen, "-DPARD_BUILD_PYTHON=OFF", "-DPARD_BUILD_TESTS=ON",
         "-DCMAKE_BUILD_TYPE=Release"],
        check=True, capture_output=True, env=env,
    )
    subprocess.run([cmake, "--build", str(build), "--target", name, "-j", "2"], check=True, capture_output=True,
                   env=env)
    exe = next(p for p in build.rglob(name + "*") if p.is_file() and os.access(p, os.X_OK))
    result = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{name}: ok" in result.stdout
