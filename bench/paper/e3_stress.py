"""Experiment 3d (issue 6 item 4): stress test -- raise the rate with fixed workers.

Each built-in pipeline at its built-in workers (fixed provisioning, no autoscaling; execution-time CV
0.1) under the bundled Azure trace amplified to ``load x capacity`` for load 0.5 .. 3.  Every policy is
plotted against the goodput bound of DESIGN §4 (``Report.goodput_bound``: the fluid bound in which
queued work carries over until its deadline; without carry-over it is ``sum_t min(arrivals_t,
capacity_t)``), which no policy beat in any test run.  Recorded per load and policy: goodput (req/s), the bound, goodput / bound, drop and invalid
rates.

Paper: pard's goodput follows the bound as the rate rises, while reactive baselines fall away.

    python bench/paper/e3_stress.py            # 4 pipelines, 8 loads, 120 s, 1 seed
    python bench/paper/e3_stress.py --full     # 4 pipelines, 11 loads, 600 s, 2 seeds
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import numpy as np

import common as C

NAME = "e3_stress"
PATTERN = "azure"
REGIME = {"autoscale": False, "jitter_cv": 0.1}


def run_one(key: tuple[str, float, int, float]) -> dict[str, Any]:
    from pard.sim import compare

    pipeline, load, seed, duration = key
    sp = C.spec(pipeline)
    cap = sp.capacity().pipeline
    arr = C.arrivals(PATTERN, load * cap, duration, seed=seed)
    reps = compare(sp, arr, list(C.POLICIES), seed=seed, **REGIME)
    return {"pipeline": pipeline, "load": load, "seed": seed, "rate": load * cap, "capacity": cap,
            "requests": int(arr.size), "policies": {n: C.metrics(r, sp) for n, r in reps.items()}}


def summarise(rows: list[dict[str, Any]], pipelines: list[str], loads: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pl in pipelines:
        curve: dict[str, Any] = {}
        for load in loads:
            rs = [r for r in rows if r["pipeline"] == pl and r["load"] == load]
            curve[str(load)] = {p: {m: float(np.mean([r["policies"][p][m] for r in rs]))
                                    for m in ("goodput", "goodput_bound", "goodput_ratio", "drop_rate",
                                              "invalid_rate")} for p in C.POLICIES}
        over = [str(v) for v in loads if v >= 1.0]
        out[pl] = {"curve": curve,
                   "min_goodput_ratio_overloaded": {p: min(curve[k][p]["goodput_ratio"] for k in over)
                                                    for p in C.POLICIES} if over else None}
    return {"pipelines": out}


def plot(summary: dict[str, Any], pipelines: list[str], loads: list[float], path: Any) -> None:
    plt = C.plt()
    fig, axes = plt.subplots(1, len(pipelines), figsize=(5 * len(pipelines), 4.2), squeeze=False)
    for ax, pl in zip(axes[0], pipelines):
        c = summary["pipelines"][pl]["curve"]
        ax.plot(loads, [c[str(v)]["pard-paper"]["goodput_bound"] for v in loads], "k--", lw=1.5, label="bound")
        for p in C.POLICIES:
            ax.plot(loads, [c[str(v)][p]["goodput"] for v in loads], "o-", ms=4, label=p)
        ax.set_title(f"{pl} (fixed workers)")
        ax.set_xlabel("mean rate / capacity")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("goodput (req/s)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Experiment 3d: stress test, Azure trace amplified, goodput vs the goodput bound (fluid, DESIGN §4)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = C.parse_args(__doc__, argv)
    duration = 600.0 if args.full else 120.0
    pipelines = list(C.PIPELINES)
    loads = ([0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0] if args.full
             else [0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0])
    seeds = list(range(args.seed, args.seed + (2 if args.full else 1)))
    rec = C.Recorder(NAME, args, {"pipelines": pipelines, "pattern": PATTERN, "loads": loads, "regime": REGIME,
                                  "duration_s": duration, "seeds": seeds, "policies": C.POLICIES})
    # big loads first so the slowest runs start early
    keys = sorted(itertools.product(pipelines, loads, seeds, [duration]), key=lambda k: -k[1])
    rows = C.run_parallel(run_one, keys, args.jobs)
    summary = summarise(rows, pipelines, loads)
    plot(summary, pipelines, loads, rec.png_path)
    rec.write(rows, summary)
    for pl in pipelines:
        print(pl, "min goodput/bound at load >= 1:", summary["pipelines"][pl]["min_goodput_ratio_overloaded"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
