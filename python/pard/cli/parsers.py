"""Argument parsers, options and console helpers shared by the ``pard`` subcommands."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ..config import BUILTIN_NAMES, SPEC_SUFFIXES, resolve_pipeline
from ..errors import PardError, UsageError
from ..policies import POLICIES
from ..workloads import BUILTIN_TRACES, TRACE_FORMATS, UNITS

__all__ = ["load_spec", "restate", "require_llm_engine", "json_target", "add_json", "is_stdout", "write_json", "STDOUT", "add_command", "positive", "non_negative", "slo_seconds", "seed", "policies", "cores", "spell", "console", "check_output", "make_output_dir",
           "check_plot_suffix", "machine_cores", "clean", "add_pipeline", "add_models", "models_arg", "DEFAULT_POLICIES", "PIPE_WIDTH",
           "BUILTIN_NAMES", "BUILTIN_TRACES", "TRACE_FORMATS", "UNITS"]

DEFAULT_POLICIES = "pard,nexus,clipper++,triton,ray-serve,naive"
#: The ``--json`` value that means standard output (a file named "-" is ``./-``).
STDOUT = "-"
#: Console width when the output is not a terminal (a pipe or a file): rich would use 80 columns
#: and wrap or cut the tables and lines; 160 fits every table ``pard`` prints.
PIPE_WIDTH = 160


def spell(name: str) -> str:
    """A keyword argument's name as its command-line option (``trace_format`` -> ``--trace-format``)."""
    return "--" + name.replace("_", "-")


def _number(option: str, ok: Callable[[float], bool], rule: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} must be a number, got {text!r}") from None
        if not (math.isfinite(v) and ok(v)):
            raise argparse.ArgumentTypeError(f"{option} must be a finite number {rule}, got {text!r}")
        return v
    return parse


def positive(option: str) -> Callable[[str], float]:
    """A parser of a finite number > 0 for ``option``."""
    return _number(option, lambda v: v > 0, "> 0")


def slo_seconds(text: str) -> float:
    """``--slo``: a number of seconds in (0, MAX_SLO_S], the bound every spec's SLO has."""
    from ..config.models import MAX_SLO_S

    return _number("--slo", lambda v: 0 < v <= MAX_SLO_S, f"in (0, {MAX_SLO_S:g}] seconds")(text)


def non_negative(option: str) -> Callable[[str], float]:
    """A parser of a finite number >= 0 for ``option``."""
    return _number(option, lambda v: v >= 0, ">= 0")


def seed(text: str) -> int:
    """``--seed``: an integer in 0..2**64-1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be an integer in 0..2**64-1, got {text!r}") from None
    if not 0 <= v <= 2**64 - 1:
        raise argparse.ArgumentTypeError(f"--seed must be an integer in 0..2**64-1, got {text!r}")
    return v


def policies(text: str) -> list[str]:
    """``--policies``: comma-separated policy names, each known, none repeated."""
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


def add_command(subparsers: Any, name: str, run: Callable[[argparse.Namespace], int], *, help: str,
                description: str) -> argparse.ArgumentParser:
    """Add subcommand ``name`` (``pard name``), whose ``run(args)`` returns the exit code."""
    p: argparse.ArgumentParser = subparsers.add_parser(name, help=help, description=description)
    p.set_defaults(func=run)
    return p


def restate(option: str, value: Any, exc: BaseException) -> UsageError:
    """A UsageError ``<option> '<value>': <exc>`` that quotes ``value`` once: a leading ``"<value>: "``
    of ``exc``'s message (pard's file errors start with the file) is left out."""
    message = str(exc)
    head = f"{value}: "
    return UsageError(f"{option} {str(value)!r}: {message[len(head):] if message.startswith(head) else message}")


def require_llm_engine(option: str, value: str | Path, spec: Any, command: str) -> None:
    """UsageError when ``spec`` has an llm stage and the llama.cpp engine it runs on here (the tiny llama,
    :func:`pard.profiling.llm.tiny_llm_engine`) is not installed (the message names the install command), or
    a DNN stage runs below an llm stage (its stage models cannot take token ids)."""
    from .._extras import available

    llm = [st.name for st in spec.stages if getattr(st, "kind", "dnn") == "llm"]
    if llm:  # the stage models below an llm stage would get its token ids
        from ..errors import ConfigError
        from ..runtime.setup import refuse_dnn_below_llm
        try:
            refuse_dnn_below_llm(spec)
        except ConfigError as exc:
            raise UsageError(f"{option} {str(value)!r}: `pard {command}` serves every DNN stage with its own stage "
                             f"models, which cannot take token ids: {exc}; simulate it instead: "
                             f"`pard simulate --pipeline {value}`") from None
    missing = [m for m in ("llama_cpp", "gguf") if not available(m)]
    if llm and missing:
        raise UsageError(f"{option} {str(value)!r}: `pard {command}` runs llm stage {llm[0]!r} on llama.cpp (a tiny "
                         f"random-weight llama), which needs {' and '.join(missing)}: pip install \".[llm]\" (or "
                         f"'pard[llm]'); or simulate it: `pard simulate --pipeline {value}`")


def load_spec(option: str, value: str | Path) -> Any:
    """The PipelineSpec ``option`` names: a built-in pipeline (``tm``, ``lv``, ``ga``, ``da``) or a spec file.

    Raises:
        UsageError: naming the option and the value: a file whose suffix is not a spec format's
            (the CLI reads the format from the suffix), an unknown name, or an invalid spec.
    """
    path = Path(value)
    if str(value) not in BUILTIN_NAMES and path.is_file() and path.suffix.lower() not in SPEC_SUFFIXES:
        suffix = repr(path.suffix) if path.suffix else "(it has none)"
        raise UsageError(f"{option} {str(value)!r}: cannot tell the spec file's format from its suffix {suffix}; "
                         f"rename it to end in one of {', '.join(SPEC_SUFFIXES)} (the suffix sets the format)")
    try:
        return resolve_pipeline(value)
    except (PardError, ValueError, OSError) as exc:
        raise restate(option, value, exc) from None


class _StoreGiven(argparse.Action):
    """Store the value and mark ``<dest>_given`` True: a command can tell a default from a choice."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def add_pipeline(p: argparse.ArgumentParser, default: str) -> None:
    """Add ``--pipeline`` (a built-in name or a spec file) with ``default``; ``args.pipeline_given`` says
    whether the user passed it."""
    p.add_argument("--pipeline", default=default, action=_StoreGiven,
                   metavar="{" + ",".join(BUILTIN_NAMES) + ",FILE}",
                   help=f"a built-in pipeline or a spec file (YAML/JSON/TOML); default {default}")
    p.set_defaults(pipeline_given=False)


def add_models(p: argparse.ArgumentParser) -> None:
    """Add ``--models {onnx,numpy}``: which built-in stage models run (default onnx when installed)."""
    p.add_argument("--models", choices=("onnx", "numpy"), default=None,
                   help="the stage models: onnx (small convolutional ONNX networks of each stage's kind, random "
                        "weights, run by ONNX Runtime; the default) or numpy (the NumPy reference models); see "
                        "docs/engines.md")


def models_arg(args: argparse.Namespace, err: Any) -> str:
    """``args.models``, settled: onnx by default, numpy (with a note on ``err``) when ONNX Runtime is missing.

    Raises:
        UsageError: ``--models onnx`` given explicitly without onnx/onnxruntime installed.
    """
    from ..models import onnx_installed

    if args.models == "numpy":
        return "numpy"
    if onnx_installed():
        return "onnx"
    if args.models == "onnx":
        raise UsageError("--models onnx needs the onnx and onnxruntime packages: pip install 'pard[onnx]'")
    err.print("[yellow]note:[/] onnx/onnxruntime are not installed (pip install 'pard[onnx]'), so the NumPy "
              "reference models run (--models numpy)")
    return "numpy"


def machine_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cores(arg: int | None, err: Any = None) -> int:
    """``--cores``, default the cores this process may run on.  More than the machine has is
    accepted (the workers are sized to it and share the real cores; the profile is measured that
    way) but warned about on ``err``."""
    have = machine_cores()
    if arg is None:
        return have
    if arg < 1:
        raise UsageError(f"--cores must be an int >= 1, got {arg!r}")
    if arg > have and err is not None:
        err.print(f"[yellow]warning:[/] --cores {arg} exceeds this machine's {have} cores: the workers "
                  f"are sized to {arg} cores and share the {have} real ones (the profile is measured "
                  f"that way, so it stays consistent, but every stage runs slower than on {arg} cores)")
    return int(arg)


def console(*, stderr: bool = False) -> Any:
    """A rich Console for stdout (or stderr): the terminal's width, or :data:`PIPE_WIDTH` columns
    without line wrapping of plain text when the stream is not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return require("rich.console", "cli", "the pard command").Console(
        stderr=stderr, width=None if tty else PIPE_WIDTH, soft_wrap=not tty)


def json_target(text: str) -> Path | str:
    """``--json``'s value: :data:`STDOUT` as is (the JSON goes to standard output), else a Path."""
    return STDOUT if text == STDOUT else Path(text)


def add_json(p: argparse.ArgumentParser, what: str) -> None:
    """Add ``--json PATH|-``, whose help says ``what`` is written and that ``-`` means stdout."""
    p.add_argument("--json", type=json_target, default=None, metavar="PATH|-",
                   help=f"{what}; - writes the JSON to stdout alone (the tables and lines then go to stderr; "
                        f"./- for a file named -)")


def is_stdout(target: Any) -> bool:
    """Whether an output option's value means standard output (``--json -``)."""
    return isinstance(target, str) and target == STDOUT


def write_json(target: Path | str, doc: Any) -> None:
    """Write ``doc`` as JSON (non-finite numbers as null) to the file ``target``, or to stdout for
    :data:`STDOUT`: one document and a newline, so ``pard ... --json - | jq`` reads it whole."""
    text = json.dumps(clean(doc), indent=2)
    if is_stdout(target):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    else:
        Path(target).write_text(text)


def check_output(option: str, path: Path | str) -> None:
    """UsageError unless ``path``'s folder exists and is writable (checked before running); nothing to
    check for standard output (:data:`STDOUT`)."""
    if is_stdout(path):
        return
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{option} {str(path)!r} is a directory; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{option} {str(path)!r}: the folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {str(path)!r}: the folder {str(parent)!r} is not writable")
    # os.access says yes to root everywhere (e.g. /proc): open the file itself, as the run will at its end
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
        if not existed:
            path.unlink()
    except OSError as exc:
        raise UsageError(f"{option} {str(path)!r}: cannot write there: {exc.strerror or exc}") from None


def make_output_dir(option: str, path: Path) -> None:
    """Create the output folder ``path`` now (with its parents), so that a bad one fails before the run
    rather than after it: UsageError naming the option when it cannot be made."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {str(path)!r}: cannot create the folder: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {str(path)!r}: the folder is not writable")


def check_plot_suffix(path: Path) -> None:
    """UsageError unless ``path``'s suffix is a format matplotlib can write."""
    canvas = require("matplotlib.backend_bases", "cli", "figures").FigureCanvasBase
    formats = sorted(canvas.get_supported_filetypes())
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats:
        raise UsageError(f"--plot {str(path)!r}: unsupported figure format {suffix or '(no suffix)'!r}; "
                         f"use one of {', '.join('.' + f for f in formats)}")


def clean(x: Any) -> Any:
    """``x`` with non-finite floats as None and NumPy scalars as Python numbers (for JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return clean(x.item())
    return x
