"""Helper of the CLI tests: run ``pard.cli.main`` in-process and capture what it printed."""

from __future__ import annotations

import pytest

from pard.cli import main


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``pard ARGV`` (argparse's exits on usage errors and --version too)."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
