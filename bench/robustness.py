"""Burst shapes the recorded grid (bench/comparison.py) lacks: a robustness set for issue 9 item 6.

The grid's bursty trace has ~5 s bursts and its flash crowd lasts 10 s, so every burst ends about when an
autoscaled worker (10 s cold start) starts serving.  A production trace also has bursts that outlast the
cold start, slow ramps, and other stretches of the real trace.  This script runs the grid's scenarios
(``comparison.scenario_spec``, the same bottleneck and dynamics settings, ``pard.simulate``'s defaults)
on such shapes; nothing here is tuned to a policy, and the recorded grid's rows are not touched.

Shapes (``SHAPES``; the mean rate over the run is ``load`` x the spec's capacity in every shape):

- ``mmpp-b{10,15,30,60}``: the grid's MMPP (CV 1.5 of 1 s counts, bursts 20 % of the time) with bursts of
  15 / 30 / 60 s on average, i.e. longer than the cold start;
- ``mmpp-cv1-b30``: a milder MMPP (CV 1.0) with 30 s bursts;
- ``mmpp-cv2.5-b{15,30}``: on/off traffic: at CV 2.5 the calm state is silent (``pard.workloads.bursty``
  then makes bursts rarer), so 300 s hold one or two bursts at ~16x the mean rate, and the run may open
  with a lull;
- ``ramp``: one cosine cycle over the run (amplitude 0.5: the rate goes from 0.5x to 1.5x the mean and
  back), a diurnal curve compressed to minutes;
- ``azure-o{0,1800,3000}-e{1,10,30}``: the bundled Azure conversation trace at another offset (s) and
  rate envelope bin (s) than the grid's 600 s / 10 s;
- ``azure-conv``, ``bursty``, ``flash``: the grid's own traces (``comparison.arrivals_for``), e.g. to run
  them with ``--autoscale-on pipeline``.

Usage::

    PYTHONPATH=python python bench/robustness.py --only da,autoscale --duration 300 --jobs 2 \
        --json /tmp/robust.json

Prints one line per scenario: each policy's goodput / bound, pard - best of nexus and clipper++, pard's
on-time count over nexus's (with autoscaling each run's workers, and so its bound, depend on the policy's
own drops), and where pard trails by more than 0.5 points.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import comparison as C  # noqa: E402  (the grid's scenarios, bottlenecks and dynamics)

POLICIES = ["pard", "pard-paper", "nexus", "clipper++"]
SHAPES = ["mmpp-b10", "mmpp-b15", "mmpp-b30", "mmpp-b60", "mmpp-cv1-b30", "mmpp-cv2.5-b15", "mmpp-cv2.5-b30", "ramp",
          "azure-o0-e1", "azure-o1800-e10", "azure-o3000-e30"]


def shape_arrivals(shape: str, rate: float, duration: float, seed: int) -> np.ndarray:
    """Arrival times (s) of ``shape`` at mean rate ``rate`` over ``duration`` seconds."""
    from pard import workloads as wl

    if shape in C.TRACES:  # the recorded grid's own traces (offset 600 s into the bundled one)
        return C.arrivals_for(shape, rate, duration, 600.0, seed)
    if shape.startswith("mmpp-"):
        opts = {"cv": 1.5, "b": 5.0, "s": 0.2}  # the grid's CV and burst share; "mmpp-cv2-b30-s0.1"
        for part in shape.split("-")[1:]:
            name = part.rstrip("0123456789.")
            opts[name] = float(part[len(name):])
        return np.asarray(wl.bursty(rate, duration, opts["cv"], burst_s=opts["b"], burst_share=opts["s"], seed=seed),
                          dtype=np.float64)
    if shape == "ramp":
        return np.asarray(wl.diurnal(rate, duration, period=duration, amplitude=0.5, peak=duration / 2,
                                     seed=seed), dtype=np.float64)
    if shape.startswith("azure-"):
        _, off, env = shape.split("-")
        raw = wl.azure_llm_conv()
        sel = wl.window(raw - raw[0], float(off[1:]), duration)
        arr = wl.scale(sel, rate, mode="amplify", bin=float(env[1:]), seed=seed)
        return np.asarray(arr[arr < duration], dtype=np.float64)
    raise ValueError(f"unknown shape {shape!r}; expected one of {SHAPES}")


def policy(name: str) -> Any:
    """A policy name, or a variant of one: ``"pard+prior_terms=True"`` (PolicySpec fields after ``+``)."""
    import dataclasses

    from pard.policies import POLICIES

    if "=" not in name:  # a plain name (clipper++ has its own plus signs)
        return name
    base, *parts = name.split("+")
    fields: dict[str, Any] = {}
    for part in parts:
        k, v = part.split("=")
        fields[k] = {"True": True, "False": False}.get(v, v)
        if isinstance(fields[k], str):
            try:
                fields[k] = float(v)
            except ValueError:
                pass
    return dataclasses.replace(POLICIES[base], name=name, **fields)


def drops_by_stage(r: Any) -> dict[str, int]:
    """Dropped requests counted by ``stage:reason``."""
    d = r.state == 3  # pard.outcomes.DROPPED
    if not d.any():
        return {}
    pairs, counts = np.unique(np.stack([r.drop_stage[d], r.reason[d]]), axis=1, return_counts=True)
    return {f"{r.stage_names[s]}:{r.reasons[c]}": int(n) for (s, c), n in zip(pairs.T.tolist(), counts.tolist())}


def run(key: tuple[str, str, str, float, str], duration: float, seed: int, policies: list[str],
        autoscale_on: str = "stage") -> dict[str, Any]:
    """Every policy on one scenario; figures per policy plus the per-stage drops and mean workers."""
    import pard

    pipeline, shape, bottleneck, load, dyn = key
    spec = C.scenario_spec(pipeline, bottleneck)
    arr = shape_arrivals(shape, load * spec.capacity().pipeline, duration, seed)
    params: dict[str, Any] = {"seed": seed}
    if dyn == "autoscale":
        params.update(autoscale=True, cold_start_s=10.0, jitter_cv=0.1, autoscale_on=autoscale_on)
    else:
        params.update(autoscale=False, jitter_cv=0.3)
    out: dict[str, Any] = {"key": list(key), "autoscale_on": autoscale_on, "requests": int(arr.size), "policies": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pard.PardWarning)
        for p in policies:
            r = pard.simulate(spec, arr, policy(p), **params)
            drops = drops_by_stage(r)
            out["policies"][p] = {
                "g": r.goodput_ratio, "on_time": r.on_time, "late": r.late, "dropped": r.dropped,
                "invalid": r.invalid_rate, "bound": r.goodput_bound_count,
                "worker_s": [float(x) for x in np.asarray(r.workers).sum(axis=1)], "drops": drops,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="comma-separated policies or variants, e.g. pard+prior_terms=True")
    ap.add_argument("--autoscale-on", default="stage", help="pard.simulate's autoscale_on: stage or pipeline")
    ap.add_argument("--only", default=None, help="comma-separated terms every chosen scenario has (e.g. da,autoscale)")
    ap.add_argument("--json", type=Path, default=None, help="append each scenario's figures here (JSON lines)")
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    keys = list(itertools.product(C.PIPELINES, args.shapes.split(","), C.BOTTLENECKS, C.LOADS, C.DYNAMICS))
    if args.only:
        want = set(args.only.split(","))
        keys = [k for k in keys if want <= {str(x) for x in k}]
    leads = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for row in pool.map(run, keys, [args.duration] * len(keys), [args.seed] * len(keys),
                            [policies] * len(keys), [args.autoscale_on] * len(keys)):
            pol = row["policies"]
            lead = (pol["pard"]["g"] - max(pol[b]["g"] for b in ("nexus", "clipper++") if b in pol)) * 100
            leads.append(lead)
            cells = " ".join(f"{p} {pol[p]['g']:.4f}" for p in policies)
            flag = "  <-- pard behind by > 0.5 pp" if lead < -0.5 else ""
            # each autoscaled run has its own workers, so its own bound: compare the on-time counts too
            ot = pol["pard"]["on_time"] / pol["nexus"]["on_time"] - 1 if pol.get("nexus", {}).get("on_time") else float("nan")
            print("/".join(map(str, row["key"])), cells, f"lead {lead:+.2f} on-time pard/nexus {ot:+.1%}{flag}", flush=True)
            if args.json:
                with args.json.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    if leads:
        print(f"{len(leads)} rows: median pard - best of nexus/clipper++ {statistics.median(leads):+.2f} pp, "
              f"worst {min(leads):+.2f} pp, behind by > 0.5 pp in {sum(x < -0.5 for x in leads)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
