"""One lazy-import rule for the package's ``__init__`` modules: a name is imported from the module that
defines it on first use, so that ``import pard`` (or ``pard.models``, ``pard.executors``, ``pard.serve``)
does not import the optional dependencies (ONNX Runtime, Triton's client, uvicorn) that only some names need."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, names: Mapping[str, str], namespace: dict[str, Any]
                    ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the module ``package`` whose globals are ``namespace``.

    ``names`` maps an attribute to the module defining it (``"pard.executors.onnx"``); an attribute that
    names a submodule (``"sim"`` -> ``"pard.sim"``) is the module itself.  The first access imports it and
    keeps it in ``namespace``.  ``__getattr__`` raises AttributeError for any other name; ``__dir__`` lists
    the loaded names and the lazy ones."""

    def __getattr__(name: str) -> Any:
        module_name = names.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        value = module if module_name == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
