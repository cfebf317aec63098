"""The PARD paper artifact's JSON module format (``name``, ``id``, ``pres``, ``subs``), read into a
:class:`pard.config.PipelineSpec`."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, PardTypeError, PardValueError
from .models import MAX_SLO_S, PipelineSpec

__all__ = ["from_module_json", "is_module_format"]


def is_module_format(data: Any) -> bool:
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
    or an object ``{"name": ..., "slo": <s> | "slo_ms": <ms>, "tiers": {...}, "modules": [...]}``
    (at most one of ``slo`` and ``slo_ms``).
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
        ConfigError: a missing or inconsistent field (names the module and the field), or both
            ``slo`` and ``slo_ms`` (names both and their values).
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
    if "slo" in meta and "slo_ms" in meta:  # as the latency fields: one unit, never two values to choose from
        raise ConfigError(f"{source}: expected at most one of 'slo' (s) or 'slo_ms', got both: "
                          f"slo={meta['slo']!r}, slo_ms={meta['slo_ms']!r}")
    if slo is None:
        if "slo" in meta:
            slo = meta["slo"]
        elif "slo_ms" in meta:
            try:
                if isinstance(meta["slo_ms"], bool):
                    raise PardTypeError("a boolean is not a number")
                slo = float(meta["slo_ms"]) / 1000.0
                if not 0.0 < slo <= MAX_SLO_S:  # say slo_ms, the field the file has, not slo
                    raise PardValueError("out of range")
            except (TypeError, ValueError, OverflowError):
                raise ConfigError(f"{source}: slo_ms must be a number of milliseconds in (0, {MAX_SLO_S * 1e3:g}], "
                                  f"got {meta['slo_ms']!r}") from None
    if pname is None or slo is None:
        raise ConfigError(f"{source}: the module list needs a pipeline name and an SLO: wrap it as "
                          f"{{\"name\": ..., \"slo_ms\": ..., \"modules\": [...]}}, or from Python pass "
                          f"from_module_json(..., name=, slo=)")

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
            values = raw if isinstance(raw, list) else list(raw.values()) if isinstance(raw, dict) else []
            if any(isinstance(x, bool) for x in values):
                raise PardTypeError(f"{keys[0]} durations must be numbers, not booleans")
            if keys[0] == "durations_ms":
                if not isinstance(raw, list):
                    raise PardTypeError("durations_ms must be a list")
                profile = {b + 1: float(d) / 1000.0 for b, d in enumerate(raw)}
            else:
                if not isinstance(raw, dict):
                    raise PardTypeError(f"{keys[0]} must be an object of batch size -> duration")
                scale = 1000.0 if keys[0] == "profile_ms" else 1.0
                profile = {int(b): float(d) / scale for b, d in raw.items()}
        except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: an int past float's range
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
