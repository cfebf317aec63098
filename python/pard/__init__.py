"""pard: proactive request dropping for multi-model DNN inference pipelines.

Implements PARD (Zhao, Hu, Chen et al., "PARD: Enhancing Goodput for Inference Pipeline via
Proactive Request Dropping", EuroSys 2026, arXiv 2602.08747).  The hot path (queues, priority,
drop decisions, the simulator's event loop) is C++ in ``pard._core``; this package holds the
configuration, workloads, planner, runtime, reports and CLI.

Public names are loaded on first use, so ``import pard`` stays cheap; ``dir(pard)`` lists them
(``__all__``), not the submodules or this module's own imports.
"""

from __future__ import annotations

from typing import Any as _Any

from ._lazy import lazy_attributes as _lazy_attributes
from ._version import __version__
from .errors import (
    ConfigError,
    Dropped,
    ExecutorError,
    PardError,
    PardWarning,
    Rejected,
    RuntimeStateError,
    TraceError,
)

try:
    from . import _core
except ImportError as exc:  # pragma: no cover - only when the extension was not built
    raise ImportError(
        "pard's compiled core (pard._core) could not be imported: the package was probably "
        "installed without being compiled. Build it with `pip install .` (needs a C++17 "
        "compiler and CMake) or, in a source tree, `pip install -e . --no-build-isolation`. "
        f"Original error: {exc}"
    ) from exc

# Public name -> module that defines it (loaded lazily by __getattr__ below).
_LAZY: dict[str, str] = {
    "config": "pard.config",
    "workloads": "pard.workloads",
    "PipelineSpec": "pard.config",
    "StageSpec": "pard.config",
    "simulate": "pard.sim",
    "compare": "pard.sim",
    "Report": "pard.report",
    "Planner": "pard.planner",
    "PlannerConfig": "pard.planner_config",
    "POLICIES": "pard.policies",
    "PolicySpec": "pard.policies",
    "ArrayExecutor": "pard.executors",
    "CallableExecutor": "pard.executors",
    "OnnxExecutor": "pard.executors",  # engines load on first use (pard[onnx], pard[triton])
    "TritonExecutor": "pard.executors",
    "Runtime": "pard.runtime",
    "Workload": "pard.workloads",
}

__all__ = [
    "__version__",
    "build_info",
    "PardError",
    "ConfigError",
    "TraceError",
    "Dropped",
    "Rejected",
    "ExecutorError",
    "RuntimeStateError",
    "PardWarning",
    *_LAZY,
]


def build_info() -> dict[str, str]:
    """How the C++ core was compiled: compiler, build type, C++ standard, pybind11 version."""
    info = dict(_core.build_info())
    info["version"] = __version__
    return info


__getattr__ = _lazy_attributes("pard", _LAZY, globals())[0]


def __dir__() -> list[str]:
    """The public API, loaded or not (``__all__``): what ``dir(pard)`` and tab completion show."""
    return sorted(__all__)


del annotations  # the __future__ feature's name; the feature itself stays on for this module
