"""Live fork/join under overload: pard with and without the coherent rank on its branch stages, and nexus.

A four-stage DAG of stages that sleep for their profiled duration (``d(b) = 4 ms + 2 ms * b`` times a
factor; max batch 8; SLO 0.15 s): ``fork`` (two workers, factor 0.5) fans out to ``left`` (factor 1.0) and
``right`` (factor 0.9), joined at ``join`` (factor 0.3). Both branches are short: 400 and 444 req/s against
the fork's 1600. Poisson arrivals at 2x the pipeline's capacity for 4 s are replayed live through
:class:`pard.Runtime` (the LivePipeline sets each scheduler's branch flag), once per policy and repeat.
Printed per run: on-time count, the copies each branch ran, the requests that reached the join, and the
join efficiency (reached / the slower branch's copies: the share of its work that was not wasted).

    python bench/live_dag.py                        # 3 repeats
    python bench/live_dag.py --repeats 5 --json live_dag.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pard.config import PipelineSpec, StageSpec
from pard.policies import POLICIES
from pard.runtime import Runtime

__all__ = ["run_once", "main"]

D0, D1, MAX_B, SECONDS = 0.004, 0.002, 8, 4.0
FACTORS = {"fork": 0.5, "left": 1.0, "right": 0.9, "join": 0.3}


def _sleeper(factor: float) -> Any:
    def run(xs: list[Any]) -> list[Any]:
        time.sleep(factor * (D0 + D1 * len(xs)))
        return list(xs)
    return run


def _join(parts: list[Any]) -> Any:
    return parts[0]


def spec() -> PipelineSpec:
    """The fork/join of sleeping stages (module doc)."""
    def stage(name: str, workers: int, successors: list[str]) -> StageSpec:
        f = FACTORS[name]
        return StageSpec(name=name, profile={b: f * (D0 + D1 * b) for b in (1, 2, 4, 8)}, max_batch=MAX_B,
                         workers=workers, successors=successors)
    return PipelineSpec(name="live-dag", slo=0.15, stages=[
        stage("fork", 2, ["left", "right"]), stage("left", 1, ["join"]), stage("right", 1, ["join"]),
        stage("join", 1, []),
    ])


def policy(name: str) -> Any:
    if name == "pard-incoherent":
        return dataclasses.replace(POLICIES["pard"], name=name, coherent_rank=False)
    return name


def run_once(name: str, seed: int) -> dict[str, Any]:
    """One live replay: on-time count, each stage's executed copies, join efficiency, load average."""
    sp = spec()
    rate = 2.0 * sp.capacity().pipeline
    arrivals = np.random.default_rng(seed).exponential(1.0 / rate, int(rate * SECONDS)).cumsum()
    load_before = os.getloadavg()[0]
    executors = {n: _sleeper(f) for n, f in FACTORS.items()}
    rt = Runtime(sp, executors, policy=policy(name), planner={"sync_interval_s": 1.0}, join=_join)
    rt.replay(arrivals, [0])
    rt.close(drain=True, timeout_s=5.0)
    rep = rt.report()
    by = {s.name: s for s in rep.stages}
    slower = min(by["left"].executed, by["right"].executed)
    return {"policy": name, "seed": seed, "submitted": rep.submitted, "on_time": rep.on_time, "late": rep.late,
            "left": by["left"].executed, "right": by["right"].executed, "join_in": by["join"].submitted,
            "join_efficiency": by["join"].submitted / slower if slower else float("nan"),
            "load_average": (load_before + os.getloadavg()[0]) / 2}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policies", default="pard,pard-incoherent,nexus")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    for rep in range(args.repeats):
        for name in args.policies.split(","):
            r = run_once(name, seed=rep)
            rows.append(r)
            print(f"{name:16s} seed {rep}: on time {r['on_time']:5d} / {r['submitted']}, late {r['late']:4d}, "
                  f"left {r['left']:5d} right {r['right']:5d} -> join {r['join_in']:5d} "
                  f"(efficiency {r['join_efficiency']:.3f}), load {r['load_average']:.2f}", flush=True)
    for name in args.policies.split(","):
        mine = [r for r in rows if r["policy"] == name]
        print(f"{name:16s} mean on time {np.mean([r['on_time'] for r in mine]):.0f}, "
              f"join efficiency {np.mean([r['join_efficiency'] for r in mine]):.3f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
