"""Measure a pipeline's latency profiles on this machine, size the live workers, cache the result.

``pard profile`` and ``pard run`` call :func:`measure_profile`: for every stage it times the
stage's executor (by default the reference model of :mod:`pard.models`) at each batch size --
warm-up runs first, then the median of ``repeats`` timed runs -- and returns the
:class:`pard.config.PipelineSpec` with those measured profiles and the worker counts used.  The
result is an ordinary spec file (YAML, as :func:`pard.config.save` writes it), so ``pard run
--profile FILE`` and ``pard simulate --pipeline FILE`` both accept it.

Measuring under load.  The live runtime runs every worker of every stage at once, one thread
each, with BLAS limited to one thread (threadpoolctl).  On a machine with fewer cores than
workers, a stage's batches run slower while the other stages compute.  So each stage is timed
while the other stages' workers run background batches with the duty cycle they would have with
the pipeline at capacity (the bottleneck's workers always busy, the others the fraction of time
their share of the work needs).  The profile then holds for an overloaded live run, which is the
regime that matters; under light load batches run a little faster than profiled.

Sizing.  :func:`size_workers` fits the spec's worker counts to the cores: unchanged when they fit,
else scaled down in proportion (at least one per stage).  :func:`busy_cores` estimates how many
cores the workers keep busy when the pipeline runs at capacity.

Cache.  :func:`cached_profile` keys a profile by machine (host, CPU model, cores, GPU), pipeline
(the spec's content), worker counts, model scale and pard version, under ``$PARD_CACHE_DIR`` or
``$XDG_CACHE_HOME/pard`` or ``~/.cache/pard``.  A side file ``<entry>.meta.json`` records when the
entry was measured and whether it was marked stale.  A cached profile is measured afresh when it
was marked stale (:func:`mark_stale`: ``pard run`` does so when a live run's batches drift more
than :data:`DRIFT_LIMIT` from it on the bottleneck stage, see :func:`profile_drift`) or when it is
older than :data:`MAX_AGE_S` (the load a machine carries changes over hours).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from .config import PipelineSpec

__all__ = [
    "measure_profile",
    "default_batch_sizes",
    "size_workers",
    "busy_cores",
    "machine_id",
    "cache_dir",
    "cached_profile",
    "ProfileResult",
    "profile_from_batches",
    "profile_drift",
    "mark_stale",
    "MAX_AGE_S",
    "DRIFT_LIMIT",
]

#: A cached profile older than this (s) is measured afresh by :func:`cached_profile` (12 hours).
MAX_AGE_S = 12 * 3600.0
#: ``pard run`` warns and marks the cached profile stale when the bottleneck stage's batches ran
#: more than this fraction slower or faster than profiled (:func:`profile_drift`).
DRIFT_LIMIT = 0.25


def default_batch_sizes(max_batch: int) -> list[int]:
    """Powers of two up to ``max_batch``, and ``max_batch`` itself: ``16 -> [1, 2, 4, 8, 16]``."""
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"max_batch must be an int >= 1, got {max_batch!r}")
    sizes = [1 << i for i in range(max_batch.bit_length()) if (1 << i) <= max_batch]
    if sizes[-1] != max_batch:
        sizes.append(max_batch)
    return sizes


def size_workers(spec: PipelineSpec, cores: int) -> list[int]:
    """Worker counts per stage (``spec.stages`` order) that fit ``cores``.

    The spec's counts when their sum is at most ``cores``; otherwise each count scaled by
    ``cores / sum`` and rounded down, at least 1, then the spare cores handed back one at a time to
    the stage whose count was cut the most (relative to the spec).  With fewer cores than stages
    every stage keeps one worker (the sum then exceeds ``cores``: stages share cores).

    Raises:
        ValueError: ``cores`` is not an int >= 1.
    """
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be an int >= 1, got {cores!r}")
    want = [int(st.workers) for st in spec.stages]
    total = sum(want)
    if total <= cores:
        return want
    got = [max(1, int(w * cores / total)) for w in want]
    while sum(got) < cores:
        k = max(range(len(want)), key=lambda i: (want[i] / got[i], -i))
        if got[k] >= want[k]:
            break
        got[k] += 1
    return got


def busy_cores(spec: PipelineSpec, workers: Sequence[int] | None = None) -> float:
    """Cores kept busy when the pipeline runs at capacity: ``sum_k X * d_k(b_k) / b_k``.

    ``X`` is the pipeline's throughput bound ``min_k workers_k * b_k / d_k(b_k)`` at max batch
    sizes; each stage's workers are busy ``X * d_k(b_k) / b_k`` of the time in total.
    """
    ws = [int(st.workers) for st in spec.stages] if workers is None else list(workers)
    per_req = [st.duration(st.max_batch) / st.max_batch for st in spec.stages]
    x = min(w / c for w, c in zip(ws, per_req))
    return float(sum(x * c for c in per_req))


def machine_id() -> dict[str, Any]:
    """What identifies this machine for the profile cache: host, CPU model, cores, GPU, NumPy."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    from .executors import gpu_available

    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count() or 1,
        "gpu": gpu_available(),
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def cache_dir() -> Path:
    """``$PARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/pard``, else ``~/.cache/pard``."""
    env = os.environ.get("PARD_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pard"


class ProfileResult:
    """A measured pipeline: the spec (measured profiles, worker counts), raw timings, and how.

    Attributes:
        spec: the :class:`~pard.config.PipelineSpec` with measured profiles and ``workers``.
        samples: stage -> batch size -> the timed durations (s), before the median.
        workers: worker counts per stage (``spec.stages`` order).
        wall_s: how long the measurement took (s).
        machine: :func:`machine_id` of the machine measured on.
        path: the file it was loaded from or saved to, if any.
        cached: True when it came from the cache.
        measured_at: when it was measured (Unix time, s), if known.
        refreshed_because: why a cached entry was measured afresh (marked stale, too old), else None.
    """

    def __init__(self, spec: PipelineSpec, samples: dict[str, dict[int, list[float]]], workers: list[int],
                 wall_s: float, machine: dict[str, Any], path: Path | None = None, cached: bool = False,
                 measured_at: float | None = None, refreshed_because: str | None = None) -> None:
        self.spec = spec
        self.samples = samples
        self.workers = workers
        self.wall_s = wall_s
        self.machine = machine
        self.path = path
        self.cached = cached
        self.measured_at = measured_at
        self.refreshed_because = refreshed_because

    @property
    def age_s(self) -> float | None:
        """Seconds since it was measured (None when unknown)."""
        return None if self.measured_at is None else max(0.0, time.time() - self.measured_at)

    def __repr__(self) -> str:
        return (f"ProfileResult({self.spec.name!r}, workers={self.workers}, wall_s={self.wall_s:.1f}, "
                f"cached={self.cached}, path={str(self.path) if self.path else None!r})")


def _duty_cycles(spec: PipelineSpec, workers: Sequence[int]) -> list[float]:
    """Each stage's busy fraction per worker when the pipeline runs at capacity, from the spec's profiles.

    ``X = min_k w_k / c_k`` with ``c_k = d_k(max_batch) / max_batch``; stage ``k``'s workers are each
    busy ``X * c_k / w_k`` of the time (1 at the bottleneck).
    """
    per_req = [st.duration(st.max_batch) / st.max_batch for st in spec.stages]
    x = min(w / c for w, c in zip(workers, per_req))
    return [min(1.0, x * c / w) for w, c in zip(workers, per_req)]


def measure_profile(
    pipeline: PipelineSpec | str,
    stages: Mapping[str, Any] | None = None,
    *,
    inputs: Mapping[str, Callable[[int], Any]] | None = None,
    workers: Sequence[int] | None = None,
    batch_sizes: Mapping[str, Sequence[int]] | None = None,
    warmup: int = 2,
    repeats: int = 7,
    co_load: str = "capacity",
    blas_threads: int | None = 1,
    model_options: Mapping[str, Any] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> ProfileResult:
    """Time every stage at every batch size under the load the live run puts beside it.

    Stages are measured one after another.  While stage ``k``'s workers are timed (all of them at
    once), the other stages' workers run batches of their largest size as background load:

    * ``co_load="capacity"`` (default): each background worker is busy the fraction of time it
      would be when the pipeline runs at capacity (:func:`_duty_cycles`, from the spec's relative
      costs: 1 for the bottleneck, less elsewhere), then idles -- the contention of an overloaded
      live run, so the profile holds under load;
    * ``"full"``: every background worker runs flat out (an upper bound on contention);
    * ``"none"``: no background load (each stage alone; a lower bound).

    Args:
        pipeline: a PipelineSpec, a built-in name or a spec file (as :func:`pard.config.load`).
        stages: stage name -> executor (called with a list of payloads); default the reference
            models of :mod:`pard.models` (``model_options`` passed on) in ArrayExecutors.
        inputs: stage name -> ``make(b)`` returning ``b`` payloads for that stage; required with
            custom ``stages``; default random float32 arrays of each reference model's input shape.
        workers: threads per stage (``spec.stages`` order); default the spec's ``workers``.
        batch_sizes: stage name -> the batch sizes to time; default :func:`default_batch_sizes` of
            each stage's ``max_batch``.
        warmup: untimed runs per batch size and worker before the timed ones (>= 0).
        repeats: timed runs per batch size and worker (>= 1); the profile point is the median over
            every worker's runs.
        co_load: the background load, see above.
        blas_threads: BLAS threads during the measurement (as the runtime; None leaves it).
        progress: called as ``progress(stage, done, total)`` after each batch size of each worker.

    Returns:
        a :class:`ProfileResult`; its ``spec`` has, per stage, ``profile = {b: median d(b)}``
        made non-decreasing in ``b`` (a running maximum: noise must not make a bigger batch look
        cheaper, which ``StageSpec`` rejects), and ``workers`` as measured.

    Raises:
        ValueError / TypeError: bad arguments (named); whatever an executor raises propagates.
    """
    spec = _resolve(pipeline)
    names = [st.name for st in spec.stages]
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if co_load not in ("capacity", "full", "none"):
        raise ValueError(f"co_load must be 'capacity', 'full' or 'none', got {co_load!r}")
    ws = [int(st.workers) for st in spec.stages] if workers is None else [int(w) for w in workers]
    if len(ws) != len(names) or any(w < 1 for w in ws):
        raise ValueError(f"workers must list one int >= 1 per stage ({len(names)}), got {list(workers or [])!r}")

    if stages is None:
        from .executors import ArrayExecutor
        from .models import reference_models

        models = reference_models(spec, **dict(model_options or {}))
        executors: dict[str, Any] = {n: ArrayExecutor(m) for n, m in models.items()}
        if inputs is None:
            def _maker(shape: tuple[int, ...], seed: int) -> Callable[[int], Any]:
                rng = np.random.default_rng(seed)
                return lambda b: list(rng.random((b, *shape), dtype=np.float32))
            inputs = {n: _maker(m.input_shape, i) for i, (n, m) in enumerate(models.items())}
    else:
        from .executors import as_executor

        missing = [n for n in names if n not in stages]
        if missing:
            raise ValueError(f"stages lacks an executor for {missing}")
        if inputs is None or any(n not in inputs for n in names):
            raise ValueError("custom stages need inputs: stage name -> make(b) returning b payloads, for every stage")
        executors = {n: as_executor(stages[n]) for n in names}
    makers: Mapping[str, Callable[[int], Any]] = inputs
    sizes = {}
    for st in spec.stages:
        bs = default_batch_sizes(int(st.max_batch)) if batch_sizes is None or st.name not in batch_sizes \
            else sorted({int(b) for b in batch_sizes[st.name]})
        if not bs or bs[0] < 1:
            raise ValueError(f"batch_sizes[{st.name!r}] must hold ints >= 1, got {bs!r}")
        sizes[st.name] = bs
    duty = _duty_cycles(spec, ws)
    biggest = {n: makers[n](sizes[n][-1]) for n in names}

    samples: dict[str, dict[int, list[float]]] = {n: {b: [] for b in sizes[n]} for n in names}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def measure(name: str, batches: dict[int, Any], gate: threading.Barrier) -> None:
        ex = executors[name]
        try:
            gate.wait()
            for i, b in enumerate(sizes[name]):
                payload = batches[b]
                for _ in range(warmup):
                    ex(payload)
                timed = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    ex(payload)
                    timed.append(time.perf_counter() - t0)
                with lock:
                    samples[name][b].extend(timed)
                if progress is not None:
                    progress(name, i + 1, len(sizes[name]))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            with lock:
                errors.append(e)
            gate.abort()

    def background(name: str, u: float, stop: threading.Event) -> None:
        ex = executors[name]
        try:
            while not stop.is_set():
                t0 = time.perf_counter()
                ex(biggest[name])
                busy = time.perf_counter() - t0
                if u < 1.0:
                    stop.wait(busy * (1.0 - u) / max(u, 1e-3))
        except BaseException as e:  # noqa: BLE001
            with lock:
                errors.append(e)

    ctx = None
    if blas_threads is not None:
        from threadpoolctl import threadpool_limits

        ctx = threadpool_limits(limits=blas_threads, user_api="blas")
    t_start = time.perf_counter()
    try:
        for k, name in enumerate(names):
            if errors:
                break
            stop = threading.Event()
            gate = threading.Barrier(ws[k])
            bg = []
            if co_load != "none":
                for j, other in enumerate(names):
                    if j == k:
                        continue
                    u = 1.0 if co_load == "full" else duty[j]
                    bg += [threading.Thread(target=background, args=(other, u, stop), daemon=True)
                           for _ in range(ws[j])]
            timed_threads = [threading.Thread(target=measure, args=(name, {b: makers[name](b) for b in sizes[name]},
                                                                    gate), daemon=True) for _ in range(ws[k])]
            for t in bg:
                t.start()
            for t in timed_threads:
                t.start()
            for t in timed_threads:
                t.join()
            stop.set()
            for t in bg:
                t.join()
    finally:
        if ctx is not None:
            ctx.restore_original_limits()
    wall = time.perf_counter() - t_start
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real:
        raise real[0]

    data = spec.to_dict()
    for st_data, w in zip(data["stages"], ws):
        prof: dict[int, float] = {}
        running = 0.0
        for b in sizes[st_data["name"]]:
            running = max(running, statistics.median(samples[st_data["name"]][b]))
            prof[b] = float(running)
        st_data["profile"] = prof
        st_data["workers"] = w
    note = (f"[profile measured by pard {__version__} on {platform.node()}, {sum(ws)} workers, "
            f"co-load {co_load}]")
    data["description"] = f"{data.get('description', '')} {note}".strip()
    measured = type(spec).from_dict(data, source="measured profile")
    return ProfileResult(measured, samples, ws, wall, machine_id(), measured_at=time.time())


def profile_from_batches(
    spec: PipelineSpec, batches: Mapping[str, np.ndarray], *, min_samples: int = 3
) -> PipelineSpec:
    """``spec`` with each stage's profile re-fitted to executed batches (e.g. ``Runtime.batches()``).

    For every stage and batch size seen at least ``min_samples`` times, the median duration
    becomes the profile point; sizes seen less often keep the spec's ``d(b)``; the result is made
    non-decreasing in ``b`` (running maximum).  Used to tell, after a live run, how much of a
    live-vs-simulated difference comes from the machine running slower or faster than profiled.

    Args:
        spec: the pipeline (stage order = the ``stage`` codes of ``batches``).
        batches: ``stage`` (int), ``size`` (int), ``duration_s`` (float) arrays of equal length.
    """
    st_idx = np.asarray(batches["stage"], dtype=np.int64)
    size = np.asarray(batches["size"], dtype=np.int64)
    dur = np.asarray(batches["duration_s"], dtype=np.float64)
    data = spec.to_dict()
    for k, st_data in enumerate(data["stages"]):
        st = spec.stages[k]
        here = st_idx == k
        points = {int(b): float(st.duration(int(b))) for b in st.profile}
        for b in np.unique(size[here]).tolist():
            sel = dur[here & (size == b)]
            if sel.size >= min_samples:
                points[int(b)] = float(np.median(sel))
        prof: dict[int, float] = {}
        running = 0.0
        for b in sorted(points):
            running = max(running, points[b])
            prof[b] = running
        st_data["profile"] = prof
    return type(spec).from_dict(data, source="profile fitted to batches")


def profile_drift(spec: PipelineSpec, batches: Mapping[str, np.ndarray], *, min_samples: int = 3) -> dict[str, float]:
    """How fast each stage ran against its profile: the median of ``duration / d(size)`` over its batches.

    1.0: as profiled; 1.4: batches took 40 % longer than the profile says (the machine is busier
    than when it was profiled); 0.7: 30 % shorter.  Every executed batch counts, whatever its
    size, so the check works under light load too (when no batch reaches ``max_batch``).

    Args:
        spec: the pipeline whose profiles are checked (stage order = the ``stage`` codes).
        batches: ``stage`` (int), ``size`` (int), ``duration_s`` (float) arrays of equal length,
            e.g. ``Runtime.batches()`` (several runs' arrays may be concatenated).
        min_samples: stages with fewer batches than this are left out.

    Returns:
        stage name -> ratio, for the stages with at least ``min_samples`` batches.
    """
    st_idx = np.asarray(batches["stage"], dtype=np.int64)
    size = np.asarray(batches["size"], dtype=np.int64)
    dur = np.asarray(batches["duration_s"], dtype=np.float64)
    out: dict[str, float] = {}
    for k, st in enumerate(spec.stages):
        here = st_idx == k
        if int(here.sum()) < max(1, min_samples):
            continue
        sizes = size[here]
        expected = np.array([st.duration(int(b)) for b in sizes.tolist()])
        out[st.name] = float(np.median(dur[here] / expected))
    return out


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


def _resolve(pipeline: Any) -> PipelineSpec:
    from .config import PipelineSpec, load

    if isinstance(pipeline, PipelineSpec):
        return pipeline
    if isinstance(pipeline, (str, os.PathLike)):
        return load(os.fspath(pipeline))
    raise TypeError(f"pipeline must be a PipelineSpec, a built-in name or a path, got {type(pipeline).__name__}")


def _cache_key(spec: PipelineSpec, workers: Sequence[int], model_options: Mapping[str, Any] | None) -> str:
    doc = {
        "machine": machine_id(),
        "pipeline": spec.to_dict(),
        "workers": list(workers),
        "model_options": dict(model_options or {}),
        "version": __version__,
    }
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{spec.name}-{digest}"


def cached_profile(
    pipeline: PipelineSpec | str,
    *,
    workers: Sequence[int] | None = None,
    model_options: Mapping[str, Any] | None = None,
    refresh: bool = False,
    directory: Path | None = None,
    max_age_s: float | None = MAX_AGE_S,
    **measure_options: Any,
) -> ProfileResult:
    """The measured profile of ``pipeline`` on this machine, from the cache or measured now.

    The cache key covers the machine (:func:`machine_id`), the pipeline's content, the worker
    counts, ``model_options`` and pard's version; any change measures afresh.  A measured profile
    is written to ``<directory or cache_dir()>/profiles/<pipeline>-<key>.yaml``.

    Args:
        pipeline, workers, model_options, measure_options: as :func:`measure_profile` (reference
            models only: custom executors are not cached).
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
    from .config import load

    spec = _resolve(pipeline)
    ws = [int(st.workers) for st in spec.stages] if workers is None else [int(w) for w in workers]
    root = (directory if directory is not None else cache_dir()) / "profiles"
    path = root / f"{_cache_key(spec, ws, model_options)}.yaml"
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
    result = measure_profile(spec, workers=ws, model_options=model_options, **measure_options)
    root.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.yaml")
    result.spec.save(tmp)
    os.replace(tmp, path)
    _write_meta(path, {"measured_at": result.measured_at, "stale": False})
    result.path = path
    result.refreshed_because = why
    return result
