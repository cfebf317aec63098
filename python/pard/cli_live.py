"""``pard run`` and ``pard profile``: the live runtime from the command line.

``pard run`` (no arguments needed) is what a new user runs first:

1. it measures the pipeline's stage profiles on this machine with the reference models of
   :mod:`pard.models` (:mod:`pard.profiling`; reused from the cache when this machine, pipeline,
   sizing and version were measured before), sizing the live worker counts to the cores;
2. it cuts a window of the bundled Azure LLM conversation trace, amplified (DESIGN §5) to a mean
   rate of ``--load`` times the measured pipeline capacity, so that the trace's bursts overload it;
3. for each policy (default ``pard,nexus,clipper++,naive``) it replays the window in wall-clock
   time through :class:`pard.Runtime` (real worker threads, real array compute), then builds the
   same :class:`pard.report.Report` ``pard simulate`` builds;
4. it prints the metrics table, the live-vs-simulated goodput of each policy (the same arrivals
   simulated with the measured profile), the scheduler's share of request latency, and a verdict
   line saying plainly whether pard beat the best reactive baseline; it writes the JSON (the
   ``pard simulate --json`` schema, plus ``live``/``simulated`` blocks) and a PNG of goodput and
   drops over time per policy.

``pard profile`` measures and saves a profile file that ``pard run --profile FILE`` and
``pard simulate --pipeline FILE`` accept.  Both subcommands are added to ``pard.cli`` by
:func:`register_live`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["register_live", "register_run", "register_profile", "cmd_run", "cmd_profile", "LIVE_DEFAULTS", "PIPE_WIDTH",
           "TIE_BAND"]

#: Defaults of ``pard run``: sized so that four policies finish within 3 minutes on 2 cores.
LIVE_DEFAULTS: dict[str, Any] = {
    "pipeline": "tm",
    "trace": "azure-conv",
    "load": 1.0,
    "start": 1170.0,  # a stretch of the trace whose 10 s rate envelope swings 0.7x .. 1.4x its mean
    "duration": 30.0,
    "policies": "pard,nexus,clipper++,naive",
    "out": "pard-out",
    "scale": 1.0,
}


def register_live(subparsers: Any) -> None:
    """Add ``pard run`` and ``pard profile`` to ``subparsers`` (the one hook ``pard.cli`` calls)."""
    register_run(subparsers)
    register_profile(subparsers)


def _cli() -> Any:
    from . import cli

    return cli


def register_profile(subparsers: Any) -> None:
    """Add ``pard profile``."""
    cli = _cli()
    p = subparsers.add_parser(
        "profile", help="measure each stage's duration per batch size on this machine (reference models)",
        description="Time each stage's reference model at every batch size (warm-up, then the median of "
                    "repeats), with all live workers running at once and BLAS limited to one thread per "
                    "worker, and write the pipeline spec with the measured profiles.  `pard run --profile "
                    "FILE` and `pard simulate --pipeline FILE` accept the file.",
    )
    p.add_argument("--pipeline", default=LIVE_DEFAULTS["pipeline"], metavar="{tm,lv,ga,da,FILE}",
                   help="a built-in pipeline or a spec file; default tm")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="where to write the profile (YAML/JSON/TOML by suffix); default the cache "
                        "(~/.cache/pard/profiles/...)")
    p.add_argument("--cores", type=int, default=None,
                   help="cores to size the workers to; default all this process may use (more than the machine "
                        "has is accepted with a warning)")
    p.add_argument("--repeats", type=int, default=7, help="timed runs per batch size and worker; default 7")
    p.add_argument("--scale", type=cli._positive("--scale"), default=LIVE_DEFAULTS["scale"],
                   help="reference models' work per request, relative to the default size; default 1")
    p.set_defaults(func=cmd_profile)


def register_run(subparsers: Any) -> None:
    """Add ``pard run``."""
    cli = _cli()
    d = LIVE_DEFAULTS
    p = subparsers.add_parser(
        "run", help="replay a real trace live through a real pipeline under each policy (start here)",
        description="Profile the pipeline on this machine (or reuse the cached profile), then replay a "
                    "window of the bundled Azure LLM conversation trace, amplified so its bursts overload "
                    "the pipeline, in wall-clock time through the live runtime and the reference models, "
                    "once per policy; print the metrics table, compare with the simulator on the same "
                    "arrivals, and write JSON and a PNG.",
    )
    p.add_argument("--pipeline", default=d["pipeline"], metavar="{tm,lv,ga,da,FILE}",
                   help="a built-in pipeline or a spec file; default tm")
    p.add_argument("--profile", type=Path, default=None, metavar="FILE",
                   help="a measured profile (from `pard profile --out`); default: cached or measured now")
    p.add_argument("--trace", default=d["trace"], metavar="{azure-conv,bursty,poisson,FILE}",
                   help="arrival trace (as `pard simulate`); default azure-conv")
    p.add_argument("--trace-format", choices=cli.TRACE_FORMATS, default=None, help="format of a trace FILE")
    p.add_argument("--load", type=cli._positive("--load"), default=d["load"],
                   help="mean arrival rate over the measured pipeline capacity; default 1.0")
    p.add_argument("--start", type=cli._non_negative("--start"), default=d["start"],
                   help=f"skip this many seconds of the trace; default {d['start']:g}")
    p.add_argument("--duration", type=cli._positive("--duration"), default=d["duration"],
                   help=f"seconds of trace to replay per policy; default {d['duration']:g}")
    p.add_argument("--policies", type=cli._policies, default=cli._policies(d["policies"]),
                   help=f"comma-separated policies; default {d['policies']}")
    p.add_argument("--out", type=Path, default=Path(d["out"]), metavar="DIR",
                   help=f"directory for live.json and live.png; default {d['out']}")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="JSON path (default DIR/live.json)")
    p.add_argument("--plot", type=Path, default=None, metavar="PATH", help="PNG path (default DIR/live.png)")
    p.add_argument("--cores", type=int, default=None,
                   help="cores to size the workers to; default all this process may use (more than the machine "
                        "has is accepted with a warning: the workers then share the real cores)")
    p.add_argument("--scale", type=cli._positive("--scale"), default=d["scale"],
                   help="reference models' work per request, relative to the default size; default 1")
    p.add_argument("--refresh-profile", action="store_true",
                   help="measure even if a cached profile exists (a cached one is also measured again when "
                        "older than 12 h, or when a previous run found the machine >25 %% off its profile)")
    p.add_argument("--seed", type=cli._seed, default=0, help="seed of the arrivals and planner; default 0")
    p.set_defaults(func=cmd_run)


#: Console width when the output is not a terminal (a pipe or a file): rich would use 80 columns
#: and wrap or cut the tables and lines; 160 fits every table ``pard run`` prints.
PIPE_WIDTH = 160


def _console(*, stderr: bool = False) -> Any:
    """A rich Console for stdout (or stderr): the terminal's width, or :data:`PIPE_WIDTH` columns
    without line wrapping of plain text when the stream is not a terminal."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return Console(stderr=stderr, width=None if tty else PIPE_WIDTH, soft_wrap=not tty)


def _machine_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _cores(arg: int | None, err: Any = None) -> int:
    """``--cores``, default the cores this process may run on.  More than the machine has is
    accepted (the workers are sized to it and share the real cores; the profile is measured that
    way) but warned about on ``err``."""
    cli = _cli()
    have = _machine_cores()
    if arg is None:
        return have
    if arg < 1:
        raise cli.UsageError(f"--cores must be an int >= 1, got {arg!r}")
    if arg > have and err is not None:
        err.print(f"[yellow]warning:[/] --cores {arg} exceeds this machine's {have} cores: the workers "
                  f"are sized to {arg} cores and share the {have} real ones (the profile is measured "
                  f"that way, so it stays consistent, but every stage runs slower than on {arg} cores)")
    return int(arg)


def _sizing_line(spec: Any, workers: list[int], cores: int) -> str:
    from .executors import gpu_available
    from .profiling import busy_cores

    parts = ", ".join(f"{st.name} x{w}" for st, w in zip(spec.stages, workers))
    device = "CuPy on the GPU, one CUDA stream per worker" if gpu_available() else "NumPy on the CPU"
    line = (f"sizing: {cores} cores -> workers {parts} ({sum(workers)} threads, {device}, "
            f"BLAS 1 thread per worker)")
    try:
        busy = busy_cores(spec, workers)
        line += f"; at capacity they keep ~{busy:.1f} cores busy"
        if busy > cores + 0.05:
            line += " (more than the cores: stages share them; the profile was measured that way)"
    except Exception:  # noqa: BLE001 - informative only
        pass
    return line


def _measure(args: argparse.Namespace, spec: Any, cores: int, err: Any, *, refresh: bool) -> Any:
    from .profiling import cached_profile, size_workers

    workers = size_workers(spec, cores)
    err.print(_sizing_line(spec, workers, cores))
    t0 = time.perf_counter()
    res = cached_profile(spec, workers=workers, model_options={"scale": float(args.scale)},
                         refresh=refresh, repeats=getattr(args, "repeats", 7))
    if res.cached:
        how = "cached" + (f", measured {_age(res.age_s)} ago" if res.age_s is not None else "")
    else:
        how = f"measured in {time.perf_counter() - t0:.1f} s"
        if res.refreshed_because:
            how += f"; the cached one was {res.refreshed_because}"
    err.print(f"profile ({how}): {res.path}")
    return res


def _age(age_s: float | None) -> str:
    if age_s is None:
        return "an unknown time"
    if age_s < 120:
        return f"{age_s:.0f} s"
    if age_s < 2 * 3600:
        return f"{age_s / 60:.0f} min"
    return f"{age_s / 3600:.1f} h"


def _profile_table(spec: Any) -> Any:
    from rich.table import Table

    t = Table(title=f"{spec.name}: measured d(b) in ms (timed beside the other stages' load at capacity)")
    t.add_column("stage")
    t.add_column("workers", justify="right")
    t.add_column("d(b) ms")
    t.add_column("req/s at max batch", justify="right")
    for st in spec.stages:
        t.add_row(st.name, str(st.workers), "  ".join(f"{b}:{d * 1e3:.1f}" for b, d in sorted(st.profile.items())),
                  f"{st.throughput():.0f}")
    return t


def cmd_profile(args: argparse.Namespace) -> int:
    """Run ``pard profile``; returns the exit code."""
    from .profiling import measure_profile, size_workers
    from .sim import resolve_pipeline

    cli = _cli()
    err = _console(stderr=True)
    try:
        spec = resolve_pipeline(args.pipeline)
    except (ValueError, OSError) as exc:
        raise cli.UsageError(f"--pipeline {args.pipeline!r}: {exc}") from None
    if args.repeats < 1:
        raise cli.UsageError(f"--repeats must be an int >= 1, got {args.repeats!r}")
    cores = _cores(args.cores, err)
    if args.out is None:
        res = _measure(args, spec, cores, err, refresh=True)
    else:
        workers = size_workers(spec, cores)
        err.print(_sizing_line(spec, workers, cores))
        res = measure_profile(spec, workers=workers, repeats=args.repeats, model_options={"scale": float(args.scale)})
        args.out.parent.mkdir(parents=True, exist_ok=True)
        res.spec.save(args.out)
        res.path = args.out
        err.print(f"profile measured in {res.wall_s:.1f} s, written to {args.out}")
    _console().print(_profile_table(res.spec))
    print(res.path)
    return 0


#: Goodput differences smaller than this (relative) are reported as a tie: run-to-run noise.
TIE_BAND = 0.02


def _verdict(reports: dict[str, Any]) -> str:
    """One plain sentence: did pard beat the best reactive baseline here, and by how much."""
    if "pard" not in reports:
        return ""
    base = {k: r for k, r in reports.items() if not k.startswith("pard")}
    if not base:
        return ""
    best_name, best = max(base.items(), key=lambda kv: kv[1].goodput)
    p = reports["pard"]
    if best.goodput <= 0:
        return f"pard goodput {p.goodput:.1f} req/s; no baseline finished any request on time."
    gain = p.goodput / best.goodput - 1.0
    if abs(gain) < TIE_BAND:
        return (f"pard and the best baseline were about equal here (within {TIE_BAND * 100:g} %, the "
                f"run-to-run noise): goodput {p.goodput:.1f} vs {best.goodput:.1f} req/s ({best_name}), {gain:+.1%}; "
                f"drop rate {p.drop_rate:.1%} vs {best.drop_rate:.1%}; see docs/live.md.")
    if gain > 0:
        return (f"pard beat the best baseline here: goodput {p.goodput:.1f} vs {best.goodput:.1f} req/s "
                f"({best_name}), {gain:+.1%}; drop rate {p.drop_rate:.1%} vs {best.drop_rate:.1%}.")
    return (f"pard did NOT beat the best baseline here: goodput {p.goodput:.1f} vs {best.goodput:.1f} req/s "
            f"({best_name}), {gain:+.1%}; see docs/live.md for why this happens.")


def cmd_run(args: argparse.Namespace) -> int:
    """Run ``pard run``; returns the exit code."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from .config import load
    from .models import sample_inputs
    from .profiling import profile_drift, profile_from_batches
    from .report import comparison_dict, comparison_table
    from .runtime import Runtime
    from .sim import resolve_pipeline, simulate

    cli = _cli()
    t_all = time.perf_counter()
    console = _console()
    err = _console(stderr=True)
    cores = _cores(args.cores, err)
    # 1. the measured pipeline
    used: dict[str, Any]
    cache_path: Path | None = None
    if args.profile is not None:
        if not args.profile.is_file():
            raise cli.UsageError(
                f"--profile {str(args.profile)!r}: no such file (write one with `pard profile --out "
                f"{args.profile}`, or leave --profile out to use the cached or a freshly measured profile)")
        try:
            spec = load(args.profile)
        except (ValueError, OSError) as exc:
            raise cli.UsageError(f"--profile {str(args.profile)!r}: {exc}") from None
        mtime = args.profile.stat().st_mtime
        used = {"source": "file", "path": str(args.profile), "measured_at": mtime,
                "age_s": max(0.0, time.time() - mtime), "refreshed_because": None}
        err.print(f"profile: {args.profile} (as given, written {_age(used['age_s'])} ago)")
        err.print(_sizing_line(spec, [st.workers for st in spec.stages], cores))
    else:
        try:
            base = resolve_pipeline(args.pipeline)
        except (ValueError, OSError) as exc:
            raise cli.UsageError(f"--pipeline {args.pipeline!r}: {exc}") from None
        res = _measure(args, base, cores, err, refresh=args.refresh_profile)
        spec = res.spec
        cache_path = res.path
        used = {"source": "cache" if res.cached else "measured now", "path": str(res.path),
                "measured_at": res.measured_at, "age_s": res.age_s, "refreshed_because": res.refreshed_because}
    used["measured_at_utc"] = (None if used["measured_at"] is None else
                               time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(used["measured_at"])))
    workers = [st.workers for st in spec.stages]
    measured_cap = spec.capacity()
    capacity = measured_cap.pipeline
    # 2. the arrivals
    rate = args.load * capacity
    arrivals, label = cli.load_trace(args.trace, trace_format=args.trace_format, scaling="amplify", rate=rate,
                                     start_s=args.start, duration_s=args.duration, seed=args.seed)
    if arrivals.size == 0:
        raise cli.UsageError(f"--trace {args.trace!r}: no arrivals in the selected window")
    err.print(f"[bold]{spec.name}[/] live: capacity {capacity:.0f} req/s (measured), SLO {spec.slo:g} s; "
              f"trace {label}, {args.duration:g} s from {args.start:g} s at load {args.load:g}: "
              f"{arrivals.size} requests, peak 1 s rate "
              f"{np.bincount(arrivals.astype(np.int64)).max():.0f} req/s")
    payloads = list(sample_inputs(64, seed=args.seed))
    # 3. one live run per policy
    runs: dict[str, tuple[Any, float, dict[str, np.ndarray]]] = {}
    simulated: dict[str, Any] = {}
    refit: dict[str, Any] = {}
    live_info: dict[str, Any] = {}
    all_batches: list[dict[str, np.ndarray]] = []
    total = float(args.duration) * len(args.policies)
    drain_limit_s = max(2.0, 5.0 * spec.slo)  # how long close() may drain after the last arrival
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("live", total=total)
        for i, name in enumerate(args.policies):
            bar.update(task, description=f"live {name}")
            offset = i * float(args.duration)
            rt = Runtime(spec, policy=name, workers=workers, model_options={"scale": float(args.scale)},
                         planner_options={"seed": args.seed + 1})
            t_rep = rt.now()
            try:
                def tick(t: float, o: float = offset) -> None:
                    bar.update(task, completed=min(o + t, total))

                rt.replay(arrivals, payloads, progress=tick)
                t_drain = time.perf_counter()
                # what is still queued this long after the last arrival cannot finish on time any
                # more; it is cancelled (counted as dropped, reason "cancelled") to bound the run
                rt.close(drain=True, timeout_s=drain_limit_s)
                drain_s = time.perf_counter() - t_drain
            finally:
                rt.close(drain=False)
            batches = rt.batches()
            runs[name] = (rt, t_rep, batches)
            all_batches.append(batches)
            out = rt.outcomes()
            done = (out["state"] == 1) | (out["state"] == 2)
            lat = out["finish_s"][done] - out["send_s"][done]
            ov = rt.overhead()
            e2e = float(lat.sum()) if lat.size else math.nan
            live_info[name] = {
                "scheduler_s": ov["scheduler_s"], "planner_s": ov["planner_s"],
                "planner_calls": int(ov["planner_calls"]),
                "scheduler_share_of_latency": (ov["scheduler_s"] + ov["planner_s"]) / out["send_s"].size
                / (e2e / lat.size) if lat.size else None,
                "mean_latency_s": e2e / lat.size if lat.size else None,
                "drain_s": drain_s,
                "batches": int(batches["size"].size),
                "mean_batch": {st.name: float(np.mean([b[2] for b in st_b])) if st_b else 0.0
                               for st, st_b in ((s, s.batches) for s in rt._stages)},
                "profile_drift": profile_drift(spec, batches),
            }
            # 4. the same arrivals, simulated with the measured profile
            # the live send times; the few the replay sent a little after the window's end (it lags
            # by milliseconds under load) are clamped into it, so both reports span the same seconds
            send = np.clip(out["send_s"] - t_rep, 0.0, np.nextafter(float(args.duration), 0.0))
            simulated[name] = simulate(spec, send, name, workers=workers, seed=args.seed)
            fitted = profile_from_batches(spec, batches)
            refit[name] = simulate(fitted, send, name, workers=workers, seed=args.seed)
            bar.update(task, completed=offset + float(args.duration))
    # 5. did the machine run as profiled?  (all policies' batches together)
    pooled = {key: np.concatenate([b[key] for b in all_batches]) for key in ("stage", "size", "duration_s")}
    check = _check_profile(spec, pooled, used, cache_path=cache_path, profile_arg=args.profile)
    warning = check["warning"] or ""
    # each run's goodput bound: the profile's capacity, scaled up where its batches ran faster
    reports = {}
    for name, (rt, t_rep, _) in runs.items():
        live_info[name]["bound_capacity"] = rt.bound_capacity()
        reports[name] = rt.report(t0_s=t_rep, duration_s=float(args.duration))
        by_reason = reports[name].dropped_by_reason
        live_info[name]["dropped_by_reason"] = {r: int(by_reason.get(r, 0)) for r in _drop_reasons(by_reason)}
        live_info[name]["drain_limit_s"] = drain_limit_s
    title = f"{spec.name} LIVE / {label} / load {args.load:g} / {cores} cores"
    console.print(comparison_table(reports, title=title))
    console.print(_bound_line(live_info))
    console.print(_reasons_line(live_info, drain_limit_s))
    agree = Table(title="live vs simulated (same arrivals, measured profile)")
    for col in ("policy", "live goodput/s", "simulated", "difference", "simulated, profile refit to run",
                "difference", "scheduler share of latency"):
        agree.add_column(col, justify="left" if col == "policy" else "right")
    for name, rep in reports.items():
        sim_g = simulated[name].goodput
        ref_g = refit[name].goodput
        diff = (rep.goodput - sim_g) / sim_g if sim_g > 0 else math.nan
        diff2 = (rep.goodput - ref_g) / ref_g if ref_g > 0 else math.nan
        share = live_info[name]["scheduler_share_of_latency"]
        agree.add_row(name, f"{rep.goodput:.1f}", f"{sim_g:.1f}", f"{diff:+.1%}", f"{ref_g:.1f}", f"{diff2:+.1%}",
                      "-" if share is None else f"{share:.3%}")
        live_info[name]["simulated_goodput"] = sim_g
        live_info[name]["goodput_difference"] = None if math.isnan(diff) else diff
        live_info[name]["simulated_refit_goodput"] = ref_g
        live_info[name]["goodput_difference_refit"] = None if math.isnan(diff2) else diff2
    console.print(agree)
    if warning:
        from rich.markup import escape

        console.print(f"[yellow]{escape(warning)}[/]")
    verdict = _verdict(reports)
    if verdict:
        console.print(verdict)
    # 6. files
    out_dir: Path = args.out
    json_path = args.json or out_dir / "live.json"
    plot_path = args.plot or out_dir / "live.png"
    doc = comparison_dict(reports, pipeline=spec.name, trace=label, load=args.load)
    doc["mode"] = "live"
    doc["simulated"] = {n: r.to_dict() for n, r in simulated.items()}
    doc["simulated_refit"] = {n: r.to_dict() for n, r in refit.items()}
    doc["live"] = {"cores": cores, "machine_cores": _machine_cores(),
                   "workers": dict(zip([st.name for st in spec.stages], workers)),
                   "profile": {st.name: {str(b): d for b, d in sorted(st.profile.items())} for st in spec.stages},
                   "profile_used": used,
                   "profile_check": check,
                   "duration_s": args.duration, "start_s": args.start, "policies": live_info,
                   "verdict": verdict, "wall_s": time.perf_counter() - t_all}
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(_clean(doc), indent=2))
    from .plotting import plot_reports

    plot_path.parent.mkdir(parents=True, exist_ok=True)
    plot_reports(reports, plot_path, title=title)
    err.print(f"wrote {json_path} and {plot_path} ({time.perf_counter() - t_all:.0f} s in all)")
    return 0


def _drop_reasons(by_reason: dict[str, int]) -> list[str]:
    """Every drop reason code of the core (so ``cancelled`` always shows), then any other seen."""
    from . import _core

    names = list(_core.REASONS)
    return names + sorted(r for r in by_reason if r not in names)


def _reasons_line(live_info: dict[str, Any], drain_limit_s: float) -> str:
    """One line with each run's drops by reason, saying what ``cancelled`` means in a live run."""
    parts = []
    for name, info in live_info.items():
        seen = ", ".join(f"{r} {c}" for r, c in info["dropped_by_reason"].items() if c) or "none"
        parts.append(f"{name}: {seen}")
    return (f"drops by reason: {'; '.join(parts)}. (\"cancelled\": still in flight {drain_limit_s:g} s after the "
            f"last arrival, when the run stopped draining -- end-of-run cancellations, not policy drops; "
            f"\"rejected\": a full ingress ring.)")


def _bound_line(live_info: dict[str, Any]) -> str:
    """One line saying which capacity each run's goodput bound ("of bound") used."""
    parts = []
    profile_req_s = None
    for name, info in live_info.items():
        b = info["bound_capacity"]
        profile_req_s = b["profile_req_s"]
        up = b["req_s"] / b["profile_req_s"] if b["profile_req_s"] > 0 else 1.0
        parts.append(f"{name} {b['req_s']:.0f}" + (f" (x{up:.2f})" if up > 1.0005 else ""))
    return (f"goodput bound (\"of bound\"): the measured profile's capacity ({profile_req_s or 0:.0f} req/s at the "
            f"best batch sizes), scaled up where a run's batches ran faster than profiled: {', '.join(parts)} req/s")


def _check_profile(spec: Any, batches: dict[str, np.ndarray], used: dict[str, Any], *,
                   cache_path: Path | None, profile_arg: Path | None) -> dict[str, Any]:
    """Compare the run's batches with the profile used; warn, and mark a cached profile stale, on drift.

    The bottleneck stage's drift (:func:`pard.profiling.profile_drift`, median of batch duration
    over profiled ``d(b)``) beyond :data:`pard.profiling.DRIFT_LIMIT` either way means the machine
    runs faster or slower than when it was profiled: the returned ``warning`` says so and what to
    do; a profile from the cache (``cache_path``) is marked stale so the next ``pard run`` measures
    it again.  Returns the JSON block ``live.profile_check``.
    """
    from .profiling import DRIFT_LIMIT, mark_stale, profile_drift

    drift = profile_drift(spec, batches)
    bottleneck = spec.capacity().bottleneck
    ratio = drift.get(bottleneck)
    drifted = ratio is not None and abs(ratio - 1.0) > DRIFT_LIMIT
    marked = False
    warning = ""
    if drifted and ratio is not None:
        how = f"{(ratio - 1.0) * 100:.0f} % slower" if ratio > 1 else f"{(1.0 - ratio) * 100:.0f} % faster"
        warning = (f"warning: the bottleneck stage {bottleneck} ran {how} than its profile during these runs "
                   f"(median batch duration / profiled d(b) = {ratio:.2f}; limit +/-{DRIFT_LIMIT * 100:g} %): "
                   f"the profile ({used['source']}, measured {_age(used.get('age_s'))} ago) no longer matches "
                   f"this machine's load, so live and simulated figures disagree. ")
        if cache_path is not None:
            try:
                mark_stale(cache_path, f"a live run's {bottleneck} batches took {ratio:.2f}x the profiled durations")
                marked = True
                warning += ("The cached profile is now marked stale: the next `pard run` measures it again "
                            "(or rerun now with `pard run --refresh-profile`).")
            except OSError as exc:
                warning += f"Rerun with `pard run --refresh-profile` (could not mark the cache stale: {exc})."
        else:
            warning += (f"Measure it again with `pard profile --out {profile_arg}`, or leave --profile out and "
                        f"run `pard run --refresh-profile`.")
    return {"drift_by_stage": drift, "bottleneck": bottleneck, "drift": ratio, "limit": DRIFT_LIMIT,
            "drifted": drifted, "marked_stale": marked, "warning": warning or None}


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return _clean(x.item())
    return x


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_cli().main(["run", *sys.argv[1:]]))
