"""Faults: a live Runtime whose executors misbehave at random, through a flash crowd of 10x.

The soak's two sleeping stages (bench/soak.py: capacity about 400 req/s, SLO 0.2 s), each wrapped
so that every batch, independently, with probability ``--fault`` each:

* raises ``RuntimeError`` (the batch fails);
* hangs briefly (sleeps an extra 50 ms, past a quarter of the SLO);
* returns garbage (one output short: the runtime must fail the batch, not mis-route outputs);
* raises ``SystemExit`` mid-batch (what kills a worker thread if it escapes the executor call).

Arrivals are Poisson at ``--base`` times capacity, then ``--crowd`` times that rate for
``--crowd-s`` seconds, then the base rate again.  At the end it checks conservation
(``submitted = on_time + late + dropped + rejected + failed``, every future resolved), memory (RSS
growth over the run) and the largest queue seen against ``max_queue_size``, and reports per
phase the goodput (on-time requests/s by send time) against its bound (min(offered rate, capacity
x the fraction of batches not faulted)) and the recovery time: seconds after the crowd until the
per-second on-time fraction is back within 10 points of the pre-crowd level.

    python bench/faults.py                          # 20 s base, 30 s crowd x10, 30 s after
    python bench/faults.py --before-s 2 --crowd-s 3 --after-s 3 --json faults.json
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import soak  # noqa: E402

import pard  # noqa: E402
from pard import workloads as wl  # noqa: E402
from pard.outcomes import ON_TIME  # noqa: E402

HANG_S = 0.05  #: the extra sleep of a hanging batch (s)
KINDS = ("raise", "hang", "garbage", "exit")


class Faulty:
    """A sleeping stage whose batches fail at random (see the module docstring); counts what it did."""

    def __init__(self, factor: float, fault: float, seed: int) -> None:
        self._sleep = soak._sleeper(factor)
        self._fault = fault
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.done = {k: 0 for k in ("ok", *KINDS)}

    def __call__(self, xs: list[Any]) -> list[Any]:
        with self._lock:
            u = float(self._rng.random())
        k = int(u // self._fault) if self._fault > 0 else len(KINDS)
        kind = KINDS[k] if k < len(KINDS) else "ok"
        with self._lock:
            self.done[kind] += 1
        if kind == "raise":
            raise RuntimeError("injected fault")
        if kind == "exit":
            raise SystemExit("injected worker exit mid-batch")
        out = self._sleep(xs)
        if kind == "hang":
            time.sleep(HANG_S)
        if kind == "garbage":
            return out[:-1]
        return out


def _arrivals(rate: float, before: float, crowd: float, crowd_s: float, after: float, seed: int) -> np.ndarray:
    parts = [wl.poisson(rate, before, seed=seed),
             before + wl.poisson(rate * crowd, crowd_s, seed=seed + 1),
             before + crowd_s + wl.poisson(rate, after, seed=seed + 2)]
    return np.concatenate(parts)


def run(before_s: float = 20.0, crowd_s: float = 30.0, after_s: float = 30.0, base: float = 0.8,
        crowd: float = 10.0, fault: float = 0.02, policy: str = "pard", seed: int = 0) -> dict[str, Any]:
    """Run the fault scenario; returns its figures (see the module docstring)."""
    p = soak.spec()
    capacity = p.capacity().pipeline
    rate = base * capacity
    arrivals = _arrivals(rate, before_s, crowd, crowd_s, after_s, seed)
    execs = {"first": Faulty(1.0, fault, seed), "second": Faulty(soak.SECOND, fault, seed + 7)}
    resolved = 0
    lock = threading.Lock()

    def done(_: Any) -> None:
        nonlocal resolved
        with lock:
            resolved += 1

    rt = pard.Runtime(p, execs, policy=policy, history=max(1, arrivals.size))
    bound = sum(rt.max_queue_size.values())
    rss0 = soak.rss_mb()
    max_queued, rss_max, submitted = 0, rss0, 0
    start = time.perf_counter()
    next_sample = 0.0
    for t in arrivals.tolist():
        now = time.perf_counter() - start
        if t > now:
            time.sleep(t - now)
        f = rt.submit(submitted)
        f.add_done_callback(done)
        submitted += 1
        if now >= next_sample:
            next_sample += 0.5
            max_queued = max(max_queued, sum(rt.snapshot()["queued"].values()))
            rss_max = max(rss_max, soak.rss_mb())
    rt.close(drain=True, timeout_s=10.0)
    time.sleep(0.2)  # done callbacks run in the resolving thread; let them land
    c = rt.counts()
    terminal = c["on_time"] + c["late"] + c["dropped"] + c["rejected"] + c["failed"]
    out = rt.outcomes()
    faults = {k: sum(e.done[k] for e in execs.values()) for k in ("ok", *KINDS)}
    ok_fraction = faults["ok"] / max(1, sum(faults.values()))
    return {
        "policy": policy, "capacity_req_s": capacity, "base_rate_req_s": rate, "crowd": crowd,
        "fault_probability_per_kind": fault, "batches": faults, "submitted": submitted, "counts": c,
        "resolved": resolved, "all_resolved": resolved == submitted,
        "conservation_exact": c["submitted"] == submitted == terminal and c["pending"] == 0,
        "max_queued": int(max_queued), "queue_bound": bound,
        "rss_start_mb": rss0, "rss_max_mb": rss_max, "rss_growth_mb": rss_max - rss0,
        "runtime_alive": rt.report() is not None and all(e.done["ok"] > 0 for e in execs.values()),
        **_phases(out, before_s, crowd_s, after_s, rate, crowd, capacity * ok_fraction),
    }


def _phases(out: dict[str, np.ndarray], before: float, crowd_s: float, after: float, rate: float,
            crowd: float, capacity: float) -> dict[str, Any]:
    """Goodput per phase (by send time) vs min(offered, capacity), and the recovery time after the crowd."""
    send, on_time = out["send_s"], out["state"] == ON_TIME
    t0 = float(send.min()) if send.size else 0.0
    s = send - t0
    edges = {"before": (0.0, before), "crowd": (before, before + crowd_s),
             "after": (before + crowd_s, before + crowd_s + after)}
    offered = {"before": rate, "crowd": rate * crowd, "after": rate}
    phases = {}
    for name, (a, b) in edges.items():
        sel = (s >= a) & (s < b)
        good = float(np.count_nonzero(on_time & sel)) / max(b - a, 1e-9)
        phases[name] = {"goodput_req_s": good, "bound_req_s": min(offered[name], capacity),
                        "ratio": good / min(offered[name], capacity)}
    sec = np.floor(s).astype(np.int64)
    n = int(sec.max()) + 1 if sec.size else 0
    sent = np.bincount(sec, minlength=n)
    good = np.bincount(sec, weights=on_time.astype(np.float64), minlength=n)
    frac = np.divide(good, sent, out=np.zeros(n), where=sent > 0)
    level = float(frac[: int(before)].mean()) if int(before) > 0 else 1.0
    end = int(before + crowd_s)
    back = [i for i in range(end, n) if frac[i] >= level - 0.10]
    recovery = float(back[0] - end) if back else float("nan")
    return {"phases": phases, "pre_crowd_on_time_fraction": level, "recovery_s": recovery}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-s", type=float, default=20.0, help="seconds at the base rate first (default 20)")
    ap.add_argument("--crowd-s", type=float, default=30.0, help="seconds of the flash crowd (default 30)")
    ap.add_argument("--after-s", type=float, default=30.0, help="seconds at the base rate after (default 30)")
    ap.add_argument("--base", type=float, default=0.8, help="base rate over capacity (default 0.8)")
    ap.add_argument("--crowd", type=float, default=10.0, help="crowd rate over the base rate (default 10)")
    ap.add_argument("--fault", type=float, default=0.02, help="probability per batch of each fault (default 0.02)")
    ap.add_argument("--policy", default="pard", help="policy (default pard)")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args(argv)
    res = run(args.before_s, args.crowd_s, args.after_s, args.base, args.crowd, args.fault, args.policy)
    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)
    ok = res["conservation_exact"] and res["all_resolved"] and res["max_queued"] <= res["queue_bound"] + 4 * soak.MAX_B
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
