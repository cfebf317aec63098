"""The scheduler's share of request latency under mild overload, before/after in one run (issue 15).

The case of ``bench/test_bench_runtime.py::test_scheduler_share_mild_overload``: one stage whose
executor sleeps 4 ms per batch of 16 (4 000 req/s), fed 1.1x that for 3 s by ``Runtime.replay``,
SLO 50 ms; share = ``Runtime.overhead()["scheduler_s"]`` per request / mean latency of finished
requests.  Each round runs in a fresh subprocess; with ``--before DIR`` (a directory holding a
``pard`` package with its own ``_core``) the rounds alternate between that package and the
installed one, so both see the same machine load.  Also prints, per round, the time of one
``Runtime.submit``, of one bare binding call (``LivePipeline.submit``) and of the C++ pipeline's
part of it (``scheduler_s``), in back-to-back loops of 4 000 submits into an identity stage whose
worker is held in a form hook meanwhile (so only the submitting thread runs), best of 5 loops each.

    python bench/live_share.py --rounds 3 --before /tmp/hp_before/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

__all__: list[str] = []

_CHILD = r"""
import json, sys, time
before = sys.argv[1]
if before:
    sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__.lower()]
    sys.path.insert(0, before)
import numpy as np
import pard
from pard.config import PipelineSpec, StageSpec
from pard.runtime import Runtime

def sleeping(d_s):
    def run(xs):
        time.sleep(d_s)
        return list(xs)
    return run

d_s, b = 0.004, 16
spec = PipelineSpec(name="mild", slo=0.05, stages=[StageSpec(name="s", profile={1: d_s, b: d_s}, max_batch=b)])
out = {"core": pard._core.__file__}
for policy in ("pard", "naive"):
    rt = Runtime(spec, {"s": sleeping(d_s)}, policy=policy, planner={"sync_interval_s": 0.25})
    futs = rt.replay(np.arange(0.0, 3.0, 1.0 / (1.1 * b / d_s)), [0])
    rt.close()
    o = rt.outcomes()
    done = np.isin(o["state"], [1, 2])
    lat = float(np.mean(o["finish_s"][done] - o["send_s"][done]))
    per = rt.overhead()["scheduler_s"] / len(futs)
    out[policy] = {"share_pct": 100 * per / lat, "sched_us": per * 1e6, "lat_ms": lat * 1e3}

# submit's split: the facade (Runtime.submit), the binding (LivePipeline.submit), the C++ pipeline
# (scheduler_s over the loop); the worker is held in a form hook meanwhile, so only submit runs
import threading
spec2 = PipelineSpec(name="id", slo=60.0, stages=[StageSpec(name="s", profile={1: 1e-5, 64: 1e-4}, max_batch=64)])
n = 4000
hold = threading.Event()
split = {}
with Runtime(spec2, {"s": lambda xs: list(xs)}, policy="naive", max_queue_size=2 * n) as rt:
    live = rt._live
    for f in [rt.submit(i) for i in range(2000)]:
        f.result()
    live.set_form_hook(0, lambda k: hold.wait())
    subs = (("facade", rt.submit), ("binding", lambda i: live.submit(i, 60.0, 0)))
    for rep in range(5):  # best of 5 loops each, alternating: the split of one call's cost under noise
        for name, sub in subs:
            hold.clear()
            s0 = live.scheduler_s()
            t0 = time.perf_counter()
            futs = [sub(i) for i in range(n)]
            t1 = time.perf_counter()
            split[name] = min(split.get(name, 1e9), (t1 - t0) / n * 1e6)
            if name == "binding":
                split["cpp"] = min(split.get("cpp", 1e9), (live.scheduler_s() - s0) / n * 1e6)
            hold.set()
            for f in futs:
                f.result()
            del futs
out["submit_us"] = split
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", default="", help="directory holding the 'before' pard package (with its _core)")
    args = ap.parse_args()
    variants = (["before"] if args.before else []) + ["after"]
    rows: list[dict[str, object]] = []
    for r in range(args.rounds):
        for v in variants:
            path = args.before if v == "before" else ""
            res = subprocess.run([sys.executable, "-c", _CHILD, path], capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONWARNINGS": "ignore"})
            row = json.loads(res.stdout.strip().splitlines()[-1])
            row.update(variant=v, round=r, load=os.getloadavg()[0])
            rows.append(row)
            p, nv, su = row["pard"], row["naive"], row["submit_us"]
            print(f"round {r} {v:6s} load {row['load']:.1f}: pard share {p['share_pct']:.4f}% "  # type: ignore[index]
                  f"({p['sched_us']:.2f} us/req, {p['lat_ms']:.2f} ms), naive {nv['share_pct']:.4f}% "  # type: ignore[index]
                  f"({nv['sched_us']:.2f} us/req, {nv['lat_ms']:.1f} ms); submit facade {su['facade']:.2f} us, "  # type: ignore[index]
                  f"binding {su['binding']:.2f} us, C++ {su['cpp']:.2f} us", flush=True)  # type: ignore[index]
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
