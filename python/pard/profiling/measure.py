"""Measuring a pipeline's latency profiles on this machine and sizing the live workers
(see :mod:`pard.profiling`)."""

from __future__ import annotations

import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._extras import available
from .._version import __version__
from ..config import resolve_pipeline
from ..errors import PardValueError
from .llm import llm_stage_fields, measure_llm

if TYPE_CHECKING:  # pragma: no cover
    from ..config import PipelineSpec

__all__ = ["measure_profile", "default_batch_sizes", "size_workers", "busy_cores", "machine_id", "ProfileResult"]


def default_batch_sizes(max_batch: int) -> list[int]:
    """Powers of two up to ``max_batch``, and ``max_batch`` itself: ``16 -> [1, 2, 4, 8, 16]``."""
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise PardValueError(f"max_batch must be an int >= 1, got {max_batch!r}")
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
        raise PardValueError(f"cores must be an int >= 1, got {cores!r}")
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
    from ..executors import gpu_available

    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count() or 1,
        "gpu": gpu_available(),
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


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
        llm: llm stage name -> :func:`pard.profiling.llm.measure_llm`'s whole measurement (fit errors,
            checks); empty when read from the cache or without an llm stage.
    """

    def __init__(self, spec: PipelineSpec, samples: dict[str, dict[int, list[float]]], workers: list[int],
                 wall_s: float, machine: dict[str, Any], path: Path | None = None, cached: bool = False,
                 measured_at: float | None = None, refreshed_because: str | None = None,
                 llm: dict[str, dict[str, Any]] | None = None) -> None:
        self.spec = spec
        self.llm = dict(llm or {})
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
    models: str = "numpy",
    progress: Callable[[str, int, int], None] | None = None,
) -> ProfileResult:
    """Time every stage at every batch size under the load the live run puts beside it; measure every
    llm stage's prefill and decode on its engine (:func:`pard.profiling.llm.measure_llm`).

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
        stages: stage name -> executor (called with a list of payloads); for an llm stage an LLM engine
            or a zero-argument factory of one; default the built-in stage models of kind ``models``
            (:func:`pard.models.stage_set`, ``model_options`` passed on; an llm stage's engine is the
            tiny llama on llama.cpp, extra ``pard[llm]``).
            An executor's ``bind(stage, workers=, threads=blas_threads)`` hook is called first.
        inputs: stage name -> ``make(b)`` returning ``b`` payloads for that stage; required with
            custom ``stages``; default random float32 arrays of each built-in model's input shape.
        workers: threads per stage (``spec.stages`` order); default the spec's ``workers``.
        batch_sizes: stage name -> the batch sizes to time; default :func:`default_batch_sizes` of
            each stage's ``max_batch``.
        warmup: untimed runs per batch size and worker before the timed ones (>= 0).
        repeats: timed runs per batch size and worker (>= 1); the profile point is the median over
            every worker's runs.  An llm stage is measured on one engine, alone, with
            ``min(repeats, 3)`` repeats of each decode count and prompt length.
        co_load: the background load, see above.
        blas_threads: BLAS threads during the measurement (as the runtime; None leaves it), also the
            ``threads`` an executor's ``bind`` hook gets.  The BLAS limit needs threadpoolctl (the
            ``pard[cli]`` extra): without it the measurement goes on with BLAS's own thread count, as
            ``Runtime(blas_threads="auto")`` runs then, so the profile matches that runtime (an
            embedder with only ``pard[onnx]`` times its ONNX Runtime sessions, whose threads ``bind``
            sets, either way).
        models: the built-in models measured when ``stages`` is None: ``"numpy"`` (default, the
            reference models) or ``"onnx"`` (the ONNX stage models, as ``pard run`` uses).
        progress: called as ``progress(stage, done, total)`` after each batch size of each worker.

    Returns:
        a :class:`ProfileResult`; its ``spec`` has, per stage, ``profile = {b: median d(b)}``
        made non-decreasing in ``b`` (a running maximum: noise must not make a bigger batch look
        cheaper, which ``StageSpec`` rejects), and ``workers`` as measured; per llm stage the
        measured ``prefill``, ``decode``, ``max_seqs`` and ``kv_tokens`` (the engine's context).

    Raises:
        ValueError / TypeError: bad arguments (named); whatever an executor raises propagates.
    """
    spec = resolve_pipeline(pipeline)
    llm = {st.name for st in spec.stages if st.kind == "llm"}
    names = [st.name for st in spec.stages if st.name not in llm]  # the batch-timed stages
    every = [st.name for st in spec.stages]
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise PardValueError(f"warmup must be an int >= 0, got {warmup!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise PardValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if co_load not in ("capacity", "full", "none"):
        raise PardValueError(f"co_load must be 'capacity', 'full' or 'none', got {co_load!r}")
    ws = [int(st.workers) for st in spec.stages] if workers is None else [int(w) for w in workers]
    if len(ws) != len(every) or any(w < 1 for w in ws):
        raise PardValueError(f"workers must list one int >= 1 per stage ({len(every)}), got {list(workers or [])!r}")

    if stages is None:
        from ..models import stage_set

        built = stage_set(spec, models, **dict(model_options or {}))
        executors: dict[str, Any] = dict(built.executors)
        if inputs is None:
            def _maker(shape: tuple[int, ...], seed: int) -> Callable[[int], Any]:
                rng = np.random.default_rng(seed)
                return lambda b: list(rng.random((b, *shape), dtype=np.float32))
            inputs = {n: _maker(shape, i) for i, (n, shape) in enumerate(built.input_shapes.items())}
    else:
        from ..executors import as_executor

        missing = [n for n in every if n not in stages]
        if missing:
            raise PardValueError(f"stages lacks an executor for {missing}")
        if inputs is None or any(n not in inputs for n in names):
            raise PardValueError("custom stages need inputs: stage name -> make(b) returning b payloads, for every "
                                 "dnn stage")
        executors = {n: as_executor(stages[n]) for n in names}
        executors.update({n: stages[n] for n in llm})
    for st, w in zip(spec.stages, ws):  # engine executors: sessions per worker, server config checks
        if st.name in llm:
            continue
        bind = getattr(executors[st.name], "bind", None)
        if callable(bind):
            bind(st, workers=w, threads=blas_threads)
    makers: Mapping[str, Callable[[int], Any]] = inputs
    sizes = {}
    for st in spec.stages:
        if st.name in llm:
            continue
        bs = default_batch_sizes(int(st.max_batch)) if batch_sizes is None or st.name not in batch_sizes \
            else sorted({int(b) for b in batch_sizes[st.name]})
        if not bs or bs[0] < 1:
            raise PardValueError(f"batch_sizes[{st.name!r}] must hold ints >= 1, got {bs!r}")
        sizes[st.name] = bs
    duty = dict(zip(every, _duty_cycles(spec, ws)))
    wk = dict(zip(every, ws))
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
    if blas_threads is not None and available("threadpoolctl"):  # optional: see blas_threads above
        from threadpoolctl import threadpool_limits

        ctx = threadpool_limits(limits=blas_threads, user_api="blas")
    t_start = time.perf_counter()
    try:
        for name in names:
            if errors:
                break
            stop = threading.Event()
            gate = threading.Barrier(wk[name])
            bg = []
            if co_load != "none":
                for other in names:
                    if other == name:
                        continue
                    u = 1.0 if co_load == "full" else duty[other]
                    bg += [threading.Thread(target=background, args=(other, u, stop), daemon=True)
                           for _ in range(wk[other])]
            timed_threads = [threading.Thread(target=measure, args=(name, {b: makers[name](b) for b in sizes[name]},
                                                                    gate), daemon=True) for _ in range(wk[name])]
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
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real:
        raise real[0]
    llm_docs = {n: _measure_llm_stage(executors[n], min(repeats, 3)) for n in every if n in llm}
    wall = time.perf_counter() - t_start

    data = spec.to_dict()
    for st_data, w in zip(data["stages"], ws):
        if st_data["name"] in llm:
            doc = llm_docs[st_data["name"]]
            st_data.update(llm_stage_fields(doc), workers=w)
            st_data["description"] = f"{st_data.get('description', '')} [measured on {doc['engine']}]".strip()
            continue
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
    return ProfileResult(measured, samples, ws, wall, machine_id(), measured_at=time.time(), llm=llm_docs)


def _measure_llm_stage(executor: Any, repeats: int) -> dict[str, Any]:
    """:func:`pard.profiling.llm.measure_llm` on an llm stage's engine (one made by the factory
    ``executor`` is closed afterwards), alone: its cost is the engine's, not a batch's.  The prefill is
    matched to the bundled Azure trace's prompt lengths, the ones ``pard run`` and ``pard simulate``
    give an llm pipeline's requests, and the running sequences hold their mean."""
    from ..executors.llm_engine import is_llm_engine

    from ..workloads import azure_llm_conv

    engine = executor if is_llm_engine(executor) else executor()
    try:  # the prefill matched to the prompts of the bundled trace, the token counts pard runs replay
        ins = azure_llm_conv(tokens=True).in_tokens
        assert ins is not None  # the bundled trace carries its token counts
        doc = measure_llm(engine, repeats=repeats, prompt_sample=ins, context_tokens=int(ins.mean()))
        doc["engine"] = repr(engine)
        return doc
    finally:
        if engine is not executor:
            engine.close()
