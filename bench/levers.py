"""What each of ``pard``'s levers is worth: every PolicySpec field where ``pard`` differs from ``pard-paper``,
switched back to ``pard-paper``'s value one at a time, on the comparison grid (``bench/comparison.py``).

    PYTHONPATH=python python bench/levers.py --seeds 0,1 --duration 120 --jobs 2 --out /tmp/levers \\
        [--markdown levers.md] [--json levers.json]

For each seed the grid runs once with every policy (``--rows``, reused when the file exists), then once per
lever with only ``pard`` simulated, that field replaced (``--reuse``, ``--variant``).  The levers are read
from :data:`pard.policies.POLICIES`, not listed here, so a lever added or retired changes the table.

The table: per lever, the change in ``pard``'s goodput (points of the goodput bound) and invalid rate
(points) when the lever is taken away, averaged over the rows of each row class (pipeline x bottleneck x
load x dynamics; traces and seeds pooled).  "Worth" is the largest loss of goodput without the lever over
the classes (positive: the lever pays there), with its class; "costs" the largest gain.  A lever stays when
it is worth >= 0.3 points in some class, or when a named test pins the failure it guards (said in
bench/RESULTS.md).  A variant PolicySpec refuses (a lever that needs another) is reported as such.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: A lever is kept when it is worth at least this many points of goodput in some row class.
WORTH_PP = 0.3
SKIP = {"name", "description"}


def levers() -> list[tuple[str, Any]]:
    """``(field, pard-paper's value)`` for every PolicySpec field where pard differs from pard-paper."""
    from pard.policies import POLICIES

    a, b = POLICIES["pard"], POLICIES["pard-paper"]
    return [(f.name, getattr(b, f.name)) for f in dataclasses.fields(a)
            if f.name not in SKIP and getattr(a, f.name) != getattr(b, f.name)]


def _value(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _grid(args: argparse.Namespace, seed: int, rows: Path, extra: list[str]) -> str | None:
    """Run bench/comparison.py; None on success, else its error's last line."""
    cmd = [sys.executable, str(HERE / "comparison.py"), "--duration", str(args.duration), "--jobs", str(args.jobs),
           "--seed", str(seed), "--rows", str(rows), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["failed"])[-1]
    return None


def _rows(path: Path) -> dict[tuple[Any, ...], dict[str, Any]]:
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        out[(r["pipeline"], r["trace"], r["bottleneck"], r["load"], r["dynamics"])] = r
    return out


def table(base: dict[int, dict[tuple[Any, ...], dict[str, Any]]],
          variant: dict[int, dict[tuple[Any, ...], dict[str, Any]]]) -> dict[str, Any]:
    """Per row class: the mean change (variant - base, points) of pard's goodput / bound and invalid rate."""
    by_class: dict[tuple[Any, ...], list[tuple[float, float]]] = defaultdict(list)
    for seed, rows in variant.items():
        for key, r in rows.items():
            b = base[seed][key]["policies"]["pard"]
            v = r["policies"]["pard"]
            cls = (key[0], key[2], key[3], key[4])
            by_class[cls].append((100 * (v["goodput_ratio"] - b["goodput_ratio"]),
                                  100 * (v["invalid_rate"] - b["invalid_rate"])))
    classes = {"/".join(map(str, c)): (statistics.fmean(x for x, _ in d), statistics.fmean(y for _, y in d))
               for c, d in sorted(by_class.items())}
    worth_cls = min(classes, key=lambda c: classes[c][0])
    cost_cls = max(classes, key=lambda c: classes[c][0])
    all_g = [x for d in by_class.values() for x, _ in d]
    all_i = [y for d in by_class.values() for _, y in d]
    return {"classes": classes, "rows": len(all_g),
            "worth_pp": -classes[worth_cls][0], "worth_class": worth_cls,
            "costs_pp": classes[cost_cls][0], "costs_class": cost_cls,
            "mean_goodput_pp": statistics.fmean(all_g), "mean_invalid_pp": statistics.fmean(all_i),
            "classes_worth": sum(1 for g, _ in classes.values() if -g >= WORTH_PP)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True, help="folder for the rows files (reused when present)")
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    base: dict[int, dict[tuple[Any, ...], dict[str, Any]]] = {}
    for seed in seeds:
        path = args.out / f"base_s{seed}.jsonl"
        err = _grid(args, seed, path, [])
        if err:
            print(f"base grid, seed {seed}: {err}", file=sys.stderr)
            return 1
        base[seed] = _rows(path)
    results: dict[str, Any] = {}
    for name, paper in levers():
        variant: dict[int, dict[tuple[Any, ...], dict[str, Any]]] = {}
        refused = None
        for seed in seeds:
            path = args.out / f"{name}_s{seed}.jsonl"
            refused = _grid(args, seed, path, ["--reuse", str(args.out / f"base_s{seed}.jsonl"),
                                               "--variant", f"{name}={_value(paper)}"])
            if refused:
                break
            variant[seed] = _rows(path)
        results[name] = {"paper_value": _value(paper), "refused": refused} if refused else \
            {"paper_value": _value(paper), **table(base, variant)}
        print(f"{name}={_value(paper)}: " + (f"refused: {refused}" if refused else
              f"worth {results[name]['worth_pp']:+.2f} pp ({results[name]['worth_class']}), mean "
              f"{results[name]['mean_goodput_pp']:+.3f} pp"), file=sys.stderr, flush=True)
    lines = ["| lever (pard-paper's value) | worth: most goodput lost without it (class) | most gained without it "
             "(class) | mean goodput / invalid change without it | classes >= 0.3 |", "|---|---|---|---|---|"]
    for name, r in results.items():
        if r.get("refused"):
            lines.append(f"| `{name}` (`{r['paper_value']}`) | refused alone: {r['refused']} | | | |")
            continue
        lines.append(f"| `{name}` (`{r['paper_value']}`) | {r['worth_pp']:+.2f} ({r['worth_class']}) | "
                     f"{r['costs_pp']:+.2f} ({r['costs_class']}) | {r['mean_goodput_pp']:+.3f} / "
                     f"{r['mean_invalid_pp']:+.3f} | {r['classes_worth']} |")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps({"seeds": seeds, "duration_s": args.duration, "levers": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
