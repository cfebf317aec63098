"""Figures of runs: goodput, drops and queueing delay over time, one line per policy.

Uses matplotlib with the non-interactive Agg backend (works headless, in CI and over SSH).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ._extras import require
from .errors import PardValueError

if TYPE_CHECKING:  # pragma: no cover
    from .report import Report

__all__ = ["plot_reports", "reports_figure"]

#: Characters per title line: a longer title (a trace path in the label) is wrapped, not cut at the
#: figure's edges.
TITLE_WIDTH = 90
_TIER_STYLES = ("-", "--", ":", "-.")


def plot_reports(reports: Mapping[str, "Report"], path: str | Path, *, title: str | None = None) -> Path:
    """Write :func:`reports_figure` of ``reports`` to ``path`` (the suffix picks the format).

    Returns the path written.  Raises ValueError when ``reports`` is empty.
    """
    fig = reports_figure(reports, title=title)  # selects the Agg backend before pyplot is imported here
    plt = require("matplotlib.pyplot", "cli", "figures")
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def reports_figure(reports: Mapping[str, "Report"], *, title: str | None = None) -> Any:
    """A matplotlib Figure, not yet saved, of ``reports`` (policy -> Report of the same pipeline and arrivals).

    Panels, per second of send time: arrivals, the goodput bound's capacity and each policy's goodput
    (req/s); each policy's drops (dropped + rejected + late, req/s); each policy's queueing delay at the
    bottleneck stage (the stage with the largest mean queueing delay over all policies, ms,
    symmetric-log scale).  When the pipeline declares two or more service tiers, a fourth panel gives
    each policy's on-time requests per second per tier (one line style per tier), so a policy that
    sheds the low tier to keep the high one shows it.  ``title`` is wrapped at :data:`TITLE_WIDTH`
    characters per line.

    Raises ValueError when ``reports`` is empty.  The caller closes the figure (``pyplot.close``).
    """
    if not reports:
        raise PardValueError("reports must hold at least one Report, got none")
    require("matplotlib", "cli", "figures").use("Agg")
    plt = require("matplotlib.pyplot", "cli", "figures")

    first = next(iter(reports.values()))
    tiered = len(first.tiers) > 1
    fig, axes = plt.subplots(4 if tiered else 3, 1, figsize=(10, 10.5 if tiered else 8), sharex=True)
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
    if tiered:
        _tier_panel(axes[3], reports)
    axes[0].set_ylabel("req/s")
    axes[0].set_title(textwrap.fill(title or f"{first.pipeline}: goodput", TITLE_WIDTH))
    axes[1].set_ylabel("drops + late /s")
    axes[2].set_ylabel(f"queueing delay at {first.stage_names[k]} (ms)")
    axes[2].set_yscale("symlog", linthresh=1.0)  # a policy that never drops queues for seconds
    # ticks at 1, 2, 5 x 10^k with plain labels: decades alone leave a 14-51 ms panel with no label
    ticker = require("matplotlib.ticker", "cli", "figures")
    axes[2].yaxis.set_major_locator(ticker.SymmetricalLogLocator(base=10, linthresh=1.0, subs=[1.0, 2.0, 5.0]))
    axes[2].yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    axes[-1].set_xlabel("time (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig


def _tier_panel(ax: Any, reports: Mapping[str, "Report"]) -> None:
    """On-time requests per second of send time, per policy (colour) and tier (line style)."""
    colours = [f"C{i}" for i in range(len(reports))]
    for colour, (name, r) in zip(colours, reports.items()):
        for code, (tier, series) in enumerate(zip(r.tiers, r.tier_goodput_per_s())):
            ax.plot(np.arange(series.size), series, lw=1.0, color=colour, ls=_TIER_STYLES[code % len(_TIER_STYLES)],
                    label=f"{name} / {tier.name} (w {tier.weight:g})")
    ax.set_ylabel("on time per tier (req/s)")
