"""``pard run`` step 6: write the JSON (the ``pard simulate --json`` schema plus ``live``, ``simulated``
and ``simulated_refit`` blocks) and the PNG of goodput and drops over time per policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..plotting import plot_reports
from ..report import comparison_dict
from .parsers import is_stdout, write_json

__all__ = ["write_outputs"]


def write_outputs(json_path: Path | str, plot_path: Path, reports: dict[str, Any], *, pipeline: str, trace: str,
                  load: float, title: str, simulated: dict[str, Any], refit: dict[str, Any],
                  live: dict[str, Any]) -> None:
    """Write ``json_path`` (or the JSON to stdout for ``-``) and ``plot_path``, their folders created."""
    doc = comparison_dict(reports, pipeline=pipeline, trace=trace, load=load)
    doc["mode"] = "live"
    doc["simulated"] = {n: r.to_dict() for n, r in simulated.items()}
    doc["simulated_refit"] = {n: r.to_dict() for n, r in refit.items()}
    doc["live"] = live
    if not is_stdout(json_path):
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
    write_json(json_path, doc)
    plot_path.parent.mkdir(parents=True, exist_ok=True)
    plot_reports(reports, plot_path, title=title)
