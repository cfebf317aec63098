"""bench/comparison.py's one-denominator view of autoscaled rows compares goodput, not each run's own ratio."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import comparison as C  # noqa: E402


def _row(dynamics: str, pard: tuple[float, float], nexus: tuple[float, float]) -> dict:
    pol = {"pard": {"goodput": pard[0], "goodput_bound": pard[1]}, "nexus": {"goodput": nexus[0], "goodput_bound": nexus[1]}}
    return {"pipeline": "da", "trace": "bursty", "bottleneck": "entry", "load": 1.3, "dynamics": dynamics, "policies": pol}


def test_common_lead_divides_both_goodputs_by_the_rows_largest_bound() -> None:
    """pard 420 of its 460 bound against nexus 309 of 330: (420 - 309) / 460 = +24.13 pp, though pard's own ratio is lower."""
    row = _row("autoscale", (420.0, 460.0), (309.0, 330.0))
    assert 420.0 / 460.0 < 309.0 / 330.0  # the per-run ratios rank nexus first
    assert C.common_lead(row) == pytest.approx((420.0 - 309.0) / 460.0 * 100)
    assert C.common_lead(_row("autoscale", (300.0, 330.0), (309.0, 330.0))) == pytest.approx(-9.0 / 330.0 * 100)


def test_common_bound_lines_cover_the_autoscaled_rows_only() -> None:
    """Two autoscaled rows (+24.13 and -2.73 pp) and a fixed one: median +10.70 pp, one row below -0.3 pp named."""
    rows = [_row("autoscale", (420.0, 460.0), (309.0, 330.0)), _row("autoscale", (300.0, 330.0), (309.0, 330.0)),
            _row("fixed-j0.3", (1.0, 100.0), (90.0, 100.0))]
    lines = C.common_bound_lines(rows, lambda r: r["dynamics"])
    assert len(lines) == 1
    assert "median pard − best baseline +10.70 pp" in lines[0] and "rows < −0.3 pp: 1" in lines[0]
    assert "worst autoscale -2.73 pp" in lines[0]
    assert C.common_bound_lines(rows[2:], lambda r: r["dynamics"]) == []
