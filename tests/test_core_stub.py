"""The hand-written stub python/pard/_core.pyi matches the compiled module pard._core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pard import _core

STUB = Path(__file__).resolve().parents[1] / "python" / "pard" / "_core.pyi"
TYPE_ALIASES = {"F64", "U64", "I64", "I32", "I8"}


def _stub_tree() -> ast.Module:
    if not STUB.exists():
        pytest.skip("the stub is only in the source tree")
    return ast.parse(STUB.read_text(encoding="utf-8"))


def _stub_names() -> tuple[set[str], dict[str, set[str]]]:
    top: set[str] = set()
    members: dict[str, set[str]] = {}
    for node in _stub_tree().body:
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


def test_every_stub_name_exists_in_the_module() -> None:
    """Each function, class and constant the stub declares is exported by the compiled module."""
    top, _ = _stub_names()
    missing = sorted(name for name in top if not hasattr(_core, name))
    assert missing == []


def test_every_public_module_name_is_in_the_stub() -> None:
    """Each public name the compiled module exports is declared in the stub."""
    top, _ = _stub_names()
    public = {name for name in dir(_core) if not name.startswith("_")}
    assert sorted(public - top) == []


def test_every_stub_method_exists_on_its_class() -> None:
    """Each method or property the stub gives a class exists on the compiled class."""
    _, members = _stub_names()
    missing = [
        f"{cls}.{name}"
        for cls, names in members.items()
        for name in names
        if not hasattr(getattr(_core, cls), name)
    ]
    assert missing == []


def test_every_public_method_is_in_the_stub() -> None:
    """Each public method or property of a compiled class is declared in the stub."""
    _, members = _stub_names()
    extra = [
        f"{cls}.{name}"
        for cls, names in members.items()
        for name in dir(getattr(_core, cls))
        if not name.startswith("_") and name not in names
    ]
    assert extra == []
