"""``pard run`` step 1 and ``pard profile``: the measured pipeline on this machine -- from a file, the
cache, or measured now (:mod:`pard.profiling`) -- and the lines that say how it was obtained."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..models import engine_description
from ..profiling import ProfileResult, busy_cores, cached_profile, size_workers
from .parsers import load_spec, require_llm_engine

__all__ = ["sizing_line", "measure", "age", "run_profile"]


def sizing_line(spec: Any, workers: list[int], cores: int, models: str = "numpy") -> str:
    """One line: the cores, the worker counts, the engine and how busy the workers keep the cores."""
    parts = ", ".join(f"{st.name} x{w}" for st, w in zip(spec.stages, workers))
    threads = "1 ONNX Runtime thread" if models == "onnx" else "BLAS 1 thread"
    line = (f"sizing: {cores} cores -> workers {parts} ({sum(workers)} threads, {models} models: "
            f"{engine_description(models)}, {threads} per worker)")
    try:
        busy = busy_cores(spec, workers)
        line += f"; at capacity they keep ~{busy:.1f} cores busy"
        if busy > cores + 0.05:
            line += " (more than the cores: stages share them; the profile was measured that way)"
    except Exception:  # noqa: BLE001 - informative only
        pass
    return line


def measure(args: argparse.Namespace, spec: Any, cores: int, err: Any, *, refresh: bool) -> ProfileResult:
    """The cached profile of ``spec`` sized to ``cores`` (measured when missing, stale or ``refresh``)."""
    workers = size_workers(spec, cores)
    err.print(sizing_line(spec, workers, cores, args.models))
    t0 = time.perf_counter()
    res = cached_profile(spec, workers=workers, model_options={"scale": float(args.scale)}, models=args.models,
                         refresh=refresh, repeats=getattr(args, "repeats", 7))
    if res.cached:
        how = "cached" + (f", measured {age(res.age_s)} ago" if res.age_s is not None else "")
    else:
        how = f"measured in {time.perf_counter() - t0:.1f} s"
        if res.refreshed_because:
            how += f"; the cached one was {res.refreshed_because}"
    err.print(f"profile ({how}): {res.path}")
    return res


def age(age_s: float | None) -> str:
    """A duration for a message: ``42 s``, ``12 min``, ``3.5 h``."""
    if age_s is None:
        return "an unknown time"
    if age_s < 120:
        return f"{age_s:.0f} s"
    if age_s < 2 * 3600:
        return f"{age_s / 60:.0f} min"
    return f"{age_s / 3600:.1f} h"


def check_same_pipeline(named: Any, profile: Any, args: argparse.Namespace) -> None:
    """``--pipeline`` and ``--profile`` given together must describe one pipeline (the same stage names):
    a profile replaces the pipeline's spec, so a mismatch would silently run another pipeline."""
    want = [st.name for st in named.stages]
    got = [st.name for st in profile.stages]
    if want != got:
        raise UsageError(
            f"--profile {str(args.profile)!r} describes pipeline {profile.name!r} (stages {', '.join(got)}), but "
            f"--pipeline {args.pipeline!r} is {named.name!r} (stages {', '.join(want)}); leave --pipeline out to "
            f"run the profile's pipeline, or measure one for {named.name!r} with "
            f"`pard profile --pipeline {args.pipeline} --out FILE`")


def run_profile(args: argparse.Namespace, cores: int, err: Any) -> tuple[Any, dict[str, Any], Path | None]:
    """``pard run``'s pipeline: ``--profile FILE`` as given, else the cached or freshly measured one
    (measured on the ``args.models`` stage models, settled by :func:`~pard.cli.parsers.models_arg`).

    Returns the spec, the JSON block ``live.profile_used`` and the cache file (None for a given file).
    """
    cache_path: Path | None = None
    if args.profile is not None:
        if not args.profile.is_file():
            raise UsageError(
                f"--profile {str(args.profile)!r}: no such file (write one with `pard profile --out "
                f"{args.profile}`, or leave --profile out to use the cached or a freshly measured profile)")
        spec = load_spec("--profile", args.profile)
        require_llm_engine("--profile", args.profile, spec, "run")
        if getattr(args, "pipeline_given", False):
            check_same_pipeline(load_spec("--pipeline", args.pipeline), spec, args)
        mtime = args.profile.stat().st_mtime
        used = {"source": "file", "path": str(args.profile), "measured_at": mtime,
                "age_s": max(0.0, time.time() - mtime), "refreshed_because": None}
        err.print(f"profile: {args.profile} (as given, written {age(used['age_s'])} ago): pipeline {spec.name!r}")
        err.print(sizing_line(spec, [st.workers for st in spec.stages], cores, args.models))
    else:
        base = load_spec("--pipeline", args.pipeline)
        require_llm_engine("--pipeline", args.pipeline, base, "run")
        res = measure(args, base, cores, err, refresh=args.refresh_profile)
        spec = res.spec
        cache_path = res.path
        used = {"source": "cache" if res.cached else "measured now", "path": str(res.path),
                "measured_at": res.measured_at, "age_s": res.age_s, "refreshed_because": res.refreshed_because}
    used["measured_at_utc"] = (None if used["measured_at"] is None else
                               time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(used["measured_at"])))
    return spec, used, cache_path
