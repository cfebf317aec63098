"""Experiment 3a (issue 6 item 4): SLO sensitivity, 200 ms .. 600 ms, pard vs nexus and clipper++.

lv (its built-in SLO is 500 ms) under each of the three arrival patterns, the paper's regime
(common.py); the SLO of every request is set to the swept value, nothing else changes.  Recorded per
SLO, pattern and policy: drop rate, invalid rate, normalised goodput; and each baseline's drop rate
over pard's.

Paper: over SLOs 200-600 ms pard's drop rate is 0.85 %-3.04 %, 1.9x-5.3x below the baselines'.

    python bench/paper/e3_slo.py            # 5 SLOs, 300 s, 1 seed
    python bench/paper/e3_slo.py --full     # 9 SLOs, 1800 s, 3 seeds
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import numpy as np

import common as C

NAME = "e3_slo"
PIPELINE = "lv"
POLICIES = ("pard-paper", "nexus", "clipper++")


def run_one(key: tuple[str, float, int, float]) -> dict[str, Any]:
    from pard.sim import compare

    pattern, slo, seed, duration = key
    sp = C.spec(PIPELINE)
    arr = C.arrivals(pattern, C.LOAD * sp.capacity().pipeline, duration, seed=seed)
    reps = compare(sp, arr, list(POLICIES), slo=slo, seed=seed, **C.REGIME)
    return {"pattern": pattern, "slo_s": slo, "seed": seed, "requests": int(arr.size),
            "policies": {n: C.metrics(r, sp) for n, r in reps.items()}}


def summarise(rows: list[dict[str, Any]], slos: list[float]) -> dict[str, Any]:
    cells: dict[str, Any] = {}
    pard_drop, ratios = [], []
    for pattern in C.PATTERNS:
        for slo in slos:
            rs = [r for r in rows if r["pattern"] == pattern and r["slo_s"] == slo]
            cell = {p: {m: float(np.mean([r["policies"][p][m] for r in rs]))
                        for m in ("drop_rate", "invalid_rate", "goodput_normalised")} for p in POLICIES}
            for b in POLICIES[1:]:
                cell[b]["drop_rate_vs_pard"] = C.ratio(cell[b]["drop_rate"], cell["pard-paper"]["drop_rate"])
                if cell[b]["drop_rate_vs_pard"] is not None:
                    ratios.append(cell[b]["drop_rate_vs_pard"])
            pard_drop.append(cell["pard-paper"]["drop_rate"])
            cells[f"{pattern}/{int(round(slo * 1000))}ms"] = cell
    return {"cells": cells,
            "pard_drop_rate_range": [min(pard_drop), max(pard_drop)], "paper_pard_drop_rate_range": [0.0085, 0.0304],
            "baseline_over_pard_drop_range": [min(ratios), max(ratios)] if ratios else None,
            "paper_baseline_over_pard_drop_range": [1.9, 5.3],
            "by_pattern": {pat: {
                "pard_drop_rate_range": [min(cells[k]["pard-paper"]["drop_rate"] for k in cells if k.startswith(pat + "/")),
                                         max(cells[k]["pard-paper"]["drop_rate"] for k in cells if k.startswith(pat + "/"))],
                "baseline_over_pard_drop_range": [
                    min(cells[k][b]["drop_rate_vs_pard"] or 0 for k in cells if k.startswith(pat + "/") for b in POLICIES[1:]),
                    max(cells[k][b]["drop_rate_vs_pard"] or 0 for k in cells if k.startswith(pat + "/") for b in POLICIES[1:])],
            } for pat in C.PATTERNS}}


def plot(summary: dict[str, Any], slos: list[float], path: Any) -> None:
    plt = C.plt()
    fig, axes = plt.subplots(1, len(C.PATTERNS), figsize=(14, 4.2))
    ms = [int(round(s * 1000)) for s in slos]
    for ax, pattern in zip(axes, C.PATTERNS):
        for p in POLICIES:
            ax.plot(ms, [summary["cells"][f"{pattern}/{m}ms"][p]["drop_rate"] for m in ms], "o-", label=p)
        ax.set_title(f"{PIPELINE} / {pattern}")
        ax.set_xlabel("SLO (ms)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("drop rate (log)")
    axes[0].axhspan(0.0085, 0.0304, color="k", alpha=0.08, label="paper: pard 0.85-3.04 %")
    axes[0].legend(fontsize=8)
    fig.suptitle("Experiment 3a: SLO sweep (autoscaling, cold start 10 s, jitter 0.1)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = C.parse_args(__doc__, argv)
    duration = 1800.0 if args.full else 300.0
    slos = [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6] if args.full else [0.2, 0.3, 0.4, 0.5, 0.6]
    seeds = list(range(args.seed, args.seed + (3 if args.full else 1)))
    rec = C.Recorder(NAME, args, {"pipeline": PIPELINE, "patterns": C.PATTERNS, "load": C.LOAD, "regime": C.REGIME,
                                  "slos_s": slos, "duration_s": duration, "seeds": seeds, "policies": POLICIES})
    keys = list(itertools.product(C.PATTERNS, slos, seeds, [duration]))
    rows = C.run_parallel(run_one, keys, args.jobs)
    summary = summarise(rows, slos)
    plot(summary, slos, rec.png_path)
    rec.write(rows, summary)
    print({k: summary[k] for k in ("pard_drop_rate_range", "baseline_over_pard_drop_range")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
