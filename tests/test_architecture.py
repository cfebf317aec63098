"""The package's shape: no import cycle, size limits, a light `import pard`, one error hierarchy."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pard

ROOT = Path(pard.__file__).parent
#: Modules owned by other work in progress that still raise bare ValueError/TypeError (each to be
#: converted to pard.errors.PardValueError / PardTypeError by its owner; remove it here then).
_BARE_RAISES_PENDING: set[str] = set()


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """pard modules ``name`` imports at run time (module level and inside functions; not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known}
            found.update(subs)
            if len(subs) < len(node.names):  # names defined by the module itself, not submodules of it
                found.add(mod)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m in known and m != name}


def test_import_graph_has_no_cycle() -> None:
    """The modules of python/pard import each other without a cycle (run-time imports, lazy ones included)."""
    mods = _modules()
    graph = {n: _imports(n, p, set(mods)) for n, p in mods.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                cycle = stack[stack.index(m):] + [m]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)


def test_module_and_class_sizes() -> None:
    """No module in python/pard is over 600 lines and no class over 400."""
    for path in ROOT.rglob("*.py"):
        text = path.read_text()
        assert text.count("\n") <= 600, f"{path.relative_to(ROOT)} has {text.count(chr(10))} lines"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                assert size <= 400, f"{path.relative_to(ROOT)}: class {node.name} has {size} lines"


CPP_ROOT = Path(__file__).resolve().parents[1]
#: C++ files and classes over the limits of DESIGN §6 that are being split now; this list must shrink to
#: empty, and an entry whose file or class is back within the limits fails the test until it is removed.
_CPP_OVERSIZE_PENDING: set[str] = set()
_CPP_CLASS = re.compile(r"\b(?:class|struct)\s+(?:alignas\([^)]*\)\s*)?(\w+)\s*(?:final\s*)?(?::[^;{}()]*)?\{")


def _cpp_code(text: str) -> str:
    """The C++ text with comments, string and character literals blanked (line breaks kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text[i] in "\"'" and not (text[i] == "'" and i and text[i - 1].isalnum()):  # 1'000 is a number
            j = i + 1
            while j < n and text[j] != text[i]:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i] * 2)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _cpp_classes(text: str) -> list[tuple[str, int]]:
    """(name, lines) of every class and struct definition (not enum class), by brace matching."""
    code = _cpp_code(text)
    found = []
    for m in _CPP_CLASS.finditer(code):
        if re.search(r"\benum\s+$", code[max(0, m.start() - 10):m.start()]):
            continue
        depth, end = 0, len(code) - 1
        for j in range(m.end() - 1, len(code)):
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            if depth == 0:
                end = j
                break
        found.append((m.group(1), code.count("\n", m.start(), end) + 1))
    return found


def test_cpp_file_and_class_sizes() -> None:
    """No file in cpp/include/ or src/ is over 600 lines and no C++ class or struct over 400, except the
    named pending ones; a pending entry that is back within the limits must leave the list."""
    paths = sorted([*CPP_ROOT.glob("cpp/include/**/*.hpp"), *CPP_ROOT.glob("src/**/*.[ch]pp")])
    if not paths:
        pytest.skip("the C++ sources are not beside this checkout of the tests")
    over: set[str] = set()
    for path in paths:
        rel = path.relative_to(CPP_ROOT).as_posix()
        text = path.read_text()
        if text.count("\n") > 600:
            over.add(rel)
        over.update(f"{rel}:{name}" for name, size in _cpp_classes(text) if size > 400)
    assert over <= _CPP_OVERSIZE_PENDING, f"over the size limits: {sorted(over - _CPP_OVERSIZE_PENDING)}"
    assert _CPP_OVERSIZE_PENDING <= over, f"within the limits now, remove from the list: {sorted(_CPP_OVERSIZE_PENDING - over)}"


def test_cpp_class_scan_counts_a_class_and_skips_the_rest() -> None:
    """The scan finds a struct's lines by its braces, through comments and literals, and skips enum class,
    forward declarations and template parameters."""
    src = textwrap.dedent("""\
        enum class E : int { a, b };
        struct Fwd;
        template <class T, class U> void f(T) { }
        struct S : Base<int> {  // a comment with a brace {
            const char* s = "}";
            char c = '{';
            int n = 1'000;
        };
        """)
    assert _cpp_classes(src) == [("S", 5)]


def test_no_bare_value_or_type_errors() -> None:
    """pard raises PardError subclasses for bad input, never a bare ValueError or TypeError."""
    for path in ROOT.rglob("*.py"):
        if path.name in _BARE_RAISES_PENDING:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            assert "raise ValueError" not in line and "raise TypeError" not in line, f"{path}:{i}: {line.strip()}"


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_light_core_imports_no_heavy_package() -> None:
    """`import pard`, a Runtime serving requests, simulate() and a JSON spec load none of pandas, matplotlib, rich, yaml."""
    out = _run("""
        import json, sys
        import numpy as np
        import pard
        spec = pard.PipelineSpec(name="p", slo=1.0, stages=[
            pard.StageSpec(name="a", profile={1: 0.001, 4: 0.002}, max_batch=4)])
        with pard.Runtime(spec, {"a": lambda xs: list(xs)}, planner={"sync_interval_s": 0.05}) as rt:
            assert [rt.submit(i).result(timeout=10) for i in range(5)] == list(range(5))
        rt.report()
        pard.simulate(spec, np.arange(50) * 0.01)
        pard.config.loads(json.dumps(spec.to_dict()), format="json")
        pard.workloads.poisson(100.0, 1.0)
        print(sorted(m for m in ("pandas", "matplotlib", "rich", "yaml", "tomli_w") if m in sys.modules))
    """)
    assert out.strip() == "[]"


def test_missing_extra_names_it() -> None:
    """Without the CLI extra's packages, a table, a YAML spec and a trace file each fail in one line naming pard[cli]."""
    out = _run("""
        import sys
        for m in ("rich", "yaml", "pandas"):
            sys.modules[m] = None  # as if not installed
        import numpy as np
        import pard
        from pard.errors import MissingExtraError
        r = pard.simulate("lv", np.arange(10) * 0.01) if False else None
        msgs = []
        for call in (lambda: pard.config.loads("name: x", format="yaml"),
                     lambda: pard.config.builtin("tm"),
                     lambda: pard.workloads.azure_llm_conv()):
            try:
                call()
            except MissingExtraError as e:
                msgs.append(str(e))
        print(len(msgs), all("pard[cli]" in m and "\\n" not in m for m in msgs))
    """)
    assert out.split() == ["3", "True"]


@pytest.mark.parametrize("cmd", [["--help"], ["simulate", "--help"], ["run", "--help"], ["profile", "--help"]])
def test_cli_commands_registered(cmd: list[str]) -> None:
    """Every subcommand module is registered by pard.cli.main."""
    from pard.cli import main

    with pytest.raises(SystemExit) as info:
        main(cmd)
    assert info.value.code == 0


def test_dir_lists_the_public_api_only() -> None:
    """`dir(pard)` is `__all__`, before and after use: no `Any`/`annotations`/`importlib`, no loaded submodule."""
    out = _run("""
        import json
        import numpy as np
        import pard
        before = dir(pard)
        pard.simulate("tm", np.arange(20) * 0.01, "naive")  # loads pard.sim, pard.errors, pard.report, ...
        print(json.dumps({"before": before, "after": dir(pard), "all": sorted(pard.__all__),
                          "resolves": all(getattr(pard, n) is not None for n in pard.__all__)}))
    """)
    doc = json.loads(out)
    assert doc["before"] == doc["after"] == doc["all"] and doc["resolves"]
    assert not {"Any", "annotations", "importlib", "sim", "errors", "report", "_core", "_LAZY"} & set(doc["after"])
    assert {"PardError", "PipelineSpec", "Runtime", "simulate", "config", "__version__"} <= set(doc["after"])
