"""Experiment 4 (issue 6 item 5): scale -- the simulator's cost vs workers and requests.

lv with its built-in workers (11) scaled to 64 workers (the paper's 64-GPU testbed) and to 1 000
workers: each stage keeps its share of the workers (largest remainder), so the stages stay balanced
and the capacity grows in proportion.  Fixed provisioning (the size is the point), execution-time CV
0.1, Poisson arrivals at 0.9x and 1.2x the capacity for the same simulated duration, so the number of
requests grows with the size.  Recorded: requests, wall time of ``pard.simulate`` (building the
simulator, the C++ event loop, the planner every simulated second and the report), wall time per
simulated request, and the run's figures (goodput / bound, drop rate) -- the 64-worker rows are the
paper's testbed size.

Runs one simulation at a time (``--jobs`` is ignored) so that the timings do not compete with each
other; the machine's load average before and after is recorded with them.

    python bench/paper/e4_scale.py            # 11, 64, 1000 workers; pard; 60 s; 1 repeat
    python bench/paper/e4_scale.py --full     # 11, 64, 256, 1000 workers; pard + nexus; 120 s; 3 repeats
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

import common as C

NAME = "e4_scale"
PIPELINE = "lv"
LOADS = (0.9, 1.2)


def scaled(sp: Any, total: int) -> Any:
    """``sp`` with ``total`` workers split over its stages in proportion to its own (largest remainder)."""
    w = np.array([st.workers for st in sp.stages], dtype=np.float64)
    exact = w / w.sum() * total
    base = np.maximum(np.floor(exact).astype(int), 1)
    rest = total - int(base.sum())
    order = np.argsort(-(exact - np.floor(exact)), kind="stable")
    for i in order[:max(rest, 0)]:
        base[i] += 1
    return sp.with_workers({st.name: int(n) for st, n in zip(sp.stages, base)})


def run_one(total: int, load: float, policy: str, duration: float, seed: int) -> dict[str, Any]:
    from pard import workloads as wl
    from pard.sim import simulate

    base = C.spec(PIPELINE)
    sp = base if total == sum(st.workers for st in base.stages) else scaled(base, total)
    cap = sp.capacity().pipeline
    arr = wl.poisson(load * cap, duration, seed=seed)
    la0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    c0 = time.process_time()
    r = simulate(sp, arr, policy, autoscale=False, jitter_cv=0.1, seed=seed)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {"workers": int(sum(st.workers for st in sp.stages)), "workers_per_stage": [st.workers for st in sp.stages],
            "capacity": cap, "load": load, "policy": policy, "seed": seed, "duration_s": duration,
            "requests": int(arr.size), "wall_s": wall, "cpu_s": cpu, "wall_ns_per_request": wall / arr.size * 1e9,
            "cpu_ns_per_request": cpu / arr.size * 1e9, "load_average_before": la0,
            "goodput_ratio": r.goodput_ratio, "drop_rate": r.drop_rate, "invalid_rate": r.invalid_rate}


def plot(rows: list[dict[str, Any]], path: Any) -> None:
    plt = C.plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    keys = sorted({(r["policy"], r["load"]) for r in rows})
    for pol, load in keys:
        rs = [r for r in rows if r["policy"] == pol and r["load"] == load]
        ws = sorted({r["workers"] for r in rs})
        med = [float(np.median([r["cpu_ns_per_request"] for r in rs if r["workers"] == w])) for w in ws]
        req = [float(np.median([r["requests"] for r in rs if r["workers"] == w])) for w in ws]
        axes[0].plot(ws, med, "o-", label=f"{pol}, load {load}")
        axes[1].plot(req, [m * q * 1e-9 for m, q in zip(med, req)], "o-", label=f"{pol}, load {load}")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("workers")
    axes[0].set_ylabel("CPU ns per simulated request")
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("simulated requests")
    axes[1].set_ylabel("CPU seconds per run")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Experiment 4: simulator cost vs size ({PIPELINE}, Poisson arrivals, fixed workers)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = C.parse_args(__doc__, argv)
    sizes = [11, 64, 256, 1000] if args.full else [11, 64, 1000]
    policies = ["pard-paper", "nexus"] if args.full else ["pard-paper"]
    duration = 120.0 if args.full else 60.0
    repeats = 3 if args.full else 1
    rec = C.Recorder(NAME, args, {"pipeline": PIPELINE, "sizes": sizes, "loads": LOADS, "policies": policies,
                                  "duration_s": duration, "repeats": repeats, "jitter_cv": 0.1,
                                  "arrivals": "poisson", "autoscale": False})
    rows = []
    for rep in range(repeats):
        for total in sizes:
            for load in LOADS:
                for pol in policies:
                    row = run_one(total, load, pol, duration, args.seed + rep)
                    rows.append(row)
                    print(f"{row['workers']:5d} workers load {load} {pol}: {row['requests']:8d} requests, "
                          f"{row['wall_s']:.2f} s wall, {row['cpu_ns_per_request']:.0f} CPU ns/request, "
                          f"goodput/bound {row['goodput_ratio']:.3f}", flush=True)
    summary: dict[str, Any] = {}
    for pol in policies:
        for load in LOADS:
            for total in sizes:
                rs = [r for r in rows if r["policy"] == pol and r["load"] == load and r["workers"] == total]
                if rs:
                    summary[f"{pol}/{load}/{total}"] = {
                        "requests": int(np.median([r["requests"] for r in rs])),
                        "cpu_ns_per_request": float(np.median([r["cpu_ns_per_request"] for r in rs])),
                        "wall_ns_per_request": float(np.median([r["wall_ns_per_request"] for r in rs])),
                        "goodput_ratio": float(np.median([r["goodput_ratio"] for r in rs])),
                        "drop_rate": float(np.median([r["drop_rate"] for r in rs]))}
    plot(rows, rec.png_path)
    rec.write(rows, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
