"""Optional dependencies: import one where it is used, or say in one line which extra provides it.

``import pard`` needs NumPy, pydantic and PyYAML (the built-in pipelines are YAML files) only.
Tables (rich), plots (matplotlib), trace files (pandas), TOML files (tomli-w), BLAS thread limits (threadpoolctl) and the CLI come
with the ``pard[cli]`` extra; the server, Ray, Triton and ONNX Runtime with their own extras.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingExtraError

__all__ = ["require", "available"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module``, or raise :class:`pard.errors.MissingExtraError` naming the extra to install.

    Args:
        module: the module to import, e.g. ``"rich.table"``.
        extra: the pard extra that installs it, e.g. ``"cli"``.
        what: what needs it, for the message, e.g. ``"comparison tables"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingExtraError(
            f"{what} need(s) the optional package {top!r}, which is not installed: "
            f"pip install 'pard[{extra}]'") from exc


def available(module: str) -> bool:
    """True when ``module`` can be imported (without importing anything else of pard)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
