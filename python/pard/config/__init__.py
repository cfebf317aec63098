"""Pipeline configuration: stages, their latency profiles, the SLO, and the DAG between them.

A :class:`PipelineSpec` names a pipeline, its end-to-end SLO (seconds), optional service tiers and a
list of :class:`StageSpec` linked through ``successors`` into a directed acyclic graph (DESIGN §2).
Every request enters at the entry stages (those with no predecessor), visits every stage, and leaves
from the exit stages.  A stage's *profile* maps batch size to execution duration ``d(b)`` in seconds,
piecewise-linear between the measured points (see :meth:`StageSpec.duration`).

Both models are pydantic v2 models, immutable once built.  Building one directly, or through
:func:`load` / :func:`loads` / :meth:`PipelineSpec.from_dict`, validates everything and raises
:class:`pard.errors.ConfigError` (a ``ValueError``) naming the field, the value and the problem.
(``model_validate`` and ``model_copy`` are pydantic's own and bypass that: use ``from_dict`` and
:meth:`PipelineSpec.replace_stage` / :meth:`PipelineSpec.with_workers` instead.)

Files: YAML (``.yaml``/``.yml``), JSON (``.json``) and TOML (``.toml``) hold the same fields,
times in seconds.  JSON files in the paper's module format (``name``, ``id``, ``pres``, ``subs``) are
read too; see :func:`from_module_json` for what is assumed about that format.  The built-in pipelines
``tm``, ``lv``, ``ga`` and ``da`` (DESIGN §5) ship as YAML package data: :func:`builtin`.

The simulator and the runtime read specs through :meth:`PipelineSpec.capacity`,
:meth:`PipelineSpec.topological_order`, :meth:`PipelineSpec.downstream_paths`,
:meth:`PipelineSpec.entry_stages` and :meth:`PipelineSpec.predecessors`.

The package holds one concern per module: :mod:`~pard.config.models` (the pydantic models),
:mod:`~pard.config.formats` (YAML/JSON/TOML files and the built-ins) and
:mod:`~pard.config.modules` (the paper's module JSON).  Import from ``pard.config``.
"""

from __future__ import annotations

from .formats import BUILTIN_NAMES, SPEC_SUFFIXES, builtin, dumps, load, loads, resolve_pipeline, save
from .models import MAX_TOTAL_WORKERS, MAX_WORKERS, Capacity, PipelineSpec, StageSpec, min_latency_path, warn_unreachable_slo
from .modules import from_module_json

__all__ = [
    "StageSpec",
    "PipelineSpec",
    "Capacity",
    "MAX_WORKERS",
    "MAX_TOTAL_WORKERS",
    "min_latency_path",
    "warn_unreachable_slo",
    "BUILTIN_NAMES",
    "SPEC_SUFFIXES",
    "builtin",
    "load",
    "loads",
    "save",
    "dumps",
    "from_module_json",
    "resolve_pipeline",
]
