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
"""

from __future__ import annotations

import json
import math
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from .errors import ConfigError, PardWarning

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

import tomli_w

__all__ = [
    "StageSpec",
    "PipelineSpec",
    "Capacity",
    "MAX_WORKERS",
    "min_latency_path",
    "BUILTIN_NAMES",
    "builtin",
    "load",
    "loads",
    "save",
    "dumps",
    "from_module_json",
]

Format = Literal["yaml", "json", "toml"]
PathLike = Union[str, Path]

#: Names of the built-in pipelines (DESIGN §5), loadable with :func:`builtin` or :func:`load`.
BUILTIN_NAMES: tuple[str, ...] = ("tm", "lv", "ga", "da")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_NAME_RULE = "a non-empty name of letters, digits, '_', '.' or '-' that starts with a letter or digit"


def _check_name(kind: str, value: str) -> str:
    if not _NAME_RE.match(value):
        raise ValueError(f"{kind} {value!r} is not {_NAME_RULE}")
    return value


#: Largest ``workers`` a stage may declare (10^5): the simulator and the runtime allocate per-worker
#: state, and a count beyond this is a typo rather than a deployment.
MAX_WORKERS = 100_000


def min_latency_path(spec: "PipelineSpec") -> tuple[float, list[str]]:
    """The smallest end-to-end latency a request can have, and the path that sets it (s, stage names).

    A request visits every stage, so even alone (batch size 1, no queueing) it needs the longest
    entry-to-exit path's sum of ``d(1)`` (the shortest duration of each non-decreasing profile).
    """
    best: tuple[float, list[str]] = (-1.0, [])
    for e in spec.entry_stages():
        for path in spec.downstream_paths(e):
            names = [e, *path]
            t = sum(spec.stage(n).duration(1) for n in names)
            if t > best[0]:
                best = (t, names)
    return best


def warn_unreachable_slo(spec: "PipelineSpec", slo: float) -> None:
    """Warn (:class:`pard.errors.PardWarning`) when no request can ever finish within ``slo`` seconds."""
    t, path = min_latency_path(spec)
    if t > slo:
        warnings.warn(
            f"pipeline {spec.name!r}: SLO {slo:g} s can never be met: a lone request needs at least "
            f"{t:.4g} s (sum of d(1) along {' -> '.join(path)}); every request will be late or dropped",
            PardWarning, stacklevel=2)


def _check_count(field: str, value: int) -> int:
    if value < 1:
        raise ValueError(f"{field} must be >= 1, got {value!r}")
    return value


class StageSpec(BaseModel):
    """One stage of a pipeline: a model served by ``workers`` identical workers.

    Fields:
        name: the stage's name (letters, digits, ``_ . -``), unique within the pipeline.
        profile: batch size (int >= 1) -> execution duration of a batch of that size (float seconds,
            finite, > 0, non-decreasing with the batch size).  At least one point.
        max_batch: largest batch a worker forms (int >= 1).
        workers: number of workers (int, 1 .. :data:`MAX_WORKERS` = 10^5).
        successors: names of the stages each request goes to next; empty for an exit stage.
        description: free text (which model, which hardware); optional.

    Raises:
        ConfigError: on any invalid field (names the field, the value and the rule).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    name: str
    profile: dict[int, float]
    max_batch: int
    workers: int = 1
    successors: list[str] = []
    description: str = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, "stage")) from None

    @field_validator("name")
    @classmethod
    def _v_name(cls, v: str) -> str:
        return _check_name("stage name", v)

    @field_validator("max_batch")
    @classmethod
    def _v_max_batch(cls, v: int) -> int:
        return _check_count("max_batch (batch size)", v)

    @field_validator("workers")
    @classmethod
    def _v_workers(cls, v: int) -> int:
        _check_count("workers", v)
        if v > MAX_WORKERS:
            raise ValueError(f"workers must be <= {MAX_WORKERS} (MAX_WORKERS), got {v!r}")
        return v

    @field_validator("profile")
    @classmethod
    def _v_profile(cls, v: dict[int, float]) -> dict[int, float]:
        if not v:
            raise ValueError("profile must have at least one (batch size, duration) point, got {}")
        points = sorted(v.items())
        for b, d in points:
            if b < 1:
                raise ValueError(f"profile batch size must be >= 1, got {b!r}")
            if not math.isfinite(d):
                raise ValueError(f"profile duration d({b}) = {d!r} is not finite")
            if d <= 0.0:
                raise ValueError(f"profile duration d({b}) = {d!r} s must be > 0")
        for (b0, d0), (b1, d1) in zip(points, points[1:]):
            if d1 < d0:
                raise ValueError(
                    f"profile durations must not decrease with batch size: "
                    f"d({b1}) = {d1!r} s < d({b0}) = {d0!r} s"
                )
        return dict(points)

    @model_validator(mode="after")
    def _v_successors(self) -> StageSpec:
        seen: set[str] = set()
        for s in self.successors:
            if s == self.name:
                raise ValueError(f"stage {self.name!r} lists itself as a successor (a cycle)")
            if s in seen:
                raise ValueError(f"stage {self.name!r} lists successor {s!r} twice")
            seen.add(s)
        return self

    # ---- profile -------------------------------------------------------------------------

    def duration(self, batch: int) -> float:
        """Execution duration ``d(b)`` of one batch of ``batch`` requests, in seconds.

        Piecewise-linear through the profile's points, the same rule as the C++ core's
        ``Profile`` (``cpp/include/pard/profile.hpp``): below the smallest profiled batch size the
        duration is that point's (a smaller batch is not assumed faster than measured); above the
        largest, the last segment's slope continues (with a single point, ``d`` stays constant).
        Profile every batch size up to ``max_batch`` to avoid relying on extrapolation.

        Raises:
            ValueError: ``batch`` is not an int >= 1.
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch size must be an int >= 1, got {batch!r}")
        points = sorted(self.profile.items())
        if batch in self.profile:
            return float(self.profile[batch])
        if batch < points[0][0]:
            return float(points[0][1])
        if batch > points[-1][0]:
            if len(points) == 1:
                return float(points[0][1])
            (b0, d0), (b1, d1) = points[-2], points[-1]
            return float(d1 + (d1 - d0) / (b1 - b0) * (batch - b1))
        for (b0, d0), (b1, d1) in zip(points, points[1:]):
            if b0 < batch < b1:
                return float(d0 + (d1 - d0) * (batch - b0) / (b1 - b0))
        raise AssertionError("unreachable: batch lies between profiled points")  # pragma: no cover

    def throughput(self, batch: int | None = None) -> float:
        """Requests per second this stage sustains with every worker running batches of ``batch``.

        ``workers * b / d(b)``; ``batch`` defaults to ``max_batch``.  Raises ValueError as
        :meth:`duration`.
        """
        b = self.max_batch if batch is None else batch
        return self.workers * b / self.duration(b)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (what the YAML/JSON/TOML files hold); ``description`` only if set."""
        out: dict[str, Any] = {
            "name": self.name,
            "profile": {int(b): float(d) for b, d in sorted(self.profile.items())},
            "max_batch": self.max_batch,
            "workers": self.workers,
            "successors": list(self.successors),
        }
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class Capacity:
    """Throughput bounds of a pipeline at every stage's max batch size, in requests per second.

    Attributes:
        stages: stage name -> ``workers * max_batch / d(max_batch)`` (req/s).
        pipeline: the pipeline's bound: every request visits every stage, so the minimum over stages.
        bottleneck: the name of the stage that sets ``pipeline`` (the first one, on ties).
    """

    stages: dict[str, float]
    pipeline: float
    bottleneck: str


class PipelineSpec(BaseModel):
    """A pipeline: stages linked into a DAG, one end-to-end SLO, optional service tiers.

    Fields:
        name: the pipeline's name (letters, digits, ``_ . -``).
        slo: end-to-end latency SLO of a request, seconds (finite, > 0).
        stages: the stages (at least one), names unique, ``successors`` naming stages of this
            pipeline, no cycle, at least one entry stage (a stage that no other stage lists).
        tiers: service tier name -> weight (finite, > 0); may be empty.  A request's tier code is the
            index of its tier in this mapping's order.  Tier-aware policies (``pard``) serve and shed by
            weight; every report gives per-tier counts and the weighted goodput.
        description: free text; optional.

    Raises:
        ConfigError: naming the field and value for an unknown successor, a cycle, no entry stage,
            duplicate stage names, SLO <= 0, and every :class:`StageSpec` rule.
    Warns:
        PardWarning: the SLO is below the smallest possible latency (the longest entry-to-exit
            path's sum of ``d(1)``): no request can ever be on time.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    name: str
    slo: float
    stages: list[StageSpec]
    tiers: dict[str, float] = {}
    description: str = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, "pipeline")) from None

    @field_validator("name")
    @classmethod
    def _v_name(cls, v: str) -> str:
        return _check_name("pipeline name", v)

    @field_validator("slo")
    @classmethod
    def _v_slo(cls, v: float) -> float:
        if not math.isfinite(v) or v <= 0.0:
            raise ValueError(f"slo must be a finite number of seconds > 0, got {v!r}")
        return v

    @field_validator("tiers")
    @classmethod
    def _v_tiers(cls, v: dict[str, float]) -> dict[str, float]:
        for name, weight in v.items():
            _check_name("tier name", name)
            if not math.isfinite(weight) or weight <= 0.0:
                raise ValueError(f"tier {name!r} weight must be finite and > 0, got {weight!r}")
        return v

    @model_validator(mode="after")
    def _v_graph(self) -> PipelineSpec:
        if not self.stages:
            raise ValueError("stages: a pipeline needs at least one stage, got []")
        names: dict[str, int] = {}
        for i, st in enumerate(self.stages):
            if st.name in names:
                raise ValueError(
                    f"stages[{i}].name: duplicate stage name {st.name!r} "
                    f"(also stages[{names[st.name]}])"
                )
            names[st.name] = i
        for i, st in enumerate(self.stages):
            for s in st.successors:
                if s not in names:
                    raise ValueError(
                        f"stages[{i}].successors: stage {st.name!r} names unknown successor {s!r} "
                        f"(stages are {sorted(names)})"
                    )
        targets = {s for st in self.stages for s in st.successors}
        if all(st.name in targets for st in self.stages):
            raise ValueError(
                "stages: no entry stage: every stage is some stage's successor, so the graph has a "
                "cycle and requests have nowhere to enter"
            )
        cycle = _find_cycle(self.stages)
        if cycle:
            raise ValueError(f"stages: the successors form a cycle: {' -> '.join(cycle)}")
        warn_unreachable_slo(self, self.slo)
        return self

    # ---- construction ----------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "pipeline") -> PipelineSpec:
        """Build and validate a spec from plain data (as :meth:`to_dict` makes it).

        Raises:
            ConfigError: any invalid field; the message starts with ``source`` (e.g. a file name).
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: expected a mapping of pipeline fields, got {type(data).__name__}")
        try:
            return cls(**dict(data))
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``name``, ``slo``, ``tiers``, ``stages`` (list of :meth:`StageSpec.to_dict`)."""
        out: dict[str, Any] = {"name": self.name, "slo": float(self.slo)}
        if self.description:
            out["description"] = self.description
        out["tiers"] = {k: float(v) for k, v in self.tiers.items()}
        out["stages"] = [st.to_dict() for st in self.stages]
        return out

    def replace_stage(self, name: str, **changes: Any) -> PipelineSpec:
        """A copy with stage ``name``'s fields changed (validated), e.g. ``workers=4``.

        Raises:
            KeyError: no stage ``name``.  ConfigError: the result is invalid.
        """
        self.index(name)
        data = self.to_dict()
        for st in data["stages"]:
            if st["name"] == name:
                st.update(changes)
        return PipelineSpec.from_dict(data, source=f"pipeline {self.name!r}")

    def with_workers(self, workers: Mapping[str, int]) -> PipelineSpec:
        """A copy with the workers of the named stages replaced (validated).

        Raises:
            KeyError: an unknown stage name.  ConfigError: a count < 1.
        """
        for name in workers:
            self.index(name)
        data = self.to_dict()
        for st in data["stages"]:
            if st["name"] in workers:
                st["workers"] = workers[st["name"]]
        return PipelineSpec.from_dict(data, source=f"pipeline {self.name!r}")

    # ---- graph -----------------------------------------------------------------------------

    @property
    def stage_names(self) -> list[str]:
        """Stage names in declaration order."""
        return [st.name for st in self.stages]

    def index(self, name: str) -> int:
        """Position of stage ``name`` in :attr:`stages`.  Raises KeyError if there is none."""
        for i, st in enumerate(self.stages):
            if st.name == name:
                return i
        raise KeyError(f"pipeline {self.name!r} has no stage {name!r} (stages: {self.stage_names})")

    def stage(self, name: str) -> StageSpec:
        """The stage called ``name``.  Raises KeyError if there is none."""
        return self.stages[self.index(name)]

    def predecessors(self, name: str) -> list[str]:
        """Names of the stages that list ``name`` as a successor, in declaration order."""
        self.index(name)
        return [st.name for st in self.stages if name in st.successors]

    def entry_stages(self) -> list[str]:
        """Stages with no predecessor (where requests enter), in declaration order."""
        targets = {s for st in self.stages for s in st.successors}
        return [st.name for st in self.stages if st.name not in targets]

    def exit_stages(self) -> list[str]:
        """Stages with no successor (where requests leave), in declaration order."""
        return [st.name for st in self.stages if not st.successors]

    def topological_order(self) -> list[str]:
        """Stage names so that every stage comes after all its predecessors.

        Deterministic: among stages that are ready at the same time, declaration order wins
        (Kahn's algorithm).  For a chain this is the chain's order.
        """
        indeg = {st.name: 0 for st in self.stages}
        for st in self.stages:
            for s in st.successors:
                indeg[s] += 1
        order: list[str] = []
        ready = [st.name for st in self.stages if indeg[st.name] == 0]
        position = {n: i for i, n in enumerate(self.stage_names)}
        while ready:
            ready.sort(key=position.__getitem__)
            n = ready.pop(0)
            order.append(n)
            for s in self.stages[position[n]].successors:
                indeg[s] -= 1
                if indeg[s] == 0:
                    ready.append(s)
        return order

    def downstream_paths(self, name: str) -> list[list[str]]:
        """Every path from ``name``'s successors to an exit stage, as lists of stage names.

        ``name`` itself is not included.  An exit stage has one empty path (``[[]]``), so a sum
        over a path's stages is 0 there.  Paths are listed depth-first in successor order.  PARD
        evaluates the downstream terms of the estimate along every path and takes the largest
        (DESIGN §3.2, "DAG").

        Raises:
            KeyError: no stage ``name``.
        """
        st = self.stage(name)
        if not st.successors:
            return [[]]
        paths: list[list[str]] = []
        for s in st.successors:
            for tail in self.downstream_paths(s):
                paths.append([s, *tail])
        return paths

    def longest_path_duration(self, batch: Mapping[str, int] | None = None) -> float:
        """Largest sum of stage durations over the entry-to-exit paths, seconds.

        Each stage runs at ``batch[stage]`` (default: its ``max_batch``).  This is the pipeline's
        execution time for one request that never queues or waits.
        """
        def d(n: str) -> float:
            st = self.stage(n)
            return st.duration(batch.get(n, st.max_batch) if batch else st.max_batch)

        return max(
            d(e) + sum(d(s) for s in path)
            for e in self.entry_stages()
            for path in self.downstream_paths(e)
        )

    # ---- capacity --------------------------------------------------------------------------

    def capacity(self) -> Capacity:
        """Each stage's and the pipeline's throughput bound at max batch size, req/s.

        Stage ``k``: ``workers_k * max_batch_k / d_k(max_batch_k)``.  Every request visits every
        stage, so the pipeline bound is the minimum over stages (DAG included).
        """
        stages = {st.name: st.throughput() for st in self.stages}
        bottleneck = min(stages, key=stages.__getitem__)
        return Capacity(stages=stages, pipeline=stages[bottleneck], bottleneck=bottleneck)

    # ---- files -----------------------------------------------------------------------------

    def save(self, path: PathLike, *, format: Format | None = None) -> Path:
        """Write this spec to ``path`` (format from the suffix unless given).  Returns the path."""
        return save(self, path, format=format)


def _find_cycle(stages: Sequence[StageSpec]) -> list[str]:
    """A cycle as a list of names (first name repeated at the end), or [] if the graph is acyclic."""
    succ = {st.name: st.successors for st in stages}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        path.append(n)
        for s in succ[n]:
            if state.get(s) == 1:
                return path[path.index(s):] + [s]
            if s not in state:
                found = visit(s)
                if found:
                    return found
        state[n] = 2
        path.pop()
        return []

    for st in stages:
        if st.name not in state:
            found = visit(st.name)
            if found:
                return found
    return []


_NESTED_PREFIX = "invalid stage: "


def _describe(exc: ValidationError, what: str) -> str:
    """One readable line per pydantic error: ``field path: problem (got value)``."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = ""
        for part in err["loc"]:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        msg = str(err["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if msg.startswith(_NESTED_PREFIX):
            # A nested StageSpec already described its own errors: put our location in front.
            for part in msg[len(_NESTED_PREFIX):].split("; "):
                field = re.match(r"^[A-Za-z_][\w.\[\]]*: ", part)
                lines.append(f"{loc}.{part}" if field and loc else f"{loc}: {part}" if loc else part)
            continue
        text = f"{loc}: {msg}" if loc else msg
        if err["type"] not in ("value_error", "assertion_error") and "input" in err:
            shown = repr(err["input"])
            text += f" (got {shown[:80]}{'...' if len(shown) > 80 else ''})"
        lines.append(text)
    return f"invalid {what}: " + "; ".join(lines)


# ---- files -------------------------------------------------------------------------------


def _format_of(path: Path, format: str | None) -> Format:
    fmt = format or {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml"}.get(
        path.suffix.lower()
    )
    if fmt not in ("yaml", "json", "toml"):
        raise ConfigError(
            f"{path}: cannot tell the file format from suffix {path.suffix!r} "
            f"(expected .yaml, .yml, .json or .toml, or pass format=)"
        )
    return fmt  # type: ignore[return-value]


def dumps(spec: PipelineSpec, *, format: Format = "yaml") -> str:
    """The spec as YAML, JSON or TOML text (times in seconds)."""
    data = spec.to_dict()
    if format == "yaml":
        return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    if format == "json":
        return json.dumps(data, indent=2) + "\n"
    if format == "toml":
        for st in data["stages"]:
            st["profile"] = {str(b): d for b, d in st["profile"].items()}
        return tomli_w.dumps(data)
    raise ValueError(f"format must be 'yaml', 'json' or 'toml', got {format!r}")


def save(spec: PipelineSpec, path: PathLike, *, format: Format | None = None) -> Path:
    """Write ``spec`` to ``path`` as YAML, JSON or TOML (from the suffix unless ``format``)."""
    p = Path(path)
    p.write_text(dumps(spec, format=_format_of(p, format)), encoding="utf-8")
    return p


def loads(text: str, *, format: Format = "yaml", source: str = "<string>") -> PipelineSpec:
    """Parse and validate a spec from YAML, JSON or TOML text.

    JSON in the paper's module format is recognised and read with :func:`from_module_json`.

    Raises:
        ConfigError: the text does not parse (names ``source`` and the parser's line) or the spec
            is invalid (names the field and value).
    """
    try:
        if format == "yaml":
            data = yaml.safe_load(text)
        elif format == "json":
            data = json.loads(text)
        elif format == "toml":
            data = tomllib.loads(text)
        else:
            raise ValueError(f"format must be 'yaml', 'json' or 'toml', got {format!r}")
    except (yaml.YAMLError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{source}: not valid {format.upper()}: {exc}") from None
    if data is None:
        raise ConfigError(f"{source}: the file is empty")
    if format == "json" and _is_module_format(data):
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
    return loads(text, format=_format_of(p, format), source=str(p))


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


# ---- the paper's JSON module format -------------------------------------------------------


def _is_module_format(data: Any) -> bool:
    mods = data.get("modules") if isinstance(data, dict) else data
    return (
        isinstance(mods, list)
        and bool(mods)
        and all(isinstance(m, dict) and "id" in m and ("subs" in m or "pres" in m) for m in mods)
    )


def from_module_json(
    data: Any, *, name: str | None = None, slo: float | None = None, source: str = "<modules>"
) -> PipelineSpec:
    """Read the PARD paper artifact's JSON module format into a :class:`PipelineSpec`.

    Accepted shape (what we assume; the paper does not publish a schema): either a list of modules
    or an object ``{"name": ..., "slo": <s> | "slo_ms": <ms>, "tiers": {...}, "modules": [...]}``.
    Each module is an object with

    - ``name`` (str) and ``id`` (int, unique);
    - ``subs`` and ``pres``: lists of successor / predecessor module ids; ``-1`` marks "none"
      (the source or the sink) and is ignored.  Either may be omitted; when both are given they
      must agree (a in b's ``pres`` exactly when b in a's ``subs``);
    - the latency profile as exactly one of: ``profile`` (batch size -> seconds),
      ``profile_ms`` (batch size -> milliseconds), or ``durations_ms`` (a list whose i-th entry is
      the duration in milliseconds of a batch of size i+1);
    - optional ``max_batch`` (default: the largest profiled batch size) and ``workers`` (default 1).

    ``name`` / ``slo`` arguments override (or, for a bare list, supply) the pipeline's name and SLO.

    Raises:
        ConfigError: a missing or inconsistent field (names the module and the field).
    """
    meta: dict[str, Any] = {}
    if isinstance(data, dict):
        meta = data
        modules = data.get("modules")
    else:
        modules = data
    if not isinstance(modules, list) or not modules:
        raise ConfigError(f"{source}: 'modules' must be a non-empty list of module objects")
    pname = name if name is not None else meta.get("name")
    if slo is None:
        if "slo" in meta:
            slo = meta["slo"]
        elif "slo_ms" in meta:
            try:
                slo = float(meta["slo_ms"]) / 1000.0
            except (TypeError, ValueError):
                raise ConfigError(f"{source}: slo_ms must be a number, got {meta['slo_ms']!r}") from None
    if pname is None or slo is None:
        raise ConfigError(f"{source}: the module list needs a pipeline name and slo (pass name=, slo=)")

    by_id: dict[int, dict[str, Any]] = {}
    for i, m in enumerate(modules):
        where = f"{source}: modules[{i}]"
        if not isinstance(m, dict):
            raise ConfigError(f"{where}: expected an object, got {m!r}")
        for key in ("name", "id"):
            if key not in m:
                raise ConfigError(f"{where}: missing field {key!r}")
        mid = m["id"]
        if isinstance(mid, bool) or not isinstance(mid, int):
            raise ConfigError(f"{where}.id: expected an integer, got {mid!r}")
        if mid in by_id:
            raise ConfigError(f"{where}.id: duplicate module id {mid!r}")
        by_id[mid] = m

    def ids(i: int, m: dict[str, Any], key: str) -> list[int] | None:
        if key not in m:
            return None
        v = m[key]
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
            raise ConfigError(f"{source}: modules[{i}].{key}: expected a list of module ids, got {v!r}")
        out = [x for x in v if x != -1]
        for x in out:
            if x not in by_id:
                raise ConfigError(f"{source}: modules[{i}].{key}: unknown module id {x!r}")
        return out

    subs: dict[int, list[int]] = {}
    pres: dict[int, list[int] | None] = {}
    for i, m in enumerate(modules):
        s = ids(i, m, "subs")
        p = ids(i, m, "pres")
        subs[m["id"]] = s if s is not None else []
        pres[m["id"]] = p
        if s is None and p is None:
            raise ConfigError(f"{source}: modules[{i}] ({m['name']!r}) has neither 'subs' nor 'pres'")
    # Successors come from 'subs'; 'pres' of modules without 'subs' add edges; then both must agree.
    for mid, p in pres.items():
        for q in p or []:
            if "subs" not in by_id[q] and mid not in subs[q]:
                subs[q].append(mid)
    for mid, p in pres.items():
        if p is None:
            continue
        derived = sorted(q for q, s in subs.items() if mid in s)
        if sorted(p) != derived:
            raise ConfigError(
                f"{source}: module {by_id[mid]['name']!r} (id {mid}): 'pres' {sorted(p)} disagrees "
                f"with the modules whose 'subs' list it {derived}"
            )

    stages = []
    for i, m in enumerate(modules):
        where = f"{source}: modules[{i}] ({m['name']!r})"
        keys = [k for k in ("profile", "profile_ms", "durations_ms") if k in m]
        if len(keys) != 1:
            raise ConfigError(
                f"{where}: expected exactly one of 'profile' (s), 'profile_ms' or 'durations_ms', "
                f"got {keys or 'none'}"
            )
        raw = m[keys[0]]
        try:
            if keys[0] == "durations_ms":
                if not isinstance(raw, list):
                    raise TypeError("durations_ms must be a list")
                profile = {b + 1: float(d) / 1000.0 for b, d in enumerate(raw)}
            else:
                if not isinstance(raw, dict):
                    raise TypeError(f"{keys[0]} must be an object of batch size -> duration")
                scale = 1000.0 if keys[0] == "profile_ms" else 1.0
                profile = {int(b): float(d) / scale for b, d in raw.items()}
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}.{keys[0]}: {exc} (got {raw!r})") from None
        stage: dict[str, Any] = {
            "name": m["name"],
            "profile": profile,
            "max_batch": m.get("max_batch", max(profile) if profile else 1),
            "workers": m.get("workers", 1),
            "successors": [by_id[s]["name"] for s in subs[m["id"]]],
        }
        stages.append(stage)
    data_out: dict[str, Any] = {"name": pname, "slo": slo, "stages": stages}
    if "tiers" in meta:
        data_out["tiers"] = meta["tiers"]
    return PipelineSpec.from_dict(data_out, source=source)
