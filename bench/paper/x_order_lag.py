"""Mechanism check: where pard trails nexus in experiment 1, is it the order switch lagging bursts?

Reads ``results/e1_workloads.json`` and takes every workload of the paper's regime where pard's
normalised goodput is below nexus's.  On each (the same seeds, arrivals and regime) it runs pard as
written (sync 1 s), pard with the planner every 0.25 s, ``pard-hbf`` (always high-budget-first) and
nexus.  If the loss comes from the interval between a burst's onset and the next sync -- during which
the stage still serves lowest-budget-first (DESIGN §3.3) -- then a faster sync and a fixed HBF order
both close the gap.  Recorded: normalised goodput, invalid rate and worst 1 s drop rate of each.

    python bench/paper/x_order_lag.py     # every seed of experiment 1's run (--full changes nothing here)
"""

from __future__ import annotations

import json
import sys
from typing import Any

import common as C

NAME = "x_order_lag"
VARIANTS = (("pard-paper", 1.0), ("pard-paper", 0.25), ("pard-hbf", 1.0), ("nexus", 1.0))


def run_one(key: tuple[str, str, int, float]) -> dict[str, Any]:
    from pard.sim import simulate

    pipeline, pattern, seed, duration = key
    sp = C.spec(pipeline)
    arr = C.arrivals(pattern, C.LOAD * sp.capacity().pipeline, duration, seed=seed)
    out: dict[str, Any] = {"pipeline": pipeline, "pattern": pattern, "seed": seed, "variants": {}}
    for pol, sync in VARIANTS:
        r = simulate(sp, arr, pol, seed=seed, planner={"sync_interval_s": sync}, **C.REGIME)
        out["variants"][f"{pol}@{sync:g}s"] = {"goodput_normalised": r.goodput_normalised,
                                               "invalid_rate": r.invalid_rate,
                                               "transient_drop_rate_1s": r.transient_drop_rate(1)}
    return out


def main(argv: list[str] | None = None) -> int:
    args = C.parse_args(__doc__, argv)
    src = args.out / "e1_workloads.json"
    if not src.exists():
        print(f"{NAME}: needs {src}; run e1_workloads.py first", file=sys.stderr)
        return 2
    e1 = json.loads(src.read_text())
    cells = e1["summary"]["paper"]["cells"]
    trailing = [w for w, c in cells.items() if c["pard-paper"]["goodput_normalised"] < c["nexus"]["goodput_normalised"]]
    seeds = e1["config"]["seeds"]
    duration = float(e1["config"]["duration_s"])
    rec = C.Recorder(NAME, args, {"source": "e1_workloads.json (paper regime)", "workloads": trailing,
                                  "seeds": seeds, "duration_s": duration, "variants": [f"{p}@{s:g}s" for p, s in VARIANTS],
                                  "regime": C.REGIME})
    keys = [(w.split("/")[0], w.split("/")[1], s, duration) for w in trailing for s in seeds]
    rows = C.run_parallel(run_one, keys, args.jobs)
    names = [f"{p}@{s:g}s" for p, s in VARIANTS]
    summary: dict[str, Any] = {}
    for w in trailing:
        rs = [r for r in rows if f"{r['pipeline']}/{r['pattern']}" == w]
        summary[w] = {n: {m: sum(r["variants"][n][m] for r in rs) / len(rs)
                          for m in ("goodput_normalised", "invalid_rate", "transient_drop_rate_1s")} for n in names}
        s = summary[w]
        summary[w]["gap_closed_by_fast_sync"] = s["pard-paper@0.25s"]["goodput_normalised"] >= s["nexus@1s"]["goodput_normalised"]
        summary[w]["gap_closed_by_hbf"] = s["pard-hbf@1s"]["goodput_normalised"] >= s["nexus@1s"]["goodput_normalised"]
    plt = C.plt()
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(trailing)), 4))
    wdt = 0.8 / len(names)
    for j, n in enumerate(names):
        xs = [i + (j - (len(names) - 1) / 2) * wdt for i in range(len(trailing))]
        ys = [summary[w][n]["goodput_normalised"] / summary[w]["nexus@1s"]["goodput_normalised"] for w in trailing]
        ax.bar(xs, ys, wdt, label=n)
    ax.axhline(1.0, color="0.3", lw=1)
    ax.set_xticks(range(len(trailing)), trailing)
    ax.set_ylabel("normalised goodput / nexus's")
    lo = min([summary[w][n]["goodput_normalised"] / summary[w]["nexus@1s"]["goodput_normalised"]
              for w in trailing for n in names], default=0.99)
    ax.set_ylim(min(lo, 0.99) - 0.005, None)
    ax.set_title("Where pard trails nexus (exp. 1): faster sync / fixed HBF")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(rec.png_path, dpi=100)
    plt.close(fig)
    rec.write(rows, summary)
    for w, s in summary.items():
        print(w, {n: round(s[n]["goodput_normalised"], 4) for n in names})
    return 0


if __name__ == "__main__":
    sys.exit(main())
