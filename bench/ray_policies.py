"""pard.ray vs the local runtime on the same arrivals: tm, 20 s of the bundled trace at load 1.2 (issue 10).

The configuration of ``tests/test_ray.py``'s policy tests (one worker per stage, NumPy executors that
sleep for the profiled ``d(b)``), printed: per policy, goodput, drop rate and on-time latency p50 /
p99 of both runtimes, and the Ray / local goodput ratio.  Usage: ``python bench/ray_policies.py``
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import ray

import pard
import pard.ray
from pard import workloads as wl

POLICIES = ("pard", "nexus", "naive")


def _execs(spec: Any) -> dict[str, Any]:
    def sleeper(st: Any) -> Any:
        def run(x: np.ndarray) -> np.ndarray:
            out = np.tanh(x[:, :4] * 0.5)
            time.sleep(st.duration(int(x.shape[0])))
            return out
        return run
    return {st.name: pard.ArrayExecutor(sleeper(st), device="cpu") for st in spec.stages}


def _row(rep: Any, out: dict[str, np.ndarray]) -> dict[str, float]:
    ok = out["state"] == 1
    lat = (out["finish_s"] - out["send_s"])[ok]
    return {"goodput": round(rep.goodput, 1), "drop_rate": round(rep.drop_rate, 4),
            "p50_ms": round(float(np.percentile(lat, 50)) * 1e3, 1) if lat.size else float("nan"),
            "p99_ms": round(float(np.percentile(lat, 99)) * 1e3, 1) if lat.size else float("nan")}


def main() -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    spec = pard.config.builtin("tm").with_workers({"vehicle_detect": 1, "vehicle_classify": 1, "plate_ocr": 1})
    arrivals = wl.scale(wl.window(wl.azure_llm_conv(), 1170.0, 20.0), 1.2 * spec.capacity().pipeline, seed=0)
    rows = {}
    for policy in POLICIES:
        rt = pard.Runtime(spec, _execs(spec), policy=policy)
        t0 = rt.now()
        rt.replay(arrivals, [np.ones(8, dtype=np.float32)])
        rt.close(drain=True, timeout_s=10.0)
        local = _row(rt.report(t0_s=t0, duration_s=20.0), rt.outcomes())
        pipe = pard.ray.deploy(spec, _execs(spec), policy=policy, resources={n: {"num_cpus": 0.25} for n in spec.stage_names})
        t0 = pipe.now()
        pipe.replay(arrivals, [np.ones(8, dtype=np.float32)])
        pipe.close(drain=True, timeout_s=10.0)
        remote = _row(pipe.report(t0_s=t0, duration_s=20.0), pipe.outcomes())
        rows[policy] = {"local": local, "ray": remote, "ratio": round(remote["goodput"] / local["goodput"], 3)}
        print(policy, rows[policy], flush=True)
    ray.shutdown()
    with open("bench/ray_policies.json", "w") as f:
        json.dump({"requests": int(arrivals.size), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
