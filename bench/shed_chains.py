"""Slow-last-stage chains (issue 37): where the drops happen, with and without the virtual-queue rule.

Each chain has 2-5 stages, one worker each, max batch 8; the stages above the last run at
``1 / ratio`` times the last stage's full-batch throughput (``ratio`` = the bottleneck ratio: the last
stage's capacity over the others'). Arrivals are Poisson or bursty (``pard.workloads.bursty``, cv 1.5) at
``load`` times the pipeline's capacity, with or without two service tiers. For ``pard``, ``pard`` with
``virtual_queue=False`` (``pard-vq``) and ``nexus`` it prints goodput / bound, the invalid rate and the share
of drops made before any compute (at the entry stage, which spends nothing before its own batch).

    python bench/shed_chains.py [--duration 30] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools

import numpy as np

import pard
from pard import workloads as wl
from pard.config import PipelineSpec
from pard.policies import get_policy

LAST = {1: 0.012, 8: 0.045}  # the bottleneck's profile (s)


def chain(n: int, ratio: float, tiered: bool) -> PipelineSpec:
    """n stages; each above the last runs d(b) = ratio * LAST's d(b) (so ratio = its capacity share)."""
    stages = []
    for k in range(n):
        last = k == n - 1
        prof = LAST if last else {b: d * ratio for b, d in LAST.items()}
        stages.append({"name": f"s{k}", "profile": prof, "max_batch": 8, "workers": 1,
                       "successors": [] if last else [f"s{k + 1}"]})
    return PipelineSpec.model_validate({"name": f"chain{n}", "slo": 0.25 + 0.02 * n,
                                        "tiers": {"gold": 4.0, "free": 1.0} if tiered else {},
                                        "stages": stages})


def row(spec: PipelineSpec, arrivals: np.ndarray, tiers: np.ndarray | None) -> dict[str, tuple[float, float, float]]:
    no_vq = dataclasses.replace(get_policy("pard"), virtual_queue=False)
    out = {}
    for name, pol in (("pard", "pard"), ("pard-vq", no_vq), ("nexus", "nexus")):
        r = pard.simulate(spec, arrivals, pol, tiers=tiers, jitter_cv=0.1)
        drops = r.dropped + r.rejected
        first = r.stages[0].dropped + r.stages[0].rejected
        out[name] = (r.goodput_ratio, r.invalid_rate, first / drops if drops else 1.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals per row")
    ap.add_argument("--quick", action="store_true", help="ratios 0.5 and 0.9 and 2 and 4 stages only")
    a = ap.parse_args()
    ns = (2, 4) if a.quick else (2, 3, 4, 5)
    ratios = (0.5, 0.9) if a.quick else (0.5, 0.7, 0.9)
    print("| stages | ratio | load | arrivals | tiers | pard gp/bound, invalid, before | pard-vq | nexus |")
    print("|---|---|---|---|---|---|---|---|")
    sums: dict[str, list[np.ndarray]] = {}
    for n, ratio, load, kind, tiered in itertools.product(ns, ratios, (1.2, 2.0), ("poisson", "bursty"), (False, True)):
        spec = chain(n, ratio, tiered)
        rate = load * spec.capacity().pipeline
        arr = (wl.poisson(rate, a.duration, seed=1) if kind == "poisson"
               else wl.bursty(rate, a.duration, 1.5, seed=1))
        tiers = np.random.default_rng(2).integers(0, 2, arr.size) if tiered else None
        res = row(spec, arr, tiers)
        for k, v in res.items():
            sums.setdefault(k, []).append(np.array(v))
        cells = " | ".join(f"{g:.3f}, {i * 100:.1f} %, {b * 100:.0f} %" for g, i, b in res.values())
        print(f"| {n} | {ratio} | {load} | {kind} | {'2' if tiered else '-'} | {cells} |", flush=True)
    for k, v in sums.items():
        m = np.mean(v, axis=0)
        worst = np.min([x[0] for x in v])
        print(f"{k}: mean goodput/bound {m[0]:.3f} (worst {worst:.3f}), invalid {m[1] * 100:.1f} %, "
              f"before compute {m[2] * 100:.0f} %")


if __name__ == "__main__":
    main()
