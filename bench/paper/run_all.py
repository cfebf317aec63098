"""Run every paper-reproduction experiment (issue 6), then regenerate README.md's tables.

    python bench/paper/run_all.py              # the default set (shorter windows, fewer points)
    python bench/paper/run_all.py --full       # the full set
    python bench/paper/run_all.py --only e2_ablations,e3_slo

Each experiment runs as its own process (``python bench/paper/<name>.py``) with the same ``--full`` /
``--jobs`` / ``--seed``; their wall times, the machine's CPU count and load averages go to
``results/run_all.json``.  Exits non-zero if any experiment fails (the others still run).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPERIMENTS = ("e1_workloads", "x_order_lag", "e2_ablations", "e3_slo", "e3_lambda", "e3_window", "e3_stress", "x_downstream", "e4_scale")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=None, help="comma-separated experiment names")
    ap.add_argument("--no-readme", action="store_true", help="do not regenerate README.md")
    args = ap.parse_args(argv)
    names = list(EXPERIMENTS)
    if args.only:
        want = [n.strip() for n in args.only.split(",") if n.strip()]
        bad = [n for n in want if n not in EXPERIMENTS]
        if bad:
            ap.error(f"unknown experiment(s) {bad}; choose from {list(EXPERIMENTS)}")
        names = want
    log: dict[str, object] = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "cpus": os.cpu_count(), "jobs": args.jobs, "full": args.full,
        "load_average_before": list(os.getloadavg()), "experiments": {},
    }
    failed = []
    t_all = time.perf_counter()
    for name in names:
        cmd = [sys.executable, str(HERE / f"{name}.py"), "--jobs", str(args.jobs), "--seed", str(args.seed)]
        if args.full:
            cmd.append("--full")
        print(f"== {name}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, check=False).returncode
        wall = time.perf_counter() - t0
        log["experiments"][name] = {"rc": rc, "wall_s": wall, "load_average_after": list(os.getloadavg())}  # type: ignore[index]
        print(f"== {name}: rc {rc}, {wall:.1f} s", flush=True)
        if rc != 0:
            failed.append(name)
    log["total_wall_s"] = time.perf_counter() - t_all
    log["load_average_after"] = list(os.getloadavg())
    if not args.only:
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "run_all.json").write_text(json.dumps(log, indent=1) + "\n")
    print(f"all: {log['total_wall_s']:.0f} s wall on {os.cpu_count()} CPUs "
          f"(load average now {os.getloadavg()[0]:.1f}); failed: {failed or 'none'}")
    if not args.no_readme:
        rc = subprocess.run([sys.executable, str(HERE / "make_readme.py")], check=False).returncode
        if rc != 0:
            failed.append("make_readme")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
