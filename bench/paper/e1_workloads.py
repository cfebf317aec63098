"""Experiment 1 (issue 6 item 2): 4 pipelines x 3 arrival patterns, pard vs nexus, clipper++, naive.

The paper's main comparison (PARD §7.2): every built-in pipeline (tm, lv, ga, da) under the bundled
Azure trace amplified, a stable MMPP (CV 0.47) and a bursty MMPP (CV 1.2), mean rate = the built-in
capacity, in the paper's regime (autoscaling, 10 s cold starts, execution-time CV 0.1; common.py).
Per workload and policy: normalised goodput (on time / submitted), goodput over its bound, drop rate,
invalid rate, share of drops per stage, transient drop rate (worst 1 s and 10 s), averaged over seeds.

A second view, not the paper's regime, repeats the grid with fixed provisioning (the built-in workers,
no autoscaling, same jitter and arrivals; DESIGN §5a), because the two regimes separate the policies
for different reasons (capacity lag in bursts vs a fixed bottleneck).  The claims are checked on each.

Claims checked (paper): pard's goodput +16 % .. +176 % over nexus and clipper++; drop rate 1.6x-16.7x
lower; invalid rate 1.5x-61.9x lower; pard's drops mostly in the first two stages, nexus's mostly in
the latter half.

    python bench/paper/e1_workloads.py            # 600 s windows, 3 seeds
    python bench/paper/e1_workloads.py --full     # 1800 s windows, 5 seeds
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any

import numpy as np

import common as C

NAME = "e1_workloads"


#: regime name -> pard.simulate keyword arguments
REGIMES: dict[str, dict[str, Any]] = {"paper": dict(C.REGIME), "fixed": {"autoscale": False, "jitter_cv": 0.1}}


def run_one(key: tuple[str, str, str, int, float]) -> dict[str, Any]:
    """Run the four policies on one (regime, pipeline, pattern, seed)."""
    from pard.sim import compare

    regime, pipeline, pattern, seed, duration = key
    sp = C.spec(pipeline)
    rate = C.LOAD * sp.capacity().pipeline
    arr = C.arrivals(pattern, rate, duration, seed=seed)
    t0 = time.perf_counter()
    reps = compare(sp, arr, list(C.POLICIES), seed=seed, **REGIMES[regime])
    wall = time.perf_counter() - t0
    from pard import workloads as wl

    return {
        "regime": regime, "pipeline": pipeline, "pattern": pattern, "seed": seed, "duration_s": duration,
        "rate": rate, "requests": int(arr.size), "cv_1s": wl.cv(arr), "wall_s": wall,
        "policies": {name: C.metrics(r, sp) for name, r in reps.items()},
    }


def mean_over_seeds(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """(pipeline/pattern) -> policy -> metric -> mean over seeds (scalars only)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for pipeline, pattern in itertools.product(C.PIPELINES, C.PATTERNS):
        rs = [r for r in rows if r["pipeline"] == pipeline and r["pattern"] == pattern]
        if not rs:
            continue
        cell: dict[str, dict[str, float]] = {}
        for pol in C.POLICIES:
            ms = [r["policies"][pol] for r in rs]
            cell[pol] = {k: float(np.mean([m[k] for m in ms])) for k, v in ms[0].items()
                         if isinstance(v, (int, float)) and v is not None}
            cell[pol]["drop_share_by_stage"] = {  # type: ignore[assignment]
                st: float(np.mean([m["drop_share_by_stage"][st] for m in ms])) for st in ms[0]["drop_share_by_stage"]}
        out[f"{pipeline}/{pattern}"] = cell
    return out


def claims(cells: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """pard vs each baseline per workload, and the ranges over the 12 workloads x 2 baselines."""
    per: dict[str, Any] = {}
    gains, drops, invalids = [], [], []
    for w, cell in cells.items():
        p = cell["pard-paper"]
        row: dict[str, Any] = {}
        for b in C.BASELINES:
            q = cell[b]
            g = C.ratio(p["goodput"], q["goodput"])
            d = C.ratio(q["drop_rate"], p["drop_rate"])
            i = C.ratio(q["invalid_rate"], p["invalid_rate"])
            row[b] = {"goodput_gain": None if g is None else g - 1.0, "drop_rate_ratio": d, "invalid_rate_ratio": i}
            if g is not None:
                gains.append(g - 1.0)
            if d is not None:
                drops.append(d)
            if i is not None:
                invalids.append(i)
        row["pard_drop_share_first_two"] = p["drop_share_first_two"]
        row["nexus_drop_share_rest"] = cell["nexus"]["drop_share_rest"]
        per[w] = row

    def rng(v: list[float]) -> list[float] | None:
        return [float(min(v)), float(max(v))] if v else None

    early = [per[w]["pard_drop_share_first_two"] for w in per]
    nex = [per[w]["nexus_drop_share_rest"] for w in per]
    return {
        "per_workload": per,
        "goodput_gain_range": rng(gains), "paper_goodput_gain_range": [0.16, 1.76],
        "drop_rate_ratio_range": rng(drops), "paper_drop_rate_ratio_range": [1.6, 16.7],
        "invalid_rate_ratio_range": rng(invalids), "paper_invalid_rate_ratio_range": [1.5, 61.9],
        "pard_wins_goodput": sum(1 for g in gains if g > 0), "comparisons": len(gains),
        "pard_drop_share_first_two_range": rng(early),
        "workloads_pard_mostly_first_two": sum(1 for e in early if e > 0.5),
        "nexus_drop_share_rest_range": rng(nex),
        "workloads_nexus_mostly_rest": sum(1 for e in nex if e > 0.5),
        "pard_drop_rate_range": rng([cells[w]["pard-paper"]["drop_rate"] for w in cells]),
        "paper_pard_drop_rate_range": [0.0012, 0.036],
    }


def plot(cells: dict[str, dict[str, dict[str, float]]], path: Any, title: str) -> None:
    plt = C.plt()
    names = list(cells)
    x = np.arange(len(names))
    wdt = 0.8 / len(C.POLICIES)
    fig, axes = plt.subplots(4, 1, figsize=(13, 12), sharex=True)
    for j, pol in enumerate(C.POLICIES):
        off = (j - (len(C.POLICIES) - 1) / 2) * wdt
        axes[0].bar(x + off, [cells[n][pol]["goodput_normalised"] for n in names], wdt, label=pol)
        axes[1].bar(x + off, [cells[n][pol]["drop_rate"] for n in names], wdt, label=pol)
        axes[2].bar(x + off, [max(cells[n][pol]["invalid_rate"], 1e-5) for n in names], wdt, label=pol)
        axes[3].bar(x + off, [cells[n][pol]["drop_share_first_two"] for n in names], wdt, label=pol)
    axes[0].set_ylabel("normalised goodput\n(on time / submitted)")
    axes[1].set_ylabel("drop rate")
    axes[2].set_ylabel("invalid rate (log)")
    axes[2].set_yscale("log")
    axes[3].set_ylabel("share of drops in\nfirst two stages")
    axes[3].set_xticks(x, names, rotation=30, ha="right")
    axes[0].set_title(title)
    for ax in axes:
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(ncol=4, fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = C.parse_args(__doc__, argv)
    duration = 1800.0 if args.full else 600.0
    seeds = list(range(args.seed, args.seed + (5 if args.full else 3)))
    rec = C.Recorder(NAME, args, {
        "pipelines": C.PIPELINES, "patterns": C.PATTERNS, "pattern_cv": C.PATTERN_CV, "load": C.LOAD,
        "regimes": REGIMES, "policies": C.POLICIES, "duration_s": duration, "seeds": seeds,
        "azure_start_s": C.AZURE_START_S,
    })
    keys = [(g, p, w, s, duration) for g, p, w, s in itertools.product(REGIMES, C.PIPELINES, C.PATTERNS, seeds)]
    rows = C.run_parallel(run_one, keys, args.jobs)
    summary: dict[str, Any] = {"simulated_requests": sum(r["requests"] for r in rows) * len(C.POLICIES)}
    titles = {"paper": "Experiment 1: 4 pipelines x 3 patterns, paper's regime (autoscaling, 10 s cold starts, "
                       "jitter CV 0.1)",
              "fixed": "Experiment 1, second view: fixed provisioning (built-in workers, jitter CV 0.1)"}
    for regime in REGIMES:
        cells = mean_over_seeds([r for r in rows if r["regime"] == regime])
        summary[regime] = {"cells": cells, "claims": claims(cells)}
        path = rec.png_path if regime == "paper" else rec.out / f"{NAME}_{regime}.png"
        plot(cells, path, titles[regime])
        cl = summary[regime]["claims"]
        print(f"[{regime}] goodput gain over baselines {cl['goodput_gain_range']} (paper [0.16, 1.76]); "
              f"drop-rate ratio {cl['drop_rate_ratio_range']}; invalid-rate ratio {cl['invalid_rate_ratio_range']}")
    rec.write(rows, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
