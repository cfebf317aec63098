"""Mechanism check: why pard wastes compute when the bottleneck is the last stage (ga).

ga's last stage (action_recognize, 727 req/s at 5 workers) sets its capacity; its entry stage can
pass 774 req/s.  Under a sustained overload (the Azure trace at 2x capacity, fixed workers, jitter CV
0.1 -- a point of the stress test) this records, per stage, the requests that reached it, ran there
and were dropped there, its compute and the mean queueing delay of the requests it took into batches,
for pard, pard at lambda 0.5 and 0.9, pard without execution jitter, pard with its batch-wait samples
weighted per request instead of per batch (each batch's wait repeated batch-size times before the
planner sees it; done by wrapping ``pard.sim.Planner.update`` in this process), pard-upper (w = sum
of durations), pard-hbf and nexus.  The questions: where do pard's drops land, and is it the order, the execution
variance or the missing batch-wait margin (w = 0, M6) that puts them there?

    python bench/paper/x_downstream.py [--full]     # --full: 600 s instead of 120 s
"""

from __future__ import annotations

import sys
from typing import Any

import common as C

NAME = "x_downstream"
PIPELINE, PATTERN, LOAD = "ga", "azure", 2.0
#: label -> (policy, extra pard.simulate arguments)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "pard-paper": ("pard-paper", {}),
    "pard lam=0.5": ("pard-paper", {"planner": {"lam": 0.5}}),
    "pard lam=0.9": ("pard-paper", {"planner": {"lam": 0.9}}),
    "pard jitter=0": ("pard-paper", {"jitter_cv": 0.0}),
    "pard-upper": ("pard-upper", {}),
    "pard-hbf": ("pard-hbf", {}),
    "nexus": ("nexus", {}),
}
POLICIES = tuple(VARIANTS)


def main(argv: list[str] | None = None) -> int:
    from pard.sim import simulate

    args = C.parse_args(__doc__, argv)
    duration = 600.0 if args.full else 120.0
    rec = C.Recorder(NAME, args, {"pipeline": PIPELINE, "pattern": PATTERN, "load": LOAD, "duration_s": duration,
                                  "seed": args.seed, "regime": {"autoscale": False, "jitter_cv": 0.1},
                                  "policies": POLICIES})
    sp = C.spec(PIPELINE)
    arr = C.arrivals(PATTERN, LOAD * sp.capacity().pipeline, duration, seed=args.seed)
    reps = {}
    for label, (pol, extra) in VARIANTS.items():
        kw: dict[str, Any] = {"autoscale": False, "jitter_cv": 0.1, **extra}
        reps[label] = simulate(sp, arr, pol, seed=args.seed, **kw)
    out: dict[str, Any] = {}
    for name, r in reps.items():
        out[name] = {"goodput_ratio": r.goodput_ratio, "invalid_rate": r.invalid_rate, "drop_rate": r.drop_rate,
                     "stages": {s.name: {"submitted": s.submitted, "executed": s.executed, "dropped": s.dropped,
                                         "compute_s": s.compute_s, "mean_queue_delay_s": s.mean_queue_delay_s}
                                for s in r.stages}}
    last = sp.stages[-1].name
    workers_s = sp.stages[-1].workers * duration
    summary = {p: {"goodput_ratio": d["goodput_ratio"], "invalid_rate": d["invalid_rate"],
                   "dropped_at_last_stage": d["stages"][last]["dropped"],
                   "last_stage_busy_share": d["stages"][last]["compute_s"] / workers_s,
                   "last_stage_mean_queue_delay_s": d["stages"][last]["mean_queue_delay_s"]} for p, d in out.items()}
    summary["last_stage"] = last  # type: ignore[assignment]
    plt = C.plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    names = [st.name for st in sp.stages]
    for j, p in enumerate(POLICIES):
        wd = 0.8 / len(POLICIES)
        xs = [i + (j - (len(POLICIES) - 1) / 2) * wd for i in range(len(names))]
        axes[0].bar(xs, [out[p]["stages"][n]["dropped"] for n in names], wd, label=p)
        axes[1].bar(xs, [out[p]["stages"][n]["mean_queue_delay_s"] * 1e3 for n in names], wd, label=p)
    for ax, lab in zip(axes, ["requests dropped at the stage", "mean queueing delay of served requests (ms)"]):
        ax.set_xticks(range(len(names)), names, rotation=15)
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.suptitle(f"{PIPELINE}, {PATTERN} trace at {LOAD}x capacity, fixed workers: where the drops land")
    fig.tight_layout()
    fig.savefig(rec.png_path, dpi=100)
    plt.close(fig)
    rec.write(out, summary)
    for p in POLICIES:
        s = summary[p]
        print(f"{p:14s} goodput/bound {s['goodput_ratio']:.3f} invalid {s['invalid_rate']:.3f} "
              f"dropped at {last} {s['dropped_at_last_stage']} busy {s['last_stage_busy_share']:.2f} "
              f"queue {s['last_stage_mean_queue_delay_s'] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
