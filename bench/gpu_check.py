"""The GPU path, measured: CuPy ArrayExecutor and ONNX Runtime's CUDA provider under pard on the tm pipeline.

One prepared run of a few minutes for a machine with a CUDA GPU (``pip install ".[gpu,onnx]"`` plus
``onnxruntime-gpu``).  For each engine --

* ``cupy``: the NumPy reference models of :mod:`pard.models.reference` run by CuPy
  (``ArrayExecutor(device="gpu")``, one non-blocking CUDA stream per worker thread);
* ``onnx-cuda``: tm's ONNX stage models (:mod:`pard.models.onnx`) run by ``OnnxExecutor`` with the
  CUDA execution provider, one session per worker --

it measures the stage profiles ``d(b)`` on the device (all workers of a stage at once), then
replays ``--duration`` seconds (default 30) of the bundled Azure LLM trace, amplified to
``--load`` (default 1.0) times the measured capacity, live through :class:`pard.Runtime` under
``pard``, ``nexus`` and ``naive``, and records per run: the outcome counts (conservation checked),
goodput, drop rate, p99 latency, the scheduler's share of request latency (C++ scheduler calls and
planner updates per request over the mean end-to-end latency, as ``pard run``), and the stream
overlap per stage (the sum of batch durations over the time at least one batch ran: 1.0 = the
workers' batches never overlapped, ``workers`` = all of them always ran at once; divided by the
worker count it is the overlap per worker).  Everything goes to one JSON file.

Without a GPU it says so, writes ``{"gpu": false, "reason": ...}`` and exits with status 3.
``--dry-run`` runs the same steps on the CPU (NumPy / the CPU provider), small and short, to
validate the script where no device is lent.

Usage: ``python bench/gpu_check.py [--out gpu_check.json] [--duration 30] [--load 1.0] [--dry-run]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

POLICIES = ("pard", "nexus", "naive")
TRACE_START_S = 1170.0  # the window `pard run` replays: the 10 s rate envelope swings 0.7x .. 1.4x


def _gpu_state() -> dict[str, Any]:
    """What this machine offers: CuPy's device, ONNX Runtime's providers."""
    state: dict[str, Any] = {"cupy": False, "onnx_cuda": False}
    try:
        import cupy

        if cupy.is_available():
            props = cupy.cuda.runtime.getDeviceProperties(0)
            state.update(cupy=True, device=props["name"].decode() if isinstance(props["name"], bytes) else
                         str(props["name"]), cupy_version=cupy.__version__,
                         memory_gib=round(props["totalGlobalMem"] / 2**30, 1))
    except Exception as exc:  # noqa: BLE001 - ImportError or a CUDA driver error
        state["cupy_error"] = f"{type(exc).__name__}: {exc}"
    try:
        import onnxruntime as ort

        state["onnxruntime"] = ort.__version__
        state["onnx_providers"] = ort.get_available_providers()
        state["onnx_cuda"] = "CUDAExecutionProvider" in state["onnx_providers"]
    except Exception as exc:  # noqa: BLE001
        state["onnx_error"] = f"{type(exc).__name__}: {exc}"
    return state


def _engine(name: str, spec: Any, *, dry_run: bool, scale: float) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(stage executors, stage -> make(b) payload makers, join) for one engine."""
    from pard.models import join_inputs

    if name == "cupy":
        from pard.executors import ArrayExecutor
        from pard.models import reference_models

        models = reference_models(spec, scale=scale)
        device = "cpu" if dry_run else "gpu"
        entries = set(spec.entry_stages())
        stages = {n: ArrayExecutor(m, device=device, to_host=not spec.stage(n).successors,
                                   payload_shape=m.input_shape if n in entries else None) for n, m in models.items()}
        shapes = {n: m.input_shape for n, m in models.items()}
    else:
        from pard.executors import OnnxExecutor
        from pard.models.onnx import onnx_models

        models = onnx_models(spec, scale=scale)
        providers = "cpu" if dry_run else "cuda"
        stages = {n: OnnxExecutor(m.path, providers=providers, payload_shape=m.input_shape, name=n)
                  for n, m in models.items()}
        shapes = {n: m.input_shape for n, m in models.items()}

    def maker(shape: tuple[int, ...], seed: int) -> Any:
        rng = np.random.default_rng(seed)
        return lambda b: list(rng.random((b, *shape), dtype=np.float32))

    return stages, {n: maker(s, i) for i, (n, s) in enumerate(shapes.items())}, join_inputs


def _overlap(batches: dict[str, np.ndarray], k: int, workers: int) -> dict[str, float]:
    """Stage ``k``'s stream overlap: sum of batch durations / time when at least one batch ran."""
    here = batches["stage"] == k
    start = batches["start_s"][here]
    end = start + batches["duration_s"][here]
    if start.size == 0:
        return {"batches": 0, "concurrency": math.nan, "per_worker": math.nan}
    order = np.argsort(start)
    busy, cur_s, cur_e = 0.0, float(start[order[0]]), float(end[order[0]])
    for i in order[1:]:
        s, e = float(start[i]), float(end[i])
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    conc = float((end - start).sum() / busy) if busy > 0 else math.nan
    return {"batches": int(start.size), "concurrency": conc, "per_worker": conc / workers}


def _live(spec: Any, stages: dict[str, Any], join: Any, policy: str, arrivals: np.ndarray, payloads: list[Any],
          workers: list[int], duration_s: float, seed: int) -> dict[str, Any]:
    import pard

    rt = pard.Runtime(spec, stages, policy=policy, workers=workers, join=join, planner={"seed": seed + 1})
    t_rep = rt.now()
    try:
        rt.replay(arrivals, payloads)
        rt.close(drain=True, timeout_s=max(2.0, 5.0 * spec.slo))
    finally:
        rt.close(drain=False)
    rep = rt.report(t0_s=t_rep, duration_s=duration_s)
    out = rt.outcomes()
    done = (out["state"] == 1) | (out["state"] == 2)
    lat = out["finish_s"][done] - out["send_s"][done]
    ov = rt.overhead()
    mean_lat = float(lat.mean()) if lat.size else math.nan
    per_req = (ov["scheduler_s"] + ov["planner_s"]) / max(1, out["send_s"].size)
    c = rt.counts()
    batches = rt.batches()
    return {
        "counts": c,
        "conserved": c["submitted"] == c["on_time"] + c["late"] + c["dropped"] + c["rejected"] + c["failed"],
        "goodput_req_s": rep.goodput, "drop_rate": rep.drop_rate, "invalid_rate": rep.invalid_rate,
        "p99_latency_s": rep.latency_percentiles().get("p99"),
        "mean_latency_s": mean_lat,
        "scheduler_s_per_request": per_req,
        "scheduler_share_of_latency": per_req / mean_lat if lat.size else None,
        "stream_overlap": {st.name: _overlap(batches, k, w) for k, (st, w) in enumerate(zip(spec.stages, workers))},
    }


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return _clean(x.item())
    return x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of trace per live run (default 30)")
    ap.add_argument("--load", type=float, default=1.0, help="mean rate over the measured capacity (default 1.0)")
    ap.add_argument("--engines", default="cupy,onnx-cuda", help="comma-separated: cupy, onnx-cuda")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU needed: the same steps on the CPU, small models, a 3 s replay")
    args = ap.parse_args(argv)

    import pard
    from pard import workloads as wl
    from pard.profiling import measure_profile

    t_all = time.perf_counter()
    state = _gpu_state()
    doc: dict[str, Any] = {"script": "bench/gpu_check.py", "pard": pard.__version__, "host": platform.node(),
                           "cpu_cores": os.cpu_count(), "dry_run": args.dry_run, "gpu_state": state}
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    bad = [e for e in engines if e not in ("cupy", "onnx-cuda")]
    if bad:
        ap.error(f"--engines: unknown {bad}; choose from cupy, onnx-cuda")
    if not args.dry_run:
        missing = [e for e in engines if not state["cupy" if e == "cupy" else "onnx_cuda"]]
        if missing:
            reason = (f"no GPU path for {missing} on this machine (CuPy device: {state['cupy']}, ONNX Runtime CUDA "
                      f"provider: {state['onnx_cuda']}); run on a CUDA machine, or --dry-run to check the script")
            print(reason, file=sys.stderr)
            doc.update(gpu=False, reason=reason)
            args.out.write_text(json.dumps(_clean(doc), indent=2))
            return 3
    doc["gpu"] = not args.dry_run
    duration = 3.0 if args.dry_run else float(args.duration)
    scale = 0.1 if args.dry_run else 1.0
    spec0 = pard.config.builtin("tm")
    workers = [1] * len(spec0.stages) if args.dry_run else [int(st.workers) for st in spec0.stages]
    doc["engines"] = {}
    for engine in engines:
        t0 = time.perf_counter()
        stages, makers, join = _engine(engine, spec0, dry_run=args.dry_run, scale=scale)
        prof = measure_profile(spec0, stages, inputs=makers, workers=workers, co_load="capacity",
                               warmup=3, repeats=2 if args.dry_run else 7, blas_threads=1)
        spec = prof.spec
        cap = spec.capacity().pipeline
        raw = wl.azure_llm_conv()
        raw = raw - raw[0]
        arrivals = wl.scale(wl.window(raw, TRACE_START_S, duration), args.load * cap, mode="amplify", seed=args.seed)
        arrivals = np.asarray(arrivals[arrivals < duration], dtype=np.float64)
        entry = spec.entry_stages()[0]
        payloads = makers[entry](64)
        runs = {}
        for policy in POLICIES:
            runs[policy] = _live(spec, stages, join, policy, arrivals, payloads, workers, duration, args.seed)
            r = runs[policy]
            print(f"{engine:9s} {policy:6s} goodput {r['goodput_req_s']:8.1f} req/s  drop rate {r['drop_rate']:.2%}  "
                  f"scheduler share {r['scheduler_share_of_latency'] or float('nan'):.4%}  overlap "
                  + ", ".join(f"{n} {o['concurrency']:.2f}" for n, o in r["stream_overlap"].items()), flush=True)
        doc["engines"][engine] = {
            "workers": dict(zip([st.name for st in spec.stages], workers)),
            "profile_ms": {st.name: {str(b): d * 1e3 for b, d in sorted(st.profile.items())} for st in spec.stages},
            "capacity_req_s": cap, "load": args.load, "requests": int(arrivals.size), "duration_s": duration,
            "runs": runs, "wall_s": time.perf_counter() - t0,
        }
        for ex in stages.values():
            getattr(ex, "close", lambda: None)()
    doc["wall_s"] = time.perf_counter() - t_all
    args.out.write_text(json.dumps(_clean(doc), indent=2))
    print(f"wrote {args.out} ({doc['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
