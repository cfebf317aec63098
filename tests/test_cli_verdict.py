"""`pard run`'s verdict: pard against the best of today's serving systems first, then the best research
baseline, each with its band; the order and the fields of the human lines and of the JSON block."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pard.cli.verdict import GROUPS, TODAY, compare_pair, tie_band, verdict, verdict_lines, verdicts

PAIR_FIELDS = ["baseline", "goodput", "baseline_goodput", "gain", "band", "noise", "noise_measured", "machine_change",
               "drop_rate", "baseline_drop_rate", "outcome"]


class _Rep:
    """A report stand-in: goodput and drop rate only (no per-request outcomes: the fixed band applies)."""

    def __init__(self, goodput: float, drop_rate: float = 0.1) -> None:
        self.goodput = goodput
        self.drop_rate = drop_rate


class _Run(_Rep):
    """A report stand-in with per-request outcomes: ``counts[t]`` on-time requests sent in second ``t``."""

    def __init__(self, counts: list[int], t0_s: float = 100.0) -> None:
        send = np.concatenate([t0_s + t + np.linspace(0.1, 0.9, c) for t, c in enumerate(counts)])
        self.send_s = np.concatenate([send, [t0_s + 0.5]])  # plus one dropped request
        self.state = np.concatenate([np.ones(send.size, np.int8), [3]])
        self.t0_s = t0_s
        self.duration_s = float(len(counts))
        super().__init__(send.size / self.duration_s)


def _all_policies() -> dict[str, Any]:
    """Every group run, in pard run's default order plus pard-paper: ray-serve best of today, clipper++ of research."""
    return {"pard": _Rep(110.0, 0.05), "nexus": _Rep(100.0), "clipper++": _Rep(104.0), "triton": _Rep(80.0),
            "ray-serve": _Rep(90.0), "naive": _Rep(40.0), "pard-paper": _Rep(102.0)}


def test_groups_are_today_then_research() -> None:
    """The verdict's groups are today's serving systems (triton, ray-serve, naive), then the research baselines."""
    assert [key for key, _ in GROUPS] == ["today", "research"]
    assert TODAY == ("triton", "ray-serve", "naive")


def test_verdict_data_orders_groups_and_names_each_groups_best() -> None:
    """verdicts() gives today's group first with its baselines in run order, then research's (pard-paper included)."""
    v = verdicts(_all_policies())
    assert list(v) == ["today", "research"]
    today, research = v["today"], v["research"]
    assert list(today) == ["title", "baselines", "best", "each"]
    assert today["baselines"] == ["triton", "ray-serve", "naive"]
    assert research["baselines"] == ["nexus", "clipper++", "pard-paper"]
    assert today["best"]["baseline"] == "ray-serve" and research["best"]["baseline"] == "clipper++"
    assert [e["baseline"] for e in today["each"]] == today["baselines"]
    for group in (today, research):
        for pair in [group["best"], *group["each"]]:
            assert list(pair) == PAIR_FIELDS
    best = today["best"]
    assert best["gain"] == pytest.approx(110.0 / 90.0 - 1.0) and best["band"] == pytest.approx(0.02)
    assert best["noise_measured"] is False and best["machine_change"] is None and best["outcome"] == "ahead"
    assert best["drop_rate"] == 0.05 and best["baseline_drop_rate"] == 0.1
    assert research["best"]["gain"] == pytest.approx(110.0 / 104.0 - 1.0) and research["best"]["outcome"] == "ahead"


def test_verdict_lines_put_todays_serving_systems_first() -> None:
    """The human verdict is two lines, today's first; each names the group's members, its best, the figures and band."""
    lines = verdict_lines(verdicts(_all_policies()))
    assert len(lines) == 2
    assert lines[0].startswith("pard vs what serving systems do today (best of triton, ray-serve, naive: ray-serve): "
                               "pard beat it: goodput 110.0 vs 90.0 req/s, +22.2%, band +/-2.0 %")
    assert "each: triton +37.5% +/-2.0 %, ray-serve +22.2% +/-2.0 %, naive +175.0% +/-2.0 %." in lines[0]
    assert lines[1].startswith("pard vs the research baselines (best of nexus, clipper++, pard-paper: clipper++): "
                               "pard beat it: goodput 110.0 vs 104.0 req/s, +5.8%")
    assert "drop rate 5.0% vs 10.0%" in lines[1]
    assert verdict(_all_policies()) == "\n".join(lines)


def test_each_group_has_its_own_outcome() -> None:
    """pard can beat today's best and trail the research best in one run: each line says so on its own."""
    reps = {"pard": _Rep(95.0), "triton": _Rep(80.0), "nexus": _Rep(100.0)}
    today, research = verdict_lines(verdicts(reps))
    assert "pard beat it" in today and "NOT" not in today
    assert "pard did NOT beat it" in research and "-5.0%" in research
    assert research.endswith("see docs/live.md for why this happens.")
    tie = verdict_lines(verdicts({"pard": _Rep(98.5), "nexus": _Rep(100.0)}))
    assert len(tie) == 1 and tie[0].startswith("pard vs the research baselines") and "about equal" in tie[0]
    assert "fixed 2.0 %" in tie[0]


def test_a_group_not_run_is_none_and_has_no_line() -> None:
    """Without a research baseline its group is None and the verdict is today's line alone; without pard it is empty."""
    v = verdicts({"pard": _Rep(10.0), "naive": _Rep(5.0)})
    assert v["research"] is None and v["today"]["baselines"] == ["naive"] and len(verdict_lines(v)) == 1
    assert verdicts({"nexus": _Rep(1.0)}) == {} and verdict({"nexus": _Rep(1.0)}) == ""


def test_a_baseline_that_finished_nothing_has_no_gain() -> None:
    """A baseline with zero goodput has gain None, pard counts as ahead, and the line says the baseline served nothing."""
    pair = compare_pair(_Rep(5.0), "triton", _Rep(0.0))
    assert pair["gain"] is None and pair["outcome"] == "ahead"
    line = verdict_lines(verdicts({"pard": _Rep(5.0), "triton": _Rep(0.0)}))[0]
    assert "triton finished no request on time" in line


def test_tie_band_is_two_standard_errors_of_the_paired_per_second_difference() -> None:
    """Per-second differences +1/-1 over 10 s at 100 req/s give 2 * sqrt(10/9) / sqrt(10) / 100 = 2/300 (hand-worked)."""
    base = [100] * 10
    pard = [101 if t % 2 == 0 else 99 for t in range(10)]
    band, measured = tie_band(_Run(pard, t0_s=5.0), _Run(base, t0_s=70.0))  # own clocks, same arrivals
    assert measured and band == pytest.approx(2.0 / 300.0)
    # a lead of 1 % beats a measured band of 0.67 %; the same lead inside a wide band is a tie
    ahead = [c + 1 for c in pard]
    assert compare_pair(_Run(ahead), "nexus", _Run(base))["outcome"] == "ahead"
    noisy = [130 if t % 2 == 0 else 72 for t in range(10)]  # mean 101, differences +-29: band ~ 18 %
    line = verdict({"pard": _Run(noisy), "nexus": _Run(base)})
    assert "about equal" in line and "two standard errors" in line
    assert tie_band(_Run([5, 5, 5]), _Run([4, 4, 4])) == (0.02, False)  # 3 s: too short to measure


def test_band_widens_by_the_machine_speed_change_between_the_two_runs_compared() -> None:
    """A 5 % lead beats a fixed 2 % band; if pard's run saw a machine 10 % slower, the band is 12 % and it is a tie."""
    reps = {"pard": _Rep(105.0), "nexus": _Rep(100.0)}
    same = {"pard": {"machine_probe_s": [0.02, 0.02]}, "nexus": {"machine_probe_s": [0.02, 0.02]}}
    line = verdict(reps, same)
    assert "pard beat it" in line and "+/-2.0 %" in line and "+ 0.0 %" in line
    slower = {"pard": {"machine_probe_s": [0.022, 0.022]}, "nexus": {"machine_probe_s": [0.02, 0.02]}}
    line = verdict(reps, slower)
    assert "about equal" in line and "+/-12.0 %" in line and "10.0 % slower for pard's run than for nexus's" in line
    faster = {"pard": {"machine_probe_s": [0.018, 0.018]}, "nexus": {"machine_probe_s": [0.02, 0.02]}}
    line = verdict({"pard": _Rep(80.0), "nexus": _Rep(100.0)}, faster)  # -20 % beyond 2 % + 10 %
    assert "pard did NOT beat it" in line and "10.0 % faster" in line and "+/-12.0 %" in line
    # each comparison uses its own pair's probes: triton's matches pard's, nexus's does not
    info = dict(slower, triton={"machine_probe_s": [0.022, 0.022]})
    v = verdicts({"pard": _Rep(105.0), "triton": _Rep(100.0), "nexus": _Rep(100.0)}, info)
    assert v["today"]["best"]["outcome"] == "ahead" and v["today"]["best"]["machine_change"] == pytest.approx(0.0)
    assert v["research"]["best"]["outcome"] == "equal" and v["research"]["best"]["band"] == pytest.approx(0.12)
