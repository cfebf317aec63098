"""Reading spec files: YAML, JSON and TOML text and files, and the built-in pipelines (DESIGN §5).

JSON needs only the standard library; YAML (pyyaml) and TOML writing (tomli-w) are imported where
used and come with the ``pard[cli]`` extra (a missing one raises
:class:`pard.errors.MissingExtraError` naming it).  The built-in pipelines ``tm``, ``lv``, ``ga``
and ``da`` ship as commented YAML package data, so :func:`builtin` needs pyyaml too.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

from .._extras import require
from ..errors import ConfigError, PardTypeError, PardValueError
from .models import Format, PathLike, PipelineSpec, spec_digest
from .modules import from_module_json, is_module_format
from .parsers import parse
from .writers import SPEC_SUFFIXES, _format_of, dumps, save

__all__ = ["BUILTIN_NAMES", "SPEC_SUFFIXES", "builtin", "load", "loads", "save", "dumps", "resolve_pipeline"]

#: Names of the built-in pipelines (DESIGN §5), loadable with :func:`builtin` or :func:`load`.
BUILTIN_NAMES: tuple[str, ...] = ("tm", "lv", "ga", "da", "rag")


def loads(text: str, *, format: Format = "yaml", source: str = "<string>") -> PipelineSpec:
    """Parse and validate a spec from YAML, JSON or TOML text.

    JSON in the paper's module format is recognised and read with :func:`from_module_json`.

    Raises:
        ConfigError: the text does not parse (names ``source`` and the parser's line), repeats a
            key, nests too deeply or expands YAML aliases past a budget (see
            :mod:`pard.config.parsers`), or the spec is invalid (names the field and value).
    """
    if format not in ("yaml", "json", "toml"):
        raise PardValueError(f"format must be 'yaml', 'json' or 'toml', got {format!r}")
    if not isinstance(text, str):
        raise PardTypeError(f"{source}: text must be a str, got {type(text).__name__}")
    # hardened parsers: duplicate keys, alias bombs and deep nesting are ConfigErrors (issue 13)
    data = parse(text, format, source)
    if data is None:
        raise ConfigError(f"{source}: the file is empty")
    if format == "json" and is_module_format(data):
        return from_module_json(data, source=source)
    return PipelineSpec.from_dict(data, source=source)


def load(path_or_name: PathLike, *, format: Format | None = None) -> PipelineSpec:
    """A built-in pipeline by name (``tm``, ``lv``, ``ga``, ``da``) or a spec file.

    A string that names a built-in and is not an existing file loads the built-in.  Otherwise the
    file's format comes from its suffix (``.yaml``/``.yml``, ``.json``, ``.toml``) unless given.

    Raises:
        ConfigError: unknown name / missing file, unparseable file, or an invalid spec.
    """
    p = Path(path_or_name)
    if isinstance(path_or_name, str) and path_or_name in BUILTIN_NAMES and not p.exists():
        return builtin(path_or_name)
    if not p.is_file():
        raise ConfigError(
            f"{path_or_name!s}: no such pipeline file, and not a built-in pipeline name "
            f"(built-ins: {', '.join(BUILTIN_NAMES)})"
        )
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read the file: {exc}") from None
    return loads(text, format=_format_of(p, format, "pard.config.load()"), source=str(p))


def builtin(name: str) -> PipelineSpec:
    """The built-in pipeline ``name``: one of ``tm``, ``lv``, ``ga``, ``da`` (DESIGN §5).

    Their profiles are illustrative, not measurements: each stage's ``description`` says which kind
    of model and which hardware class it imitates (see ``docs/workloads.md``).

    Raises:
        ConfigError: ``name`` is not a built-in.
    """
    if name not in BUILTIN_NAMES:
        raise ConfigError(f"unknown built-in pipeline {name!r}; expected one of {', '.join(BUILTIN_NAMES)}")
    res = resources.files("pard").joinpath("pipelines", f"{name}.yaml")
    return loads(res.read_text(encoding="utf-8"), format="yaml", source=f"built-in pipeline {name!r}")


def _intact(spec: PipelineSpec) -> PipelineSpec:
    """``spec``, or a re-validated copy when its lists or dicts were changed in place after it was built
    (the model is frozen, its containers are not); ConfigError when the change made it invalid, rather
    than a KeyError or the C++ core's ValueError deep in a run."""
    if spec_digest(spec) == spec._digest:
        return spec
    try:
        return PipelineSpec(**spec.model_dump())
    except ConfigError as exc:
        raise ConfigError(f"pipeline {spec.name!r} was changed in place after it was built, and is no longer "
                          f"valid: {exc} (build a new spec: replace_stage, with_workers or from_dict)") from None


def resolve_pipeline(pipeline: PipelineSpec | str | os.PathLike[str]) -> PipelineSpec:
    """A PipelineSpec from a spec, a built-in name (``tm``, ``lv``, ``ga``, ``da``) or a file path.

    Raises:
        pard.ConfigError: an unknown name or an invalid file.
        pard.errors.PardTypeError: anything else.
    """
    if isinstance(pipeline, PipelineSpec):
        return _intact(pipeline)
    if isinstance(pipeline, (str, os.PathLike)):
        return load(os.fspath(pipeline))
    raise PardTypeError(f"pipeline must be a PipelineSpec, a built-in name or a path, got "
                        f"{type(pipeline).__name__}: {pipeline!r}")
