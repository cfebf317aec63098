"""The paper-reproduction helpers (bench/paper/common.py, e4_scale.scaled) build what they claim."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

PAPER = Path(__file__).resolve().parent.parent / "bench" / "paper"
sys.path.insert(0, str(PAPER))

import common as C  # noqa: E402
import e4_scale  # noqa: E402


@pytest.mark.parametrize("pattern,target", [("stable", 0.47), ("bursty", 1.2)])
def test_synthetic_patterns_have_the_papers_cv(pattern: str, target: float) -> None:
    """The stable and bursty patterns' CV of 1 s counts lies near the paper's 0.47 and 1.0-1.3 (long run)."""
    arr = C.arrivals(pattern, 800.0, 3000.0, seed=3)
    counts = np.bincount(np.floor(arr).astype(np.int64), minlength=3000)
    cv = counts.std() / counts.mean()
    assert abs(cv - target) < 0.2 * target
    assert abs(arr.size / 3000.0 - 800.0) < 0.1 * 800.0


def test_azure_pattern_is_the_bundled_trace_window_amplified() -> None:
    """The azure pattern keeps the trace's steady envelope (CV of 10 s counts well below 0.5) at the asked mean rate."""
    arr = C.arrivals("azure", 500.0, 1200.0, seed=0)
    assert arr.min() >= 0.0 and arr.max() < 1200.0
    assert np.all(np.diff(arr) >= 0)
    assert abs(arr.size / 1200.0 - 500.0) < 0.05 * 500.0
    c10 = np.bincount(np.floor(arr / 10.0).astype(np.int64), minlength=120)
    assert c10.std() / c10.mean() < 0.5


def test_azure_window_past_the_trace_is_refused() -> None:
    """Asking for more of the bundled trace than it holds raises ValueError naming duration_s."""
    with pytest.raises(ValueError, match="duration_s"):
        C.arrivals("azure", 100.0, 10_000.0)


def test_unknown_pattern_is_refused() -> None:
    """An unknown pattern name raises ValueError listing the valid ones."""
    with pytest.raises(ValueError, match="unknown pattern"):
        C.arrivals("wikipedia", 100.0, 10.0)


def test_stage_depths_and_drop_split_on_the_dag() -> None:
    """da's depths follow its DAG (fan-out at depth 1, join at the end) and the early/late split adds up."""
    sp = C.spec("da")
    depth = dict(zip([st.name for st in sp.stages], C.stage_depths(sp)))
    assert depth == {"person_detect": 0, "pose": 1, "face_detect": 1, "face_landmark": 2, "expression": 3}
    shares = {"person_detect": 0.5, "pose": 0.1, "face_detect": 0.1, "face_landmark": 0.2, "expression": 0.1}
    early, late = C.early_late_shares(sp, shares)
    assert early == pytest.approx(0.7) and late == pytest.approx(0.3)


@pytest.mark.parametrize("total", [11, 64, 257, 1000])
def test_scaled_keeps_the_total_and_the_proportions(total: int) -> None:
    """Scaling lv's workers gives exactly `total` workers, each stage within one of its proportional share."""
    base = C.spec("lv")
    w0 = np.array([st.workers for st in base.stages], dtype=float)
    sp = e4_scale.scaled(base, total)
    w = np.array([st.workers for st in sp.stages])
    assert w.sum() == total and (w >= 1).all()
    assert np.all(np.abs(w - w0 / w0.sum() * total) < 1.0)


def test_lambda_diagnostic_reads_every_sync_of_the_planner() -> None:
    """e3_lambda's w diagnostic sees one planner update per 1 s sync (8 s of lv: at least 8), for each of lv's 5 stages."""
    import e3_lambda

    out = e3_lambda.w_diagnostic(("stable", 0.1, 0, 8.0))
    assert out["syncs"] >= 8 and len(out["stages"]) == 5
    assert len(out["share_of_syncs_w_zero"]) == 5 and all(0.0 <= x <= 1.0 for x in out["share_of_syncs_w_zero"])
