"""Figures of runs: goodput, drops and queueing delay over time, one line per policy.

Uses matplotlib with the non-interactive Agg backend (works headless, in CI and over SSH).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ._extras import require
from .errors import PardValueError

if TYPE_CHECKING:  # pragma: no cover
    from .report import Report

__all__ = ["plot_reports"]


def plot_reports(reports: Mapping[str, "Report"], path: str | Path, *, title: str | None = None) -> Path:
    """Write a three-panel figure of ``reports`` (policy -> Report of the same pipeline and arrivals).

    Panels, per second of send time: arrivals, the goodput bound's capacity and each policy's goodput
    (req/s); each policy's drops (dropped + rejected + late, req/s); each policy's queueing delay at the
    bottleneck stage (the stage with the largest mean queueing delay over all policies, ms,
    symmetric-log scale).

    Returns the path written.  Raises ValueError when ``reports`` is empty.
    """
    if not reports:
        raise PardValueError("reports must hold at least one Report, got none")
    require("matplotlib", "cli", "figures").use("Agg")
    plt = require("matplotlib.pyplot", "cli", "figures")

    first = next(iter(reports.values()))
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    t = np.arange(first.arrivals_per_s.size)
    axes[0].plot(t, first.arrivals_per_s, color="0.6", lw=1, label="arrivals")
    axes[0].plot(t, np.minimum(first.arrivals_per_s, first.capacity), color="0.3", lw=1, ls="--", label="min(arrivals, capacity)")
    qmeans = np.zeros(len(first.stage_names))
    for r in reports.values():
        qmeans += np.array([s.mean_queue_delay_s for s in r.stages])
    k = int(np.argmax(qmeans)) if qmeans.size else 0
    for name, r in reports.items():
        tt = np.arange(r.arrivals_per_s.size)
        axes[0].plot(tt, r.goodput_per_s, lw=1.2, label=name)
        axes[1].plot(tt, r.drops_per_s + r.late_per_s, lw=1.2, label=name)
        axes[2].plot(tt, r.queue_delay_per_s[k] * 1e3, lw=1.2, label=name)
    axes[0].set_ylabel("req/s")
    axes[0].set_title(title or f"{first.pipeline}: goodput")
    axes[1].set_ylabel("drops + late /s")
    axes[2].set_ylabel(f"queueing delay at {first.stage_names[k]} (ms)")
    axes[2].set_yscale("symlog", linthresh=1.0)  # a policy that never drops queues for seconds
    axes[2].set_xlabel("time (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
