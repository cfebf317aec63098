"""The run figure (pard.plotting): its per-tier panel and its title, checked against counts made here."""

from __future__ import annotations

import numpy as np
import pytest

import pard
from pard.plotting import TITLE_WIDTH, plot_reports, reports_figure

pytest.importorskip("matplotlib")


def _two_tier_reports() -> dict[str, pard.Report]:
    spec = pard.PipelineSpec(name="two-tier", slo=0.3, tiers={"gold": 4.0, "free": 1.0}, stages=[
        pard.StageSpec(name="a", profile={1: 0.01, 8: 0.04}, max_batch=8, workers=1, successors=["b"]),
        pard.StageSpec(name="b", profile={1: 0.01, 8: 0.05}, max_batch=8, workers=1)])
    arr = pard.workloads.poisson(spec.capacity().pipeline * 1.5, 12, seed=3)
    tiers = np.random.default_rng(3).integers(0, 2, arr.size)
    return pard.compare(spec, arr, ["pard", "nexus"], tiers=tiers)


def test_tier_panel_plots_each_policys_on_time_per_tier_and_second() -> None:
    import matplotlib.pyplot as plt

    reports = _two_tier_reports()
    fig = reports_figure(reports)
    try:
        assert len(fig.axes) == 4  # arrivals/goodput, drops, queueing delay, tiers
        lines = {ln.get_label(): ln.get_ydata() for ln in fig.axes[3].get_lines()}
        assert set(lines) == {f"{p} / {t}" for p in reports for t in ("gold (w 4)", "free (w 1)")}
        for policy, r in reports.items():
            for code, tier in enumerate(("gold (w 4)", "free (w 1)")):
                mine = [((r.send_s >= r.t0_s + s) & (r.send_s < r.t0_s + s + 1) & (r.state == 1) & (r.tier == code)).sum()
                        for s in range(r.arrivals_per_s.size)]
                np.testing.assert_array_equal(lines[f"{policy} / {tier}"], mine)
                assert sum(mine) == r.tiers[code].on_time  # the panel accounts for every on-time request
    finally:
        plt.close(fig)


def test_untiered_runs_keep_three_panels_and_a_long_title_is_wrapped(tmp_path) -> None:
    import matplotlib.pyplot as plt

    spec = pard.PipelineSpec(name="one", slo=0.2, stages=[pard.StageSpec(name="a", profile={1: 0.01, 4: 0.02}, max_batch=4)])
    reports = pard.compare(spec, pard.workloads.poisson(150.0, 5, seed=0), ["pard"])
    title = "one / " + "/".join(["a-rather-long-directory-name"] * 8) + "/trace.csv"
    fig = reports_figure(reports, title=title)
    try:
        assert len(fig.axes) == 3
        shown = fig.axes[0].get_title()
        assert shown.replace("\n", "").replace(" ", "") == title.replace(" ", "")  # nothing cut
        assert len(shown.splitlines()) > 1 and max(len(line) for line in shown.splitlines()) <= TITLE_WIDTH
    finally:
        plt.close(fig)
    assert plot_reports(reports, tmp_path / "f.png", title=title).stat().st_size > 0


def test_an_empty_mapping_is_refused() -> None:
    with pytest.raises(pard.PardError, match="at least one Report"):
        reports_figure({})
