"""Shared pieces of the paper-reproduction experiments (issue 6): workloads, regime, output.

Every script in ``bench/paper/`` builds its arrivals and its simulation parameters here, so that the
experiments share one definition of the paper's workloads and of its regime:

* **Arrival patterns** (DESIGN §5): ``azure`` -- the bundled Azure LLM conversation trace (2023),
  a window of it amplified to the target mean rate (rate envelope in 10 s bins, Poisson within a bin;
  CV of 1 s counts ~0.27); ``stable`` -- the seeded two-state MMPP with CV 0.47 of 1 s counts (the
  paper's Wikipedia-like pattern); ``bursty`` -- the same generator with CV 1.2 (Twitter / Azure
  Functions-like, the paper's 1.0-1.3).  The generator's own defaults shape the bursts (mean burst
  5 s, 20 % of the time); nothing here is fitted to a result.
* **Load**: the mean arrival rate is ``LOAD`` (1.0) times the built-in pipeline's capacity at its
  built-in workers (:meth:`pard.config.PipelineSpec.capacity`), for every pipeline and pattern.
* **Regime** (DESIGN §5a, the paper's): autoscaling workers (each stage follows its recent input
  rate with headroom 1.2), 10 s cold starts, lognormal execution-time variability of CV 0.1, the
  planner at its defaults (sync 1 s, lambda 0.1, window 5 s resized by the input's CV).

Output: each script writes ``results/<name>.json`` (raw figures plus the run's environment: date,
CPU count, load average before and after, wall time, git commit) and ``results/<name>.png``.

Run any script as ``python bench/paper/<name>.py [--full] [--jobs N]`` from the repository root;
``pard`` is imported from ``python/`` when it is not installed (after the in-tree build of
CONTRIBUTING.md).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RESULTS = HERE / "results"

try:  # an installed pard wins; otherwise the in-tree package
    import pard  # noqa: F401
except ImportError:  # pragma: no cover - depends on how the repo was set up
    sys.path.insert(0, str(REPO / "python"))
    import pard  # noqa: F401

__all__ = [
    "PIPELINES",
    "PATTERNS",
    "PATTERN_CV",
    "BASELINES",
    "POLICIES",
    "LOAD",
    "REGIME",
    "AZURE_START_S",
    "RESULTS",
    "spec",
    "arrivals",
    "metrics",
    "early_late_shares",
    "stage_depths",
    "parse_args",
    "run_parallel",
    "Recorder",
    "ratio",
    "plt",
]

#: The paper's four pipelines (built-ins, DESIGN §5).
PIPELINES = ("tm", "lv", "ga", "da")
#: The three arrival patterns of the paper's evaluation, in this order everywhere.
PATTERNS = ("azure", "stable", "bursty")
#: CV of per-second counts asked of the MMPP generator for the synthetic patterns.
PATTERN_CV = {"stable": 0.47, "bursty": 1.2}
#: The paper's two baselines and the never-dropping reference.
BASELINES = ("nexus", "clipper++")
POLICIES = ("pard-paper", "nexus", "clipper++", "naive")
#: Mean arrival rate / built-in capacity, the same for every pipeline and pattern.
LOAD = 1.0
#: The paper's regime (DESIGN §5a): keyword arguments of pard.simulate.
REGIME: dict[str, Any] = {"autoscale": True, "cold_start_s": 10.0, "jitter_cv": 0.1}
#: Where the window of the bundled Azure trace starts (s): past its first ten minutes.
AZURE_START_S = 600.0

T = TypeVar("T")
R = TypeVar("R")


def spec(pipeline: str) -> Any:
    """The built-in pipeline ``pipeline`` (a pard.config.PipelineSpec)."""
    from pard import config

    return config.builtin(pipeline)


def arrivals(pattern: str, rate: float, duration_s: float, *, seed: int = 0, cv: float | None = None) -> np.ndarray:
    """Arrival times (s, sorted, in ``[0, duration_s)``) of ``pattern`` at mean ``rate`` req/s.

    ``pattern``: ``azure`` (bundled trace window from ``AZURE_START_S``, amplified), ``stable`` or
    ``bursty`` (MMPP at ``PATTERN_CV``), ``poisson``, or ``mmpp`` with an explicit ``cv``.
    Raises ValueError for an unknown pattern or a window past the trace's end.
    """
    from pard import workloads as wl

    if pattern == "azure":
        raw = wl.azure_llm_conv()
        if AZURE_START_S + duration_s > float(raw[-1]) + 1.0:
            raise ValueError(f"duration_s {duration_s!r} runs past the bundled trace ({raw[-1]:.0f} s) "
                             f"from {AZURE_START_S} s")
        sel = wl.window(raw, AZURE_START_S, duration_s)
        out = wl.scale(sel, rate, mode="amplify", seed=seed)
        return np.ascontiguousarray(out[out < duration_s])
    if pattern == "poisson":
        return np.asarray(wl.poisson(rate, duration_s, seed=seed))
    if pattern in PATTERN_CV or pattern == "mmpp":
        c = PATTERN_CV.get(pattern) if cv is None else cv
        if c is None:
            raise ValueError("pattern 'mmpp' needs cv")
        return np.asarray(wl.bursty(rate, duration_s, c, seed=seed))
    raise ValueError(f"unknown pattern {pattern!r}; expected one of {PATTERNS + ('poisson', 'mmpp')}")


def stage_depths(sp: Any) -> list[int]:
    """Depth of each stage (entry = 0; longest path from an entry), in ``sp.stages`` order."""
    depth: dict[str, int] = {}
    for name in sp.topological_order():
        preds = sp.predecessors(name)
        depth[name] = 0 if not preds else 1 + max(depth[p] for p in preds)
    return [depth[st.name] for st in sp.stages]


def early_late_shares(sp: Any, shares: Mapping[str, float]) -> tuple[float, float]:
    """(share of drops in the first two stages -- depth 0 and 1 --, share in the rest)."""
    d = stage_depths(sp)
    early = sum(shares.get(st.name, 0.0) for st, k in zip(sp.stages, d) if k <= 1)
    late = sum(shares.get(st.name, 0.0) for st, k in zip(sp.stages, d) if k >= 2)
    return float(early), float(late)


def metrics(report: Any, sp: Any) -> dict[str, Any]:
    """The figures the experiments record for one run (a pard.report.Report)."""
    shares = report.drop_share_by_stage
    early, late = early_late_shares(sp, shares)
    return {
        "submitted": report.submitted,
        "on_time": report.on_time,
        "late": report.late,
        "dropped": report.dropped,
        "goodput": report.goodput,
        "goodput_normalised": report.goodput_normalised,
        "goodput_bound": report.goodput_bound,
        "goodput_ratio": report.goodput_ratio,
        "drop_rate": report.drop_rate,
        "invalid_rate": report.invalid_rate,
        "drop_share_by_stage": shares,
        "drop_share_first_two": early,
        "drop_share_rest": late,
        "dropped_by_reason": report.dropped_by_reason,
        "transient_drop_rate_1s": report.transient_drop_rate(1),
        "transient_drop_rate_10s": report.transient_drop_rate(10),
        "p99_latency_s": report.latency_percentiles()["p99"],
    }


def ratio(num: float, den: float) -> float | None:
    """``num / den``, or None when ``den`` is 0 (JSON-safe)."""
    return float(num / den) if den > 0 else None


def parse_args(doc: str | None, argv: Sequence[str] | None = None,
               extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """The options every script takes: ``--full``, ``--jobs``, ``--seed``, ``--out``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the full set (longer windows, more points and seeds)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder (default bench/paper/results)")
    if extra is not None:
        extra(ap)
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {args.jobs}")
    return args


def run_parallel(fn: Callable[[T], R], items: Iterable[T], jobs: int) -> list[R]:
    """``[fn(x) for x in items]`` over ``jobs`` processes (in order); inline when ``jobs == 1``."""
    items = list(items)
    if jobs == 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(fn, items))


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False)
        return out.stdout.strip() or None
    except OSError:
        return None


class Recorder:
    """Times one experiment and writes its JSON (and holds the environment it ran in)."""

    def __init__(self, name: str, args: argparse.Namespace, config: Mapping[str, Any]) -> None:
        self.name = name
        self.out: Path = args.out
        self.out.mkdir(parents=True, exist_ok=True)
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()
        self.env: dict[str, Any] = {
            "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
            "git_commit": _git_commit(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_before": list(os.getloadavg()),
            "jobs": args.jobs,
            "full": bool(args.full),
            "command": " ".join(["python", f"bench/paper/{name}.py"] + sys.argv[1:]),
        }
        self.config = dict(config)

    @property
    def json_path(self) -> Path:
        return self.out / f"{self.name}.json"

    @property
    def png_path(self) -> Path:
        return self.out / f"{self.name}.png"

    def write(self, results: Any, summary: Mapping[str, Any]) -> Path:
        """Write ``{"experiment", "env", "config", "summary", "results"}`` to ``results/<name>.json``."""
        self.env["wall_s"] = time.perf_counter() - self._t0
        self.env["load_average_after"] = list(os.getloadavg())
        doc = {"experiment": self.name, "env": self.env, "config": self.config, "summary": dict(summary),
               "results": results}
        self.json_path.write_text(json.dumps(_clean(doc), indent=1) + "\n")
        print(f"{self.name}: wrote {self.json_path} and {self.png_path} "
              f"({self.env['wall_s']:.1f} s wall, load average {self.env['load_average_after'][0]:.1f})")
        return self.json_path


def _clean(x: Any) -> Any:
    """JSON-safe: NaN/inf -> None, NumPy scalars -> Python."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if np.isfinite(v) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def plt() -> Any:
    """matplotlib.pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot
