"""``pard simulate``: replay an arrival trace against a pipeline under several policies and print the
comparison (DESIGN §1, use 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ..config import warn_unreachable_slo
from ..errors import TooManyArrivalsError, UsageError
from ..plotting import plot_reports
from ..report import comparison_dict, comparison_table
from ..sim import compare
from ..sim_llm import bound_spec
from ..workloads import BUILTIN_TRACES, TRACE_FORMATS, UNITS, load_requests, load_trace, resolve_file_format
from .llm_table import llm_rows, llm_table
from .parsers import (add_command, DEFAULT_POLICIES, add_json, add_pipeline, check_output, check_plot_suffix, console,
                      is_stdout, load_spec, non_negative, slo_seconds, policies, positive, write_json)
from .parsers import seed as seed_arg
from .parsers import spell
from .tiers import tier_codes, tier_table, untiered_note, unused_columns_note
from .tokens import token_source

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
                        "default azure-conv.  For a pipeline with an llm stage, a csv file's in_tokens / "
                        "out_tokens / max_tokens columns (or the Azure names ContextTokens / GeneratedTokens) "
                        "give its requests' token counts; without them, pairs are drawn from the bundled trace")
    p.add_argument("--trace-format", choices=TRACE_FORMATS, default=None,
                   help="format of a trace FILE (default: guessed conservatively from its first lines and "
                        "shown in the header: an Azure LLM or Functions header, else csv; a file of whole "
                        "numbers only is refused: say counts or csv)")
    p.add_argument("--column", default=None, metavar="NAME|INDEX",
                   help="csv: the column of arrival times (default: the one named like time/timestamp/"
                        "arrival, also with a unit as in ts_ms, or column 0 without a header)")
    p.add_argument("--unit", choices=UNITS, default=None,
                   help="csv: unit of the arrival times (default: the unit the column's name ends in, as ts_ms, "
                        "time_us or 'time (ms)'; else datetime for ISO 8601 date-times, else s.  An exact replay "
                        "read as s whose rate is under 1 %% of the pipeline's capacity over more than 1000 s "
                        "warns that the times may be ms)")
    p.add_argument("--tier-column", default=None, metavar="NAME",
                   help="csv: the column of each request's service tier, a name of the pipeline's tiers (its spec's "
                        "tiers: {NAME: WEIGHT}); exact replay only (no --load).  Default: every request in the "
                        "spec's first tier")
    p.add_argument("--slo-column", default=None, metavar="NAME",
                   help="csv: the column of each request's SLO, in s (ms, us or ns when its name ends so: slo_ms); "
                        "exact replay only (no --load); not with --slo")
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
                   help="CV of the execution-time factor (lognormal, mean 1), in [0, 10]; 0 = deterministic; "
                        "default 0.1")
    p.add_argument("--autoscale", action=argparse.BooleanOptionalAction, default=False,
                   help="workers follow each stage's input rate (ceil(rate / per-worker throughput * 1.2), "
                        "at least 1), new ones after a 10 s cold start; default off.  The spec's workers are "
                        "only the starting point: a lightly loaded stage scales below them, which lowers its "
                        "capacity and hence the goodput bound")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of arrivals, jitter and planner; default 0")
    add_json(p, "write the comparison as JSON")
    p.add_argument("--plot", type=Path, default=None, metavar="PATH", help="write goodput/drops/queueing figure")


def _too_big(args: argparse.Namespace, load: float | None, capacity: float, exc: Exception) -> str:
    """One line for a run over the size limits: what was asked, what it means, what to lower."""
    what = str(exc).split("; lower ")[0].split("; simulate ")[0]
    if load is None:  # an exact replay: no --load was given, and without --duration it is the whole file
        asked = "the exact replay of the whole trace" if args.duration is None else \
            f"the exact replay's --duration {args.duration:g}"
        return (f"{asked} is too large to simulate: {what}; replay a part of it (--start, --duration) "
                f"or rescale it with --load")
    dur = 300.0 if args.duration is None else args.duration
    return (f"--load {load} --duration {dur:g} ({load * capacity:.4g} req/s) is too large to "
            f"simulate: {what}; lower --duration or --load")


def _check_options(args: argparse.Namespace, is_file: bool) -> None:
    """UsageError for options that do not fit together, before any trace is read."""
    if args.json is not None:
        check_output("--json", args.json)
    if args.plot is not None:
        check_output("--plot", args.plot)
        check_plot_suffix(args.plot)
    if not is_file and (args.column is not None or args.unit is not None):
        raise UsageError("--column/--unit apply to a csv trace FILE")
    if args.tier_column is None and args.slo_column is None:
        return
    if not is_file:
        raise UsageError("--tier-column/--slo-column apply to a csv trace FILE")
    if args.load is not None:  # amplify and compress make new requests, which the file's columns do not describe
        raise UsageError("--tier-column/--slo-column replay the csv trace exactly: leave out --load (scaling a "
                         "trace to a rate draws new requests, to which the file's tiers and SLOs do not belong)")
    if args.slo_column is not None and args.slo is not None:
        raise UsageError("--slo and --slo-column both set the SLO: give one")


def _arrivals(args: argparse.Namespace, spec: Any, load: float | None,
              capacity: float) -> tuple[np.ndarray, dict[str, Any], str]:
    """The arrivals, the per-request ``slo``/``tiers`` for :func:`pard.compare` (from --slo-column and
    --tier-column, or --slo), and the trace's label."""
    if args.tier_column is None and args.slo_column is None:
        arrivals, label = load_trace(args.trace, trace_format=args.trace_format, scaling=args.scaling,
                                     rate=None if load is None else load * capacity, start_s=args.start,
                                     duration_s=args.duration, seed=args.seed, column=args.column, unit=args.unit,
                                     capacity=capacity, spell=spell)
        return arrivals, {"slo": args.slo}, label
    work, label = load_requests(args.trace, trace_format=args.trace_format, start_s=args.start,
                                duration_s=args.duration, column=args.column, unit=args.unit,
                                tier_column=args.tier_column, slo_column=args.slo_column, capacity=capacity,
                                spell=spell)
    tiers = None if args.tier_column is None else tier_codes(work, spec, args.tier_column)
    return work.arrivals_s, {"slo": args.slo if work.slo_s is None else work.slo_s, "tiers": tiers}, label


def _notes(args: argparse.Namespace, spec: Any, fmt: str | None) -> list[str]:
    """Lines for stderr on tiers and SLOs the run does not take from the trace."""
    notes = [] if args.tier_column is not None else [untiered_note(spec)]
    if fmt == "csv":
        how = "pass {uses} to use {them} (an exact replay: no --load)"
        notes.append(unused_columns_note(args.trace, tier_column=args.tier_column, slo_column=args.slo_column,
                                         how=how))
    return [n for n in notes if n]


def _rate(x: float) -> str:
    """A rate for the header: whole req/s, or 3 significant digits below 10 (0.2, not 0)."""
    return f"{x:.0f}" if x >= 10 else f"{x:.3g}"


def _header(spec: Any, label: str, arrivals: np.ndarray, slo: Any, load: float | None, span: float,
            capacity: float) -> str:
    """The line above the table after the pipeline's name: its capacity and SLO, the trace, how many requests
    over how long, the asked and the actual load.  ``slo``: --slo, the per-request SLOs, or None."""
    slo_text = (f"SLO {spec.slo if slo is None else slo:g} s" if np.ndim(slo) == 0
                else f"SLO per request {np.min(slo):g}-{np.max(slo):g} s")
    asked = f"requested load {load:g} = {load * capacity:.0f} req/s; " if load is not None else "exact replay; "
    # one request, or all at one instant, spans 0 s: no rate to state (it printed "nan req/s = load nan")
    actual = (f"actual {_rate(arrivals.size / span)} req/s = load {arrivals.size / span / capacity:.3g}" if span > 0
              else "all at one instant: no rate")
    n = arrivals.size
    return (f"(capacity {capacity:.0f} req/s, {slo_text}), trace {label}: "
            f"{n} request{'' if n == 1 else 's'} over {span:g} s ({asked}{actual})")


def run(args: argparse.Namespace) -> int:
    """Run ``pard simulate``; returns the exit code."""
    escape = require("rich.markup", "cli", "the pard command").escape
    is_file = args.trace not in BUILTIN_TRACES and Path(args.trace).is_file()
    _check_options(args, is_file)
    spec = load_spec("--pipeline", args.pipeline)
    if args.slo is not None:
        warn_unreachable_slo(spec, args.slo)
    fmt = resolve_file_format(Path(args.trace), args.trace_format, args.column, spell=spell)[0] if is_file else None
    exact = args.load is None and fmt == "csv"
    tokens = None
    if any(st.kind == "llm" for st in spec.stages):
        tokens = token_source(args.trace, fmt, exact, column=args.column, unit=args.unit)
    capacity = (bound_spec(spec, tokens.sample(args.seed)).capacity().pipeline if tokens
                else spec.capacity().pipeline)
    load = None if exact else (1.0 if args.load is None else args.load)
    try:
        arrivals, per_request, label = _arrivals(args, spec, load, capacity)
    except TooManyArrivalsError as exc:
        raise UsageError(_too_big(args, load, capacity, exc)) from None
    if arrivals.size == 0:
        raise UsageError(f"--trace {args.trace!r}: no arrivals in the selected window")
    # --json -: stdout holds the JSON alone, so the table goes to stderr with the other lines
    out = console(stderr=is_stdout(args.json))
    err = console(stderr=True)
    for note in _notes(args, spec, fmt):
        err.print(f"[yellow]note:[/] {escape(note)}")
    if tokens:
        per_request.update(tokens.for_arrivals(int(arrivals.size), args.seed, args.start, args.duration))
        err.print(f"[yellow]note:[/] {escape(tokens.note())}")
    span = float(args.duration) if args.duration is not None and not exact else float(arrivals[-1] - arrivals[0])
    line = _header(spec, label, arrivals, per_request["slo"], load, span, capacity)
    err.print(f"[bold]{escape(spec.name)}[/] {escape(line)}")
    try:
        reports = compare(spec, arrivals, args.policies, **per_request, jitter_cv=args.jitter,
                          autoscale=args.autoscale, seed=args.seed, progress=sys.stderr.isatty())
    except TooManyArrivalsError as exc:
        raise UsageError(_too_big(args, load, capacity, exc)) from None
    out.print(comparison_table(reports, title=f"{spec.name} / {label} / load {load if load else 'replay'}"))
    if len(spec.tiers) > 1:
        out.print(tier_table(reports))
    llm = llm_table(reports)
    if llm is not None:
        out.print(llm)
    if args.json is not None:
        # an exact replay's load is the one the header states: the actual rate over the capacity
        shown = load if not exact else (arrivals.size / span / capacity if span > 0 else None)
        settings = {"requests": int(arrivals.size), "span_s": span, "seed": args.seed, "jitter_cv": args.jitter,
                    "autoscale": bool(args.autoscale), "slo_s": args.slo, "duration_s": args.duration}
        if tokens:
            settings["tokens"] = tokens.label()
        doc = comparison_dict(reports, pipeline=spec.name, trace=label, load=shown, settings=settings)
        for name, r in reports.items():
            if r.llm_calibration is not None:
                doc["policies"][name]["llm_stages"] = llm_rows(r)
        write_json(args.json, doc)
        if not is_stdout(args.json):
            err.print(f"wrote {escape(str(args.json))}")  # stderr: stdout holds the table
    if args.plot is not None:
        plot_reports(reports, args.plot, title=f"{spec.name} / {label}")
        err.print(f"wrote {escape(str(args.plot))}")
    return 0
