"""A small LLM chain (embed -> generate) under every LLM-relevant policy: goodput against the bound, invalid
rate and the LLM stage's wasted compute (issue 38).

The chain: ``embed`` (d(1) = 2 ms, d(8) = 5 ms, max batch 8) feeds ``generate``, an llm stage with the
design's example numbers (prefill 12 ms + 0.08 ms per input token; decode step 11 / 12 / 15 / 19 ms at 1 / 8 /
32 / 64 running sequences; max_seqs 64, KV 120 000 tokens, 1 024 output tokens at most), one worker each.
Requests carry real (input, output) token pairs drawn from the bundled Azure LLM conversation trace
(:func:`pard.workloads.draw_tokens`); arrivals are Poisson at multiples of the LLM stage's capacity at the
trace's mean lengths; SLO 10 s; execution jitter 0.1.

    python bench/llm_chain.py [--duration 300] [--loads 1.0 1.5] [--seed 1]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from pard import simulate
from pard.config import PipelineSpec
from pard.sim_llm import bound_spec
from pard.workloads import draw_tokens, poisson

POLICIES = ("pard", "pard-paper", "nexus", "vllm", "scorpio", "ray-serve")
SPEC = PipelineSpec(name="llm-chain", slo=10.0, stages=[
    dict(name="embed", profile={1: 0.002, 8: 0.005}, max_batch=8, successors=["generate"]),
    dict(name="generate", kind="llm", prefill={"base": 0.012, "per_token": 0.00008},
         decode={1: 0.011, 8: 0.012, 32: 0.015, 64: 0.019}, max_seqs=64, kv_tokens=120000, max_output_tokens=1024),
])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of arrivals (default 300)")
    ap.add_argument("--loads", type=float, nargs="+", default=[1.0, 1.5], help="offered load / LLM capacity")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ins, outs = draw_tokens(100_000, seed=args.seed)
    tokens = {"in_tokens": ins, "out_tokens": outs, "max_tokens": None}
    capacity = bound_spec(SPEC, tokens).stage("generate").throughput()
    print(f"LLM capacity at the trace's mean lengths (in {ins.mean():.0f}, out {np.minimum(outs, 1024).mean():.0f} "
          f"tokens): {capacity:.2f} req/s")
    print(f"{'load':>5} {'policy':<11} {'goodput/bound':>13} {'invalid':>8} {'LLM wasted s':>12} {'LLM useful s':>12}"
          f" {'drop':>6} {'late':>6} {'calib':>6}")
    for load in args.loads:
        arr = poisson(load * capacity, args.duration, seed=args.seed)
        n = arr.size
        for pol in POLICIES:
            r = simulate(SPEC, arr, pol, in_tokens=ins[:n], out_tokens=outs[:n], jitter_cv=0.1, seed=args.seed)
            split = r.compute_split
            cal = (r.llm_calibration or {}).get("generate", {})
            share = cal.get("under_share", math.nan)
            print(f"{load:>5.2f} {pol:<11} {r.goodput / r.goodput_bound:>13.3f} {r.invalid_rate:>8.3f} "
                  f"{split.wasted_s[1]:>12.1f} {split.useful_s[1]:>12.1f} {(r.dropped + r.rejected) / n:>6.3f} "
                  f"{r.late / n:>6.3f} {share:>6.3f}")


if __name__ == "__main__":
    main()
