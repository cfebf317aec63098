"""Where the compute goes (issue 37 item 3): invalid rate, wasted share of compute and the share of drops made
before any compute, per policy, on the issue's slow-last-stage chain and on the built-in ``lv`` pipeline.

    PYTHONPATH=python python bench/waste.py [--seeds 0,1,2] [--duration 120] [--loads 1.2,2] [--markdown FILE]

Each row is ``pard.simulate`` with Poisson arrivals at ``load`` x the pipeline's capacity, jitter 0.1, averaged
over the seeds.  The chain (the issue's): ``decode {1: 4, 8: 10} ms`` -> ``detect {1: 6, 8: 16}`` -> ``embed
{1: 3, 8: 8}`` -> ``rank {1: 12, 8: 45}``, one worker each, max batch 8, SLO 0.25 s; ``lv`` at its own SLO.
Columns: goodput over the bound, invalid rate (compute of requests not on time over all compute, from the
per-request outcomes), wasted share (the same from the per-stage split, :mod:`pard.compute_split`), drops
before compute (of the requests shed, the share no stage had run), and the share of the drops made above
the last stage (the issue's "shed done before rank").  This is the baseline that rate-aware admission (issue 37 item 1) is measured against.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import pard
from pard.config import PipelineSpec, StageSpec

POLICIES = ("pard", "pard-paper", "nexus", "clipper++")
JITTER_CV = 0.1


def chain() -> PipelineSpec:
    """The issue's four-stage chain whose last stage is the steady bottleneck."""
    ms = {"decode": (4, 10), "detect": (6, 16), "embed": (3, 8), "rank": (12, 45)}
    names = list(ms)
    return PipelineSpec(name="slow-last", slo=0.25, stages=[
        StageSpec(name=n, profile={1: ms[n][0] / 1e3, 8: ms[n][1] / 1e3}, max_batch=8, workers=1,
                  successors=names[i + 1:i + 2]) for i, n in enumerate(names)])


def row(spec: PipelineSpec, policy: str, load: float, seeds: list[int], duration_s: float) -> dict[str, float]:
    """The means over ``seeds`` of one (pipeline, policy, load)."""
    runs: list[dict[str, float]] = []
    for seed in seeds:
        arr = pard.workloads.poisson(load * spec.capacity().pipeline, duration_s, seed=seed)
        r = pard.simulate(spec, arr, policy, jitter_cv=JITTER_CV, seed=seed)
        runs.append({"goodput_ratio": r.goodput_ratio, "invalid_rate": r.invalid_rate,
                     "wasted_share": r.wasted_compute_share, "before_compute": r.drops_before_compute,
                     "above_last": 1.0 - r.stages[-1].drop_share if r.dropped else 0.0})
    return {k: statistics.fmean(x[k] for x in runs) for k in runs[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of arrivals per run (default 120)")
    ap.add_argument("--loads", default="1.2,2", help="offered loads against capacity (default 1.2,2)")
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    loads = [float(x) for x in args.loads.split(",")]
    lines = ["| pipeline | load | policy | goodput / bound | invalid rate | wasted share | drops before compute | "
             "drops above the last stage |", "|---|---|---|---|---|---|---|---|"]
    for spec in (chain(), pard.config.builtin("lv")):
        for load in loads:
            for policy in POLICIES:
                m: dict[str, Any] = row(spec, policy, load, seeds, args.duration)
                lines.append(f"| {spec.name} | {load:g} | `{policy}` | {m['goodput_ratio']:.3f} | "
                             f"{m['invalid_rate']:.2%} | {m['wasted_share']:.2%} | {m['before_compute']:.1%} | "
                             f"{m['above_last']:.1%} |")
                print(lines[-1], flush=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
