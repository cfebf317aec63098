"""Concurrency at scale through the Python runtime: 10^6 requests from 8 submitting threads with random
cancels through :class:`pard.Runtime` (issue 13, "Concurrency at scale", the Python half).

A two-stage chain of identity executors (profile d(b) = 0.5 ms + 20 us * b, max batch 64, SLO
``--slo``), ``--threads`` submitters that each submit their share as fast as the runtime takes it
and, after each submit, with probability ``--cancel`` cancel a random one of their last 256 futures.
No future is kept beyond that window: a done callback records, per request id, how many times it
ran and what the future ended as (result, cancelled, Dropped, Rejected, ExecutorError).  The runtime
keeps every outcome row (``history`` = the request count, about 45 bytes each).

Checked at the end, per request id (only the public API: ``submit``, futures, ``counts``,
``outcomes``, ``report``): every future resolved exactly once; its outcome row is terminal and
agrees with the future (on_time/late <-> a result; dropped <-> cancelled or Dropped, a cancelled
future's row has reason ``cancelled``, and every future whose ``cancel()`` returned True ended
cancelled (calling it again on a cancelled future returns True too, so calls > ids); rejected <-> Rejected; failed <-> ExecutorError); ``counts()``
equals the tally of the rows and ``submitted = on_time + late + dropped + rejected + failed``; the
report's totals equal the counts.  Exit status 1 on any mismatch.

    python bench/concurrency.py                          # 10^6 requests, 8 threads
    python bench/concurrency.py --requests 100000 --json concurrency.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

import pard
from pard.config import PipelineSpec, StageSpec
from pard.outcomes import REASONS, STATES

__all__ = ["run", "main"]

RESULT, CANCELLED, DROPPED, REJECTED, FAILED, OTHER = range(6)
KINDS = ("result", "cancelled", "Dropped", "Rejected", "ExecutorError", "other")


def _identity(xs: list[Any]) -> list[Any]:
    return list(xs)


def _spec(slo: float) -> PipelineSpec:
    prof = {1: 0.0005 + 0.00002, 64: 0.0005 + 0.00002 * 64}
    return PipelineSpec(name="identity2", slo=slo, stages=[
        StageSpec(name="a", profile=prof, max_batch=64, successors=["b"]),
        StageSpec(name="b", profile=prof, max_batch=64)])


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(n: int, threads: int, cancel_p: float, slo: float, seed: int) -> dict[str, Any]:
    """Run the bench; returns its figures and the list of mismatches (empty when every check holds)."""
    calls = np.zeros(n, dtype=np.int16)
    kind = np.full(n, -1, dtype=np.int8)
    cancel_true = np.zeros(n, dtype=bool)  # cancel() returned True for this id (at least once)
    rt = pard.Runtime(_spec(slo), {"a": _identity, "b": _identity}, policy="pard", history=n)

    def on_done(f: Any) -> None:
        rid = f.request_id
        calls[rid] += 1
        if f.cancelled():
            kind[rid] = CANCELLED
            return
        e = f.exception(timeout=0)
        kind[rid] = (RESULT if e is None else DROPPED if isinstance(e, pard.Dropped) else
                     REJECTED if isinstance(e, pard.Rejected) else FAILED if isinstance(e, pard.ExecutorError)
                     else OTHER)

    tried = [0] * threads
    won = [0] * threads
    share = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]
    start = threading.Barrier(threads + 1)

    def submitter(i: int) -> None:
        rng = random.Random(seed + i)
        recent: deque[Any] = deque(maxlen=256)
        start.wait()
        for j in range(share[i]):
            f = rt.submit(j)
            f.add_done_callback(on_done)
            recent.append(f)
            if rng.random() < cancel_p:
                tried[i] += 1
                g = recent[rng.randrange(len(recent))]
                if g.cancel():
                    won[i] += 1
                    cancel_true[g.request_id] = True

    pool = [threading.Thread(target=submitter, args=(i,), name=f"submitter-{i}") for i in range(threads)]
    for t in pool:
        t.start()
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    start.wait()
    for t in pool:
        t.join()
    t_sub = time.perf_counter() - t0
    rt.close(drain=True, timeout_s=60.0)
    wall = time.perf_counter() - t0
    counts = rt.counts()
    out = rt.outcomes()
    rep = rt.report()

    bad: list[str] = []
    state = out["state"]
    if state.size != n or out["request_id"].tolist() != list(range(n)):
        bad.append(f"outcome rows: {state.size} for {n} requests")
    if not (calls == 1).all():
        bad.append(f"futures resolved != once: {int((calls == 0).sum())} never, {int((calls > 1).sum())} twice+")
    code = {s: STATES.index(s) for s in STATES}
    cancelled_reason = REASONS.index("cancelled")
    want = {  # the future's ending -> the outcome states it may have
        RESULT: {code["on_time"], code["late"]}, CANCELLED: {code["dropped"]}, DROPPED: {code["dropped"]},
        REJECTED: {code["rejected"]}, FAILED: {code["failed"]}}
    for k, states in want.items():
        sel = kind == k
        off = ~np.isin(state[sel], list(states))
        if off.any():
            bad.append(f"{int(off.sum())} futures ended {KINDS[k]} but their rows say "
                       f"{sorted({STATES[s] for s in state[sel][off]})}")
    if (kind == OTHER).any():
        bad.append(f"{int((kind == OTHER).sum())} futures raised something else")
    if (kind[cancel_true] != CANCELLED).any():  # cancel() said True: the work must not be done
        bad.append(f"{int((kind[cancel_true] != CANCELLED).sum())} futures whose cancel() returned True ended otherwise")
    if (out["reason"][kind == CANCELLED] != cancelled_reason).any():
        bad.append("a cancelled future's row does not have reason 'cancelled'")
    tally = {s: int((state == code[s]).sum()) for s in STATES}
    if tally["pending"] or any(tally[s] != counts[s] for s in STATES) or counts["submitted"] != n:
        bad.append(f"counts {counts} != rows {tally}")
    if n != sum(counts[s] for s in ("on_time", "late", "dropped", "rejected", "failed")):
        bad.append(f"conservation fails: {counts}")
    if (rep.submitted, rep.on_time, rep.dropped, rep.rejected) != (n, counts["on_time"], counts["dropped"],
                                                                   counts["rejected"]):
        bad.append("report totals differ from the counts")
    return {
        "requests": n, "threads": threads, "cancel_probability": cancel_p, "slo_s": slo,
        "submit_s": t_sub, "wall_s": wall, "submitted_per_s": n / t_sub,
        "counts": counts, "futures": {KINDS[k]: int((kind == k).sum()) for k in range(6)},
        "cancel_calls": sum(tried), "cancel_true_calls": sum(won), "cancel_true_ids": int(cancel_true.sum()),
        "dropped_by_reason": {r: c for r, c in rep.dropped_by_reason.items() if c},
        "rss_mb_start": rss0, "rss_mb_end": _rss_mb(), "mismatches": bad,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--cancel", type=float, default=1 / 16, help="cancel probability after each submit")
    ap.add_argument("--slo", type=float, default=0.5, help="SLO (s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    res = run(args.requests, args.threads, args.cancel, args.slo, args.seed)
    for k, v in res.items():
        print(f"{k}: {v}")
    if args.json is not None:
        args.json.write_text(json.dumps(res, indent=2))
        print(f"wrote {args.json}", file=sys.stderr)
    return 1 if res["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
