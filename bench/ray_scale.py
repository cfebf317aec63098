"""Planner cost and state traffic at the paper's scale, in simulation (issue 10; paper: < 3.2 Kbps per worker).

The built-in pipelines with every stage's workers x16 (the paper ran 16 machines), at load 1.0 over
60 s of the bundled trace (amplified), stepped one sync interval at a time in the C++ simulator.  Each
sync's statistics go, in the float seconds the live runtime and Ray hand over, to :meth:`pard.Planner.update`
(the C++ planner; its terms are published, so the run follows it) and, as the baseline, to the NumPy
planner it replaced (``tests/planner_oracle.py``, the same arithmetic and bits); each call is timed
(``time.thread_time_ns``, CPU) and the state that crosses the network per sync in pard.ray is counted:

* stats in: each stage's statistics dict as the stage actor sends it (pickled, protocol 5), the
  same arrays the local runtime's planner thread reads;
* summary in: what the planner's update actually reads of them -- per stage an arrival count and the
  sum and count of queueing delays (3 numbers), and per batch its size, duration and wait (24 bytes;
  the online d(b) correction reads sizes and durations, the Monte Carlo the waits) -- the size a
  stage actor that summarised its per-request samples would send (not implemented: pard.ray sends
  the stats as the local runtime's planner thread reads them);
* terms out: each stage's published terms (pickled).

Traffic per worker per second = bytes per sync / sync interval / workers.

Usage: ``python bench/ray_scale.py [--duration 60] [--out bench/ray_scale.json]``
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import pard
from pard import _core
from pard import workloads as wl
from pard.planner import Planner
from pard.outcomes import ON_TIME
from pard.policies import get_policy
from pard.wiring import core_stages, planner_stages

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import planner_oracle  # noqa: E402  (the NumPy planner, the baseline)

FACTOR = 16
PIPELINES = ("tm", "lv", "ga", "da")


def _measure(name: str, duration_s: float, load: float) -> dict[str, Any]:
    spec = pard.config.builtin(name)
    spec = spec.with_workers({st.name: st.workers * FACTOR for st in spec.stages})
    workers = sum(st.workers for st in spec.stages)
    rate = load * spec.capacity().pipeline
    arrivals = wl.scale(wl.window(wl.azure_llm_conv(), 1170.0, duration_s), rate, seed=0)
    rows: list[tuple[float, float, int, int, int]] = []
    pol = get_policy("pard")
    slo = np.full(arrivals.size, spec.slo)
    sim = _core.Simulator(stages=core_stages(spec, None), policy=pol.core(), arrivals_s=arrivals, slo_s=slo,
                          tier=np.zeros(arrivals.size, np.int32), jitter_cv=0.1, seed=0, cold_start_s=0.0,
                          tier_weights=[float(w) for w in spec.tiers.values()])
    st = planner_stages(spec)
    planner, baseline = Planner(st, policy=pol, seed=1), planner_oracle.Planner(st, policy=pol, seed=1)
    planner.warn_drift = False
    t = 0.0
    wall0 = time.perf_counter()
    while t < duration_s + 2.0:
        t += 1.0
        sim.run_until(t)
        stats, w = sim.take_stats(), sim.serving()
        stats_b = sum(len(pickle.dumps(dict(s), protocol=5)) for s in stats)
        summary_b = sum(3 * 8 + 24 * len(s.get("batch_size", ())) for s in stats)
        c0 = time.thread_time_ns()
        terms = planner.update(t, stats, w)
        c1 = time.thread_time_ns()
        baseline.update(t, stats, w)
        c2 = time.thread_time_ns()
        sim.publish_all([tuple(x.publish_kwargs().values()) for x in terms])
        terms_b = sum(len(pickle.dumps(x.publish_kwargs(), protocol=5)) for x in terms)
        rows.append(((c1 - c0) * 1e-9, (c2 - c1) * 1e-9, stats_b, summary_b, terms_b))
    wall = time.perf_counter() - wall0
    out = sim.outcomes()
    on_time = int((out["state"] == ON_TIME).sum())
    base = np.array([r[1] for r in rows])
    cost = np.array([r[0] for r in rows])
    per = np.array([r[2:] for r in rows], dtype=np.float64)  # bytes per sync: stats, summary, terms
    sync_s = 1.0
    kbps = per.mean(axis=0) * 8 / 1e3 / sync_s / workers
    return {
        "pipeline": name, "stages": len(spec.stages), "workers": workers, "rate_req_s": round(rate, 1),
        "requests": int(arrivals.size), "syncs": len(rows), "on_time": on_time,
        "planner_ms_per_sync": {"mean": round(cost.mean() * 1e3, 3), "p99": round(float(np.percentile(cost, 99)) * 1e3, 3)},
        "numpy_planner_ms_per_sync": {"mean": round(base.mean() * 1e3, 3),
                                      "p99": round(float(np.percentile(base, 99)) * 1e3, 3)},
        "numpy_over_cpp": round(float(base.mean() / cost.mean()), 1),
        "bytes_per_sync": {"stats": int(per[:, 0].mean()), "summary": int(per[:, 1].mean()), "terms": int(per[:, 2].mean())},
        "kbps_per_worker": {"stats": round(kbps[0], 2), "summary": round(kbps[1], 3), "terms": round(kbps[2], 3),
                            "stats_plus_terms": round(kbps[0] + kbps[2], 2),
                            "summary_plus_terms": round(kbps[1] + kbps[2], 3)},
        "wall_s": round(wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--out", default="bench/ray_scale.json")
    args = ap.parse_args()
    results = [_measure(p, args.duration, args.load) for p in PIPELINES]
    for r in results:
        k = r["kbps_per_worker"]
        print(f"{r['pipeline']}: {r['workers']} workers, {r['rate_req_s']:.0f} req/s, planner "
              f"{r['planner_ms_per_sync']['mean']:.3f} ms CPU/sync (p99 {r['planner_ms_per_sync']['p99']:.3f}), "
              f"NumPy planner {r['numpy_planner_ms_per_sync']['mean']:.3f} ({r['numpy_over_cpp']}x); "
              f"per worker: stats+terms {k['stats_plus_terms']:.1f} Kbps, summary+terms {k['summary_plus_terms']:.2f} Kbps")
    with open(args.out, "w") as f:
        json.dump({"factor": FACTOR, "load": args.load, "duration_s": args.duration, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
