"""``pard profile``: measure each stage's duration per batch size on this machine and save the spec."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._extras import require
from ..errors import UsageError
from ..profiling import measure_profile, size_workers
from .measure import measure, sizing_line
from .parsers import add_command, add_models, add_pipeline, check_output, console, cores, load_spec, models_arg, positive, require_llm_engine

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add ``pard profile``."""
    p = add_command(
        subparsers, "profile", run,
        help="measure each stage's duration per batch size on this machine (ONNX or NumPy stage models; an llm "
             "stage's prefill and decode step on llama.cpp)",
        description="Time each stage's model (--models: the ONNX stage models by default, or the NumPy "
                    "reference models) at every batch size (warm-up, then the median of repeats), with all "
                    "live workers running at once and one thread per worker; measure an llm stage's prefill "
                    "and decode step per running sequences on llama.cpp with a tiny random-weight llama (extra "
                    "llm), alone; and write the pipeline spec with the measured profiles.  `pard run --profile FILE` and `pard simulate --pipeline FILE` "
                    "accept the file.",
    )
    add_pipeline(p, "tm")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="where to write the profile (YAML/JSON/TOML by suffix); default the cache "
                        "(~/.cache/pard/profiles/...)")
    p.add_argument("--cores", type=int, default=None,
                   help="cores to size the workers to; default all this process may use (more than the machine "
                        "has is accepted with a warning)")
    p.add_argument("--repeats", type=int, default=7, help="timed runs per batch size and worker; default 7")
    p.add_argument("--scale", type=positive("--scale"), default=1.0,
                   help="stage models' work per request, relative to the default size; default 1")
    add_models(p)


def _profile_table(spec: Any) -> Any:
    t = require("rich.table", "cli", "the pard command").Table(title=f"{spec.name}: measured d(b) in ms (timed beside the other stages' load at capacity)")
    t.add_column("stage")
    t.add_column("workers", justify="right")
    t.add_column("d(b) ms")
    t.add_column("req/s at its best batch", justify="right")  # StageSpec.throughput(): at batch_limit
    for st in spec.stages:
        if st.kind == "llm":  # its cost per step: the prefill line, then the decode step by running sequences
            pf = st.prefill
            cost = (f"prefill {pf['base'] * 1e3:.3f} + {pf['per_token'] * 1e3:.4f}/token; decode/step "
                    + "  ".join(f"{n}:{d * 1e3:.2f}" for n, d in sorted(st.decode.items())))
            t.add_row(st.name, str(st.workers), cost, f"{st.throughput():.0f} (at the output cap)")
            continue
        t.add_row(st.name, str(st.workers), "  ".join(f"{b}:{d * 1e3:.1f}" for b, d in sorted(st.profile.items())),
                  f"{st.throughput():.0f}")
    return t


def llm_fit_lines(llm: dict[str, Any]) -> list[str]:
    """One line per measured llm stage: how its linear prefill was fitted and its error by prompt length
    (the engine's prefill grows faster than linearly: attention), and the step's additivity check."""
    lines = []
    for name, doc in llm.items():
        m = doc["measured"]
        errs = ", ".join(f"{p}: {e:+.0%}" for p, e in m["prefill_fit_rel_error"].items())
        add = doc["checks"]["additivity"]
        lines.append(f"{name}: prefill {m['prefill_fit']}; linear fit - measured, by prompt tokens: {errs}; "
                     f"a step of {add['running']} running + a {add['prompt']}-token joiner is "
                     f"{add['ratio']:.2f}x decode + prefill measured apart")
    return lines


def _stand_in_note(spec: Any, models: str) -> str:
    """What is measured: pard's stand-in models, not the user's own (a new user took the written profile for
    one of their executors), and how to measure those."""
    from ..config import BUILTIN_NAMES

    note = (f"note: this times pard's {models} stand-in models (seeded networks sized like {spec.name!r}'s "
            f"profile), not your executors")
    if any(st.kind == "llm" for st in spec.stages):
        note += (", and its llm stage on llama.cpp with a tiny random-weight llama (2 layers, width 64), "
                 "not your LLM")
    if spec.name not in BUILTIN_NAMES:
        note += ("; to profile your own: pard.profiling.measure_profile(spec, stages={name: executor}, "
                 "inputs=...) (docs/engines.md)")
    return note


def run(args: argparse.Namespace) -> int:
    """Run ``pard profile``; returns the exit code."""
    err = console(stderr=True)
    spec = load_spec("--pipeline", args.pipeline)
    require_llm_engine("--pipeline", args.pipeline, spec, "profile")
    if args.repeats < 1:
        raise UsageError(f"--repeats must be an int >= 1, got {args.repeats!r}")
    n_cores = cores(args.cores, err)
    args.models = models_arg(args, err)
    err.print(_stand_in_note(spec, args.models))
    if args.out is not None:  # before measuring, not after
        check_output("--out", args.out)
        if args.out.suffix.lower() not in (".yaml", ".yml", ".json", ".toml"):
            raise UsageError(f"--out {str(args.out)!r}: the profile is written as YAML, JSON or TOML by its "
                             f"suffix (.yaml, .yml, .json, .toml), got {args.out.suffix or '(no suffix)'!r}")
    if args.out is None:
        res = measure(args, spec, n_cores, err, refresh=True)
    else:
        workers = size_workers(spec, n_cores)
        err.print(sizing_line(spec, workers, n_cores, args.models))
        res = measure_profile(spec, workers=workers, repeats=args.repeats, model_options={"scale": float(args.scale)},
                              models=args.models)
        res.spec.save(args.out)
        res.path = args.out
        err.print(f"profile measured in {res.wall_s:.1f} s, written to {args.out}")
    console().print(_profile_table(res.spec))
    for line in llm_fit_lines(res.llm):
        err.print(line)
    print(res.path)
    return 0
