"""Where pard keeps what it builds and measures on this machine: one rule, for every cache.

Measured profiles (:mod:`pard.profiling.cache`) and built ONNX stage models (:mod:`pard.models.onnx`)
live under :func:`cache_dir`.  A leaf module (it imports nothing of pard), so both can use it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """``$PARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/pard``, else ``~/.cache/pard``."""
    env = os.environ.get("PARD_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "pard"
