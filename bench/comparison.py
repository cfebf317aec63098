"""The policy comparison grid of issue 9 item 8, recorded in bench/RESULTS.md.

Grid (144 scenarios): pipeline {tm, lv, ga, da} x trace {bundled Azure conversation trace amplified
(10 s envelope, Poisson inside), bursty MMPP with CV 1.5 of per-second counts, flash crowd x5 for 10 s
(Poisson elsewhere)} x bottleneck {entry, downstream} x load {0.8, 1.0, 1.3} (mean arrival rate over that
spec's capacity) x dynamics {fixed workers with execution jitter CV 0.3, autoscaling every sync to
``ceil(rate / per-worker throughput x 1.2)`` with 10 s cold starts and jitter CV 0.1}; policies pard,
pard-paper, nexus, clipper++, triton, ray-serve, naive.  Every policy runs on the same arrivals with the
same seed and the same parameters (``pard.simulate``'s defaults); nothing is tuned per row.

Bottleneck: "entry" makes an entry stage the pipeline's bottleneck, "downstream" a later stage, by adding
one worker at a time to the current bottleneck stage of the built-in spec until the kind matches (e.g.
``tm`` downstream: vehicle_detect 3 -> 4 workers, so vehicle_classify sets the capacity; ``ga`` entry:
action_recognize 5 -> 6).  A built-in spec whose stages tie keeps the tie (lv/da's entry rows).

Usage::

    PYTHONPATH=python python bench/comparison.py --duration 300 --jobs 2 --markdown bench/comparison.md

Lever experiments: ``--variant downstream=busy,overload_upper=true`` runs ``pard`` with those PolicySpec fields
replaced (the name stays ``pard``), and ``--reuse ROWS`` takes every other policy's figures from a rows file of
an earlier run with the same duration and seed (only ``pard`` is simulated), e.g.::

    PYTHONPATH=python python bench/comparison.py --rows base.jsonl            # once: every policy
    PYTHONPATH=python python bench/comparison.py --reuse base.jsonl --variant overload_below=none

Prints (and optionally writes) a markdown table, one row per scenario, and a summary: the median and
worst of pard - best baseline, the rows where pard trails a baseline by more than 0.3 points, where it
trails pard-paper, where it is below 0.90 of the bound, and where its invalid rate exceeds nexus's; for the
flash-crowd rows, pard's on-time share of the crowd's requests against two bounds (the crowd's requests
alone, and their share of the whole run's bound, which counts the work queued before the crowd).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

POLICIES = ["pard", "pard-paper", "nexus", "clipper++", "triton", "ray-serve", "naive"]
BASELINES = ["nexus", "clipper++", "triton", "ray-serve", "naive"]
PIPELINES = ["tm", "lv", "ga", "da"]
TRACES = ["azure-conv", "bursty", "flash"]
BOTTLENECKS = ["entry", "downstream"]
LOADS = [0.8, 1.0, 1.3]
DYNAMICS = ["fixed-j0.3", "autoscale"]
FLASH_FACTOR, FLASH_LENGTH_S = 5.0, 10.0


def scenario_spec(pipeline: str, bottleneck: str) -> Any:
    """The built-in spec with workers added until the bottleneck is at an entry / downstream stage."""
    from pard import config

    spec = config.builtin(pipeline)
    entries = set(spec.entry_stages())
    for _ in range(8):
        b = spec.capacity().bottleneck
        if (b in entries) == (bottleneck == "entry"):
            break
        spec = spec.with_workers({b: spec.stage(b).workers + 1})
    return spec


def flash_window(duration: float) -> tuple[float, float]:
    """Start and length (s) of the flash crowd: 10 s, a third of the way in."""
    return duration / 3.0, FLASH_LENGTH_S


def arrivals_for(trace: str, rate: float, duration: float, start: float, seed: int) -> np.ndarray:
    """Arrival times (s) of ``trace`` at mean rate ``rate`` over ``duration`` seconds."""
    from pard import workloads as wl

    if trace == "bursty":
        return np.asarray(wl.bursty(rate, duration, 1.5, seed=seed), dtype=np.float64)
    if trace == "flash":
        t0, length = flash_window(duration)
        base = rate / (1.0 + (FLASH_FACTOR - 1.0) * length / duration)  # mean over the run = rate
        return np.asarray(wl.flash_crowd(base, FLASH_FACTOR, t0, length, duration=duration, seed=seed),
                          dtype=np.float64)
    raw = wl.azure_llm_conv()
    sel = wl.window(raw - raw[0], start, duration)
    arr = wl.scale(sel, rate, mode="amplify", seed=seed)
    return np.asarray(arr[arr < duration], dtype=np.float64)


def crowd_ratio(report: Any, duration: float) -> float:
    """On-time requests sent during the flash crowd over the fluid bound of those requests alone (generous:
    the crowd gets the whole capacity from its first second, as if nothing sent before it were queued)."""
    from pard.report import fluid_goodput_bound

    t0, length = flash_window(duration)
    sel = (report.send_s >= t0) & (report.send_s < t0 + length)
    slo = report.slo_s[sel] if report.slo_s is not None else None
    bound = fluid_goodput_bound(report.send_s[sel], slo, report.capacity, report.t0_s)
    return float(np.count_nonzero(report.state[sel] == 1) / bound) if bound else float("nan")


def crowd_run_ratio(report: Any, duration: float) -> float:
    """On-time requests sent during the flash crowd over their share of the whole run's fluid bound
    (:func:`pard.report.fluid_bound_share`: the crowd competes with the requests sent before it)."""
    from pard.report import fluid_bound_share

    t0, length = flash_window(duration)
    sel = (report.send_s >= t0) & (report.send_s < t0 + length)
    bound = fluid_bound_share(report.send_s, report.slo_s, report.capacity, report.t0_s, sel)
    return float(np.count_nonzero(report.state[sel] == 1) / bound) if bound else float("nan")


def parse_variant(text: str | None) -> Any:
    """``pard``'s PolicySpec with the fields of ``text`` (``field=value,...``; true/false, numbers, else
    strings) replaced; ``pard`` itself when ``text`` is empty.  Raises pard's ValueError / TypeError for a
    field or value PolicySpec refuses."""
    import dataclasses

    from pard.policies import POLICIES

    base = POLICIES["pard"]
    if not text:
        return base
    fields: dict[str, Any] = {}
    for item in text.split(","):
        name, _, raw = item.partition("=")
        value: Any = raw.strip()
        if value.lower() in ("true", "false"):
            value = value.lower() == "true"
        else:
            try:
                value = float(value) if "." in value or "e" in value.lower() else int(value)
            except ValueError:
                pass
        fields[name.strip()] = value
    return dataclasses.replace(base, **fields)


def run_scenario(key: tuple[str, str, str, float, str], duration: float, start: float, seed: int,
                 policies: list[Any]) -> dict[str, Any]:
    from pard import compare

    pipeline, trace, bottleneck, load, dyn = key
    spec = scenario_spec(pipeline, bottleneck)
    cap = spec.capacity()
    arr = arrivals_for(trace, load * cap.pipeline, duration, start, seed)
    params: dict[str, Any] = {"seed": seed}
    if dyn == "autoscale":
        params.update(autoscale=True, cold_start_s=10.0, jitter_cv=0.1)
    else:
        params.update(autoscale=False, jitter_cv=0.3)
    t0 = time.perf_counter()
    reports = compare(spec, arr, policies, **params)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "pipeline": pipeline, "trace": trace, "bottleneck": bottleneck, "load": load, "dynamics": dyn,
        "bottleneck_stage": cap.bottleneck, "capacity": cap.pipeline, "requests": int(arr.size),
        "wall_s": wall, "policies": {},
    }
    for name, r in reports.items():
        d = r.to_dict(detail=False)
        d.update(goodput_ratio=r.goodput_ratio, dropped_by_reason=r.dropped_by_reason)
        if trace == "flash":
            d["crowd_ratio"] = crowd_ratio(r, duration)
            d["crowd_run_ratio"] = crowd_run_ratio(r, duration)
        out["policies"][name] = d
    return out


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["pipeline"], row["trace"], row["bottleneck"], row["load"], row["dynamics"])


def _g(row: dict[str, Any], p: str) -> float:
    return float(row["policies"][p]["goodput_ratio"])


def best_baseline(row: dict[str, Any], among: list[str] = BASELINES) -> tuple[str, float]:
    name = max((b for b in among if b in row["policies"]), key=lambda b: _g(row, b))
    return name, _g(row, name)


def markdown(rows: list[dict[str, Any]], policies: list[str]) -> str:
    head = ("| pipeline | trace | bottleneck | load | dynamics | "
            + " | ".join(f"{p}" for p in policies)
            + " | pard − best baseline | pard − pard-paper | invalid pard / nexus | drop pard / nexus | "
              "weighted goodput pard / best (req/s) | crowd g/bound pard / nexus (crowd alone) | "
              "crowd g/bound pard / nexus (share of the run's bound) |")
    sep = "|" + "---|" * (5 + len(policies) + 7)
    lines = [head, sep]
    for row in rows:
        pol = row["policies"]
        best = max(_g(row, p) for p in policies)
        cells = [f"**{_g(row, p):.3f}**" if _g(row, p) == best else f"{_g(row, p):.3f}" for p in policies]
        bname, bval = best_baseline(row)
        delta = (_g(row, "pard") - bval) * 100
        dpaper = (_g(row, "pard") - _g(row, "pard-paper")) * 100 if "pard-paper" in pol else float("nan")
        inv = f"{pol['pard']['invalid_rate']:.1%} / {pol['nexus']['invalid_rate']:.1%}"
        drp = f"{pol['pard']['drop_rate']:.1%} / {pol['nexus']['drop_rate']:.1%}"
        wg = f"{pol['pard']['weighted_goodput']:.0f} / {pol[bname]['weighted_goodput']:.0f} ({bname})"
        crowd = (f"{pol['pard']['crowd_ratio']:.3f} / {pol['nexus']['crowd_ratio']:.3f}"
                 if "crowd_ratio" in pol["pard"] else "–")
        crowd_run = (f"{pol['pard']['crowd_run_ratio']:.3f} / {pol['nexus']['crowd_run_ratio']:.3f}"
                     if "crowd_run_ratio" in pol["pard"] else "–")
        lines.append(f"| {row['pipeline']} | {row['trace']} | {row['bottleneck']} ({row['bottleneck_stage']}) | "
                     f"{row['load']} | {row['dynamics']} | " + " | ".join(cells)
                     + f" | {delta:+.1f} pp ({bname}) | {dpaper:+.1f} pp | {inv} | {drp} | {wg} | {crowd} | {crowd_run} |")
    return "\n".join(lines)


def common_lead(row: dict[str, Any]) -> float:
    """pard − best baseline in points of the row's largest goodput bound (every policy's goodput over the
    same denominator).  With autoscaling each run's bound follows its own workers, so a policy whose
    autoscaler provisioned more has a larger bound: a ratio to its own bound can fall while it serves
    more, and one policy's goodput can exceed another's "bound".  One denominator per row compares goodput."""
    pol = row["policies"]
    denom = max(v["goodput_bound"] for v in pol.values())
    if denom <= 0:
        return 0.0
    best = max(pol[b]["goodput"] for b in BASELINES if b in pol)
    return (pol["pard"]["goodput"] - best) / denom * 100


def common_bound_lines(rows: list[dict[str, Any]], label: Any) -> list[str]:
    """The summary lines of :func:`common_lead` for the autoscaled rows (fixed rows share one bound already)."""
    auto = [r for r in rows if r["dynamics"] == "autoscale"]
    if not auto:
        return []
    lead = [common_lead(r) for r in auto]
    worst = min(range(len(auto)), key=lambda i: lead[i])
    behind = [label(r) + f" ({lead[i]:+.1f} pp)" for i, r in enumerate(auto) if lead[i] < -0.3]
    return [f"autoscaled rows, goodput over the row's largest bound (one denominator per row): median pard − best "
            f"baseline {statistics.median(lead):+.2f} pp, worst {label(auto[worst])} {lead[worst]:+.2f} pp, "
            f"rows < −0.3 pp: {len(behind)}" + "".join(f"\n  - {x}" for x in behind)]


def summary(rows: list[dict[str, Any]]) -> str:
    """The issue-9 "Done when" figures over the rows."""
    def label(r: dict[str, Any]) -> str:
        return f"{r['pipeline']}/{r['trace']}/{r['bottleneck']}/{r['load']}/{r['dynamics']}"

    lead = [(_g(r, "pard") - best_baseline(r)[1]) * 100 for r in rows]
    lead_nc = [(_g(r, "pard") - best_baseline(r, ["nexus", "clipper++"])[1]) * 100 for r in rows]
    worst = min(range(len(rows)), key=lambda i: lead[i])
    behind = [label(r) + f" ({lead[i]:+.1f} pp vs {best_baseline(r)[0]})"
              for i, r in enumerate(rows) if lead[i] < -0.3]
    below_paper = [label(r) + f" ({(_g(r, 'pard') - _g(r, 'pard-paper')) * 100:+.2f} pp)"
                   for r in rows if "pard-paper" in r["policies"] and _g(r, "pard") < _g(r, "pard-paper")]
    below_bound = [label(r) + f" ({_g(r, 'pard'):.3f})" for r in rows if _g(r, "pard") < 0.90]
    inv = [label(r) + f" ({r['policies']['pard']['invalid_rate']:.2%} vs {r['policies']['nexus']['invalid_rate']:.2%})"
           for r in rows if r["policies"]["pard"]["invalid_rate"] > r["policies"]["nexus"]["invalid_rate"]]
    crowd = [r["policies"]["pard"]["crowd_ratio"] for r in rows if "crowd_ratio" in r["policies"]["pard"]]
    out = [
        f"rows: {len(rows)}",
        f"median pard − best baseline: {statistics.median(lead):+.2f} pp; over nexus/clipper++ only: "
        f"{statistics.median(lead_nc):+.2f} pp",
        f"worst row: {label(rows[worst])} {lead[worst]:+.2f} pp (vs {best_baseline(rows[worst])[0]})",
        f"rows with pard < best baseline − 0.3 pp: {len(behind)}" + "".join(f"\n  - {x}" for x in behind),
        f"rows with pard < pard-paper: {len(below_paper)}" + "".join(f"\n  - {x}" for x in below_paper),
        f"rows with pard < 0.90 of the bound: {len(below_bound)}" + "".join(f"\n  - {x}" for x in below_bound),
        f"rows with pard's invalid rate above nexus's: {len(inv)}" + "".join(f"\n  - {x}" for x in inv),
    ]
    out += common_bound_lines(rows, label)
    if crowd:
        out.append(f"flash crowd rows: pard on-time / bound of the crowd's requests alone: min {min(crowd):.3f}, "
                   f"median {statistics.median(crowd):.3f}, >= 0.90 in {sum(c >= 0.9 for c in crowd)} of {len(crowd)}")
    crowd_run = [r["policies"]["pard"]["crowd_run_ratio"] for r in rows if "crowd_run_ratio" in r["policies"]["pard"]]
    if crowd_run:
        out.append(f"flash crowd rows: pard on-time / the crowd's share of the whole run's bound: min "
                   f"{min(crowd_run):.3f}, median {statistics.median(crowd_run):.3f}, >= 0.90 in "
                   f"{sum(c >= 0.9 for c in crowd_run)} of {len(crowd_run)}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of arrivals per scenario")
    ap.add_argument("--start", type=float, default=600.0, help="offset into the bundled trace (s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--markdown", type=Path, default=None, help="write the table and summary here")
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    ap.add_argument("--only", default=None,
                    help="comma-separated filter: a scenario runs when every term names one of its fields")
    ap.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policies (pard and nexus needed)")
    ap.add_argument("--variant", default=None,
                    help="field=value,... : run pard with these PolicySpec fields replaced (a lever experiment)")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="take every policy but pard from this rows file (same duration and seed); simulate pard only")
    ap.add_argument("--rows", type=Path, default=None,
                    help="append each finished scenario to this JSON-lines file and skip scenarios already in it "
                         "(resume a long grid)")
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    pard_spec = parse_variant(args.variant)
    reused: dict[tuple[Any, ...], dict[str, Any]] = {}
    if args.reuse:
        for line in args.reuse.read_text().splitlines():
            r = json.loads(line)
            reused[_key(r)] = r
    run_policies: list[Any] = [pard_spec] if args.reuse else [pard_spec if p == "pard" else p for p in policies]
    keys = list(itertools.product(PIPELINES, TRACES, BOTTLENECKS, LOADS, DYNAMICS))
    if args.only:
        want = set(args.only.split(","))
        keys = [k for k in keys if want <= {str(x) for x in k}]
    t0 = time.perf_counter()
    done: dict[tuple[Any, ...], dict[str, Any]] = {}
    if args.rows and args.rows.exists():
        for line in args.rows.read_text().splitlines():
            r = json.loads(line)
            done[_key(r)] = r
    todo = [k for k in keys if k not in done]
    missing = [k for k in todo if args.reuse and k not in reused]
    if missing:
        ap.error(f"--reuse {args.reuse} has no row for {'/'.join(map(str, missing[0]))} ({len(missing)} missing)")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_scenario, k, args.duration, args.start, args.seed, run_policies) for k in todo]
        for fut in as_completed(futures):
            r = fut.result()
            if args.reuse:  # the other policies' figures from the earlier run, pard's from this one
                r = {**reused[_key(r)], "policies": {**reused[_key(r)]["policies"], "pard": r["policies"]["pard"]}}
            done[_key(r)] = r
            if args.rows:
                with args.rows.open("a") as fh:
                    fh.write(json.dumps(r) + "\n")
            print(f"done {len(done)}/{len(keys)}: {'/'.join(map(str, _key(r)))}", file=sys.stderr, flush=True)
    rows = [done[k] for k in keys]
    total = time.perf_counter() - t0
    table = markdown(rows, policies)
    summ = summary(rows)
    print(table)
    print()
    print(summ)
    n_req = sum(r["requests"] for r in rows) * len(policies)
    print(f"\n{len(rows)} scenarios x {len(policies)} policies, {n_req} simulated requests in {total:.0f} s wall",
          file=sys.stderr)
    if args.markdown:
        args.markdown.write_text(table + "\n\n" + summ + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
