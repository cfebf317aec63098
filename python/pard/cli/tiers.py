"""Service tiers and per-request SLOs on the command line (DESIGN §3.7): the tier codes of a trace's
``--tier-column``, matched to the pipeline's tiers by name; the compact per-tier table printed under the
comparison when the pipeline has more than one tier; and the one-line notes on tiers nobody assigned
and on a trace's ``tier``/``slo`` columns that no option read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ..errors import PardValueError, UsageError
from ..workloads import Workload, csv_header

__all__ = ["tier_codes", "tier_table", "untiered_note", "unused_columns_note"]

# the column names a user plainly meant as per-request tiers or SLOs ("tier", "slo", "slo_ms", "SLO (s)")
_TIER_NAME = re.compile(r"^tiers?$", re.IGNORECASE)
_SLO_NAME = re.compile(r"^slo(?:[\s_]*\(?(?:s|ms)\)?)?$", re.IGNORECASE)


def tier_codes(workload: Workload, spec: Any, column: str) -> np.ndarray:
    """The workload's tiers as codes of ``spec.tiers`` (matched by name), or UsageError naming
    ``--tier-column``, the tier values the pipeline lacks and the tiers it has."""
    try:
        codes = workload.tier_codes_for(spec.tiers)
    except PardValueError:
        unknown = ", ".join(repr(n) for n in workload.tier_names if n not in spec.tiers)
        have = (f"its tiers: {', '.join(spec.tiers)}" if spec.tiers else
                "it declares none: add tiers: {NAME: WEIGHT, ...} to its spec")
        raise UsageError(f"--tier-column {column!r}: the trace's tier(s) {unknown} are not tiers of pipeline "
                         f"{spec.name!r} ({have})") from None
    assert codes is not None  # the workload was read with a tier column
    return codes


def tier_table(reports: Mapping[str, Any]) -> Any:
    """A compact rich Table: per policy, the weighted goodput and each tier's on-time / dropped counts; the
    column heads give each tier's weight and submitted requests (the same for every policy: same arrivals)."""
    table = require("rich.table", "cli", "the pard command").Table(
        title="per tier: on time / dropped (weight, submitted)")
    table.add_column("policy")
    table.add_column("weighted\ngoodput/s", justify="right")
    for t in next(iter(reports.values())).tiers:
        table.add_column(f"{t.name}\n(x{t.weight:g}, {t.submitted})", justify="right")
    for name, r in reports.items():
        table.add_row(name, f"{r.weighted_goodput:.1f}", *(f"{t.on_time} / {t.dropped}" for t in r.tiers))
    return table


def untiered_note(spec: Any) -> str | None:
    """For a pipeline with several tiers and a trace without them: which tier every request then gets."""
    if len(spec.tiers) < 2:
        return None
    first = next(iter(spec.tiers))
    return (f"pipeline {spec.name!r} declares tiers {', '.join(spec.tiers)} but the trace gives none: every request "
            f"is in the first, {first!r} (--tier-column NAME reads each request's tier from a csv trace)")


def unused_columns_note(trace: str, *, tier_column: str | None, slo_column: str | None,
                        how: str = "pass {uses} to use {them}") -> str | None:
    """One line naming a csv trace's ``tier``/``slo`` columns that no option read and ``how`` to use them
    (``{uses}`` in it becomes the options, e.g. ``--tier-column tier``, and ``{them}`` "it" or "them");
    None when there is none."""
    header = csv_header(Path(trace))
    tier = next((h for h in header if _TIER_NAME.match(h.strip())), None) if tier_column is None else None
    slo = next((h for h in header if _SLO_NAME.match(h.strip())), None) if slo_column is None else None
    if tier is None and slo is None:
        return None
    named = [(opt, h) for opt, h in (("--tier-column", tier), ("--slo-column", slo)) if h is not None]
    what = " and ".join(repr(h) for _, h in named)
    uses = " and ".join(f"{opt} {h}" for opt, h in named)
    many = len(named) > 1
    return (f"the trace's column{'s' if many else ''} {what} {'were' if many else 'was'} ignored; "
            f"{how.format(uses=uses, them='them' if many else 'it')}")
