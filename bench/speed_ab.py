"""Before/after speed of two builds of pard, interleaved in one run: simulated requests per CPU second
(`pard.simulate`, pard on lv, 120 s at load 1.0) and the live runtime's CPU per request (two identity
stages, bursts of 100), best of ``--rounds`` each.

Usage: ``python bench/speed_ab.py --python OLD/bin/python --python NEW/bin/python [--rounds 3]`` (each
interpreter with its own pard installed, e.g. a worktree of the older commit in its own venv).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

INNER = r'''
import json, sys, time
import pard
from pard import workloads as wl
if sys.argv[1] == "sim":
    spec = pard.config.builtin("lv")
    arr = wl.poisson(1.0 * spec.capacity().pipeline, 120.0, seed=0)
    c0 = time.process_time()
    r = pard.simulate(spec, arr, "pard")
    print(json.dumps({"value": arr.size / (time.process_time() - c0), "on_time": r.on_time}))
else:
    spec = pard.PipelineSpec.model_validate({"name": "two", "slo": 10.0, "stages": [
        {"name": "a", "profile": {1: 0.0001, 64: 0.001}, "max_batch": 64, "workers": 1, "successors": ["b"]},
        {"name": "b", "profile": {1: 0.0001, 64: 0.001}, "max_batch": 64, "workers": 1, "successors": []}]})
    with pard.Runtime(spec, {"a": lambda xs: list(xs), "b": lambda xs: list(xs)}) as rt:
        for _ in range(200):
            [f.result() for f in [rt.submit(0.0) for _ in range(100)]]
        c0 = time.process_time()
        for _ in range(300):
            [f.result() for f in [rt.submit(0.0) for _ in range(100)]]
        print(json.dumps({"value": (time.process_time() - c0) / 30000 * 1e6}))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", action="append", required=True, help="an interpreter with pard (give two)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    best: dict[str, dict[str, float]] = {p: {} for p in args.python}
    for _ in range(args.rounds):
        for py in args.python:
            for what in ("sim", "live"):
                out = json.loads(subprocess.run([py, "-c", INNER, what], check=True, capture_output=True,
                                                text=True).stdout)
                old = best[py].get(what)
                better = old is None or (out["value"] > old if what == "sim" else out["value"] < old)
                best[py][what] = out["value"] if better else old
                if "on_time" in out:
                    best[py]["on_time"] = out["on_time"]
    for py, b in best.items():
        print(f"{py}: {b['sim'] / 1e6:.3f} M simulated req per CPU s (on time {b['on_time']:.0f}), "
              f"live {b['live']:.2f} us CPU per request")
    print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "best": best}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
