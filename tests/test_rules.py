"""The stage scheduler's named rules (cpp/include/pard/rules/), each tested alone in C++ (cpp/tests/test_rules.cpp)."""

from __future__ import annotations

from pathlib import Path

from _cpp import run_standalone_cpp_test


def test_standalone_cpp_rules(tmp_path: Path) -> None:
    """The C++ rules test (each rule on hand-computed values and its edges) passes."""
    run_standalone_cpp_test("test_rules", tmp_path)
