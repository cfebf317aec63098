"""Shared pieces of the benchmark suites in bench/ (run with `pytest bench --benchmark-only`).

Every benchmark records how many items one timed call handles (``extra_info["items"]``); C++-side
timings record the nanoseconds per item that the C++ loop measured (``extra_info["cpp_ns"]``), and
a C++ call that timed its own baseline in alternating rounds records it too (``"paired_ns"``).
At the end of the run a table prints the median cost per item of each benchmark and its ratio to
the baseline of its group (``extra_info["baseline"] = True``), all measured in the same run.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

__all__: list[str] = []


def per_item_ns(bench: Any) -> float:
    """Median nanoseconds per item of one pytest-benchmark result."""
    info = bench.extra_info
    if "cpp_ns" in info:
        return float(statistics.median(info["cpp_ns"]))
    return float(bench.stats.median) * 1e9 / float(info.get("items", 1))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    session = getattr(config, "_benchmarksession", None)
    benches = [b for b in getattr(session, "benchmarks", []) if getattr(b, "stats", None) is not None]
    if not benches:
        return
    groups: dict[str, list[Any]] = {}
    for b in benches:
        groups.setdefault(b.group or "", []).append(b)
    tr = terminalreporter
    tr.section("median cost per item (ratio = baseline / this: >1 means faster than the baseline)")
    for group in sorted(groups):
        rows = groups[group]
        base = next((b for b in rows if b.extra_info.get("baseline")), None)
        base_ns = per_item_ns(base) if base is not None else None
        tr.write_line(f"[{group}]")
        # A C++ call that timed its own baseline in alternating rounds (extra_info["paired_ns"]).
        paired = next((b for b in rows if "paired_ns" in b.extra_info), None)
        if base is None and paired is not None:
            base_ns = float(statistics.median(paired.extra_info["paired_ns"]))
            tr.write_line(f"  {paired.extra_info['paired_label']:<44} {base_ns:12.1f} ns/item      1.00x")
        for b in sorted(rows, key=per_item_ns):
            ns = per_item_ns(b)
            ratio = f"{base_ns / ns:8.2f}x" if base_ns else "        "
            label = b.extra_info.get("label", b.name)
            tag = " (baseline)" if b is base else ""
            tr.write_line(f"  {label:<44} {ns:12.1f} ns/item  {ratio}{tag}")
