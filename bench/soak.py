"""Soak: a live Runtime under 10x overload for a bounded run, watching memory, queues and conservation.

A two-stage pipeline whose stages sleep for their profiled duration (so the capacity is known: about
400 req/s), fed Poisson arrivals at ``--load`` times that capacity for ``--minutes`` minutes from one
submitting thread.  Arrivals are generated one 10 s chunk at a time and no future is kept (a done
callback counts it), so the driver itself holds O(1) state.  Every ``--every`` seconds it records the
process's RSS (``/proc/self/status`` VmRSS), ``Runtime.snapshot()`` (queued per stage, counts) and
``Runtime.report()`` (a live report, to exercise it under load).

At the end it closes the runtime and checks: every future resolved, ``submitted = on_time + late +
dropped + rejected + failed`` exactly, the largest queue seen within the stages' ``max_queue_size``
(plus the requests in flight to it), and it fits a line to RSS after the warm-up (the first
``--warmup`` fraction of the run): the slope in MB/min.

    python bench/soak.py                       # 10 minutes, policy pard, load 10
    python bench/soak.py --minutes 1 --policy naive --json soak.json
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

import numpy as np

import pard
from pard import workloads as wl

D0, D1, MAX_B = 0.008, 0.002, 16  # d(b) = D0 + D1 * b: best 16 / 0.04 = 400 req/s per worker
SECOND = 0.75  # the second stage runs this fraction of the first's duration


def _sleeper(factor: float) -> Any:
    def run(xs: list[Any]) -> list[Any]:
        time.sleep(factor * (D0 + D1 * len(xs)))
        return list(xs)
    return run


def spec(slo: float = 0.2) -> pard.PipelineSpec:
    """The soak's pipeline: two sleeping stages, capacity 400 req/s at the first."""
    return pard.PipelineSpec(name="soak", slo=slo, stages=[
        pard.StageSpec(name="first", profile={b: D0 + D1 * b for b in (1, 2, 4, 8, 16)}, max_batch=MAX_B,
                       successors=["second"]),
        pard.StageSpec(name="second", profile={b: SECOND * (D0 + D1 * b) for b in (1, 2, 4, 8, 16)},
                       max_batch=MAX_B),
    ])


def rss_mb() -> float:
    """This process's resident set size (MB), from /proc (Linux)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")  # pragma: no cover - not Linux


def run(minutes: float = 10.0, load: float = 10.0, policy: str = "pard", every_s: float = 5.0,
        warmup: float = 0.25, seed: int = 0, chunk_s: float = 10.0) -> dict[str, Any]:
    """Run the soak; returns its figures (see the module docstring)."""
    p = spec()
    capacity = p.capacity().pipeline
    rate = load * capacity
    duration = 60.0 * minutes
    resolved = 0
    lock = threading.Lock()

    def done(_: Any) -> None:
        nonlocal resolved
        with lock:
            resolved += 1

    rt = pard.Runtime(p, {"first": _sleeper(1.0), "second": _sleeper(SECOND)}, policy=policy)
    bound = sum(rt.max_queue_size.values())
    samples: list[dict[str, Any]] = []
    submitted = 0
    start = time.perf_counter()
    next_sample = 0.0
    t_chunk = 0.0
    seq = 0
    while t_chunk < duration:
        span = min(chunk_s, duration - t_chunk)
        arrivals = t_chunk + wl.poisson(rate, span, seed=seed + seq)
        seq += 1
        for t in arrivals.tolist():
            now = time.perf_counter() - start
            if t > now:
                time.sleep(t - now)
            f = rt.submit(submitted)
            f.add_done_callback(done)
            submitted += 1
            if now >= next_sample:
                next_sample += every_s
                snap = rt.snapshot()
                rep = rt.report()
                samples.append({"t_s": now, "rss_mb": rss_mb(), "queued": sum(snap["queued"].values()),
                                "in_flight": snap["in_flight"], "held_report_requests": rep.submitted,
                                "counts": snap["counts"]})
        t_chunk += span
    wall = time.perf_counter() - start
    rt.close(drain=True, timeout_s=5.0)
    time.sleep(0.2)  # done callbacks run in the thread that resolved the future; let them land
    c = rt.counts()
    t = np.array([s["t_s"] for s in samples])
    rss = np.array([s["rss_mb"] for s in samples])
    after = t >= warmup * duration
    slope = float(np.polyfit(t[after] / 60.0, rss[after], 1)[0]) if after.sum() >= 3 else float("nan")
    terminal = c["on_time"] + c["late"] + c["dropped"] + c["rejected"] + c["failed"]
    return {
        "policy": policy, "minutes": minutes, "load": load, "capacity_req_s": capacity, "rate_req_s": rate,
        "wall_s": wall, "submitted": submitted, "counts": c, "resolved": resolved,
        "conservation_exact": c["submitted"] == submitted == terminal and c["pending"] == 0,
        "all_resolved": resolved == submitted,
        "max_queued": int(max((s["queued"] for s in samples), default=0)), "queue_bound": bound,
        "rss_start_mb": float(rss[0]) if rss.size else None, "rss_end_mb": float(rss[-1]) if rss.size else None,
        "rss_slope_mb_per_min": slope, "warmup_fraction": warmup, "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="how long to run (default 10)")
    ap.add_argument("--load", type=float, default=10.0, help="arrival rate over capacity (default 10)")
    ap.add_argument("--policy", default="pard", help="policy (default pard)")
    ap.add_argument("--every", type=float, default=5.0, help="seconds between samples (default 5)")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args(argv)
    res = run(args.minutes, args.load, args.policy, args.every)
    summary = {k: v for k, v in res.items() if k != "samples"}
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)
    ok = res["conservation_exact"] and res["all_resolved"] and res["max_queued"] <= res["queue_bound"] + MAX_B * 4
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
