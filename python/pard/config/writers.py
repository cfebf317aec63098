"""Writing specs: YAML, JSON or TOML text and files (times in seconds).

Only the standard library and :mod:`pard._extras`: the models call :func:`save` for
:meth:`pard.config.PipelineSpec.save` without this module importing them back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._extras import require
from ..errors import ConfigError, PardValueError

if TYPE_CHECKING:  # pragma: no cover
    from .models import Format, PathLike, PipelineSpec

__all__ = ["dumps", "save", "SPEC_SUFFIXES"]

#: A spec file's suffix -> its format (how :func:`save` and :func:`pard.config.load` tell it).
SPEC_SUFFIXES: dict[str, "Format"] = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}


def _yaml() -> Any:
    return require("yaml", "cli", "YAML spec files (and the built-in pipelines)")


def _suffix_list() -> str:
    """:data:`SPEC_SUFFIXES` for a message: ``.yaml, .yml, .json or .toml``."""
    names = list(SPEC_SUFFIXES)
    return f"{', '.join(names[:-1])} or {names[-1]}"


def _format_of(path: Path, format: str | None, api: str) -> "Format":
    """``format``, else the one ``path``'s suffix names; ConfigError naming ``api`` (the function
    whose ``format=`` argument settles it) when neither does."""
    fmt = format or SPEC_SUFFIXES.get(path.suffix.lower())
    if fmt not in ("yaml", "json", "toml"):
        raise ConfigError(
            f"{path}: cannot tell the file format from suffix {path.suffix!r}: expected "
            f"{_suffix_list()}; or pass format='yaml', 'json' or 'toml' to {api}"
        )
    return fmt  # type: ignore[return-value]


def dumps(spec: "PipelineSpec", *, format: "Format" = "yaml") -> str:
    """The spec as YAML, JSON or TOML text (times in seconds)."""
    data = spec.to_dict()
    if format == "yaml":
        return str(_yaml().safe_dump(data, sort_keys=False, allow_unicode=True))
    if format == "json":
        return json.dumps(data, indent=2) + "\n"
    if format == "toml":
        for st in data["stages"]:
            for table in ("profile", "decode"):  # TOML keys are strings
                if table in st:
                    st[table] = {str(b): d for b, d in st[table].items()}
        return str(require("tomli_w", "cli", "writing TOML spec files").dumps(data))
    raise PardValueError(f"format must be 'yaml', 'json' or 'toml', got {format!r}")


def save(spec: "PipelineSpec", path: "PathLike", *, format: "Format | None" = None) -> Path:
    """Write ``spec`` to ``path`` as YAML, JSON or TOML (from the suffix unless ``format``)."""
    p = Path(path)
    p.write_text(dumps(spec, format=_format_of(p, format, "save()")), encoding="utf-8")
    return p
