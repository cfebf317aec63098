"""The ``pard`` command line.

``pard simulate`` replays an arrival trace against a pipeline under several policies and prints the
comparison (DESIGN §1, use 2).  Each subcommand lives in its own ``register_<cmd>(subparsers)`` and
``cmd_<cmd>(args)`` pair; another module adds its own subcommands by appending its register function to
:data:`REGISTRARS` (one line here), e.g. ``pard run`` / ``pard profile`` from ``pard.cli_live``.

Exit codes: 0 success, 2 bad usage or bad input (the message names the option and the value), 1 an
unexpected internal error.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ._version import __version__
from .errors import PardError, PardWarning

__all__ = ["main", "build_parser", "register_simulate", "cmd_simulate", "REGISTRARS", "UsageError"]

BUILTIN_PIPELINES = ("tm", "lv", "ga", "da")
BUILTIN_TRACES = ("azure-conv", "bursty", "poisson")
TRACE_FORMATS = ("azure-llm", "azure-functions", "counts", "csv")
DEFAULT_POLICIES = "pard,nexus,clipper++,naive"


class UsageError(PardError, ValueError):
    """Bad command-line input; the message names the option and the value (exit code 2)."""


def _positive(option: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be a number, got {text!r}") from None
        if not (v > 0 and np.isfinite(v)):
            raise argparse.ArgumentTypeError(f"{option} must be a finite number > 0, got {text!r}")
        return v
    return parse


def _non_negative(option: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be a number, got {text!r}") from None
        if not (v >= 0 and np.isfinite(v)):
            raise argparse.ArgumentTypeError(f"{option} must be a finite number >= 0, got {text!r}")
        return v
    return parse


def _seed(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be an integer in 0..2**64-1, got {text!r}") from None
    if not 0 <= v <= 2**64 - 1:
        raise argparse.ArgumentTypeError(f"--seed must be an integer in 0..2**64-1, got {text!r}")
    return v


def _policies(text: str) -> list[str]:
    from .policies import POLICIES

    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"--policies must name at least one policy, got {text!r}")
    for p in names:
        if p not in POLICIES:
            raise argparse.ArgumentTypeError(
                f"--policies: unknown policy {p!r}; valid policies: {', '.join(POLICIES)}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"--policies must not repeat a name, got {text!r}")
    return names


# --------------------------------------------------------------------------- simulate
def register_simulate(subparsers: Any) -> None:
    """Add ``pard simulate`` to ``subparsers``."""
    p = subparsers.add_parser(
        "simulate", help="compare drop policies on a pipeline and an arrival trace (discrete-event)",
        description="Replay an arrival trace against a pipeline's latency profiles under each policy and "
                    "print goodput, its ratio to the goodput bound, drop and invalid rates, p99 latency and "
                    "the share of drops per stage (DESIGN §4).",
    )
    p.add_argument("--pipeline", default="lv", metavar="{tm,lv,ga,da,FILE}",
                   help="a built-in pipeline or a spec file (YAML/JSON/TOML); default lv")
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
    p.add_argument("--load", type=_positive("--load"), default=None,
                   help="mean arrival rate over the pipeline's capacity (spec.capacity()); default 1.0, "
                        "or an exact replay for --trace-format csv")
    p.add_argument("--policies", type=_policies, default=_policies(DEFAULT_POLICIES),
                   help=f"comma-separated policies; default {DEFAULT_POLICIES}")
    p.add_argument("--slo", type=_positive("--slo"), default=None, help="end-to-end SLO in seconds; default the pipeline's")
    p.add_argument("--start", type=_non_negative("--start"), default=0.0,
                   help="skip this many seconds of the trace; default 0")
    p.add_argument("--duration", type=_positive("--duration"), default=None,
                   help="seconds of trace to simulate; default 300 (the whole file for an exact csv replay)")
    p.add_argument("--jitter", type=_non_negative("--jitter"), default=0.1,
                   help="CV of the execution-time factor (lognormal, mean 1); 0 = deterministic; default 0.1")
    p.add_argument("--autoscale", action=argparse.BooleanOptionalAction, default=False,
                   help="workers follow each stage's input rate (ceil(rate / per-worker throughput * 1.2), "
                        "at least 1), new ones after a 10 s cold start; default off.  The spec's workers are "
                        "only the starting point: a lightly loaded stage scales below them, which lowers its "
                        "capacity and hence the goodput bound")
    p.add_argument("--seed", type=_seed, default=0, help="seed of arrivals, jitter and planner; default 0")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the comparison as JSON")
    p.add_argument("--plot", type=Path, default=None, metavar="PATH", help="write goodput/drops/queueing figure")
    p.set_defaults(func=cmd_simulate)


BURSTY_CV = 1.5  #: CV of per-second counts of ``--trace bursty`` (the issue's bursty case)


def load_trace(
    trace: str, *, trace_format: str | None, scaling: str, rate: float | None, start_s: float,
    duration_s: float | None, seed: int, column: str | None = None, unit: str | None = None,
) -> tuple[np.ndarray, str]:
    """Arrival times (s) and a label for ``--trace`` and its options.

    Generators (``poisson``, ``bursty`` with CV 1.5) produce ``duration_s`` seconds at ``rate``.  A real
    trace (the bundled ``azure-conv`` or a file) is cut to ``[start_s, start_s + duration_s)`` of its own
    time and scaled to ``rate`` (``scaling`` amplify or compress; with compress the window is taken after
    scaling).  ``rate`` None replays a ``csv`` file of seconds exactly (window applied, times unchanged
    when ``start_s`` is 0).  ``duration_s`` None: 300 s, or the whole file for an exact replay.
    A file's format is ``trace_format`` or guessed by :func:`resolve_file_format`; a csv is read by
    :func:`read_csv_trace` (``column``, ``unit``).  The label says which format, column and unit
    were used and whether the format was guessed.

    Raises:
        UsageError: the message names the option and the value.
    """
    from . import workloads as wl

    if trace in ("bursty", "poisson"):
        if rate is None:
            raise UsageError(f"--trace {trace} needs --load")
        dur = 300.0 if duration_s is None else duration_s
        if trace == "poisson":
            arr = wl.poisson(rate, dur, seed=seed)
        else:
            arr = wl.bursty(rate, dur, BURSTY_CV, seed=seed)
        return np.asarray(arr, dtype=np.float64), f"{trace}" + (f" (cv {BURSTY_CV:g})" if trace == "bursty" else "")
    if trace in wl.BUNDLED_TRACES:
        raw, label, fmt = wl.BUNDLED_TRACES[trace](), trace, "azure-llm"
    else:
        path = Path(trace)
        if not path.is_file():
            raise UsageError(f"--trace: {trace!r} is neither one of {', '.join(BUILTIN_TRACES)} nor an existing file")
        fmt, how = resolve_file_format(path, trace_format, column)
        if (column is not None or unit is not None) and fmt != "csv":
            raise UsageError(f"--column/--unit apply to --trace-format csv, not {fmt}")
        note = fmt
        if fmt == "azure-llm":
            raw = wl.azure_llm(path)
        elif fmt == "azure-functions":
            raw = wl.azure_functions(path, seed=seed)
        elif fmt == "counts":
            raw = wl.per_second_counts(path, seed=seed)
        else:
            raw, where = read_csv_trace(path, column=column, unit=unit)
            note = f"csv, {where}"
        label = f"{path} ({note}{'' if how == 'given' else '; format ' + how})"
    raw = np.asarray(raw, dtype=np.float64)
    if raw.size == 0:
        raise UsageError(f"--trace {trace!r} holds no arrivals")
    if rate is None:  # exact replay of a csv of seconds
        if fmt != "csv":
            raise UsageError(f"--load is required for --trace-format {fmt} (only csv replays exactly)")
        if duration_s is None and start_s == 0:
            return raw, f"{label} (exact)"
        end = np.inf if duration_s is None else start_s + duration_s
        return raw[(raw >= start_s) & (raw < end)] - start_s, f"{label} (exact window)"
    dur = 300.0 if duration_s is None else duration_s
    raw = raw - raw[0]
    if scaling == "amplify":
        sel = wl.window(raw, start_s, dur)
        if sel.size < 2:
            raise UsageError(f"--start {start_s:g} --duration {dur:g}: fewer than two arrivals of --trace "
                             f"{trace!r} fall there (it spans {raw[-1]:.0f} s)")
        arr = wl.scale(sel, rate, mode="amplify", seed=seed)
        arr = arr[arr < dur]
    else:
        sel = raw[raw >= start_s] - start_s
        if sel.size < 2:
            raise UsageError(f"--start {start_s:g}: fewer than two arrivals of --trace {trace!r} after it")
        arr = wl.scale(sel, rate, mode="compress")
        arr = arr[arr < dur]
    return np.asarray(arr, dtype=np.float64), f"{label} ({scaling})"


_TIME_NAME = re.compile(r"^(t|ts|time|times|timestamp|timestamps|arrival|arrivals|arrival_?time|arrival_?s|"
                        r"send_?time|send_?s|date|datetime|time_?s|seconds|sec|secs)$", re.IGNORECASE)
_DATE_RE = re.compile(r"\s*\d{4}-\d{2}-\d{2}")
UNITS = ("s", "ms", "us", "ns", "datetime")


def _is_value(field: str) -> bool:
    """A data field (a number or an ISO date-time) rather than a header name."""
    f = field.strip()
    try:
        float(f)
        return True
    except ValueError:
        return bool(_DATE_RE.match(f))


def _head(path: Path, lines: int = 200) -> list[list[str]]:
    """The first ``lines`` non-blank lines of ``path``, split on commas."""
    rows: list[list[str]] = []
    with path.open("r", errors="replace") as fh:
        for line in fh:
            if line.strip():
                rows.append([f.strip() for f in line.rstrip("\r\n").split(",")])
            if len(rows) >= lines:
                break
    return rows


def resolve_file_format(path: Path, trace_format: str | None, column: str | None = None) -> tuple[str, str]:
    """The format of trace file ``path`` and a note on how it was chosen, for the header.

    With ``trace_format`` given it is used as is.  Otherwise the guess is conservative: a header
    naming ``TIMESTAMP``, ``ContextTokens`` and ``GeneratedTokens`` is the Azure LLM trace; one with
    ``HashFunction``/``HashOwner`` is Azure Functions; any other header, or numbers / ISO date-times
    that are not all whole numbers, is ``csv``.  A file of whole numbers only (per-second counts or
    whole-second timestamps?) is refused.

    Raises:
        UsageError: an empty or ambiguous file; the message lists the ``--trace-format`` choices.
    """
    if trace_format is not None:
        return trace_format, "given"
    rows = _head(path)
    choices = f"pass --trace-format {{{','.join(TRACE_FORMATS)}}}"
    if not rows:
        raise UsageError(f"--trace {str(path)!r}: the file is empty")
    first = rows[0]
    if not all(_is_value(f) for f in first if f):  # a header
        upper = {f.upper() for f in first}
        if {"TIMESTAMP", "CONTEXTTOKENS", "GENERATEDTOKENS"} <= upper:
            return "azure-llm", "guessed from the header"
        if "HASHFUNCTION" in upper or "HASHOWNER" in upper:
            return "azure-functions", "guessed from the header"
        return "csv", "guessed from the header"
    values = [r[0] for r in rows if r and r[0]]
    whole = all(re.fullmatch(r"[+-]?\d+", v) for v in values) and all(len(r) == 1 for r in rows)
    if whole and column is None:
        raise UsageError(
            f"--trace {str(path)!r}: one whole number per line could be per-second counts or whole-second "
            f"timestamps; {choices} (counts: requests per second; csv: arrival times)")
    return "csv", "guessed: numbers or date-times"


def _pick_column(path: Path, header: list[str], column: str | None) -> str | int:
    """The timestamp column of a csv with a header: ``--column`` or the one time-like name."""
    if column is not None:
        if column in header:
            return column
        if re.fullmatch(r"\d+", column):
            return int(column)
        raise UsageError(f"--column {column!r}: {str(path)!r} has no such column; its header is {','.join(header)}")
    if len(header) == 1 and _TIME_NAME.match(header[0]):
        return header[0]
    timelike = [h for h in header if _TIME_NAME.match(h)]
    if len(timelike) == 1:
        return timelike[0]
    raise UsageError(
        f"--trace {str(path)!r}: cannot tell which column holds the arrival times (header "
        f"{','.join(header)}); pass --column NAME|INDEX (and --unit {{{','.join(UNITS)}}}), or "
        f"--trace-format {{{','.join(TRACE_FORMATS)}}} if this is not a csv of arrival times")


def read_csv_trace(path: Path, *, column: str | None = None, unit: str | None = None) -> tuple[np.ndarray, str]:
    """Arrival times (s) of a csv trace and a note naming the column and unit used.

    A header line is detected (a first line that is not numbers / ISO date-times).  With a header
    the column is ``column`` (name or 0-based index) or the single time-like name (``timestamp``,
    ``arrival``, ``time``...); without one, ``column`` must be an index (default 0).  ``unit``
    ``s``/``ms``/``us``/``ns``/``datetime``; default: datetime when the first value is an ISO
    date-time, else seconds.  Numbers are returned as given (sorted); date-times as seconds from the
    first one.

    Raises:
        UsageError / pard.TraceError: the message names the option, the file, the line and the value.
    """
    from .workloads import _common, traces

    if unit is not None and unit not in UNITS:
        raise UsageError(f"--unit must be one of {', '.join(UNITS)}, got {unit!r}")
    rows = _head(path, 1)
    if not rows:
        raise UsageError(f"--trace {str(path)!r}: the file is empty")
    header = not all(_is_value(f) for f in rows[0] if f)
    if header:
        col = _pick_column(path, rows[0], column)
        p, df, name = traces._read_timestamp_csv(path, col)
        miss = _common.first_missing(df, [name])
        if miss is not None:
            raise UsageError(f"--trace {str(path)!r}, line {miss[0] + 2}, column {name!r}: missing value")
        raw = traces._times_from_column(p, df, name, unit, 2)  # type: ignore[arg-type]
        where = f"column {name!r}"
        first = str(df[name].iloc[0])
    else:
        if column is not None and not re.fullmatch(r"\d+", column):
            raise UsageError(f"--column {column!r}: {str(path)!r} has no header line; pass a 0-based index")
        idx = 0 if column is None else int(column)
        p, df = _common.read_csv_text(path, header=False)
        if idx >= df.shape[1]:
            raise UsageError(f"--column {idx}: {str(path)!r} has only {df.shape[1]} column(s)")
        df = _common.drop_blank_rows(df)
        if df.empty:
            raise UsageError(f"--trace {str(path)!r}: the file holds no arrivals")
        raw = traces._times_from_column(p, df, idx, unit, 1)  # type: ignore[arg-type]
        where = f"column {idx}"
        first = str(df[idx].iloc[0])
    if unit is None:
        unit = "datetime" if _DATE_RE.match(first) else "s"
    order = _common.sort_order(np.asarray(raw, dtype=np.float64), str(path))
    arr = np.asarray(raw, dtype=np.float64) if order is None else np.asarray(raw, dtype=np.float64)[order]
    return arr, f"{where}, {'ISO date-times' if unit == 'datetime' else unit}"


def _check_output(option: str, path: Path) -> None:
    """UsageError unless ``path``'s folder exists and is writable (checked before simulating)."""
    import os

    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{option} {str(path)!r} is a directory; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{option} {str(path)!r}: the folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {str(path)!r}: the folder {str(parent)!r} is not writable")


def _check_plot_suffix(path: Path) -> None:
    """UsageError unless ``path``'s suffix is a format matplotlib can write."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise UsageError(f"--plot {str(path)!r}: unsupported figure format {suffix or '(no suffix)'!r}; "
                         f"use one of {', '.join('.' + f for f in formats)}")


def _too_big(args: argparse.Namespace, load: float | None, capacity: float, exc: Exception) -> str:
    """One line for a run over the size limits: what was asked, what it means, what to lower."""
    dur = 300.0 if args.duration is None else args.duration
    rate = "" if load is None else f" ({load * capacity:.4g} req/s)"
    what = str(exc).split("; lower ")[0].split("; simulate ")[0]
    return (f"--load {load if load is not None else 'replay'} --duration {dur:g}{rate} is too large to "
            f"simulate: {what}; lower --duration or --load")


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run ``pard simulate``; returns the exit code."""
    from rich.console import Console
    from rich.markup import escape

    from .report import comparison_dict, comparison_table
    from .sim import compare, resolve_pipeline

    if args.json is not None:
        _check_output("--json", args.json)
    if args.plot is not None:
        _check_output("--plot", args.plot)
        _check_plot_suffix(args.plot)
    try:
        spec = resolve_pipeline(args.pipeline)
    except (PardError, ValueError, OSError) as exc:
        raise UsageError(f"--pipeline {args.pipeline!r}: {exc}") from None
    if args.slo is not None:
        from .config import warn_unreachable_slo

        warn_unreachable_slo(spec, args.slo)
    capacity = spec.capacity().pipeline
    load = args.load
    is_file = args.trace not in BUILTIN_TRACES and Path(args.trace).is_file()
    fmt = resolve_file_format(Path(args.trace), args.trace_format, args.column)[0] if is_file else None
    if not is_file and (args.column is not None or args.unit is not None):
        raise UsageError("--column/--unit apply to a csv trace FILE")
    exact = load is None and fmt == "csv"
    if load is None and not exact:
        load = 1.0
    rate = None if load is None else load * capacity
    from .workloads import TooManyArrivalsError

    try:
        arrivals, label = load_trace(args.trace, trace_format=args.trace_format, scaling=args.scaling,
                                     rate=rate, start_s=args.start, duration_s=args.duration, seed=args.seed,
                                     column=args.column, unit=args.unit)
    except TooManyArrivalsError as exc:
        raise UsageError(_too_big(args, load, capacity, exc)) from None
    if arrivals.size == 0:
        raise UsageError(f"--trace {args.trace!r}: no arrivals in the selected window")
    wide = None if sys.stdout.isatty() else 160  # not a terminal: no wrapping at 80 columns
    console = Console(width=wide)
    err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
    span = float(args.duration) if args.duration is not None and not exact else float(arrivals[-1] - arrivals[0])
    offered = arrivals.size / span if span > 0 else float("nan")
    asked = f"requested load {load:g} = {load * capacity:.0f} req/s; " if load is not None else "exact replay; "
    err.print(f"[bold]{escape(spec.name)}[/] (capacity {capacity:.0f} req/s, SLO {args.slo or spec.slo:g} s), "
              f"trace {escape(label)}: {arrivals.size} requests over {span:g} s ({asked}actual "
              f"{offered:.0f} req/s = load {offered / capacity:.3g})", soft_wrap=not sys.stderr.isatty())
    try:
        reports = compare(spec, arrivals, args.policies, slo=args.slo, jitter_cv=args.jitter,
                          autoscale=args.autoscale, seed=args.seed, progress=sys.stderr.isatty())
    except TooManyArrivalsError as exc:
        raise UsageError(_too_big(args, load, capacity, exc)) from None
    console.print(comparison_table(reports, title=f"{spec.name} / {label} / load {load if load else 'replay'}"))
    if args.json is not None:
        import json

        doc = comparison_dict(reports, pipeline=spec.name, trace=label, load=load)
        args.json.write_text(json.dumps(doc, indent=2))
    if args.plot is not None:
        from .plotting import plot_reports

        plot_reports(reports, args.plot, title=f"{spec.name} / {label}")
    return 0


# --------------------------------------------------------------------------- main
#: Functions that add subcommands; other modules append theirs here (one line each).
REGISTRARS: list[Callable[[Any], None]] = [register_simulate]
REGISTRARS.append(lambda sub: __import__("pard.cli_live", fromlist=["register_live"]).register_live(sub))


def build_parser() -> argparse.ArgumentParser:
    """The ``pard`` argument parser with every registered subcommand."""
    parser = argparse.ArgumentParser(prog="pard", description="Proactive request dropping for DNN inference pipelines.")
    parser.add_argument("--version", action="version", version=f"pard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for register in REGISTRARS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pard`` command; returns the exit code (argparse exits 2 on bad usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)

    def show(message: Any, category: type[Warning], *_: Any, **__: Any) -> None:
        print(f"pard {args.command}: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show  # one clean line per warning, no source line
        warnings.simplefilter("default", PardWarning)  # pard's warnings are printed, never raised
        try:
            return int(args.func(args))
        except (PardError, ValueError, TypeError, OSError) as exc:
            print(f"pard {args.command}: error: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
