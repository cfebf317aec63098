"""Behaviour fingerprints of every named policy: one SHA-1 per simulated run, to compare two builds.

A refactor that must not change behaviour (a lever removed that no named policy sets, a rule moved
into its own header) is checked by taking the fingerprints before and after and comparing them:

    python bench/fingerprints.py -o before.json          # on the starting commit
    python bench/fingerprints.py -o after.json           # after the change
    python bench/fingerprints.py --compare before.json after.json

Each run is ``pard.simulate`` on a built-in pipeline (lv, tm, da, ga) x a named policy (plus the
autoscaled runs of pard, pard-paper and naive) at two offered loads on seeded bursty arrivals with two
service tiers and execution jitter 0.1, so that every drop rule and order switch is exercised.  A
fingerprint hashes the per-request state, finish time, drop stage, drop reason and compute time arrays
and the detailed JSON report; any bit that differs changes it.  ``--compare`` exits 1 when a run differs
or is missing from one side.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from typing import Any

import numpy as np

from pard import config
from pard.policies import policy_names
from pard.sim import simulate
from pard.workloads import bursty

PIPELINES = ("lv", "tm", "da", "ga")
AUTOSCALED = ("pard", "pard-paper", "naive")
#: Offered loads against the pipeline's capacity: one calm on average (order switches, the floor, idle
#: stages) and one past capacity (overload reaction, shedding, pacing); bursts exceed capacity in both.
LOADS = (0.6, 1.1)
DURATION_S = 60.0
BURST_CV = 1.5
JITTER_CV = 0.1
SEED = 7
TIERS = {"gold": 3.0, "bronze": 1.0}


def _fingerprint(report: Any) -> str:
    """SHA-1 of the per-request outcome arrays and the detailed JSON report."""
    h = hashlib.sha1()
    for arr, dtype in ((report.state, np.int8), (report.finish_s, np.float64), (report.drop_stage, np.int32),
                       (report.reason, np.int32), (report.compute_s, np.float64)):
        h.update(np.ascontiguousarray(arr, dtype=dtype).tobytes())
    h.update(report.to_json(detail=True).encode())
    return h.hexdigest()


def runs() -> list[tuple[str, str, bool]]:
    """(policy, autoscale) for every run on one pipeline and load, in a stable order."""
    return [(pol, False) for pol in policy_names()] + [(pol, True) for pol in AUTOSCALED]


def take() -> dict[str, str]:
    """Run every case; return {"pipeline/load/policy[/autoscale]": sha1}."""
    prints: dict[str, str] = {}
    for pipeline in PIPELINES:
        spec = config.builtin(pipeline).model_copy(update={"tiers": dict(TIERS)})
        for load in LOADS:
            arr = bursty(load * spec.capacity().pipeline, DURATION_S, BURST_CV, seed=SEED)
            tiers = np.random.default_rng(SEED).integers(0, len(TIERS), arr.size).astype(np.int32)
            for policy, autoscale in runs():
                report = simulate(spec, arr, policy, tiers=tiers, jitter_cv=JITTER_CV, autoscale=autoscale,
                                  cold_start_s=2.0, seed=SEED)
                key = f"{pipeline}/{load:g}/{policy}" + ("/autoscale" if autoscale else "")
                prints[key] = _fingerprint(report)
    return prints


def compare(a_path: str, b_path: str) -> int:
    """Print the runs whose fingerprints differ (or that one side lacks); 0 when all agree, else 1."""
    with open(a_path) as fa, open(b_path) as fb:
        a, b = json.load(fa)["fingerprints"], json.load(fb)["fingerprints"]
    differ = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    only = sorted(a.keys() ^ b.keys())
    for k in differ:
        print(f"differs: {k}")
    for k in only:
        print(f"only in {'A' if k in a else 'B'}: {k}")
    print(f"{len(a.keys() & b.keys())} runs compared, {len(differ)} differ, {len(only)} on one side only")
    return 1 if differ or only else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("-o", "--output", default="fingerprints.json", help="JSON file to write")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two fingerprint files")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    t0 = time.perf_counter()
    prints = take()
    with open(args.output, "w") as f:
        json.dump({"loads": list(LOADS), "duration_s": DURATION_S, "burst_cv": BURST_CV, "jitter_cv": JITTER_CV,
                   "seed": SEED, "fingerprints": prints}, f, indent=1, sort_keys=True)
    print(f"{len(prints)} fingerprints in {time.perf_counter() - t0:.1f} s -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
