"""``pard run`` (no arguments needed) -- what a new user runs first -- in six steps, one module each:

1. :mod:`~pard.cli.measure`: measure the pipeline's stage profiles on this machine with the stage
   models (``--models``: the ONNX stage models of :mod:`pard.models.onnx` on ONNX Runtime by default,
   or the NumPy reference models) (:mod:`pard.profiling`; reused from the cache when this machine, pipeline, sizing and version
   were measured before), sizing the live worker counts to the cores;
2. here: cut a window of the bundled Azure LLM conversation trace, amplified (DESIGN §5) to a mean
   rate of ``--load`` times the measured pipeline capacity, so that the trace's bursts overload it;
3. :mod:`~pard.cli.replay`: for each policy (default ``pard,nexus,clipper++,triton,ray-serve,naive``) replay the window
   in wall-clock time through :class:`pard.Runtime` (real worker threads, real DNN graphs), and
   simulate the same arrivals with the measured profile;
4. and 5. :mod:`~pard.cli.compare`: print the metrics table (the same :class:`pard.report.Report`
   ``pard simulate`` builds), the live-vs-simulated goodput, the scheduler's share of request latency
   and the profile check; :mod:`~pard.cli.verdict`: the verdict, pard against the best of what serving
   systems do today (``triton``, ``ray-serve``, ``naive``), then against the best research baseline,
   each saying plainly whether pard is ahead by more than that comparison's noise band;
6. :mod:`~pard.cli.write`: write the JSON and a PNG of goodput and drops over time per policy.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ..errors import UsageError
from ..report import comparison_table
from ..sim_llm import output_caps
from ..workloads import BUILTIN_TRACES, GENERATED_TRACES, TRACE_FORMATS, UNITS, load_trace, resolve_file_format
from .compare import agreement_table, bound_line, check_profile, drop_reasons, probe_line, reasons_line, refit_note
from .llm_run import has_llm, llm_block, llm_capacity, llm_workload
from .measure import run_profile
from .parsers import (add_command, add_json, add_models, add_pipeline, check_output, check_plot_suffix, console, cores,
                      is_stdout, machine_cores, make_output_dir, models_arg, non_negative, policies, positive)
from .parsers import seed as seed_arg
from .parsers import spell
from .replay import replay_policies
from .tiers import unused_columns_note
from .tokens import TokenSource, token_source
from .verdict import verdict_lines, verdicts
from .write import write_outputs

__all__ = ["register", "run", "check_trace", "LIVE_DEFAULTS"]

#: Defaults of ``pard run``: 30 s of trace per policy, six policies (about 4-5 minutes on 2 cores).
LIVE_DEFAULTS: dict[str, Any] = {
    "pipeline": "tm",
    "trace": "azure-conv",
    "load": 1.0,
    "start": 1170.0,  # a stretch of the trace whose 10 s rate envelope swings 0.7x .. 1.4x its mean
    "duration": 30.0,
    "policies": "pard,nexus,clipper++,triton,ray-serve,naive",
    "out": "pard-out",
    "scale": 1.0,
}


def register(subparsers: Any) -> None:
    """Add ``pard run``."""
    d = LIVE_DEFAULTS
    p = add_command(
        subparsers, "run", run,
        help="replay a real trace live through a real pipeline under each policy (start here)",
        description="Profile the pipeline on this machine (or reuse the cached profile), then replay a "
                    "window of the bundled Azure LLM conversation trace, amplified so its bursts overload "
                    "the pipeline, in wall-clock time through the live runtime and the stage models (ONNX "
                    "Runtime by default), "
                    "once per policy; print the metrics table, compare with the simulator on the same "
                    "arrivals, and write JSON and a PNG.",
    )
    add_pipeline(p, d["pipeline"])
    p.add_argument("--profile", type=Path, default=None, metavar="FILE",
                   help="a measured profile (from `pard profile --out`); default: cached or measured now")
    p.add_argument("--trace", default=d["trace"], metavar="{azure-conv,bursty,poisson,FILE}",
                   help="arrival trace (as `pard simulate`); default azure-conv")
    p.add_argument("--trace-format", choices=TRACE_FORMATS, default=None, help="format of a trace FILE")
    p.add_argument("--column", default=None, metavar="NAME|INDEX",
                   help="csv: the column of arrival times (as `pard simulate`)")
    p.add_argument("--unit", choices=UNITS, default=None, help="csv: unit of the arrival times (as `pard simulate`)")
    p.add_argument("--load", type=positive("--load"), default=d["load"],
                   help="mean arrival rate over the measured pipeline capacity; default 1.0")
    p.add_argument("--start", type=non_negative("--start"), default=None,
                   help=f"skip this many seconds of a real trace; default {d['start']:g} (0 for the generators)")
    p.add_argument("--duration", type=positive("--duration"), default=d["duration"],
                   help=f"seconds of trace to replay per policy; default {d['duration']:g}")
    p.add_argument("--policies", type=policies, default=policies(d["policies"]),
                   help=f"comma-separated policies; default {d['policies']}")
    p.add_argument("--out", type=Path, default=Path(d["out"]), metavar="DIR",
                   help=f"directory for live.json and live.png; default {d['out']}")
    add_json(p, "JSON path (default DIR/live.json)")
    p.add_argument("--plot", type=Path, default=None, metavar="PATH", help="PNG path (default DIR/live.png)")
    p.add_argument("--cores", type=int, default=None,
                   help="cores to size the workers to; default all this process may use (more than the machine "
                        "has is accepted with a warning: the workers then share the real cores)")
    p.add_argument("--scale", type=positive("--scale"), default=d["scale"],
                   help="stage models' work per request, relative to the default size; default 1")
    add_models(p)
    p.add_argument("--refresh-profile", action="store_true",
                   help="measure even if a cached profile exists (a cached one is also measured again when "
                        "older than 12 h, or when a previous run found the machine >25 %% off its profile)")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the arrivals and planner; default 0")


def check_outputs(args: argparse.Namespace) -> None:
    """UsageError now if live.json / live.png could not be written at the end."""
    if args.json is None or args.plot is None:
        make_output_dir("--out", args.out)
    if args.json is not None:
        check_output("--json", args.json)
    if args.plot is not None:
        check_output("--plot", args.plot)
        check_plot_suffix(args.plot)


def check_trace(args: argparse.Namespace, err: Any = None) -> None:
    """Read the trace once at a nominal rate, so that a missing or malformed one is refused before the profile;
    note on ``err`` a csv trace's tier/slo columns, which a live replay does not use."""
    if args.start is None:  # the default stretch of a real trace; a generator has no timeline to skip into
        args.start = 0.0 if args.trace in GENERATED_TRACES else LIVE_DEFAULTS["start"]
    is_file = args.trace not in BUILTIN_TRACES and Path(args.trace).is_file()
    if not is_file and (args.column is not None or args.unit is not None):
        raise UsageError("--column/--unit apply to a csv trace FILE")
    load_trace(args.trace, trace_format=args.trace_format, scaling="amplify", rate=1.0, start_s=args.start,
               duration_s=args.duration, seed=args.seed, column=args.column, unit=args.unit, spell=spell)
    if err is not None and is_file and resolve_file_format(Path(args.trace), args.trace_format, args.column,
                                                          spell=spell)[0] == "csv":
        note = unused_columns_note(args.trace, tier_column=None, slo_column=None,
                                   how="pard run rescales the trace and serves every request alike; "
                                       "pard simulate replays {them} exactly with {uses}")
        if note:
            err.print(f"[yellow]note:[/] {require('rich.markup', 'cli', 'the pard command').escape(note)}")


def llm_tokens(args: argparse.Namespace) -> TokenSource:
    """Where an llm pipeline's token counts come from: a trace file's token columns (rows drawn from it: the
    trace is rescaled, so its requests are new), else pairs from the bundled trace (:mod:`.tokens`)."""
    is_file = args.trace not in BUILTIN_TRACES and Path(args.trace).is_file()
    fmt = resolve_file_format(Path(args.trace), args.trace_format, args.column, spell=spell)[0] if is_file else None
    return token_source(args.trace, fmt, False, column=args.column, unit=args.unit)


def run(args: argparse.Namespace) -> int:
    """Run ``pard run``; returns the exit code."""
    escape = require("rich.markup", "cli", "the pard command").escape
    t_all = time.perf_counter()
    out = console(stderr=is_stdout(args.json))  # --json -: stdout holds the JSON alone
    err = console(stderr=True)
    n_cores = cores(args.cores, err)
    args.models = models_arg(args, err)
    check_outputs(args)  # before minutes of replay, not after
    check_trace(args, err)  # a bad trace fails now, not after the profile is measured
    spec, used, cache_path = run_profile(args, n_cores, err)  # 1.
    workers = [st.workers for st in spec.stages]
    tokens = llm_tokens(args) if has_llm(spec) else None  # an llm stage's capacity: at the mean token lengths
    capacity = llm_capacity(spec, tokens, args.seed) if tokens else spec.capacity().pipeline
    arrivals, label = load_trace(args.trace, trace_format=args.trace_format, scaling="amplify",  # 2.
                                 rate=args.load * capacity, start_s=args.start, duration_s=args.duration,
                                 seed=args.seed, column=args.column, unit=args.unit, spell=spell)
    if arrivals.size == 0:
        raise UsageError(f"--trace {args.trace!r}: no arrivals in the selected window")
    source = "measured" if args.profile is None else f"by --profile {args.profile}"
    err.print(f"[bold]{spec.name}[/] live: capacity {capacity:.0f} req/s ({source}), SLO {spec.slo:g} s; "
              f"trace {label}, {args.duration:g} s from {args.start:g} s at load {args.load:g}: "
              f"{arrivals.size} requests, peak 1 s rate "
              f"{np.bincount(arrivals.astype(np.int64)).max():.0f} req/s")
    workload = None
    if tokens:
        workload, longest, capped = llm_workload(spec, arrivals, tokens, args.seed)
        ins, outs = np.asarray(workload.in_tokens), np.asarray(workload.out_tokens)
        # what the engine produces: each output ends at the stage's cap or at its request's max_tokens hint
        llm = min((st for st in spec.stages if st.kind == "llm"), key=lambda st: st.max_output_tokens)
        served = np.minimum(outs, output_caps(llm, outs.size, workload.max_tokens))
        err.print(f"llm: {escape(tokens.note())}: input mean {ins.mean():.0f}, output mean {served.mean():.0f} "
                  f"tokens as served ({int((served < outs).sum())} of {arrivals.size} outputs end early at the "
                  f"stage's max_output_tokens or their max_tokens); prompts over {longest} tokens (the KV budget "
                  f"less the output cap) are cut to it: {capped} of {arrivals.size}")
    drain_limit_s = max(2.0, 5.0 * spec.slo)  # how long close() may drain after the last arrival
    live = replay_policies(args, spec, arrivals, err, drain_limit_s, workload=workload)  # 3.
    # 5. did the machine run as profiled?  (all policies' batches together)
    pooled = {key: np.concatenate([b[key] for b in live.batches]) for key in ("stage", "size", "duration_s")}
    check = check_profile(spec, pooled, used, cache_path=cache_path, profile_arg=args.profile)
    # 4. each run's report; its goodput bound: the profile's capacity, scaled up where its batches ran faster
    reports = {}
    for name, (rt, t_rep) in live.runs.items():
        info = live.info[name]
        info["bound_capacity"] = rt.bound_capacity()
        reports[name] = rt.report(t0_s=t_rep, duration_s=float(args.duration))
        by_reason = reports[name].dropped_by_reason
        info["dropped_by_reason"] = {r: int(by_reason.get(r, 0)) for r in drop_reasons(by_reason)}
        info["drain_limit_s"] = drain_limit_s
    title = f"{spec.name} LIVE / {label} / load {args.load:g} / {n_cores} cores"
    out.print(comparison_table(reports, title=title))
    out.print(bound_line(live.info))
    out.print(reasons_line(live.info, drain_limit_s))
    out.print(agreement_table(reports, live.simulated, live.refit, live.info))
    note = refit_note(live.info)
    if note:
        out.print(require("rich.markup", "cli", "the pard command").escape(note))
    out.print(probe_line(live.info, live.probe))
    if check["warning"]:
        out.print(f"[yellow]{require('rich.markup', 'cli', 'the pard command').escape(check['warning'])}[/]")
    judged = verdicts(reports, live.info)
    for line in verdict_lines(judged):  # against today's serving systems first, then the research baselines
        out.print(require("rich.markup", "cli", "the pard command").escape(line))
    # 6. files
    json_path = args.json or args.out / "live.json"
    plot_path = args.plot or args.out / "live.png"
    extra: dict[str, Any] = {}
    if workload is not None:
        fit = {st.name: {"prefill": dict(st.prefill), "decode": dict(st.decode), "max_seqs": st.max_seqs,
                         "kv_tokens": st.kv_tokens} for st in spec.stages if st.kind == "llm"}
        assert tokens is not None
        extra["llm"] = llm_block(spec, workload, longest, capped, fit, live.llm_steps, live.simulated, tokens.label())
        out.print("llm engines: " + "; ".join(
            f"{name} {d['steps']} steps, {d['tokens']} tokens, {d['dropped_while_decoding']} dropped while decoding "
            f"(most steps after a drop: {d['after_drop_steps_max']})" for name, d in live.llm_steps.items()))
    write_outputs(json_path, plot_path, reports, pipeline=spec.name, trace=label, load=args.load, title=title,
                  simulated=live.simulated, refit=live.refit, live={
                      "cores": n_cores, "machine_cores": machine_cores(), "models": args.models,
                      "workers": dict(zip([st.name for st in spec.stages], workers)),
                      "profile": {st.name: {str(b): d for b, d in sorted(st.profile.items())} for st in spec.stages},
                      "profile_used": used, "profile_check": check,
                      "duration_s": args.duration, "start_s": args.start, "policies": live.info, "machine_probe": live.probe,
                      "verdict": dict(judged, text=verdict_lines(judged)), "wall_s": time.perf_counter() - t_all,
                      **extra})
    wrote = plot_path if is_stdout(json_path) else f"{json_path} and {plot_path}"
    err.print(f"wrote {wrote} ({time.perf_counter() - t_all:.0f} s in all)")
    return 0
