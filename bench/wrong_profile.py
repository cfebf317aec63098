"""An embedded ``pard.Runtime`` whose executors take k times their profile (issue 9 item 4).

Every stage of ``tm`` is a ``CallableExecutor`` that sleeps ``k * d(b)`` for a batch of ``b`` (sleeping, so
the figures hardly depend on the machine's load), while the runtime plans with the built-in profile.
Poisson arrivals at ``load`` times the *true* capacity (the profile's / k), the same arrivals for every
policy.  Prints each policy's counts and the ``pard.PardWarning`` lines the run raised.  Recorded in
bench/RESULTS.md (issue 9, third round).

Usage::

    PYTHONPATH=python python bench/wrong_profile.py --k 3 --load 0.8 --duration 10 --policies pard,pard-paper,nexus,naive
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import pard
from pard.config import resolve_pipeline


def sleeper(stage: pard.StageSpec, k: float) -> pard.CallableExecutor:
    """An executor that takes k x the stage's profiled d(b) for a batch of b."""
    def run(payloads: list) -> list:
        time.sleep(k * float(stage.duration(len(payloads))))
        return payloads
    return pard.CallableExecutor(run)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=float, default=3.0, help="executor duration / profiled duration")
    ap.add_argument("--load", type=float, default=0.8, help="arrival rate over the true capacity")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of arrivals")
    ap.add_argument("--policies", default="pard,pard-paper,nexus,naive")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    spec = resolve_pipeline("tm")
    rate = args.load * spec.capacity().pipeline / args.k
    arr = np.cumsum(np.random.default_rng(args.seed).exponential(1.0 / rate, int(rate * args.duration)))
    for pol in args.policies.split(","):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pard.PardWarning)
            with pard.Runtime(spec, {st.name: sleeper(st, args.k) for st in spec.stages}, policy=pol,
                              close_timeout_s=30) as rt:
                t0 = time.monotonic()
                futures = []
                for a in arr:
                    wait = t0 + a - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    futures.append(rt.submit(np.zeros(1)))
                for f in futures:
                    try:
                        f.result(timeout=30)
                    except Exception:  # noqa: BLE001 - dropped / late requests: counted below
                        pass
                c = rt.counts()
        msgs = [str(w.message) for w in caught if issubclass(w.category, pard.PardWarning)]
        print(f"{pol}: k {args.k}, {arr.size} requests, on time {c['on_time']}, late {c['late']}, "
              f"dropped {c['dropped']}, rejected {c['rejected']}; {len(msgs)} warnings")
        for m in msgs:
            print("   ", m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
