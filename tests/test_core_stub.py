"""The hand-written stubs python/pard/_core.pyi and _core_bench.pyi match the compiled modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pard import _core, _core_bench

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "pard"
MODULES = {"_core": _core, "_core_bench": _core_bench}
TYPE_ALIASES = {"F64", "U64", "I64", "I32", "I8"}


def _stub_tree(module: str) -> ast.Module:
    stub = PACKAGE / f"{module}.pyi"
    if not stub.exists():
        pytest.skip("the stub is only in the source tree")
    return ast.parse(stub.read_text(encoding="utf-8"))


def _stub_names(module: str) -> tuple[set[str], dict[str, set[str]]]:
    top: set[str] = set()
    members: dict[str, set[str]] = {}
    for node in _stub_tree(module).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
        elif isinstance(node, ast.Assign):
            top.update(t.id for t in node.targets if isinstance(t, ast.Name))
        if isinstance(node, ast.ClassDef):
            members[node.name] = {
                item.name for item in node.body if isinstance(item, ast.FunctionDef)
            }
    return top - TYPE_ALIASES, members


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_stub_name_exists_in_the_module(module: str) -> None:
    """Each function, class and constant the stub declares is exported by the compiled module."""
    top, _ = _stub_names(module)
    missing = sorted(name for name in top if not hasattr(MODULES[module], name))
    assert missing == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_public_module_name_is_in_the_stub(module: str) -> None:
    """Each public name the compiled module exports is declared in the stub."""
    top, _ = _stub_names(module)
    public = {name for name in dir(MODULES[module]) if not name.startswith("_")}
    assert sorted(public - top) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_stub_method_exists_on_its_class(module: str) -> None:
    """Each method or property the stub gives a class exists on the compiled class."""
    _, members = _stub_names(module)
    missing = [
        f"{cls}.{name}"
        for cls, names in members.items()
        for name in names
        if not hasattr(getattr(MODULES[module], cls), name)
    ]
    assert missing == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_public_method_is_in_the_stub(module: str) -> None:
    """Each public method or property of a compiled class is declared in the stub."""
    _, members = _stub_names(module)
    extra = [
        f"{cls}.{name}"
        for cls, names in members.items()
        for name in dir(getattr(MODULES[module], cls))
        if not name.startswith("_") and name not in names
    ]
    assert extra == []


def test_no_package_module_imports_the_bench_module() -> None:
    """pard._core_bench is test-only: no module of the pard package imports it."""
    users = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "_core_bench" in path.read_text(encoding="utf-8")
    )
    assert users == []
