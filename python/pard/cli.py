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
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ._version import __version__
from .errors import PardError

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
        raise argparse.ArgumentTypeError(f"--seed must be an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"--seed must be an integer >= 0, got {text!r}")
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
                   help="format of a trace FILE (default: guessed from its header; 'counts' must be given)")
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
                   help="workers follow each stage's input rate, new ones after a 10 s cold start; default off")
    p.add_argument("--seed", type=_seed, default=0, help="seed of arrivals, jitter and planner; default 0")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the comparison as JSON")
    p.add_argument("--plot", type=Path, default=None, metavar="PATH", help="write goodput/drops/queueing figure")
    p.set_defaults(func=cmd_simulate)


BURSTY_CV = 1.5  #: CV of per-second counts of ``--trace bursty`` (the issue's bursty case)


def load_trace(
    trace: str, *, trace_format: str | None, scaling: str, rate: float | None, start_s: float,
    duration_s: float | None, seed: int,
) -> tuple[np.ndarray, str]:
    """Arrival times (s) and a label for ``--trace`` and its options.

    Generators (``poisson``, ``bursty`` with CV 1.5) produce ``duration_s`` seconds at ``rate``.  A real
    trace (the bundled ``azure-conv`` or a file) is cut to ``[start_s, start_s + duration_s)`` of its own
    time and scaled to ``rate`` (``scaling`` amplify or compress; with compress the window is taken after
    scaling).  ``rate`` None replays a ``csv`` file of seconds exactly (window applied, times unchanged
    when ``start_s`` is 0).  ``duration_s`` None: 300 s, or the whole file for an exact replay.

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
        fmt = trace_format or _guess_format(path)
        if fmt == "azure-llm":
            raw = wl.azure_llm(path)
        elif fmt == "azure-functions":
            raw = wl.azure_functions(path, seed=seed)
        elif fmt == "counts":
            raw = wl.per_second_counts(path, seed=seed)
        else:
            raw = _plain_seconds(path)
        label = str(path)
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


def _plain_seconds(path: Path) -> np.ndarray:
    """A csv of seconds: one number per line (no header), else a header and the first column."""
    from . import workloads as wl

    try:
        arr = np.loadtxt(path, dtype=np.float64, delimiter=",", ndmin=2)[:, 0]
    except ValueError:
        return np.asarray(wl.csv_timestamps(path, column=0, unit="s"), dtype=np.float64)
    if arr.size and (not np.isfinite(arr).all() or (arr < 0).any()):
        raise UsageError(f"--trace {str(path)!r}: times must be finite seconds >= 0")
    return np.sort(arr)


def _guess_format(path: Path) -> str:
    with path.open("r", errors="replace") as fh:
        head = fh.readline()
    if "TIMESTAMP" in head.upper():
        return "azure-llm"
    if "HashFunction" in head or "HashOwner" in head:
        return "azure-functions"
    return "csv"


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

    from .report import comparison_dict, comparison_table
    from .sim import compare, resolve_pipeline

    try:
        spec = resolve_pipeline(args.pipeline)
    except (PardError, ValueError, OSError) as exc:
        raise UsageError(f"--pipeline {args.pipeline!r}: {exc}") from None
    capacity = spec.capacity().pipeline
    load = args.load
    is_file = args.trace not in BUILTIN_TRACES and Path(args.trace).is_file()
    exact = load is None and is_file and (args.trace_format or _guess_format(Path(args.trace))) == "csv"
    if load is None and not exact:
        load = 1.0
    rate = None if load is None else load * capacity
    from .workloads import TooManyArrivalsError

    try:
        arrivals, label = load_trace(args.trace, trace_format=args.trace_format, scaling=args.scaling,
                                     rate=rate, start_s=args.start, duration_s=args.duration, seed=args.seed)
    except TooManyArrivalsError as exc:
        raise UsageError(_too_big(args, load, capacity, exc)) from None
    if arrivals.size == 0:
        raise UsageError(f"--trace {args.trace!r}: no arrivals in the selected window")
    console = Console()
    err = Console(stderr=True)
    err.print(f"[bold]{spec.name}[/] (capacity {capacity:.0f} req/s, SLO {args.slo or spec.slo:g} s), "
              f"trace {label}: {arrivals.size} requests over {arrivals[-1]:.0f} s"
              + (f", load {load:g}" if load is not None else ", exact replay"))
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
    try:
        return int(args.func(args))
    except (PardError, ValueError, TypeError, OSError) as exc:
        print(f"pard {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
