"""The profile cache: measured profiles keyed by machine, pipeline, workers, scale and version
(see :mod:`pard.profiling`)."""

from __future__ import annotations

import hashlib
import json

import os

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._cache import cache_dir
from .._version import __version__
from ..config import resolve_pipeline

from .measure import ProfileResult, machine_id, measure_profile

if TYPE_CHECKING:  # pragma: no cover
    from ..config import PipelineSpec

__all__ = ["cache_dir", "cached_profile", "mark_stale", "MAX_AGE_S"]

#: A cached profile older than this (s) is measured afresh by :func:`cached_profile` (12 hours).
MAX_AGE_S = 12 * 3600.0


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name.rsplit(".", 1)[0] + ".meta.json")


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(_meta_path(path).read_text())
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_meta(path: Path, doc: Mapping[str, Any]) -> None:
    meta = _meta_path(path)
    tmp = meta.with_name(f"{meta.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(dict(doc), indent=2))
    os.replace(tmp, meta)


def mark_stale(path: Path, reason: str) -> None:
    """Mark the cached profile at ``path`` stale: the next :func:`cached_profile` measures it afresh.

    Records ``reason`` in the entry's side file (``<entry>.meta.json``).  Raises OSError if the
    side file cannot be written.
    """
    doc = _read_meta(path)
    doc.setdefault("measured_at", path.stat().st_mtime if path.is_file() else None)
    doc["stale"] = True
    doc["stale_reason"] = str(reason)
    _write_meta(path, doc)


def _cache_key(spec: PipelineSpec, workers: Sequence[int], model_options: Mapping[str, Any] | None,
               models: str = "numpy") -> str:
    doc = {
        "machine": machine_id(),
        "pipeline": spec.to_dict(),
        "workers": list(workers),
        "model_options": dict(model_options or {}),
        "models": models,
        "version": __version__,
    }
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{spec.name}-{digest}"


def cached_profile(
    pipeline: PipelineSpec | str,
    *,
    workers: Sequence[int] | None = None,
    model_options: Mapping[str, Any] | None = None,
    models: str = "numpy",
    refresh: bool = False,
    directory: Path | None = None,
    max_age_s: float | None = MAX_AGE_S,
    **measure_options: Any,
) -> ProfileResult:
    """The measured profile of ``pipeline`` on this machine, from the cache or measured now.

    The cache key covers the machine (:func:`machine_id`), the pipeline's content, the worker
    counts, the models (``"numpy"`` or ``"onnx"``), ``model_options`` and pard's version; any change
    measures afresh.  A measured profile
    is written to ``<directory or cache_dir()>/profiles/<pipeline>-<key>.yaml``.

    Args:
        pipeline, workers, model_options, models, measure_options: as :func:`measure_profile`
            (built-in models only: custom executors are not cached).
        refresh: measure even when a cached profile exists.
        directory: the cache directory (default :func:`cache_dir`).
        max_age_s: measure afresh a cached profile older than this (s; default :data:`MAX_AGE_S`,
            12 h); None: any age.  A cached profile marked stale (:func:`mark_stale`) is always
            measured afresh.

    Returns:
        a :class:`ProfileResult` (``cached=True`` and empty ``samples`` when read from the cache;
        ``measured_at`` from the entry's side file, else the file's modification time;
        ``refreshed_because`` says why a cached entry was measured again).
    """
    from ..config import load

    spec = resolve_pipeline(pipeline)
    ws = [int(st.workers) for st in spec.stages] if workers is None else [int(w) for w in workers]
    root = (directory if directory is not None else cache_dir()) / "profiles"
    path = root / f"{_cache_key(spec, ws, model_options, models)}.yaml"
    why: str | None = None
    if path.is_file() and not refresh:
        meta = _read_meta(path)
        measured_at = meta.get("measured_at")
        if not isinstance(measured_at, (int, float)):
            measured_at = path.stat().st_mtime
        age = time.time() - float(measured_at)
        if meta.get("stale"):
            why = f"marked stale: {meta.get('stale_reason', 'no reason recorded')}"
        elif max_age_s is not None and age > max_age_s:
            why = f"older than {max_age_s / 3600:g} h ({age / 3600:.1f} h)"
        else:
            try:
                cached = load(path)
            except Exception:  # noqa: BLE001 - a damaged cache entry is measured again
                cached = None
                why = "the cached file could not be read"
            if cached is not None and [st.name for st in cached.stages] == [st.name for st in spec.stages]:
                return ProfileResult(cached, {}, ws, 0.0, machine_id(), path=path, cached=True,
                                     measured_at=float(measured_at))
    result = measure_profile(spec, workers=ws, model_options=model_options, models=models, **measure_options)
    root.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.yaml")
    result.spec.save(tmp)
    os.replace(tmp, path)
    _write_meta(path, {"measured_at": result.measured_at, "stale": False})
    result.path = path
    result.refreshed_because = why
    return result
