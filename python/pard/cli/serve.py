"""``pard serve CONFIG``: serve a pipeline over HTTP (the command lives in :mod:`pard.serve.cli`)."""

from __future__ import annotations

from typing import Any

from ..serve.cli import add_parser, run

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """Add ``pard serve``."""
    add_parser(subparsers)
