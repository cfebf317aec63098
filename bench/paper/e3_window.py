"""Experiment 3c (issue 6 item 4): estimation-window length vs the input's burstiness (CV).

pard on lv, the paper's regime (common.py), arrivals from the seeded MMPP at several CVs of 1 s
counts; the planner's window is held fixed (``adapt_window=False``) at each swept length, and once
more left to the planner's own CV rule (DESIGN §3.5: CV < 0.5 -> 5-7 s, 0.5-1 -> 3-5 s, >= 1 -> 1-3 s).
Recorded: drop rate and invalid rate per (CV, window), the best fixed window per CV, and how the
adaptive rule compares with the best fixed window.

Paper: the window should shrink as the CV grows (the rule above).

    python bench/paper/e3_window.py            # CV {0.47, 1.0, 1.5}, windows {1, 3, 5, 7, 10} s, 300 s, 2 seeds
    python bench/paper/e3_window.py --full     # 5 CVs, 7 windows, 1800 s, 3 seeds
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import numpy as np

import common as C

NAME = "e3_window"
PIPELINE = "lv"


def run_one(key: tuple[float, float | None, int, float]) -> dict[str, Any]:
    from pard.sim import simulate

    cv, window, seed, duration = key
    sp = C.spec(PIPELINE)
    arr = C.arrivals("mmpp", C.LOAD * sp.capacity().pipeline, duration, seed=seed, cv=cv)
    if window is None:
        r = simulate(sp, arr, "pard-paper", seed=seed, planner={"adapt_window": True}, **C.REGIME)
    else:
        r = simulate(sp, arr, "pard-paper", seed=seed, planner={"window_s": window, "adapt_window": False}, **C.REGIME)
    return {"cv": cv, "window_s": window, "seed": seed, "requests": int(arr.size), "pard-paper": C.metrics(r, sp)}


def summarise(rows: list[dict[str, Any]], cvs: list[float], windows: list[float]) -> dict[str, Any]:
    from pard.planner import window_for_cv

    out: dict[str, Any] = {}
    for cv in cvs:
        curve: dict[str, Any] = {}
        for w in [*windows, None]:
            rs = [r["pard-paper"] for r in rows if r["cv"] == cv and r["window_s"] == w]
            curve["adaptive" if w is None else str(w)] = {
                m: float(np.mean([x[m] for x in rs])) for m in ("drop_rate", "invalid_rate", "goodput_normalised")}
        best = min(windows, key=lambda v: curve[str(v)]["drop_rate"])
        out[str(cv)] = {"curve": curve, "best_fixed_window_s": best,
                        "rule_window_s": float(window_for_cv(cv)),
                        "adaptive_vs_best_fixed_drop": C.ratio(curve["adaptive"]["drop_rate"],
                                                               curve[str(best)]["drop_rate"])}
    return {"cvs": out}


def plot(summary: dict[str, Any], cvs: list[float], windows: list[float], path: Any) -> None:
    plt = C.plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for cv in cvs:
        c = summary["cvs"][str(cv)]["curve"]
        ad = c["adaptive"]
        line, = axes[0].plot(windows, [c[str(w)]["drop_rate"] / ad["drop_rate"] for w in windows], "o-",
                             label=f"CV {cv}")
        axes[0].axvline(summary["cvs"][str(cv)]["rule_window_s"], color=line.get_color(), ls=":", lw=1)
        if ad["invalid_rate"] > 0:
            axes[1].plot(windows, [c[str(w)]["invalid_rate"] / ad["invalid_rate"] for w in windows], "o-",
                         label=f"CV {cv}")
    axes[0].set_ylabel("drop rate / adaptive window's")
    axes[1].set_ylabel("invalid rate / adaptive window's")
    for ax in axes:
        ax.axhline(1.0, color="0.3", lw=1)
        ax.set_xlabel("fixed window (s); dotted: the CV rule's window")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Experiment 3c: estimation window vs CV, pard on {PIPELINE} (autoscaling, cold start 10 s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = C.parse_args(__doc__, argv)
    duration = 1800.0 if args.full else 300.0
    cvs = [0.47, 0.75, 1.0, 1.25, 1.5] if args.full else [0.47, 1.0, 1.5]
    windows = [1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0] if args.full else [1.0, 3.0, 5.0, 7.0, 10.0]
    seeds = list(range(args.seed, args.seed + (3 if args.full else 2)))
    rec = C.Recorder(NAME, args, {"pipeline": PIPELINE, "cvs": cvs, "windows_s": windows, "load": C.LOAD,
                                  "regime": C.REGIME, "duration_s": duration, "seeds": seeds})
    keys = list(itertools.product(cvs, [*windows, None], seeds, [duration]))
    rows = C.run_parallel(run_one, keys, args.jobs)
    summary = summarise(rows, cvs, windows)
    plot(summary, cvs, windows, rec.png_path)
    rec.write(rows, summary)
    for cv, d in summary["cvs"].items():
        print(f"CV {cv}: best fixed window {d['best_fixed_window_s']} s, rule {d['rule_window_s']:.1f} s, "
              f"adaptive/best drop {d['adaptive_vs_best_fixed_drop']:.3f}",
              {k: round(v["drop_rate"], 4) for k, v in d["curve"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
