"""Experiment 3b (issue 6 item 4): sensitivity to lambda, the batch-wait quantile (DESIGN §3.2).

pard on lv under each arrival pattern, the paper's regime (common.py), with lambda swept from 0.025
to 0.3 (the planner's ``lam``; 0.1 is the default), at lv's own SLO (500 ms) and at a tight 300 ms
(where experiment 3a shows the estimate's downstream terms matter most).  Recorded: drop rate,
invalid rate, normalised goodput per lambda, SLO and pattern, and which lambda gives the lowest
drop rate; and, for lambda 0.1 and 0.3, how often the planner publishes w = 0 (the entry stage's w
sums the batch waits of the four stages below it).

Paper: the best lambda lies in 0.075-0.15.

    python bench/paper/e3_lambda.py            # 7 values, 300 s, 2 seeds
    python bench/paper/e3_lambda.py --full     # 10 values, 1800 s, 3 seeds
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import numpy as np

import common as C

NAME = "e3_lambda"
PIPELINE = "lv"


SLOS = (0.5, 0.3)


def run_one(key: tuple[str, float, float, int, float]) -> dict[str, Any]:
    from pard.sim import simulate

    pattern, slo, lam, seed, duration = key
    sp = C.spec(PIPELINE)
    arr = C.arrivals(pattern, C.LOAD * sp.capacity().pipeline, duration, seed=seed)
    r = simulate(sp, arr, "pard-paper", slo=slo, planner={"lam": lam}, seed=seed, **C.REGIME)
    return {"pattern": pattern, "slo_s": slo, "lam": lam, "seed": seed, "requests": int(arr.size),
            "pard-paper": C.metrics(r, sp)}


def w_diagnostic(key: tuple[str, float, int, float]) -> dict[str, Any]:
    """How often the planner publishes w = 0: one pard run, recording every sync's per-stage
    ``StageTerms.wait_quantile_s`` (DESIGN §3.2's w_k) through ``simulate``'s ``on_sync``."""
    import pard.sim as S

    pattern, lam, seed, duration = key
    seen: list[list[float]] = []
    sp = C.spec(PIPELINE)
    arr = C.arrivals(pattern, C.LOAD * sp.capacity().pipeline, duration, seed=seed)
    S.simulate(sp, arr, "pard-paper", planner={"lam": lam}, seed=seed, **C.REGIME,
               on_sync=lambda t, terms: seen.append([x.wait_quantile_s for x in terms]))
    w = np.asarray(seen)
    return {"pattern": pattern, "lam": lam, "stages": [st.name for st in sp.stages], "syncs": int(w.shape[0]),
            "share_of_syncs_w_zero": (w == 0).mean(axis=0).tolist(), "mean_w_s": w.mean(axis=0).tolist(),
            "max_w_s": w.max(axis=0).tolist()}


def summarise(rows: list[dict[str, Any]], lams: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pattern, slo in itertools.product(C.PATTERNS, SLOS):
        curve = {}
        for lam in lams:
            rs = [r["pard-paper"] for r in rows if r["pattern"] == pattern and r["lam"] == lam and r["slo_s"] == slo]
            curve[str(lam)] = {m: float(np.mean([x[m] for x in rs]))
                               for m in ("drop_rate", "invalid_rate", "goodput_normalised")}
        best = min(lams, key=lambda v: curve[str(v)]["drop_rate"])
        lo = min(curve[str(v)]["drop_rate"] for v in lams)
        # lambdas within 1 % (relative) of the best drop rate: a flat curve has many
        near = [v for v in lams if curve[str(v)]["drop_rate"] <= lo * 1.01]
        out[f"{pattern}/{int(round(slo * 1000))}ms"] = {"curve": curve, "best_lam": best, "lams_within_1pct_of_best": near,
                        "drop_rate_at_default_0.1": curve.get("0.1", {}).get("drop_rate")}
    return {"patterns": out, "paper_best_lam_range": [0.075, 0.15]}


def plot(summary: dict[str, Any], lams: list[float], path: Any) -> None:
    plt = C.plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for key, d in summary["patterns"].items():
        c = d["curve"]
        d0 = c["0.1"]["drop_rate"] if "0.1" in c else 1.0
        ls = "o-" if key.endswith("500ms") else "s--"
        axes[0].plot(lams, [c[str(v)]["drop_rate"] / d0 for v in lams], ls, label=key)
        i0 = c["0.1"]["invalid_rate"] if "0.1" in c else 1.0
        axes[1].plot(lams, [c[str(v)]["invalid_rate"] / i0 if i0 else 0 for v in lams], ls, label=key)
    for ax, what in zip(axes, ["drop rate", "invalid rate"]):
        ax.axvspan(0.075, 0.15, color="k", alpha=0.08, label="paper's best range")
        ax.set_xlabel("lambda")
        ax.set_ylabel(f"{what} / its value at lambda = 0.1")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Experiment 3b: lambda sweep, pard on {PIPELINE} (autoscaling, cold start 10 s, jitter 0.1)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = C.parse_args(__doc__, argv)
    duration = 1800.0 if args.full else 300.0
    lams = ([0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3] if args.full
            else [0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3])
    seeds = list(range(args.seed, args.seed + (3 if args.full else 2)))
    rec = C.Recorder(NAME, args, {"pipeline": PIPELINE, "patterns": C.PATTERNS, "load": C.LOAD, "regime": C.REGIME,
                                  "lams": lams, "slos_s": SLOS, "duration_s": duration, "seeds": seeds})
    rows = C.run_parallel(run_one, list(itertools.product(C.PATTERNS, SLOS, lams, seeds, [duration])), args.jobs)
    summary = summarise(rows, lams)
    diag = [w_diagnostic((p, lam, args.seed, duration)) for p in C.PATTERNS for lam in (0.1, 0.3)]
    summary["w_diagnostic"] = diag
    plot(summary, lams, rec.png_path)
    rec.write(rows, summary)
    for p, d in summary["patterns"].items():
        print(p, "best lambda", d["best_lam"], "within 1 %:", d["lams_within_1pct_of_best"],
              {k: round(v["drop_rate"], 5) for k, v in d["curve"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
