"""The served-pipeline file: one YAML/TOML/JSON file says what ``pard serve`` runs and how.

```yaml
pipeline: tm                    # a built-in name, a spec file (relative to this file) or an inline spec
policy: pard                    # a policy name (pard.POLICIES)
planner: {sync_interval_s: 1.0, lam: 0.1}   # pard.PlannerConfig's fields
workers: {vehicle_detect: 1}    # per stage; default the spec's
stages:                         # per stage: an executor factory by import path, with kwargs;
  vehicle_detect:               # absent: pard's NumPy reference models (model_options)
    executor: pard.serve.factories:reference_model
    kwargs: {scale: 0.5}
model_options: {scale: 0.5}     # for the reference models when `stages` is absent
inputs: [{name: INPUT0, datatype: FP32, shape: [32, 32, 3]}]   # default: one FP32 INPUT0
outputs: [{name: OUTPUT0}]                                     # default: OUTPUT0 (one per exit stage)
server: {host: 127.0.0.1, port: 8000, drain_grace_s: 1.0, drain_timeout_s: 25.0,
         grpc_port: null,        # the gRPC front's port (KServe v2 GRPCInferenceService); null: none
         health_port: null,      # the health routes on a port of their own, answered by a thread; null: none
         max_body_bytes: null,   # null: the largest valid body for the declared inputs (body_limit_for)
         header_timeout_s: 5.0,  # a connection's request headers must be in within this (connections.py)
         max_connections: null,  # null: min(10 000, the open-file soft limit - 100)
         max_loop_lag_s: null}   # shed at the door while the event loop lags this much (null: SLO / 2; 0: never)
queue:                          # Triton's model-config queue fields, mapped onto pard's
  max_queue_size: 0             #   > 0: 429 once this many requests wait at the entry stage
  default_timeout_microseconds: 0   # > 0: the SLO of a request without its own timeout
  allow_timeout_override: true  #   false: client timeouts are ignored
  priority_levels: 0            # > 0: v2 parameters.priority p in 1..N -> the tier with the p-th largest weight
  default_priority_level: 0     #   the level of a request with priority 0 or none
```

A factory is ``module:function`` (or ``module:Class``) called with ``kwargs``, plus ``stage=``
(the :class:`pard.StageSpec`) and ``pipeline=`` (the :class:`pard.PipelineSpec`) when its signature
takes them; it returns the stage's executor (any callable ``list -> list``).  Every bad field
raises :class:`ServeConfigError` (a :class:`pard.ConfigError`) naming the file, the field and the
value.
"""

from __future__ import annotations

import dataclasses

import importlib
import inspect
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..config import PipelineSpec
from ..config import load as load_pipeline
from ..config.parsers import parse
from .._extras import require
from ..errors import ConfigError, PardValueError
from .protocol import DATATYPES, ProtocolError, datatype_of

__all__ = [
    "ServeConfigError",
    "ExecutorRef",
    "TensorSpec",
    "ServerOptions",
    "QueueOptions",
    "ServeConfig",
    "load_serve_config",
    "parse_serve_config",
    "body_limit_for",
    "check_body_fits",
    "sample_payload",
]


class ServeConfigError(ConfigError):
    """A served-pipeline file is invalid; the message names the file, the field and the value."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # "8000" or true for an int: refused


class ExecutorRef(_Strict):
    """A stage's executor: ``executor`` is ``module:factory``, called with ``kwargs``."""

    executor: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    kwargs: dict[str, Any] = {}


class TensorSpec(_Strict):
    """One input or output tensor of the served model's metadata (shape without a batch axis)."""

    name: str = Field(min_length=1)
    datatype: str = "FP32"
    shape: list[int] | None = None  # -1: a variable dimension (Triton's marker)
    stage: str | None = None  # outputs only: the exit stage it comes from (several exits)

    @field_validator("shape")
    @classmethod
    def _dims(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and any(d < -1 for d in v):
            raise PardValueError("dimensions must be >= 0, or -1 for a variable one")
        return v

    def fixed(self) -> bool:
        """Whether the shape is known and has no variable (-1) dimension."""
        return self.shape is not None and -1 not in self.shape

    def matches(self, shape: tuple[int, ...]) -> bool:
        """Whether an array's ``shape`` fits this tensor's (a -1 dimension takes any size)."""
        return self.shape is None or (len(shape) == len(self.shape) and
                                      all(e in (-1, g) for e, g in zip(self.shape, shape)))

    def check_output(self, array: np.ndarray) -> None:
        """Raise ProtocolError when a pipeline output breaks what this declared output promises clients:
        its shape (when given) or its datatype (when set in the file; the FP32 default is no promise)."""
        if not self.matches(tuple(array.shape)):
            raise ProtocolError(f"output {self.name!r} has shape {list(array.shape)}, but outputs declares "
                                f"{self.shape} (use -1 for a dimension that varies)")
        got = datatype_of(array)
        if "datatype" in self.model_fields_set and got != self.datatype:
            raise ProtocolError(f"output {self.name!r} is {got}, but outputs declares datatype {self.datatype}")


class ModelOptions(_Strict):
    """The reference models' options (``pard.serve.factories:reference_model``), when ``stages`` is absent."""

    scale: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    seed: int = 0


#: ``server.max_body_bytes`` when the inputs' sizes are not all known (not declared, a -1 dimension, BYTES)
DEFAULT_MAX_BODY_BYTES = 16 * 2**20
#: the derived limit's floor -- the size below which protocol.decode_request_async decodes on the event loop,
#: a millisecond or two -- and its ceiling (a larger tensor should travel binary, under an explicit limit)
MIN_BODY_BYTES = 256 * 2**10
MAX_DERIVED_BODY_BYTES = 2**30
#: a request's JSON around its tensors' data: id, parameters, names, shapes, datatypes, outputs
ENVELOPE_BYTES = 64 * 2**10
#: the JSON text around each number: its separator, and a line break and indentation when pretty-printed
JSON_SEPARATOR_BYTES = 16


def _raw_nbytes(t: TensorSpec) -> int | None:
    """The bytes of a fixed-shape input's data (the binary form), None when not known in advance."""
    if not t.fixed() or t.datatype not in DATATYPES or t.datatype == "BYTES":
        return None
    return math.prod(t.shape or []) * DATATYPES[t.datatype].itemsize


def _number_text_bytes(datatype: str) -> int:
    """The longest JSON text of one value of ``datatype``: ``false``, the integer type's most negative
    value, or a float64's longest shortest-round-trip repr (``-2.2250738585072014e-308``, 24 characters:
    clients write float32 values as doubles)."""
    dt = DATATYPES[datatype]
    if dt.kind == "b":
        return 5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return max(len(str(info.min)), len(str(info.max)))
    return 24


def body_limit_for(inputs: list[TensorSpec] | None) -> int:
    """The default ``server.max_body_bytes`` for ``inputs``: the largest valid body a request for them can
    be, in JSON (each element its longest number text plus :data:`JSON_SEPARATOR_BYTES`) or binary (the
    raw bytes), plus :data:`ENVELOPE_BYTES`; at least :data:`MIN_BODY_BYTES` and at most
    :data:`MAX_DERIVED_BODY_BYTES`.  Inputs not declared, or of a size not known in advance (a -1
    dimension, BYTES): at least :data:`DEFAULT_MAX_BODY_BYTES`."""
    known, unknown = 0, not inputs
    for t in inputs or []:
        raw = _raw_nbytes(t)
        if raw is None:
            unknown = True
            continue
        count = math.prod(t.shape or [])
        known += max(raw, count * (_number_text_bytes(t.datatype) + JSON_SEPARATOR_BYTES))
    limit = max(MIN_BODY_BYTES, known + ENVELOPE_BYTES, DEFAULT_MAX_BODY_BYTES if unknown else 0)
    return min(limit, MAX_DERIVED_BODY_BYTES)


def check_body_fits(t: TensorSpec, where: str, max_body_bytes: int, *, note: str = "") -> None:
    """ServeConfigError when a fixed-shape input takes more than ``max_body_bytes`` (its raw bytes, the
    least a request carrying it can send): every request would be refused 413.  ``note`` ends the message
    (how the limit was set)."""
    nbytes = _raw_nbytes(t)
    if nbytes is not None and nbytes > max_body_bytes:
        raise ServeConfigError(f"{where}: {t.shape} of {t.datatype} is {nbytes:.3g} bytes a request, above "
                               f"server.max_body_bytes {max_body_bytes}{note}")


def check_warm_outputs(outputs: list[TensorSpec], warm: Mapping[str, Any], exits: list[str], source: str) -> None:
    """ServeConfigError when the warm-up batch's output breaks a declared output (``outputs`` in the
    file): every answer would be a 500 output_error, so the server refuses to start instead."""
    for i, t in enumerate(outputs):
        stage = t.stage if t.stage is not None else (exits[0] if len(exits) == 1 else None)
        if stage is None or stage not in warm:
            continue
        try:
            t.check_output(np.asarray(warm[stage]))
        except ProtocolError as exc:
            raise ServeConfigError(f"{source}: outputs[{i}]: the warm-up batch's {exc}; every answer "
                                   f"would be a 500 output_error") from None


class ServerOptions(_Strict):
    """Where and how the HTTP server listens, and how it drains on SIGTERM/SIGINT."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    #: the gRPC front's port on ``host`` (KServe v2 GRPCInferenceService, :mod:`pard.serve.grpc_front`; 0: any
    #: free port); None: no gRPC front
    grpc_port: int | None = Field(default=None, ge=0, le=65535)
    #: a port on ``host`` answering only the health routes, from a thread of its own rather than the event loop
    #: (:mod:`pard.serve.health_port`: probes answered under any load; 0: any free port); None: none
    health_port: int | None = Field(default=None, ge=0, le=65535)
    #: the largest request body (bytes, 413 past it); not in the file: derived from ``inputs`` when the
    #: file is loaded (:func:`body_limit_for`), DEFAULT_MAX_BODY_BYTES here
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0)
    #: a connection that has not sent a request's headers this long (s) after it opened, or after its
    #: previous response, is closed (:mod:`pard.serve.connections`)
    header_timeout_s: float = Field(default=5.0, gt=0, allow_inf_nan=False)
    #: open connections at most; past it the oldest one waiting for its headers is closed, or the new one
    #: refused 503.  None: min(10 000, the open-file soft limit - 100), below the limit so accept() never fails
    max_connections: int | None = Field(default=None, ge=1)
    drain_grace_s: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    # 25 s: the drain and uvicorn's close of the connections left fit Kubernetes' default 30 s grace period
    drain_timeout_s: float = Field(default=25.0, gt=0, allow_inf_nan=False)
    #: shed at the door (429, before the body is read) while the event loop runs this far behind (s);
    #: None: half the pipeline's default SLO; 0: never
    max_loop_lag_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    model_name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.\-]+$")
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = "info"
    #: a 500's body carries the executor's exception text (True), or only the stage, the request id and
    #: the exception's type (False: the text may hold paths, inputs or secrets; the server log has it)
    error_detail: bool = False
    #: how long (s) past its deadline a request may wait for the pipeline before it is answered 504 and
    #: cancelled (a hung model otherwise holds its clients until shutdown); None: the default SLO
    answer_grace_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class QueueOptions(_Strict):
    """Triton's queue fields (``dynamic_batching.default_queue_policy`` and priorities)."""

    max_queue_size: int = Field(default=0, ge=0)
    default_timeout_microseconds: int = Field(default=0, ge=0)
    allow_timeout_override: bool = True
    priority_levels: int = Field(default=0, ge=0, le=2**31 - 1)
    default_priority_level: int = Field(default=0, ge=0)


class ServeConfig(_Strict):
    """A served pipeline (see the module docstring for the file's form)."""

    pipeline: str | dict[str, Any]
    policy: str = "pard"
    planner: dict[str, Any] | None = None
    workers: dict[str, int] | None = None
    stages: dict[str, ExecutorRef] | None = None
    model_options: ModelOptions | None = None
    inputs: list[TensorSpec] | None = None
    outputs: list[TensorSpec] | None = None
    warmup: bool = True
    server: ServerOptions = ServerOptions()
    queue: QueueOptions = QueueOptions()
    base_dir: str = "."  # the file's folder (relative pipeline paths); set by the loader
    source: str = "<serve config>"  # the file, for errors found when the pipeline is built; set by the loader

    @model_validator(mode="after")
    def _derive_body_limit(self) -> ServeConfig:
        """``server.max_body_bytes`` not given: the largest valid body for ``inputs`` (:func:`body_limit_for`),
        so a server is never open to bodies far larger than any request it can serve."""
        if "max_body_bytes" not in self.server.model_fields_set:
            fields = {**self.server.__dict__, "max_body_bytes": body_limit_for(self.inputs)}
            derived = ServerOptions.model_construct(self.server.model_fields_set, **fields)  # still "not given"
            object.__setattr__(self, "server", derived)  # frozen model: set once, while it is being built
        return self

    def body_limit_note(self) -> str:
        """How ``server.max_body_bytes`` was set, for error messages."""
        if "max_body_bytes" in self.server.model_fields_set:
            return ""
        return (f" (derived from inputs, at most {MAX_DERIVED_BODY_BYTES} bytes: set server.max_body_bytes "
                f"to allow more, and send the tensor binary)")

    # ------------------------------------------------------------------ derived
    def pipeline_spec(self) -> Any:
        """The :class:`pard.PipelineSpec` served.  Raises ServeConfigError naming ``pipeline``."""
        if isinstance(self.pipeline, dict):
            try:
                return PipelineSpec.from_dict(self.pipeline, source="pipeline")
            except ConfigError as exc:  # its message names the source, "pipeline", already
                raise ServeConfigError(str(exc)) from None
        path = Path(self.base_dir) / self.pipeline
        target = path if path.is_file() else self.pipeline
        try:
            return load_pipeline(target)
        except ConfigError as exc:  # its message starts with the file or name: say that once
            raise ServeConfigError(f"pipeline: {self.pipeline!r}: {str(exc).removeprefix(f'{target}: ')}") from None

    def default_slo_s(self, spec: Any) -> float:
        """The SLO of a request without its own timeout: ``default_timeout_microseconds``, else the spec's."""
        us = self.queue.default_timeout_microseconds
        return us * 1e-6 if us > 0 else float(spec.slo)

    def tier_of(self, priority: int | None, tiers: Mapping[str, float]) -> int:
        """Triton priority level -> pard tier code: level ``p`` (1 is the highest) is the tier with the
        ``p``-th largest weight among the pipeline's ``tiers`` (name -> weight, codes in declaration
        order; equal weights by code).  Level 0, or none, is ``default_priority_level``; with no
        levels configured, or level 0, tier 0 (the runtime's default).  By weight, not by code: a
        pipeline that declares ``{gold: 3, free: 1}`` has gold at code 0, and Triton's highest
        priority must reach gold."""
        n = self.queue.priority_levels
        p = priority or self.queue.default_priority_level
        weights = list(tiers.values())
        if n == 0 or p == 0 or not weights:
            return 0
        ranked = sorted(range(len(weights)), key=lambda code: (-weights[code], code))
        return ranked[min(p, len(ranked)) - 1]

    def build_executors(self, spec: Any) -> dict[str, Any] | None:
        """Stage name -> executor from the factories, or None (the reference models)."""
        if self.stages is None:
            return None
        return {name: _call_factory(f"stages.{name}", ref, spec.stage(name), spec)
                for name, ref in self.stages.items()}

    def check_against(self, spec: Any) -> None:
        """Cross-field checks that need the pipeline; ServeConfigError naming the field and value."""
        names = [st.name for st in spec.stages]
        for field_name, given in (("stages", self.stages), ("workers", self.workers)):
            unknown = sorted(set(given or {}) - set(names))
            if unknown:
                raise ServeConfigError(f"{field_name}: unknown stage(s) {unknown}; {spec.name!r} has {names}")
        if self.stages is not None:
            missing = [n for n in names if n not in self.stages]
            if missing:
                raise ServeConfigError(f"stages: no executor for stage(s) {missing} (give one per stage, "
                                       f"or omit `stages` for the reference models)")
        for field_name, tensors in (("inputs", self.inputs), ("outputs", self.outputs)):
            for i, t in enumerate(tensors or []):
                if t.datatype not in DATATYPES:
                    raise ServeConfigError(f"{field_name}[{i}].datatype: {t.datatype!r} is not one of "
                                           f"{sorted(DATATYPES)}")
                if t.stage is not None and field_name == "inputs":
                    raise ServeConfigError(f"inputs[{i}].stage: {t.stage!r}: only outputs name a stage (the exit "
                                           f"stage an output comes from); every input goes to the entry stages "
                                           f"{spec.entry_stages()}")
                if t.stage is not None and t.stage not in spec.exit_stages():
                    raise ServeConfigError(f"{field_name}[{i}].stage: {t.stage!r} is not an exit stage "
                                           f"of {spec.name!r} ({spec.exit_stages()})")
                if field_name == "inputs":  # the warm-up builds one; a request could not carry it
                    check_body_fits(t, f"inputs[{i}].shape", self.server.max_body_bytes, note=self.body_limit_note())
        sizes = [_raw_nbytes(t) for t in self.inputs or []]
        total = sum(n for n in sizes if n is not None)
        if len(sizes) > 1 and total > self.server.max_body_bytes:  # each fits, but a request carries them all
            raise ServeConfigError(f"inputs: the fixed-shape inputs take {total:.3g} bytes a request together, "
                                   f"above server.max_body_bytes {self.server.max_body_bytes}{self.body_limit_note()}")
        q = self.queue
        if q.priority_levels and q.default_priority_level > q.priority_levels:
            raise ServeConfigError(f"queue.default_priority_level: {q.default_priority_level} exceeds "
                                   f"queue.priority_levels {q.priority_levels}")
        codes = max(len(spec.tiers), 1)  # tier_of maps level p to the p-th tier by weight: N tiers needed
        if q.priority_levels > codes:
            tiers = f"declares tiers {list(spec.tiers)!r}" if spec.tiers else "declares no tiers (one code, 0)"
            raise ServeConfigError(f"queue.priority_levels: {q.priority_levels} levels map onto tiers 0..."
                                   f"{q.priority_levels - 1}, but pipeline {spec.name!r} {tiers}: declare "
                                   f"`tiers` in the pipeline, or set priority_levels to at most {codes}")
        if q.default_timeout_microseconds and not q.default_timeout_microseconds * 1e-6 <= 1e9:
            raise ServeConfigError(f"queue.default_timeout_microseconds: {q.default_timeout_microseconds} "
                                   f"is above 1e9 s")


def _call_factory(where: str, ref: ExecutorRef, stage: Any, spec: Any) -> Any:
    module_name, _, attr = ref.executor.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ServeConfigError(f"{where}.executor: cannot import module {module_name!r} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ServeConfigError(f"{where}.executor: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ServeConfigError(f"{where}.executor: {ref.executor!r} is not callable")
    kwargs = dict(ref.kwargs)
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):  # builtins without a signature: kwargs only
        params = {}  # type: ignore[assignment]
    for key, value in (("stage", stage), ("pipeline", spec)):
        if key in params and key not in kwargs:
            kwargs[key] = value
    try:
        executor = obj(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ServeConfigError(f"{where}.kwargs: {ref.executor}(**{ref.kwargs!r}) raised "
                               f"{type(exc).__name__}: {exc}") from None
    from ..executors.llm_engine import is_llm_engine

    if stage.kind == "llm" and is_llm_engine(executor):  # an engine is an llm stage's executor, not a callable
        return executor
    if not callable(executor):
        want = "an LLM engine or a factory of one" if stage.kind == "llm" else "an executor (a callable list -> list)"
        raise ServeConfigError(f"{where}.executor: {ref.executor!r} returned {type(executor).__name__}, not {want}")
    return executor


def _describe(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = err.get("input")
        shown = repr(value) if not isinstance(value, dict) or len(repr(value)) < 80 else "{...}"
        lines.append(f"{where}: {err['msg']} (got {shown})")
    return f"{source}: " + "; ".join(lines)


def parse_serve_config(data: Any, *, source: str = "<serve config>", base_dir: str = ".") -> ServeConfig:
    """Validate a served-pipeline mapping; ServeConfigError naming ``source``, the field and the value."""
    if not isinstance(data, Mapping):
        raise ServeConfigError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    from ..planner_config import PlannerConfig  # noqa: PLC0415 - light; the fields it names

    for name in (f.name for f in dataclasses.fields(PlannerConfig)):
        if name in data:
            raise ServeConfigError(f"{source}: {name}: set it inside planner (planner: {{{name}: "
                                   f"{data[name]!r}}}), with the planner's other settings")
    if "planner_options" in data:
        raise ServeConfigError(f"{source}: planner_options: the planner's settings are the planner section "
                               f"(planner: {{...}}, pard.PlannerConfig's fields)")
    try:
        cfg = ServeConfig(**{**dict(data), "base_dir": base_dir, "source": source})
    except ValidationError as exc:
        raise ServeConfigError(_describe(exc, source)) from None
    try:
        spec = cfg.pipeline_spec()
        cfg.check_against(spec)
    except ServeConfigError as exc:
        raise ServeConfigError(f"{source}: {exc}") from None
    _check_planner(cfg, spec, source)
    return cfg


def _check_planner(cfg: ServeConfig, spec: Any, source: str) -> None:
    """The ``planner`` settings as the runtime will take them (:class:`pard.PlannerConfig`), checked at
    load: ServeConfigError naming ``planner``'s field and its value."""
    from ..errors import PardError
    from ..planner import Planner
    from ..planner_config import PlannerConfig
    from ..wiring import planner_stages

    from ..policies import get_policy

    try:
        get_policy(cfg.policy)
    except (PardError, ValueError, KeyError) as exc:
        raise ServeConfigError(f"{source}: policy: {exc}") from None
    try:
        Planner(planner_stages(spec), policy=cfg.policy, **PlannerConfig.of(cfg.planner).planner_kwargs(0))
    except (PardError, ValueError, TypeError) as exc:
        msg = str(exc)
        raise ServeConfigError(f"{source}: {msg if msg.startswith('planner') else 'planner: ' + msg}") from None


def load_serve_config(path: str | Path) -> ServeConfig:
    """Read a served-pipeline file (``.yaml``/``.yml``, ``.toml`` or ``.json``).

    Raises: ServeConfigError for a missing or unreadable file, bad syntax, or a bad field.
    """
    p = Path(path)
    if not p.is_file():
        raise ServeConfigError(f"{path}: no such served-pipeline file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServeConfigError(f"{p}: cannot read the file: {exc}") from None
    suffix = p.suffix.lower()
    fmt = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}.get(suffix)
    if fmt is None:
        raise ServeConfigError(f"{p}: unknown suffix {p.suffix!r}; expected .yaml, .yml, .toml or .json")
    if fmt == "yaml":
        require("yaml", "serve", "served-pipeline YAML files")
    try:  # the pipeline files' hardened parsers: one-line errors with the line, no alias bombs
        data = parse(text, fmt, str(p))
    except ConfigError as exc:
        raise ServeConfigError(str(exc)) from None
    if data is None:
        raise ServeConfigError(f"{p}: the file is empty; it needs at least `pipeline:` (a built-in name, a spec "
                               f"file or an inline spec)")
    return parse_serve_config(data, source=str(p), base_dir=str(p.parent))


def sample_payload(tensors: list[TensorSpec]) -> Any:
    """A zero payload for warm-up: one array, or a dict of arrays for several inputs (None: unknown shape)."""
    if not all(t.fixed() for t in tensors):
        return None
    arrays = {t.name: np.zeros(t.shape or [], dtype=DATATYPES[t.datatype]) for t in tensors}
    return next(iter(arrays.values())) if len(arrays) == 1 else arrays
