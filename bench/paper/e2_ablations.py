"""Experiment 2 (issue 6 item 3): PARD's ablations on lv with the bursty pattern, relative to pard.

Policies (DESIGN §3.6): pard-back (no downstream terms), pard-sf (downstream = sum of durations),
dagor, pard-lower (w = 0), pard-upper (w = sum d), pard-fcfs / pard-lbf / pard-hbf (fixed order),
pard-instant (eps = 0), each on the same arrivals and seeds as pard, in the paper's regime (common.py).
Recorded: drop rate and invalid rate, and both divided by pard's (mean over seeds of the per-seed
figures; the ratio is of the means).

Paper: every ablation is worse than pard; FCFS ~1.8x, LBF ~2.2x and HBF ~1.5x pard's drop rate;
pard-lower ~3.5x pard's invalid rate.

    python bench/paper/e2_ablations.py            # 600 s, 3 seeds
    python bench/paper/e2_ablations.py --full     # 1800 s, 5 seeds
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import common as C

NAME = "e2_ablations"
PIPELINE = "lv"
PATTERN = "bursty"
ABLATIONS = ("pard-back", "pard-sf", "dagor", "pard-lower", "pard-upper", "pard-fcfs", "pard-lbf", "pard-hbf",
             "pard-instant")
#: The paper's figure where it gives one: (metric, ratio to pard).
PAPER = {"pard-fcfs": ("drop_rate", 1.8), "pard-lbf": ("drop_rate", 2.2), "pard-hbf": ("drop_rate", 1.5),
         "pard-lower": ("invalid_rate", 3.5)}


def run_one(key: tuple[int, float]) -> dict[str, Any]:
    from pard.sim import compare

    seed, duration = key
    sp = C.spec(PIPELINE)
    arr = C.arrivals(PATTERN, C.LOAD * sp.capacity().pipeline, duration, seed=seed)
    reps = compare(sp, arr, ["pard-paper", *ABLATIONS], seed=seed, **C.REGIME)
    return {"seed": seed, "requests": int(arr.size), "policies": {n: C.metrics(r, sp) for n, r in reps.items()}}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    base = {m: float(np.mean([r["policies"]["pard-paper"][m] for r in rows])) for m in ("drop_rate", "invalid_rate",
                                                                                   "goodput_normalised")}
    for pol in ["pard-paper", *ABLATIONS]:
        d = {m: float(np.mean([r["policies"][pol][m] for r in rows]))
             for m in ("drop_rate", "invalid_rate", "goodput_normalised", "goodput_ratio", "transient_drop_rate_1s")}
        d["drop_rate_vs_pard"] = C.ratio(d["drop_rate"], base["drop_rate"])
        d["invalid_rate_vs_pard"] = C.ratio(d["invalid_rate"], base["invalid_rate"])
        d["goodput_vs_pard"] = C.ratio(d["goodput_normalised"], base["goodput_normalised"])
        # per-seed spread of the drop-rate ratio, to show what is noise
        per_seed = [C.ratio(r["policies"][pol]["drop_rate"], r["policies"]["pard-paper"]["drop_rate"]) for r in rows]
        d["drop_rate_vs_pard_per_seed"] = per_seed
        if pol in PAPER:
            d["paper"] = {"metric": PAPER[pol][0], "ratio_to_pard": PAPER[pol][1]}
        out[pol] = d
    worse = [p for p in ABLATIONS if (out[p]["drop_rate_vs_pard"] or 0) > 1.0 or (out[p]["invalid_rate_vs_pard"] or 0) > 1.0]
    return {"policies": out, "ablations_worse_on_drop_or_invalid": worse,
            "ablations_not_worse": [p for p in ABLATIONS if p not in worse]}


def plot(summary: dict[str, Any], path: Any) -> None:
    plt = C.plt()
    pols = list(ABLATIONS)
    x = np.arange(len(pols))
    fig, ax = plt.subplots(figsize=(11, 4.5))
    ax.bar(x - 0.2, [summary["policies"][p]["drop_rate_vs_pard"] or 0 for p in pols], 0.4, label="drop rate / pard's")
    ax.bar(x + 0.2, [summary["policies"][p]["invalid_rate_vs_pard"] or 0 for p in pols], 0.4,
           label="invalid rate / pard's")
    for p, (metric, v) in PAPER.items():
        i = pols.index(p)
        ax.plot([i + (-0.2 if metric == "drop_rate" else 0.2)], [v], "k*", ms=11)
    ax.plot([], [], "k*", label="paper's figure")
    ax.axhline(1.0, color="0.3", lw=1)
    ax.set_xticks(x, pols, rotation=20)
    ax.set_ylabel("ratio to pard (log)")
    ax.set_yscale("log")
    ax.set_title(f"Experiment 2: ablations on {PIPELINE} / {PATTERN} (autoscaling, cold start 10 s, jitter 0.1)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = C.parse_args(__doc__, argv)
    duration = 1800.0 if args.full else 600.0
    seeds = list(range(args.seed, args.seed + (5 if args.full else 3)))
    rec = C.Recorder(NAME, args, {"pipeline": PIPELINE, "pattern": PATTERN, "pattern_cv": C.PATTERN_CV[PATTERN],
                                  "load": C.LOAD, "regime": C.REGIME, "duration_s": duration, "seeds": seeds,
                                  "policies": ["pard-paper", *ABLATIONS]})
    rows = C.run_parallel(run_one, [(s, duration) for s in seeds], args.jobs)
    summary = summarise(rows)
    plot(summary, rec.png_path)
    rec.write(rows, summary)
    for p, d in summary["policies"].items():
        print(f"{p:13s} drop {d['drop_rate']:.4f} ({d['drop_rate_vs_pard']:.2f}x)  "
              f"invalid {d['invalid_rate']:.4f} ({d['invalid_rate_vs_pard']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
