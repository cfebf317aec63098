"""The LLM stages' lines of ``pard simulate``: per policy and LLM stage, the output-length predictor's
calibration (the share of finished requests whose length fell under the quantile used) and the stage's
drops and rejections by reason, read from each :class:`pard.Report`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._extras import require
from ..report import STATES, Report

__all__ = ["llm_rows", "llm_table"]


def llm_rows(report: Report) -> dict[str, dict[str, Any]]:
    """Per LLM stage name: ``quantile``, ``token_aware``, ``n`` (requests finished there), ``under_share``
    (their share whose length fell under the quantile predicted at their join; None before any finished),
    ``dropped_by_reason`` (reason -> requests dropped at that stage) and ``rejected_by_reason`` (reason ->
    requests it refused at admission: a full queue, a first token that cannot come in time).  Empty for a
    report without an LLM stage."""
    cal = report.llm_calibration or {}
    index = {s.name: k for k, s in enumerate(report.stages)}
    refused = report.state == STATES.index("rejected")
    out: dict[str, dict[str, Any]] = {}
    for name, c in cal.items():
        k = index[name]
        codes, counts = np.unique(report.reason[refused & (report.drop_stage == k)], return_counts=True)
        rejected = {report.reasons[int(r)] if 0 <= r < len(report.reasons) else str(int(r)): int(m)
                    for r, m in zip(codes, counts)}
        share = float(c["under_share"])
        out[name] = {"quantile": float(c["quantile"]), "token_aware": bool(c["token_aware"]), "n": int(c["n"]),
                     "under_share": None if math.isnan(share) else share,
                     "dropped_by_reason": dict(sorted(report.stages[k].dropped_by_reason.items())),
                     "rejected_by_reason": dict(sorted(rejected.items()))}
    return out


def llm_table(reports: Mapping[str, Report]) -> Any | None:
    """A rich Table, one row per policy and LLM stage (:func:`llm_rows`); None when no report has an LLM stage."""
    rows = {name: llm_rows(r) for name, r in reports.items()}
    if not any(rows.values()):
        return None
    table = require("rich.table", "cli", "comparison tables").Table(
        title="LLM stages: output-length calibration and drops by reason")
    for col in ["policy", "stage", "length\nquantile", "finished\nunder it", "drops and rejections by reason"]:
        table.add_column(col, justify="left" if col in ("policy", "stage", "drops and rejections by reason")
                         else "right", no_wrap=col != "drops and rejections by reason")
    for policy, stages in rows.items():
        for stage, row in stages.items():
            # a policy without token knowledge prices every request at the running mean, not a quantile
            q = f"{row['quantile']:g}" if row["token_aware"] else "mean"
            under = "-" if row["under_share"] is None else f"{row['under_share']:.1%} of {row['n']}"
            reasons = [f"dropped {k} {v}" for k, v in row["dropped_by_reason"].items() if v]
            reasons += [f"refused {k} {v}" for k, v in row["rejected_by_reason"].items() if v]
            table.add_row(policy, stage, q, under, ", ".join(reasons) or "-")
    return table
