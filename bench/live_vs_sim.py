"""Live vs simulated goodput on the same arrivals, repeated: how closely the runtime follows the simulator.

The scenario of ``tests/test_live.py``: two stages that sleep for their profiled duration
(``d(b) = 4 ms + 2 ms * b``, the second 0.75x that; max batch 8; SLO 0.12 s; capacity 400 req/s), a
bursty (MMPP, CV 1) overload at 1.2x capacity for 4 s, replayed live through :class:`pard.Runtime`,
then simulated on the live send times with the profile refit to the run's batches
(:func:`pard.profiling.profile_from_batches`, jitter 0).  Per policy and repeat it prints live and
simulated goodput and their ratio, with the machine's load average, because the live figure depends
on how promptly this machine wakes threads and ends sleeps (the test asserts only the contract).

    python bench/live_vs_sim.py                      # 3 repeats of pard, nexus, naive, clipper++
    python bench/live_vs_sim.py --repeats 5 --policies pard,naive --json live_vs_sim.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pard import workloads as wl
from pard.config import PipelineSpec, StageSpec
from pard.profiling import profile_from_batches
from pard.runtime import Runtime
from pard.sim import simulate

__all__ = ["run_once", "main"]

D0, D1, SECOND, MAX_B = 0.004, 0.002, 0.75, 8


def _sleeper(factor: float) -> Any:
    def run(xs: list[Any]) -> list[Any]:
        time.sleep(factor * (D0 + D1 * len(xs)))
        return list(xs)
    return run


def _spec() -> PipelineSpec:
    return PipelineSpec(name="sleepy", slo=0.12, stages=[
        StageSpec(name="first", profile={b: D0 + D1 * b for b in (1, 2, 4, 8)}, max_batch=MAX_B,
                  successors=["second"]),
        StageSpec(name="second", profile={b: SECOND * (D0 + D1 * b) for b in (1, 2, 4, 8)}, max_batch=MAX_B),
    ])


def run_once(policy: str, seed: int = 3) -> dict[str, Any]:
    """One live replay and its refit simulation: goodput of each (req/s), their ratio, load average."""
    spec = _spec()
    arrivals = wl.bursty(1.2 * spec.capacity().pipeline, 4.0, 1.0, seed=seed)
    load_before = os.getloadavg()[0]
    rt = Runtime(spec, {"first": _sleeper(1.0), "second": _sleeper(SECOND)}, policy=policy, planner={"sync_interval_s": 1.0})
    t_rep = rt.now()
    rt.replay(arrivals, [0])
    rt.close(drain=True, timeout_s=3.0)
    live = rt.report(t0_s=t_rep, duration_s=4.0)
    send = np.clip(rt.outcomes()["send_s"] - t_rep, 0.0, np.nextafter(4.0, 0.0))
    sim = simulate(profile_from_batches(spec, rt.batches()), send, policy, jitter_cv=0.0, seed=0)
    return {"policy": policy, "live": live.goodput, "simulated": sim.goodput,
            "ratio": live.goodput / sim.goodput if sim.goodput > 0 else float("nan"),
            "within_test_bound": abs(live.goodput - sim.goodput) <= 0.25 * sim.goodput + 10.0,
            "load_average": (load_before + os.getloadavg()[0]) / 2}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policies", default="pard,nexus,naive,clipper++")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    for i in range(args.repeats):
        for policy in args.policies.split(","):
            r = run_once(policy)
            rows.append({"repeat": i, **r})
            print(f"{policy:10s} repeat {i}: live {r['live']:6.1f}  simulated {r['simulated']:6.1f} req/s  "
                  f"ratio {r['ratio']:.3f}  within 25 %+10: {r['within_test_bound']}  "
                  f"load {r['load_average']:.1f}", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
