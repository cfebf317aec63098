"""The built-in ``rag`` pipeline (embed -> retrieve -> rerank -> generate, an llm stage) under pard and the
baselines users run, on the bundled Azure LLM conversation trace's real token counts (issue 38).

Grid (24 rows): load {0.8, 1.0, 1.3} (mean arrival rate over rag's capacity, its llm stage read at the
trace's mean lengths) x arrivals {the bundled trace amplified (10 s envelope, Poisson inside: steady),
bursty MMPP with CV 1.5 of per-second counts} x dynamics {fixed workers with execution jitter CV 0.3,
autoscaling every sync with 10 s cold starts and jitter CV 0.1} x seed {0, 1}.  Every request carries a real
(input, output) token pair drawn from the trace (``pard.workloads.draw_tokens``, seeded by the row).  Every
policy runs on the same arrivals, tokens and seed with ``pard.simulate``'s defaults; nothing is tuned per row.

Per row: each policy's goodput over the row's largest goodput bound (one denominator per row: with
autoscaling each run's bound follows its own workers) and the llm stage's wasted GPU-seconds (compute
spent on requests that ended dropped or late).  Summary: pard minus the best baseline per row (median,
worst, rows behind by more than 0.3 points), pard against pard-paper, and pard's llm waste over that of the
baseline with the best goodput in the row; the predictor's calibration (share of finished requests whose
length fell under the quantile used).

    PYTHONPATH=python python bench/rag.py [--duration 600] [--json rows.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import time

import numpy as np

import pard
from pard import workloads as wl
from pard.config import builtin
from pard.sim_llm import bound_spec

POLICIES = ["pard", "pard-paper", "nexus", "clipper++", "triton", "vllm", "scorpio", "ray-serve", "naive"]
BASELINES = ["nexus", "clipper++", "triton", "vllm", "scorpio", "ray-serve", "naive"]
LOADS = [0.8, 1.0, 1.3]
TRACES = ["azure-conv", "bursty"]
DYNAMICS = ["fixed-j0.3", "autoscale"]
SEEDS = [0, 1]


def arrivals_for(trace: str, rate: float, duration: float, seed: int) -> np.ndarray:
    """Steady: the bundled trace's 10 s envelope amplified to ``rate``, cut to ``duration``; bursty: MMPP."""
    if trace == "bursty":
        return np.asarray(wl.bursty(rate, duration, 1.5, seed=seed), dtype=np.float64)
    sel = wl.window(wl.azure_llm_conv(), 1170.0, duration)  # the stretch `pard run` replays by default
    return wl.scale(sel, rate, mode="amplify", seed=seed)


def run_row(spec, capacity: float, llm: int, load: float, trace: str, dyn: str, seed: int,
            duration: float) -> dict:
    arr = arrivals_for(trace, load * capacity, duration, seed)
    ins, outs = wl.draw_tokens(arr.size, seed=100 + seed)
    params = dict(autoscale=True, cold_start_s=10.0, jitter_cv=0.1) if dyn == "autoscale" else \
        dict(autoscale=False, jitter_cv=0.3)
    out = {"load": load, "trace": trace, "dynamics": dyn, "seed": seed, "requests": int(arr.size), "policies": {}}
    for pol in POLICIES:
        r = pard.simulate(spec, arr, pol, in_tokens=ins, out_tokens=outs, seed=seed, **params)
        cal = (r.llm_calibration or {}).get(spec.stages[llm].name, {})
        out["policies"][pol] = {"goodput": r.goodput, "bound": r.goodput_bound, "invalid_rate": r.invalid_rate,
                                "llm_wasted_s": float(r.compute_split.wasted_s[llm]),
                                "llm_useful_s": float(r.compute_split.useful_s[llm]),
                                "calibration": cal.get("under_share", math.nan), "quantile": cal.get("quantile")}
    bound = max(p["bound"] for p in out["policies"].values())
    for p in out["policies"].values():
        p["ratio"] = p["goodput"] / bound if bound > 0 else math.nan
    return out


def summary(rows: list[dict]) -> list[str]:
    lead, vs_paper, waste, behind = [], [], [], []
    for row in rows:
        ps = row["policies"]
        best = max(BASELINES, key=lambda b: ps[b]["ratio"])
        d = 100 * (ps["pard"]["ratio"] - ps[best]["ratio"])
        lead.append(d)
        vs_paper.append(100 * (ps["pard"]["ratio"] - ps["pard-paper"]["ratio"]))
        w = ps[best]["llm_wasted_s"]
        waste.append(ps["pard"]["llm_wasted_s"] / w if w > 0 else math.nan)
        if d < -0.3:
            behind.append(f"{row['trace']}/{row['load']}/{row['dynamics']}/s{row['seed']} ({d:+.2f} vs {best})")
    cal = [r["policies"]["pard"]["calibration"] for r in rows if not math.isnan(r["policies"]["pard"]["calibration"])]
    q = rows[0]["policies"]["pard"]["quantile"] if rows else None
    finite = [w for w in waste if not math.isnan(w)]
    return [
        f"pard - best baseline (points of the row's bound): median {statistics.median(lead):+.2f}, "
        f"worst {min(lead):+.2f}; rows behind by > 0.3: {len(behind)} of {len(rows)} {behind}",
        f"pard - pard-paper: median {statistics.median(vs_paper):+.2f}, worst {min(vs_paper):+.2f}",
        f"pard's llm wasted GPU-s over the best-goodput baseline's: median {statistics.median(finite):.2f}, "
        f"worst {max(finite):.2f} ({sum(w <= 0.5 for w in finite)} of {len(finite)} rows <= 0.5)",
        f"predictor calibration at quantile {q}: share under, median {statistics.median(cal):.3f}, "
        f"range {min(cal):.3f}-{max(cal):.3f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600.0, help="seconds of arrivals per row (default 600)")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    spec = builtin("rag")
    llm = next(i for i, st in enumerate(spec.stages) if st.kind == "llm")
    ins, outs = wl.draw_tokens(100_000, seed=0)
    capacity = bound_spec(spec, {"in_tokens": ins, "out_tokens": outs}).capacity().pipeline
    print(f"rag capacity at the trace's mean lengths: {capacity:.2f} req/s; SLO {spec.slo} s")
    head = " | ".join(f"{p} gp, waste s" for p in POLICIES)
    print(f"| trace | load | dynamics | seed | {head} |")
    rows, t0 = [], time.perf_counter()
    for trace, load, dyn, seed in itertools.product(TRACES, LOADS, DYNAMICS, SEEDS):
        row = run_row(spec, capacity, llm, load, trace, dyn, seed, a.duration)
        rows.append(row)
        cells = " | ".join(f"{row['policies'][p]['ratio']:.3f}, {row['policies'][p]['llm_wasted_s']:.0f}"
                           for p in POLICIES)
        print(f"| {trace} | {load} | {dyn} | {seed} | {cells} |", flush=True)
    for line in summary(rows):
        print(line)
    print(f"({time.perf_counter() - t0:.0f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
