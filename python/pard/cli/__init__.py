"""The ``pard`` command line: one module per subcommand, each with ``register(subparsers)`` and
``run(args) -> exit code``.

- :mod:`~pard.cli.simulate` -- ``pard simulate``: compare policies on a trace (discrete-event);
- :mod:`~pard.cli.run` -- ``pard run``: replay a real trace live under each policy (start here), in
  steps :mod:`~pard.cli.measure`, :mod:`~pard.cli.replay`, :mod:`~pard.cli.compare`, :mod:`~pard.cli.write`;
- :mod:`~pard.cli.profile` -- ``pard profile``: measure and save a profile;
- :mod:`~pard.cli.serve` -- ``pard serve``: serve a pipeline over HTTP (:mod:`pard.serve`);
- :mod:`~pard.cli.parsers` -- the argument parsers and console helpers they share (``--json -``: stdout);
- :mod:`~pard.cli.tiers` -- a csv trace's per-request tiers and SLOs: tier codes, the per-tier table, notes.

To add a subcommand, write ``pard/cli/<name>.py`` with ``register`` and ``run`` and add the module to
:data:`COMMANDS` below.  Exit codes: 0 success, 2 bad usage or bad input (the message names the
option and the value), 1 an unexpected internal error.  The CLI needs the ``pard[cli]`` extra.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from .._version import __version__
from ..errors import MissingExtraError, PardError, PardWarning, UsageError
from . import profile, run, serve, simulate

__all__ = ["main", "build_parser", "COMMANDS", "UsageError"]

#: The subcommand modules, in ``--help`` order.
COMMANDS = (simulate, run, profile, serve)


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is reported with its own usage (argparse
    would hand it back to the top-level parser, which prints ``pard``'s usage instead), naming the
    argument and the closest option of this subcommand."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            known = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            close = [f"{m[0]} for {x}" for x in extras if x.startswith("--")
                     for m in [difflib.get_close_matches(x.split("=")[0], known, 1, 0.75)] if m]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}; see {self.prog} --help")
        return ns, extras


def build_parser() -> argparse.ArgumentParser:
    """The ``pard`` argument parser with every subcommand of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog="pard", description="Proactive request dropping for DNN inference pipelines.")
    parser.add_argument("--version", action="version", version=f"pard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    sub.required = True
    for command in COMMANDS:
        command.register(sub)
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
        except MissingExtraError as exc:
            print(f"pard {args.command}: error: {exc}", file=sys.stderr)
            return 1
        except (PardError, ValueError, TypeError, OSError) as exc:
            print(f"pard {args.command}: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, no traceback
            print(f"pard {args.command}: interrupted", file=sys.stderr)
            return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
