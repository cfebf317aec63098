"""Untrusted spec text to plain data: YAML, JSON and TOML parsers hardened for hostile input.

A spec file may come from anyone (issue 13), so the parsers here refuse, with a
:class:`~pard.errors.ConfigError` naming the source and the line, what the standard ones accept
silently or choke on:

- duplicate mapping keys (YAML ``{1: 0.01, 1: 0.5}``, a JSON object with a key twice; TOML's
  parser already refuses them): the last value would otherwise win unnoticed;
- YAML alias expansion beyond :data:`MAX_YAML_NODES` nodes (a "billion laughs" bomb is a few
  hundred bytes that expand to 10^9 nodes) and recursive aliases: the node graph is measured,
  aliases counted at their full expanded size, before anything is constructed;
- brackets nested deeper than :data:`MAX_DEPTH` (PyYAML scans deep flow nesting in quadratic
  time, seconds for a few thousand ``[``) and any nesting deeper than the parsers can recurse,
  which would otherwise escape as ``RecursionError``.

:func:`formats.loads` calls :func:`parse`; the spec's own validation (:mod:`.models`) comes after.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .._extras import require
from ..errors import ConfigError

__all__ = ["MAX_YAML_NODES", "MAX_DEPTH", "parse"]

#: Most YAML nodes a spec may expand to, aliases counted at their expanded size. The largest
#: built-in pipeline is about 150 nodes; 100 000 leaves room for hand-written specs with many
#: stages while a bomb is refused after a few milliseconds.
MAX_YAML_NODES = 100_000

#: Deepest bracket nesting accepted in any format (a spec nests 4 levels deep).
MAX_DEPTH = 64


def parse(text: str, fmt: str, source: str) -> Any:
    """Parse ``text`` in format ``fmt`` (``"yaml"``, ``"json"``, ``"toml"``) into plain data.

    Raises:
        ConfigError: the text does not parse, repeats a key, nests too deeply or (YAML) expands
            past :data:`MAX_YAML_NODES` nodes; names ``source`` and, where known, the line.
    """
    _check_depth(text, source, fmt)
    if fmt == "yaml":
        return _parse_yaml(text, source)
    if fmt == "json":
        return _parse_json(text, source)
    return _parse_toml(text, source)


def _check_depth(text: str, source: str, fmt: str) -> None:
    """Refuse brackets nested deeper than MAX_DEPTH, by one scan before any parser runs.

    Brackets inside strings count too, which can only over-estimate: a spec's strings do not hold
    dozens of unclosed brackets.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return  # cannot nest deeper: skip the scan
    depth, line = 0, 1
    for ch in text:
        if ch == "[" or ch == "{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(f"{source}: line {line}: brackets nest deeper than {MAX_DEPTH} levels "
                                  f"(MAX_DEPTH); a pipeline spec needs 4")
        elif ch == "]" or ch == "}":
            depth -= 1
        elif ch == "\n":
            line += 1


# ---------------------------------------------------------------------------------------- JSON

def _no_duplicates(source: str) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise ConfigError(f"{source}: duplicate key {k!r} in a JSON object")
            out[k] = v
        return out

    return hook


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates(source))
    except ConfigError:
        raise
    except ValueError as exc:  # JSONDecodeError, and an integer past Python's 4300-digit limit
        raise ConfigError(f"{source}: not valid JSON: {exc}") from None
    except RecursionError:  # the C decoder's nesting limit
        raise ConfigError(f"{source}: JSON nests deeper than Python can parse") from None


# ---------------------------------------------------------------------------------------- TOML

def _parse_toml(text: str, source: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib as toml
    else:  # pragma: no cover - Python < 3.11
        toml = require("tomli", "cli", "TOML spec files")
    try:
        return toml.loads(text)
    except ValueError as exc:  # TOMLDecodeError, and an integer past Python's 4300-digit limit
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{source}: TOML nests deeper than Python can parse") from None


# ---------------------------------------------------------------------------------------- YAML

def _yaml_problem(exc: Exception, text: str) -> str:
    """One line from a PyYAML error: ``line L, column C: not valid YAML: <problem> (<context> at line
    L', column C')``, without PyYAML's quoted snippets and its name for the stream."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    pos = getattr(exc, "position", None)  # the reader's error: an unprintable character
    if isinstance(pos, int) and isinstance(getattr(exc, "character", None), (str, int)):
        line, col = text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)
        ch = exc.character  # type: ignore[attr-defined]
        code = ord(ch) if isinstance(ch, str) else ch
        return f"line {line}, column {col}: not valid YAML: character #x{code:04x} is not allowed"
    if mark is None or problem is None:
        return "not valid YAML: " + " ".join(str(exc).split())
    out = f"line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {problem}"
    ctx, ctx_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if ctx:
        where = f" at line {ctx_mark.line + 1}, column {ctx_mark.column + 1}" if ctx_mark is not None else ""
        out += f" ({ctx}{where})"
    return out


def _parse_yaml(text: str, source: str) -> Any:
    yaml = require("yaml", "cli", "YAML spec files")
    loader = None
    try:
        loader = _strict_loader(yaml)(text)  # the reader refuses unprintable characters here already
        loader.pard_source = source
        return loader.get_single_data()
    except ConfigError:
        raise
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer past Python's 4300-digit limit
        raise ConfigError(f"{source}: {_yaml_problem(exc, text)}") from None
    except RecursionError:
        raise ConfigError(f"{source}: YAML nests deeper than Python can parse") from None
    finally:
        if loader is not None:
            loader.dispose()


_LOADER: Any = None


def _strict_loader(yaml: Any) -> Any:
    """yaml.SafeLoader with the node budget and duplicate-key check (built once, on first use)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER

    class StrictLoader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
        pard_source = "<string>"

        def get_single_node(self) -> Any:
            node = super().get_single_node()
            if node is not None:
                _check_expansion(node, self.pard_source)
            return node

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            _check_duplicates(self, node, self.pard_source)
            return super().construct_mapping(node, deep=deep)

    _LOADER = StrictLoader
    return StrictLoader


def _check_expansion(root: Any, source: str) -> None:
    """Expanded node count of the composed graph (shared nodes counted once per reference), iteratively.

    Raises ConfigError past MAX_YAML_NODES, or for an alias that refers to its own ancestor.
    """
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(size[id(c)] for c in _children(node))
            if total > MAX_YAML_NODES:
                line = node.start_mark.line + 1
                raise ConfigError(f"{source}: line {line}: the YAML expands to more than {MAX_YAML_NODES} "
                                  f"nodes (anchors and aliases: an alias bomb?)")
            size[key] = total
            continue
        if key in size:
            continue
        if key in on_path:
            raise ConfigError(f"{source}: line {node.start_mark.line + 1}: a YAML alias refers to its own "
                              f"enclosing node (a recursive structure)")
        on_path.add(key)
        stack.append((node, True))
        for c in _children(node):
            if id(c) not in size:
                stack.append((c, False))


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        out: list[Any] = []
        for item in value:
            if isinstance(item, tuple):  # a mapping's (key, value) pair
                out.extend(item)
            else:
                out.append(item)
        return out
    return []


def _check_duplicates(loader: Any, node: Any, source: str) -> None:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # '<<' merges may be overridden by explicit keys, by the YAML spec
        key = loader.construct_object(key_node, deep=True)
        try:
            dup = key in seen
        except TypeError:
            continue  # an unhashable key: the base constructor refuses it with its own error
        if dup:
            raise ConfigError(f"{source}: line {key_node.start_mark.line + 1}: duplicate key {key!r}")
        seen.add(key)
