"""The pipeline and stage models: :class:`StageSpec`, :class:`PipelineSpec`, :class:`Capacity`.

Pydantic v2 models, immutable once built; building one validates every field and raises
:class:`pard.errors.ConfigError` naming the field and the value.  A stage's ``d(b)`` is
:func:`pard.profile.duration` (the one rule, shared with the planner and the C++ core).  Files are
read and written by :mod:`pard.config.formats`; the paper's module JSON by :mod:`pard.config.modules`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, field_validator, model_validator

from .. import profile as _profile
from .._checks import yaml11_hint
from ..errors import ConfigError, PardValueError, UnknownStageError
from .graph import MAX_PATHS, count_paths, downstream_paths, find_cycle
from .limits import (MAX_BATCH, MAX_DURATION_S, MAX_SLO_S, MAX_TOTAL_WORKERS, MAX_WORKERS, MIN_DURATION_S,
                     MIN_SLO_S)
from .latency import min_latency_path, warn_unreachable_slo
from .llm import fill_llm_stage
from .writers import save

__all__ = ["StageSpec", "PipelineSpec", "Capacity", "MAX_WORKERS", "MAX_TOTAL_WORKERS", "MAX_BATCH", "MIN_DURATION_S",
           "MAX_DURATION_S", "MAX_SLO_S", "MIN_SLO_S", "min_latency_path", "warn_unreachable_slo", "Format", "PathLike"]

Format = Literal["yaml", "json", "toml"]
PathLike = Union[str, Path]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_NAME_RULE = "a non-empty name of ASCII letters, digits, '_', '.' or '-' that starts with a letter or digit"


def _check_name(kind: str, value: str) -> str:
    if not _NAME_RE.match(value):
        raise PardValueError(f"{kind} {value!r} is not {_NAME_RULE}")
    return value


def _refuse_bools(field: str, value: Any) -> Any:
    """YAML reads ``yes``/``true`` as a bool, and pydantic would take it as 1: refuse it for a number."""
    items = value.items() if isinstance(value, Mapping) else [(None, value)]
    for k, v in items:
        for x in (k, v):
            if isinstance(x, bool):
                what = f"{field} keys and values must be numbers, got a boolean in" if k is not None else \
                    f"{field} must be a number, got the boolean"
                raise PardValueError(f"{what} {value!r}")
    return value


def _check_count(field: str, value: int) -> int:
    if value < 1:
        raise PardValueError(f"{field} must be >= 1, got {value!r}")
    return value


class _Spec(BaseModel):
    """A frozen pydantic model whose validation errors become one :class:`ConfigError` line."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)
    what: ClassVar[str] = "spec"  #: what a message calls it

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, self.what, data)) from None

    @field_validator("name", check_fields=False)
    @classmethod
    def _v_name(cls, v: str) -> str:
        return _check_name(f"{cls.what} name", v)


class StageSpec(_Spec):
    """One stage of a pipeline: a model served by ``workers`` identical workers.

    Fields:
        name: the stage's name (letters, digits, ``_ . -``), unique within the pipeline.
        profile: batch size (int >= 1) -> execution duration of a batch of that size (float seconds,
            finite, in [:data:`MIN_DURATION_S` = 1 µs, :data:`MAX_DURATION_S`], non-decreasing with the
            batch size).  At least one point.
        max_batch: largest batch a worker forms (int >= 1).
        workers: number of workers (int, 1 .. :data:`MAX_WORKERS` = 1 024; the pipeline's sum at most
            :data:`MAX_TOTAL_WORKERS` = 4 096: one thread each in the live runtime).
        successors: names of the stages each request goes to next; empty for an exit stage.
        description: free text (which model, which hardware); optional.
        kind: ``dnn`` (default: whole batches, the fields above) or ``llm`` (token-level batching, DESIGN
            §3.8): then ``prefill`` ({base, per_token} s), ``decode`` (running sequences -> s per step),
            ``max_seqs``, ``kv_tokens`` and ``max_output_tokens`` replace ``profile`` and ``max_batch``,
            which follow from them (:mod:`pard.config.llm`: the request-level reading every capacity
            helper uses).

    Raises:
        ConfigError: on any invalid field (names the field, the value and the rule).
    """

    what: ClassVar[str] = "stage"

    name: str
    profile: dict[int, float] = {}  # an llm stage's follows from its fields (pard.config.llm)
    max_batch: int = 1
    workers: int = 1
    successors: list[str] = []
    description: str = ""
    kind: Literal["dnn", "llm"] = "dnn"
    prefill: dict[str, float] | None = None
    decode: dict[int, float] | None = None
    max_seqs: int | None = None
    kv_tokens: int | None = None
    max_output_tokens: int | None = None

    _v_kind = model_validator(mode="before")(fill_llm_stage)

    @field_validator("max_batch", "workers", "profile", mode="before")
    @classmethod
    def _v_no_bools(cls, v: Any, info: Any) -> Any:
        return _refuse_bools(info.field_name, v)

    @field_validator("max_batch")
    @classmethod
    def _v_max_batch(cls, v: int) -> int:
        _check_count("max_batch (batch size)", v)
        if v > MAX_BATCH:
            raise PardValueError(f"max_batch must be <= {MAX_BATCH} (MAX_BATCH, the C++ Profile's table "
                                 f"limit), got {v!r}")
        return v

    @field_validator("workers")
    @classmethod
    def _v_workers(cls, v: int) -> int:
        _check_count("workers", v)
        if v > MAX_WORKERS:
            raise PardValueError(f"workers must be <= {MAX_WORKERS} (MAX_WORKERS, one thread per worker in the "
                                 f"live runtime: more is a typo, not a deployment), got {v!r}")
        return v

    @field_validator("profile")
    @classmethod
    def _v_profile(cls, v: dict[int, float]) -> dict[int, float]:
        if not v:
            raise PardValueError("profile must have at least one (batch size, duration) point, got {}")
        points = sorted(v.items())
        for b, d in points:
            if b < 1:
                raise PardValueError(f"profile batch size must be >= 1, got {b!r}")
            if b > MAX_BATCH:
                raise PardValueError(f"profile batch size must be <= {MAX_BATCH} (MAX_BATCH, the C++ Profile's "
                                     f"table limit), got {b!r}")
            if not math.isfinite(d):
                raise PardValueError(f"profile duration d({b}) = {d!r} is not finite")
            if d <= 0.0:
                raise PardValueError(f"profile duration d({b}) = {d!r} s must be > 0")
            if d < MIN_DURATION_S:
                raise PardValueError(f"profile duration d({b}) = {d!r} s must be >= {MIN_DURATION_S:g} s "
                                     f"(MIN_DURATION_S, 1 µs: the C++ core counts whole nanoseconds)")
            if d > MAX_DURATION_S:
                raise PardValueError(f"profile duration d({b}) = {d!r} s must be <= {MAX_DURATION_S:g} s "
                                     f"(MAX_DURATION_S, the C++ core's limit)")
        for (b0, d0), (b1, d1) in zip(points, points[1:]):
            if d1 < d0:
                raise PardValueError(
                    f"profile durations must not decrease with batch size: "
                    f"d({b1}) = {d1!r} s < d({b0}) = {d0!r} s"
                )
        return dict(points)

    @model_validator(mode="after")
    def _v_successors(self) -> StageSpec:
        seen: set[str] = set()
        for s in self.successors:
            if s == self.name:
                raise PardValueError(f"stage {self.name!r} lists itself as a successor (a cycle)")
            if s in seen:
                raise PardValueError(f"stage {self.name!r} lists successor {s!r} twice")
            seen.add(s)
        return self

    # ---- profile -------------------------------------------------------------------------

    def duration(self, batch: int) -> float:
        """Execution duration ``d(b)`` of one batch of ``batch`` requests, in seconds.

        :func:`pard.profile.duration`, the one rule shared with the planner and the C++ core's
        ``Profile`` (``cpp/include/pard/profile.hpp``): below the smallest profiled batch size the
        duration is that point's (a smaller batch is not assumed faster than measured); above the
        largest, the last segment's slope continues (with a single point, ``d`` stays constant).
        Profile every batch size up to ``max_batch`` to avoid relying on extrapolation.

        Raises:
            ValueError: ``batch`` is not an int >= 1.
        """
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise PardValueError(f"batch size must be an int >= 1, got {batch!r}")
        return float(_profile.duration(*_profile.points(self.profile), batch))

    @property
    def batch_profile(self) -> dict[int, float]:
        """What one batch row of this stage's statistics costs, as a profile: ``profile`` for a dnn stage; for an
        llm stage its decode step (running sequences -> s), a row per step (what the planner and C++ read)."""
        return dict(self.decode) if self.kind == "llm" and self.decode else self.profile

    @property
    def batch_limit(self) -> int:
        """The largest batch this stage forms: its best batch size in ``1 .. max_batch``, the one with the
        highest throughput ``b / d(b)`` on its profile (:func:`pard.profile.best_batch`; ``max_batch``
        itself for a profile whose throughput grows with the batch, as every built-in one's does)."""
        return _profile.best_batch(self.profile, self.max_batch)

    def throughput(self, batch: int | None = None) -> float:
        """Requests per second this stage sustains with every worker running batches of ``batch``.

        ``workers * b / d(b)``; ``batch`` defaults to :attr:`batch_limit` (the stage's best throughput).
        Raises ValueError as :meth:`duration`.
        """
        b = self.batch_limit if batch is None else batch
        return self.workers * b / self.duration(b)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (what the YAML/JSON/TOML files hold); ``description`` only if set."""
        out: dict[str, Any] = {"name": self.name}
        if self.kind == "llm":
            out.update(kind="llm", prefill=dict(self.prefill or {}), decode={int(b): float(d) for b, d in
                       sorted((self.decode or {}).items())}, max_seqs=self.max_seqs, kv_tokens=self.kv_tokens,
                       max_output_tokens=self.max_output_tokens)
        else:
            out.update(profile={int(b): float(d) for b, d in sorted(self.profile.items())}, max_batch=self.max_batch)
        out.update(workers=self.workers, successors=list(self.successors))
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class Capacity:
    """Throughput bounds of a pipeline at every stage's best batch size, in requests per second.

    Attributes:
        stages: stage name -> ``workers * B / d(B)``, ``B`` the stage's ``batch_limit`` (req/s).
        pipeline: the pipeline's bound: every request visits every stage, so the minimum over stages.
        bottleneck: the name of the stage that sets ``pipeline`` (the first one, on ties).
    """

    stages: dict[str, float]
    pipeline: float
    bottleneck: str


def spec_digest(spec: BaseModel) -> str:
    """A digest of ``spec``'s fields: its lists and dicts can be changed in place after validation."""
    return hashlib.blake2b(repr(spec.model_dump()).encode(), digest_size=16).hexdigest()


class PipelineSpec(_Spec):
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

    what: ClassVar[str] = "pipeline"
    _digest: str = PrivateAttr(default="")  # of the fields as validated (formats.resolve_pipeline checks it)

    name: str
    slo: float
    stages: list[StageSpec]
    tiers: dict[str, float] = {}
    description: str = ""

    @field_validator("slo", "tiers", mode="before")
    @classmethod
    def _v_no_bools(cls, v: Any, info: Any) -> Any:
        return _refuse_bools(info.field_name, v)

    @field_validator("slo")
    @classmethod
    def _v_slo(cls, v: float) -> float:
        if not (0.0 < v <= MAX_SLO_S):  # NaN fails the comparison too
            raise PardValueError(f"slo must be a number of seconds in (0, {MAX_SLO_S:g}] (MAX_SLO_S, the C++ "
                                 f"core's time range), got {v!r}")
        return v

    @field_validator("tiers")
    @classmethod
    def _v_tiers(cls, v: dict[str, float]) -> dict[str, float]:
        for name, weight in v.items():
            _check_name("tier name", name)
            if not math.isfinite(weight) or weight <= 0.0:
                raise PardValueError(f"tier {name!r} weight must be finite and > 0, got {weight!r}")
        return v

    @model_validator(mode="after")
    def _v_graph(self) -> PipelineSpec:
        if not self.stages:
            raise PardValueError("stages: a pipeline needs at least one stage, got []")
        names: dict[str, int] = {}
        for i, st in enumerate(self.stages):
            if st.name in names:
                raise PardValueError(
                    f"stages[{i}].name: duplicate stage name {st.name!r} "
                    f"(also stages[{names[st.name]}])"
                )
            names[st.name] = i
        for i, st in enumerate(self.stages):
            for s in st.successors:
                if s not in names:
                    raise PardValueError(
                        f"stages[{i}].successors: stage {st.name!r} names unknown successor {s!r} "
                        f"(stages are {sorted(names)})"
                    )
        total = sum(st.workers for st in self.stages)
        if total > MAX_TOTAL_WORKERS:
            raise PardValueError(f"stages: the workers sum to {total} over {len(self.stages)} stages, more than "
                                 f"MAX_TOTAL_WORKERS = {MAX_TOTAL_WORKERS} (one thread per worker in the live runtime)")
        targets = {s for st in self.stages for s in st.successors}
        if all(st.name in targets for st in self.stages):
            raise PardValueError(
                "stages: no entry stage: every stage is some stage's successor, so the graph has a "
                "cycle and requests have nowhere to enter"
            )
        succ = {st.name: st.successors for st in self.stages}
        cycle = find_cycle(succ)
        if cycle:
            raise PardValueError(f"stages: the successors form a cycle: {' -> '.join(cycle)}")
        n_paths = count_paths(succ, self.topological_order())
        if n_paths > MAX_PATHS:
            raise PardValueError(f"stages: the graph has {n_paths} entry-to-exit paths, more than MAX_PATHS = "
                                 f"{MAX_PATHS} (the planner evaluates every path each sync)")
        warn_unreachable_slo(self, self.slo)
        return self

    def model_post_init(self, context: Any, /) -> None:
        self._digest = spec_digest(self)

    # ---- construction ----------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "pipeline") -> PipelineSpec:
        """Build and validate a spec from plain data (as :meth:`to_dict` makes it).

        Raises:
            ConfigError: any invalid field; the message starts with ``source`` (e.g. a file name).
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: expected a mapping of pipeline fields, got {type(data).__name__}")
        _check_keys(source, "pipeline", data)
        stages = data.get("stages")
        if isinstance(stages, list):
            for i, st in enumerate(stages):
                if isinstance(st, Mapping):
                    _check_keys(source, f"stages[{i}]", st)
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
            UnknownStageError (a KeyError): an unknown stage name.  ConfigError: a count < 1.
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
        """Position of stage ``name`` in :attr:`stages`.  Raises UnknownStageError (a KeyError) if there is
        none."""
        for i, st in enumerate(self.stages):
            if st.name == name:
                return i
        raise UnknownStageError(f"pipeline {self.name!r} has no stage {name!r} (stages: {self.stage_names})")

    def stage(self, name: str) -> StageSpec:
        """The stage called ``name``.  Raises UnknownStageError (a KeyError) if there is none."""
        return self.stages[self.index(name)]

    def predecessors(self, name: str) -> list[str]:
        """Names of the stages that list ``name`` as a successor, in declaration order."""
        self.index(name)
        return [st.name for st in self.stages if name in st.successors]

    def entry_stages(self) -> list[str]:
        """Stages with no predecessor (where requests enter), in declaration order."""
        total = sum(st.workers for st in self.stages)
        if total > MAX_TOTAL_WORKERS:
            raise PardValueError(f"stages: the workers sum to {total} over {len(self.stages)} stages, more than "
                                 f"MAX_TOTAL_WORKERS = {MAX_TOTAL_WORKERS} (one thread per worker in the live runtime)")
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
        self.index(name)
        return downstream_paths({st.name: st.successors for st in self.stages}, name)

    def longest_path_duration(self, batch: Mapping[str, int] | None = None) -> float:
        """Largest sum of stage durations over the entry-to-exit paths, seconds.

        Each stage runs at ``batch[stage]`` (default: its :attr:`StageSpec.batch_limit`, the largest batch
        it forms).  This is the pipeline's execution time for one request that never queues or waits.
        """
        def d(n: str) -> float:
            st = self.stage(n)
            return st.duration(batch.get(n, st.batch_limit) if batch else st.batch_limit)

        return max(
            d(e) + sum(d(s) for s in path)
            for e in self.entry_stages()
            for path in self.downstream_paths(e)
        )

    # ---- capacity --------------------------------------------------------------------------

    def capacity(self) -> Capacity:
        """Each stage's and the pipeline's throughput bound at each stage's best batch size, req/s.

        Stage ``k``: ``workers_k * B_k / d_k(B_k)``, ``B_k`` its :attr:`StageSpec.batch_limit` (its
        ``max_batch`` unless a smaller batch has a higher throughput on its profile).  Every request visits every
        stage, so the pipeline bound is the minimum over stages (DAG included).
        """
        stages = {st.name: st.throughput() for st in self.stages}
        bottleneck = min(stages, key=stages.__getitem__)
        return Capacity(stages=stages, pipeline=stages[bottleneck], bottleneck=bottleneck)

    # ---- files -----------------------------------------------------------------------------

    def save(self, path: PathLike, *, format: Format | None = None) -> Path:
        """Write this spec to ``path`` (format from the suffix unless given).  Returns the path."""
        return save(self, path, format=format)


def _check_keys(source: str, where: str, data: Mapping[Any, Any]) -> None:
    """Field names must be strings (YAML also allows ``1:`` or ``null:`` keys)."""
    for k in data:
        if not isinstance(k, str):
            raise ConfigError(f"{source}: {where}: field names must be strings, got {k!r} "
                              f"({type(k).__name__})")


_NESTED_PREFIX = "invalid stage: "


def _describe(exc: ValidationError, what: str, data: Mapping[str, Any] | None = None) -> str:
    """One readable line per pydantic error: ``field path: problem (got value)``, followed by the
    stage's name when the error is inside a stage whose input has one (``... (stage 'ocr')``)."""
    lines = []
    stages = (data or {}).get("stages")
    for err in exc.errors(include_url=False):
        loc = ""
        parts = err["loc"]
        for part in parts:
            loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
        label = _stage_label(stages, parts[1]) if len(parts) > 1 and parts[0] == "stages" else ""
        msg = str(err["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if msg.startswith(_NESTED_PREFIX):
            # A nested StageSpec already described its own errors: put our location in front.
            for part in msg[len(_NESTED_PREFIX):].split("; "):
                field = re.match(r"^[A-Za-z_][\w.\[\]]*: ", part)
                lines.append((f"{loc}.{part}" if field and loc else f"{loc}: {part}" if loc else part) + label)
            continue
        text = f"{loc}: {msg}" if loc else msg
        if err["type"] not in ("value_error", "assertion_error") and "input" in err:
            shown = repr(err["input"])
            text += f" (got {shown[:80]}{'...' if len(shown) > 80 else ''})" + yaml11_hint(err["input"])
        lines.append(text + label)
    return f"invalid {what}: " + "; ".join(lines)


def _stage_label(stages: Any, i: Any) -> str:
    """`` (stage 'name')`` for stage ``i`` of the raw input when it has a string name, else ``""``."""
    if isinstance(stages, list) and isinstance(i, int) and 0 <= i < len(stages) and isinstance(stages[i], Mapping):
        name = stages[i].get("name")
        if isinstance(name, str):
            return f" (stage {name!r})"
    return ""

