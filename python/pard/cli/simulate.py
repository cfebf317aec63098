"""``pard simulate``: replay an arrival trace against a pipeline under several policies and print the
comparison (DESIGN §1, use 2)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._extras import require
from ..config import warn_unreachable_slo
from ..errors import TooManyArrivalsError, UsageError
from ..plotting import plot_reports
from ..report import comparison_dict, comparison_table
from ..sim import compare
from ..workloads import BUILTIN_TRACES, TRACE_FORMATS, UNITS, load_trace, resolve_file_format
from .parsers import (add_command, DEFAULT_POLICIES, add_pipeline, check_output, check_plot_suffix, load_spec, non_negative, slo_seconds,
                      policies, positive)
from .parsers import seed as seed_arg
from .parsers import spell

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add ``pard simulate`` to ``subparsers``."""
    p = add_command(
        subparsers, "simulate", run,
        help="compare drop policies on a pipeline and an arrival trace (discrete-event)",
        description="Replay an arrival trace against a pipeline's latency profiles under each policy and "
                    "print goodput, its ratio to the goodput bound, drop and invalid rates, p99 latency and "
                    "the share of drops per stage (DESIGN §4).",
    )
    add_pipeline(p, "lv")
    p.add_argument("--trace", default="azure-conv", metavar="{azure-conv,bursty,poisson,FILE}",
                   help="the bundled Azure LLM conversation trace, a generator, or a trace file; "
                        "default azure-conv")
    p.add_argument("--trace-format", choices=TRACE_FORMATS, default=None,
                   help="format of a trace FILE (default: guessed conservatively from its first lines and "
                        "shown in the header: an Azure LLM or Functions header, else csv; a file of whole "
                        "numbers only is refused: say counts or csv)")
    p.add_argument("--column", default=None, metavar="NAME|INDEX",
                   help="csv: the column of arrival times (default: the one named like time/timestamp/"
                        "arrival, or column 0 without a header)")
    p.add_argument("--unit", choices=UNITS, default=None,
                   help="csv: unit of the arrival times (default: datetime for ISO 8601 date-times, else s)")
    p.add_argument("--scaling", choices=("amplify", "compress"), default="amplify",
                   help="how a real trace reaches the target rate (DESIGN §5); default amplify")
    p.add_argument("--load", type=positive("--load"), default=None,
                   help="mean arrival rate over the pipeline's capacity (spec.capacity()); default 1.0, "
                        "or an exact replay for --trace-format csv")
    p.add_argument("--policies", type=policies, default=policies(DEFAULT_POLICIES),
                   help=f"comma-separated policies; default {DEFAULT_POLICIES}")
    p.add_argument("--slo", type=slo_seconds, default=None,
                   help="end-to-end SLO in seconds, in (0, 1e9]; default the pipeline's")
    p.add_argument("--start", type=non_negative("--start"), default=0.0,
                   help="skip this many seconds of the trace; default 0")
    p.add_argument("--duration", type=positive("--duration"), default=None,
                   help="seconds of trace to simulate; default 300 (the whole file for an exact csv replay)")
    p.add_argument("--jitter", type=non_negative("--jitter"), default=0.1,
                   help="CV of the execution-time factor (lognormal, mean 1); 0 = deterministic; default 0.1")
    p.add_argument("--autoscale", action=argparse.BooleanOptionalAction, default=False,
                   help="workers follow each stage's input rate (ceil(rate / per-worker throughput * 1.2), "
                        "at least 1), new ones after a 10 s cold start; default off.  The spec's workers are "
                        "only the starting point: a lightly loaded stage scales below them, which lowers its "
                        "capacity and hence the goodput bound")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of arrivals, jitter and planner; default 0")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the comparison as JSON")
    p.add_argument("--plot", type=Path, default=None, metavar="PATH", help="write goodput/drops/queueing figure")


def _too_big(args: argparse.Namespace, load: float | None, capacity: float, exc: Exception) -> str:
    """One line for a run over the size limits: what was asked, what it means, what to lower."""
    dur = 300.0 if args.duration is None else args.duration
    rate = "" if load is None else f" ({load * capacity:.4g} req/s)"
    what = str(exc).split("; lower ")[0].split("; simulate ")[0]
    return (f"--load {load if load is not None else 'replay'} --duration {dur:g}{rate} is too large to "
            f"simulate: {what}; lower --duration or --load")


def run(args: argparse.Namespace) -> int:
    """Run ``pard simulate``; returns the exit code."""
    rc = require("rich.console", "cli", "the pard command")
    escape = require("rich.markup", "cli", "the pard command").escape
    if args.json is not None:
        check_output("--json", args.json)
    if args.plot is not None:
        check_output("--plot", args.plot)
        check_plot_suffix(args.plot)
    spec = load_spec("--pipeline", args.pipeline)
    if args.slo is not None:
        warn_unreachable_slo(spec, args.slo)
    capacity = spec.capacity().pipeline
    load = args.load
    is_file = args.trace not in BUILTIN_TRACES and Path(args.trace).is_file()
    fmt = resolve_file_format(Path(args.trace), args.trace_format, args.column, spell=spell)[0] if is_file else None
    if not is_file and (args.column is not None or args.unit is not None):
        raise UsageError("--column/--unit apply to a csv trace FILE")
    exact = load is None and fmt == "csv"
    if load is None and not exact:
        load = 1.0
    rate = None if load is None else load * capacity
    try:
        arrivals, label = load_trace(args.trace, trace_format=args.trace_format, scaling=args.scaling,
                                     rate=rate, start_s=args.start, duration_s=args.duration, seed=args.seed,
                                     column=args.column, unit=args.unit, spell=spell)
    except TooManyArrivalsError as exc:
        raise UsageError(_too_big(args, load, capacity, exc)) from None
    if arrivals.size == 0:
        raise UsageError(f"--trace {args.trace!r}: no arrivals in the selected window")
    wide = None if sys.stdout.isatty() else 160  # not a terminal: no wrapping at 80 columns
    console = rc.Console(width=wide)
    err = rc.Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    span = float(args.duration) if args.duration is not None and not exact else float(arrivals[-1] - arrivals[0])
    asked = f"requested load {load:g} = {load * capacity:.0f} req/s; " if load is not None else "exact replay; "
    # one request, or all at one instant, spans 0 s: no rate to state (it printed "nan req/s = load nan")
    actual = (f"actual {arrivals.size / span:.0f} req/s = load {arrivals.size / span / capacity:.3g}" if span > 0
              else "all at one instant: no rate")
    err.print(f"[bold]{escape(spec.name)}[/] (capacity {capacity:.0f} req/s, SLO {args.slo or spec.slo:g} s), "
              f"trace {escape(label)}: {arrivals.size} requests over {span:g} s ({asked}{actual})",
              soft_wrap=not sys.stderr.isatty())
    try:
        reports = compare(spec, arrivals, args.policies, slo=args.slo, jitter_cv=args.jitter,
                          autoscale=args.autoscale, seed=args.seed, progress=sys.stderr.isatty())
    except TooManyArrivalsError as exc:
        raise UsageError(_too_big(args, load, capacity, exc)) from None
    console.print(comparison_table(reports, title=f"{spec.name} / {label} / load {load if load else 'replay'}"))
    if args.json is not None:
        doc = comparison_dict(reports, pipeline=spec.name, trace=label, load=load)
        args.json.write_text(json.dumps(doc, indent=2))
        err.print(f"wrote {escape(str(args.json))}", soft_wrap=True)  # stderr: stdout holds the table
    if args.plot is not None:
        plot_reports(reports, args.plot, title=f"{spec.name} / {label}")
        err.print(f"wrote {escape(str(args.plot))}", soft_wrap=True)
    return 0
