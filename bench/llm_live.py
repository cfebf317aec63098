"""Live vs simulated goodput with an LLM stage: the live runtime's step boundaries against the simulator's.

A chain embed -> generate: ``embed`` sleeps its profile ``d(b)``, ``generate`` is a
:class:`pard.executors.ProfiledLlmEngine` that sleeps the spec's ``prefill`` + ``decode(n)`` per step (what
a GPU engine costs the host). The same Poisson arrivals with seeded input / output token counts are
replayed live (:meth:`pard.Runtime.replay` with the Workload: each request's true output length is the
engine's ``max_new``) and simulated (:func:`pard.simulate`, jitter 0) under ``pard``. Per repeat it prints
the share of requests on time, live and simulated, and their difference.

Why they differ. Live, every sleep overshoots by the machine's wake-up latency (tens of microseconds to a
millisecond on a loaded 2-core box) and every boundary costs a Python round trip, so a live step runs a
little longer than its profile: at a load near capacity the live run finishes slightly fewer on time.

    python bench/llm_live.py                  # 3 repeats at about 1.2x the LLM stage's capacity
    python bench/llm_live.py --repeats 5 --n 600 --rate 60
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

from pard.config import PipelineSpec
from pard.executors import CallableExecutor, ProfiledLlmEngine
from pard.runtime import Runtime
from pard.sim import simulate
from pard.workloads import Workload

__all__ = ["spec", "workload", "compare", "main"]

EMBED_D = {1: 0.002, 8: 0.004}


def spec(slo: float) -> PipelineSpec:
    """embed (max batch 8) -> generate (up to 8 sequences, decode 4-8 ms a step)."""
    return PipelineSpec(name="llm-live", slo=slo, stages=[
        dict(name="embed", profile=EMBED_D, max_batch=8, successors=["generate"]),
        dict(name="generate", kind="llm", prefill={"base": 0.002, "per_token": 0.00002},
             decode={1: 0.004, 8: 0.008}, max_seqs=8, kv_tokens=8 * 160, max_output_tokens=64),
    ])


def workload(n: int, rate: float, seed: int) -> Workload:
    """n Poisson arrivals at `rate` req/s, 16-96 input tokens, 4-40 output tokens (seeded)."""
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(1.0 / rate, n))
    arr -= arr[0]
    return Workload(arrivals_s=arr, in_tokens=rng.integers(16, 97, n).astype(np.int32),
                    out_tokens=rng.integers(4, 41, n).astype(np.int32))


def _embed(xs: list[Any]) -> list[Any]:
    b = len(xs)
    time.sleep(EMBED_D[1] + (EMBED_D[8] - EMBED_D[1]) * (min(b, 8) - 1) / 7)
    return list(xs)


def compare(n: int = 400, rate: float = 50.0, slo: float = 0.5, seed: int = 0,
            policy: str = "pard") -> tuple[float, float]:
    """(live, simulated) share of the n requests finished on time, on the same arrivals and tokens."""
    sp = spec(slo)
    w = workload(n, rate, seed)
    rt = Runtime(sp, {"embed": CallableExecutor(_embed), "generate": ProfiledLlmEngine(sp.stage("generate"))},
                 policy=policy)
    with rt:
        rt.replay(w, [0])
        rt.close(drain=True, timeout_s=30.0)
    c = rt.counts()
    assert c["submitted"] == n and c["pending"] == 0
    sim = simulate(sp, w, policy, jitter_cv=0.0, seed=0)
    return c["on_time"] / n, sim.on_time / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--rate", type=float, default=50.0, help="req/s (the LLM stage serves about 40)")
    ap.add_argument("--slo", type=float, default=0.5)
    ap.add_argument("--policy", default="pard")
    a = ap.parse_args(argv)
    print(f"n={a.n} rate={a.rate} slo={a.slo} policy={a.policy} cpus={os.cpu_count()}")
    diffs = []
    for r in range(a.repeats):
        live, sim = compare(a.n, a.rate, a.slo, seed=r, policy=a.policy)
        diffs.append(live - sim)
        print(f"seed {r}: on time live {live:.3f}  simulated {sim:.3f}  live-sim {live - sim:+.3f}  "
              f"load {os.getloadavg()[0]:.2f}")
    print(f"mean live-sim {np.mean(diffs):+.3f}, worst |live-sim| {np.max(np.abs(diffs)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
