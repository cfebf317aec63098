"""pard.ray's overhead against the local runtime, same arrivals, same machine, same run (issue 10).

The tm pipeline with 1, 2, 4 and 8 workers per stage (3 to 24 worker actors on the local Ray
cluster; threads in the local runtime), Poisson arrivals at a fixed rate, each stage a NumPy
executor that sleeps for its profiled ``d(b)`` (so both runtimes do the same work and the CPU they
spend is overhead).  Per runtime and worker count:

* scheduler share of latency: the C++ scheduler calls' time per request (``overhead()["scheduler_s"]``,
  the same definition in both runtimes) over the mean latency of on-time requests -- the figure the
  paper reports (< 0.16 %);
* CPU per batch: all the CPU the runtime's processes spent, over the batches executed -- local: this
  process's ``time.process_time``; Ray: the driver's plus every stage and worker actor's process CPU
  plus the planner's update time (Ray's raylet and GCS processes are not counted);
* mean latency, goodput, and for Ray the hop delay (arrival to reaching the next stage actor) and the
  record lag (a batch's end to its stage actor knowing), averaged over stages.

Ratios Ray / local are printed for each worker count.  Usage:
``python bench/ray_overhead.py [--rate 200] [--duration 8] [--out bench/ray_overhead.json]``
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import ray

import pard
import pard.ray
from pard import workloads as wl


def _sleeper(st: Any) -> Any:
    def run(x: np.ndarray) -> np.ndarray:
        out = np.tanh(x[:, :4] * 0.5)
        time.sleep(st.duration(int(x.shape[0])))
        return out
    return run


def _execs(spec: Any) -> dict[str, Any]:
    return {st.name: pard.ArrayExecutor(_sleeper(st), device="cpu") for st in spec.stages}


def _summary(out: dict[str, np.ndarray], sched_s: float, cpu_s: float, batches: int, duration: float) -> dict[str, Any]:
    ok = out["state"] == 1
    lat = float((out["finish_s"] - out["send_s"])[ok].mean()) if ok.any() else float("nan")
    n = out["state"].size
    per_req = sched_s / n
    return {"requests": n, "on_time": int(ok.sum()), "goodput_req_s": round(ok.sum() / duration, 1),
            "mean_latency_ms": round(lat * 1e3, 2), "scheduler_us_per_request": round(per_req * 1e6, 2),
            "scheduler_share_pct": round(100 * per_req / lat, 4), "batches": batches,
            "cpu_ms_per_batch": round(cpu_s / max(1, batches) * 1e3, 3)}


def run_local(spec: Any, arrivals: np.ndarray, duration: float) -> dict[str, Any]:
    rt = pard.Runtime(spec, _execs(spec), policy="pard")
    c0 = time.process_time()
    rt.replay(arrivals, [np.ones(8, dtype=np.float32)])
    rt.close(drain=True, timeout_s=10.0)
    cpu = time.process_time() - c0
    ov = rt.overhead()
    return _summary(rt.outcomes(), ov["scheduler_s"], cpu, int(rt.batches()["size"].size), duration)


def run_ray(spec: Any, arrivals: np.ndarray, duration: float, n: int) -> dict[str, Any]:
    res = {st.name: {"num_cpus": round(1.5 / (3 * n), 3)} for st in spec.stages}
    t_dep = time.perf_counter()
    pipe = pard.ray.deploy(spec, _execs(spec), policy="pard", resources=res)
    deploy_s = time.perf_counter() - t_dep
    c0 = time.process_time()
    pipe.replay(arrivals, [np.ones(8, dtype=np.float32)])
    pipe.close(drain=True, timeout_s=10.0)
    driver = time.process_time() - c0
    ov = pipe.overhead()
    cpu = driver + ov["stage_cpu_s"] + ov["worker_cpu_s"] + ov["planner_s"]
    out = _summary(pipe.outcomes(), ov["scheduler_s"], cpu, int(ov["batches"]), duration)
    out.update({"deploy_s": round(deploy_s, 1), "driver_cpu_s": round(driver, 2),
                "stage_cpu_s": round(ov["stage_cpu_s"], 2), "worker_cpu_s": round(ov["worker_cpu_s"], 2),
                "hop_ms_mean": round(float(np.mean(list(ov["hop_s_mean"].values()))) * 1e3, 2),
                "record_lag_ms_mean": round(float(np.mean(list(ov["record_lag_s_mean"].values()))) * 1e3, 2),
                "calls": ov["calls"]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--out", default="bench/ray_overhead.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - t0
    base = pard.config.builtin("tm")
    arrivals = wl.poisson(args.rate, args.duration, seed=0)
    rows = []
    for n in [int(x) for x in args.workers.split(",")]:
        spec = base.with_workers({st.name: n for st in base.stages})
        local = run_local(spec, arrivals, args.duration)
        remote = run_ray(spec, arrivals, args.duration, n)
        ratio = {k: round(remote[k] / local[k], 2) if local[k] else None
                 for k in ("scheduler_share_pct", "cpu_ms_per_batch", "mean_latency_ms", "goodput_req_s")}
        rows.append({"workers_per_stage": n, "worker_actors": 3 * n, "local": local, "ray": remote,
                     "ray_over_local": ratio})
        print(f"{n} per stage ({3 * n} actors): scheduler share local {local['scheduler_share_pct']:.4f} % "
              f"ray {remote['scheduler_share_pct']:.4f} % (x{ratio['scheduler_share_pct']}); CPU/batch local "
              f"{local['cpu_ms_per_batch']:.2f} ms ray {remote['cpu_ms_per_batch']:.2f} ms (x{ratio['cpu_ms_per_batch']}); "
              f"latency local {local['mean_latency_ms']:.1f} ms ray {remote['mean_latency_ms']:.1f} ms; "
              f"hop {remote['hop_ms_mean']:.1f} ms, record lag {remote['record_lag_ms_mean']:.1f} ms", flush=True)
    ray.shutdown()
    with open(args.out, "w") as f:
        json.dump({"rate_req_s": args.rate, "duration_s": args.duration, "ray_init_s": round(init_s, 1),
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
