"""Tests for pard.workloads: trace loaders, the bundled trace, generators, transforms, tiers."""

from __future__ import annotations

import csv
import math
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import pard
from pard import workloads as wl
from pard.errors import PardWarning, TraceError

LLM_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---- Azure LLM trace ------------------------------------------------------------------------


def test_azure_llm_small_file(tmp_path: Path) -> None:
    """Timestamps become float64 seconds from the first request, exactly; blank lines skipped."""
    p = write(
        tmp_path,
        "llm.csv",
        LLM_HEADER
        + "2023-11-16 18:15:46.5000000,374,44\n"
        + "2023-11-16 18:15:47.2500000,396,109\n"
        + "\n"
        + "2023-11-16 18:16:46.5000001,10,1\n",
    )
    a = wl.azure_llm(p)
    assert a.dtype == np.float64 and a.shape == (3,)
    np.testing.assert_allclose(a, [0.0, 0.75, 60.0000001], rtol=0, atol=1e-9)


def llm_file(rows: str) -> str:
    return LLM_HEADER + "2023-11-16 18:15:46.0,1,1\n" + rows


BAD_LLM: list[tuple[str, str, str]] = [
    ("empty file", "", "the file is empty"),
    ("header only", LLM_HEADER, "header but no rows"),
    ("wrong columns", "time,a,b\n1,2,3\n", "missing column(s) TIMESTAMP, ContextTokens, GeneratedTokens"),
    ("missing column", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,1\n", "missing column(s) GeneratedTokens"),
    ("too many fields", llm_file("2023-11-16 18:15:47.0,1,2,3\n"), "line 3 has 4 fields, but line 1 (the first) has 3"),
    ("too few fields", llm_file("2023-11-16 18:15:47.0,1\n"), "line 3, column 'GeneratedTokens': missing value"),
    ("bad timestamp", llm_file("2023-11-16 18:15:47.0,1,1\nyesterday,1,1\n"), "line 4, column 'TIMESTAMP': cannot parse 'yesterday'"),
    ("nan timestamp", llm_file("NaN,1,1\n"), "line 3, column 'TIMESTAMP': cannot parse 'NaN'"),
    ("numeric timestamp", llm_file("-5,1,1\n"), "line 3, column 'TIMESTAMP': cannot parse '-5'"),
    ("non-numeric tokens", llm_file("2023-11-16 18:15:47.0,many,1\n"), "line 3, column 'ContextTokens': 'many'"),
    ("negative tokens", llm_file("2023-11-16 18:15:47.0,1,-4\n"), "line 3, column 'GeneratedTokens': '-4'"),
]


@pytest.mark.parametrize("desc,text,needle", BAD_LLM, ids=[b[0] for b in BAD_LLM])
def test_azure_llm_bad_input(tmp_path: Path, desc: str, text: str, needle: str) -> None:
    """Each malformed LLM trace raises TraceError naming the file, line/column and problem."""
    p = write(tmp_path, "bad.csv", text)
    with pytest.raises(TraceError) as info:
        wl.azure_llm(p)
    assert str(p) in str(info.value)
    assert needle in str(info.value)


def test_missing_file_is_trace_error(tmp_path: Path) -> None:
    """A path that does not exist raises TraceError naming it."""
    with pytest.raises(TraceError, match="no such trace file"):
        wl.azure_llm(tmp_path / "nope.csv")


def test_unsorted_timestamps_are_sorted_with_a_count(tmp_path: Path) -> None:
    """Out-of-order timestamps are sorted, and the warning says how many were out of order."""
    p = write(
        tmp_path,
        "u.csv",
        LLM_HEADER
        + "2023-11-16 18:00:05,1,1\n"
        + "2023-11-16 18:00:01,1,1\n"  # earlier than its predecessor
        + "2023-11-16 18:00:03,1,1\n"
        + "2023-11-16 18:00:02,1,1\n",  # earlier than its predecessor
    )
    with pytest.warns(PardWarning, match=r"2 of 4 timestamps were earlier"):
        a = wl.azure_llm(p)
    np.testing.assert_array_equal(a, [0.0, 1.0, 2.0, 4.0])


# ---- the bundled trace ----------------------------------------------------------------------


def test_bundled_trace_matches_its_notice() -> None:
    """azure_llm_conv() has one arrival per data row and the NOTICE's rate and CV figures."""
    res = resources.files("pard").joinpath("data", "azure_llm_2023_conv.csv")
    with resources.as_file(res) as path, open(path, newline="") as f:
        rows = list(csv.reader(f))
    n_rows = len(rows) - 1
    assert n_rows == 19366  # NOTICE.md; the shared notes' 19 365 was `wc -l` with the header
    a = wl.azure_llm_conv()
    assert a.shape == (n_rows,) and a.dtype == np.float64
    assert a[0] == 0.0 and np.all(np.diff(a) >= 0)
    assert a[-1] == pytest.approx(3501.72, abs=0.01)
    assert n_rows / a[-1] == pytest.approx(5.53, abs=0.01)
    assert wl.cv(a, 1.0) == pytest.approx(0.50, abs=0.01)
    assert wl.cv(a, 10.0) == pytest.approx(0.27, abs=0.01)
    np.testing.assert_array_equal(wl.BUNDLED_TRACES["azure-conv"](), a)
    notice = resources.files("pard").joinpath("data", "NOTICE.md").read_text(encoding="utf-8")
    for needle in ("CC-BY 4.0", "Splitwise", "ISCA 2024", "Azure/AzurePublicDataset", "19 366"):
        assert needle in notice


# ---- Azure Functions ------------------------------------------------------------------------


def functions_file(rows: list[tuple[str, str, str, str, dict[int, Any]]]) -> str:
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(m) for m in range(1, 1441))
    lines = [header]
    for owner, app, fn, trig, counts in rows:
        vals = [str(counts.get(m, 0)) for m in range(1, 1441)]
        lines.append(",".join([owner, app, fn, trig, *vals]))
    return "\n".join(lines) + "\n"


def test_azure_functions_select_and_spread(tmp_path: Path) -> None:
    """Rows are selected by hash and summed per minute; uniform spread spaces them evenly."""
    p = write(
        tmp_path,
        "f.csv",
        functions_file(
            [
                ("o1", "a1", "f1", "http", {2: 2, 3: 1}),
                ("o1", "a1", "f2", "timer", {2: 2}),
                ("o2", "a2", "f3", "queue", {1: 5}),
            ]
        ),
    )
    one = wl.azure_functions(p, app="a1", function="f1")
    # minute 2 = [60, 120): 2 arrivals at 75, 105; minute 3: one at 150; shifted by 75
    np.testing.assert_allclose(one, [0.0, 30.0, 75.0])
    app = wl.azure_functions(p, app="a1")
    # minute 2 holds 4 arrivals: 60 + 7.5, 22.5, 37.5, 52.5; minute 3: 150
    np.testing.assert_allclose(app, np.array([67.5, 82.5, 97.5, 112.5, 150.0]) - 67.5)
    everything = wl.azure_functions(p, spread="poisson", seed=3)
    assert everything.size == 10
    np.testing.assert_array_equal(everything, wl.azure_functions(p, spread="poisson", seed=3))
    assert not np.array_equal(everything, wl.azure_functions(p, spread="poisson", seed=4))


def test_azure_functions_poisson_spread_stays_in_its_minute(tmp_path: Path) -> None:
    """Poisson spread keeps each minute's count inside that minute, at uniform times."""
    p = write(tmp_path, "g.csv", functions_file([("o", "a", "f", "http", {1: 5, 3: 4})]))
    x = wl.azure_functions(p, spread="poisson", seed=11)
    # minute 1 is [0, 60), minute 3 is [120, 180); times are shifted by the first arrival
    assert x.size == 9 and np.all(x[:5] < 60.0) and np.all(x[5:] - x[4] > 60.0)
    p = write(tmp_path, "h.csv", functions_file([("o", "a", "f", "http", {2: 20000})]))
    y = wl.azure_functions(p, spread="poisson", seed=12)
    assert y.size == 20000 and y.max() < 60.0
    # uniform on [0, 60) shifted by its minimum (~0.003 s): mean 30, std 60/sqrt(12)
    assert y.mean() == pytest.approx(30.0, abs=0.5)
    assert y.std() == pytest.approx(60.0 / math.sqrt(12.0), abs=0.5)


def test_azure_functions_bad_input(tmp_path: Path) -> None:
    """Missing minute columns, unknown hashes and bad counts raise TraceError with line/column."""
    good = functions_file([("o", "a", "f", "http", {1: 1})])
    p = write(tmp_path, "cols.csv", good.replace(",1440", ",minute1440", 1))
    with pytest.raises(TraceError, match="missing column\\(s\\) 1440"):
        wl.azure_functions(p)
    p = write(tmp_path, "ok.csv", good)
    with pytest.raises(TraceError, match="no row has HashApp == 'zz'"):
        wl.azure_functions(p, app="zz")
    for value, needle in (("-3", "'-3' is not a non-negative integer"), ("x", "'x'"), ("1.5", "1.5")):
        p = write(tmp_path, "v.csv", functions_file([("o", "a", "f", "http", {7: 1}), ("o", "b", "g", "http", {9: value})]))
        with pytest.raises(TraceError, match=f"line 3, column '9': .*{needle}"):
            wl.azure_functions(p)
    short = good.rstrip("\n").rsplit(",", 1)[0] + "\n"
    p = write(tmp_path, "short.csv", short)
    with pytest.raises(TraceError, match="line 2, column '1440': missing value"):
        wl.azure_functions(p)
    p = write(tmp_path, "zero.csv", functions_file([("o", "a", "f", "http", {})]))
    with pytest.raises(TraceError, match="no arrivals"):
        wl.azure_functions(p)
    with pytest.raises(TraceError, match="empty"):
        wl.azure_functions(write(tmp_path, "e.csv", ""))


# ---- per-second counts ----------------------------------------------------------------------


def test_per_second_counts(tmp_path: Path) -> None:
    """Line i holds the count of second i-1; uniform spread is exact, poisson keeps counts."""
    p = write(tmp_path, "c.txt", "0\n3\n0\n2\n\n")
    a = wl.per_second_counts(p)
    expected = np.array([1 + 1 / 6, 1.5, 1 + 5 / 6, 3.25, 3.75]) - (1 + 1 / 6)
    np.testing.assert_allclose(a, expected)
    b = wl.per_second_counts(p, spread="poisson", seed=7)
    # second 1 holds 3 arrivals, second 3 holds 2; shifted by the first arrival (in second 1)
    assert b.size == 5 and b[0] == 0.0 and np.all(np.diff(b) >= 0)
    assert np.all(b[:3] < 1.0) and np.all((b[3:] > 1.0) & (b[3:] < 3.0))
    np.testing.assert_array_equal(b, wl.per_second_counts(p, spread="poisson", seed=7))


BAD_COUNTS = [
    ("empty", "", "empty"),
    ("word", "3\nmany\n", "line 2: 'many' is not a non-negative integer"),
    ("negative", "3\n-1\n", "line 2: '-1'"),
    ("fraction", "3\n1.5\n", "line 2: '1.5'"),
    ("nan", "3\nnan\n", "line 2: 'nan'"),
    ("two fields", "3\n1,2\n", "line 2 has 2 fields, but line 1 (the first) has 1"),
    ("two fields first", "1,2\n3\n", "line 1: expected one integer per line"),
    ("blank inside", "3\n\n4\n", "line 2: blank line"),
    ("all zero", "0\n0\n", "no arrivals"),
]


@pytest.mark.parametrize("desc,text,needle", BAD_COUNTS, ids=[b[0] for b in BAD_COUNTS])
def test_per_second_counts_bad_input(tmp_path: Path, desc: str, text: str, needle: str) -> None:
    """Each malformed count file raises TraceError naming the file, line and problem."""
    p = write(tmp_path, "c.txt", text)
    with pytest.raises(TraceError) as info:
        wl.per_second_counts(p)
    assert str(p) in str(info.value) and needle in str(info.value)


# ---- generic CSV ----------------------------------------------------------------------------


def test_csv_timestamps_numeric_and_datetime(tmp_path: Path) -> None:
    """Numeric columns honour the unit; date-times and column positions work; origin is 0."""
    p = write(tmp_path, "t.csv", "id,ms,when\n1,1500,2024-01-01T00:00:01\n2,2500,2024-01-01T00:00:03.5\n3,4000,2024-01-01T00:01:00\n")
    np.testing.assert_allclose(wl.csv_timestamps(p, column="ms", unit="ms"), [0.0, 1.0, 2.5])
    np.testing.assert_allclose(wl.csv_timestamps(p, column=1, unit="ms"), [0.0, 1.0, 2.5])
    np.testing.assert_allclose(wl.csv_timestamps(p, column="ms"), [0.0, 1.0, 2.5])  # the name states ms
    np.testing.assert_allclose(wl.csv_timestamps(p, column="ms", unit="s"), [0.0, 1000.0, 2500.0])
    np.testing.assert_allclose(wl.csv_timestamps(p, column="when"), [0.0, 2.5, 59.0])


BAD_TS = [
    ("nan", "t\n1\nnan\n", "line 3, column 't': timestamp 'nan' is not finite"),
    ("inf", "t\n1\ninf\n", "line 3, column 't': timestamp 'inf' is not finite"),
    ("negative", "t\n1\n-2\n", "line 3, column 't': timestamp '-2' is negative"),
    ("non-numeric", "t\n1\n2\nsoon\n", "line 4, column 't': timestamp 'soon' is not a number"),
    ("empty field", "t,u\n1,2\n,3\n", "line 3, column 't': missing value"),
    ("header only", "t\n", "header but no rows"),
    ("unknown column", "x\n1\n", "no column 't'"),
]


@pytest.mark.parametrize("desc,text,needle", BAD_TS, ids=[b[0] for b in BAD_TS])
def test_csv_timestamps_bad_input(tmp_path: Path, desc: str, text: str, needle: str) -> None:
    """NaN, infinite, negative, non-numeric and missing timestamps raise TraceError with line/column."""
    p = write(tmp_path, "t.csv", text)
    with pytest.raises(TraceError) as info:
        wl.csv_timestamps(p, column="t", unit="s")
    assert str(p) in str(info.value) and needle in str(info.value)


def test_csv_requests_keeps_slo_and_tier_aligned(tmp_path: Path) -> None:
    """Per-request SLO and tier columns are permuted together with the sorted arrivals."""
    p = write(tmp_path, "r.csv", "t,slo,tier\n3,300,gold\n1,100,free\n2,200,gold\n")
    with pytest.warns(PardWarning, match="1 of 3"):
        w = wl.csv_requests(p, column="t", slo_column="slo", tier_column="tier", slo_unit="ms")
    np.testing.assert_allclose(w.arrivals_s, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(w.slo_s, [0.1, 0.2, 0.3])  # type: ignore[arg-type]
    assert w.tier_names == ("free", "gold")
    assert [w.tier_names[c] for c in w.tier] == ["free", "gold", "gold"]  # type: ignore[union-attr]
    bad = write(tmp_path, "b.csv", "t,slo\n1,0.2\n2,-1\n")
    with pytest.raises(TraceError, match="line 3, column 'slo': SLO '-1'"):
        wl.csv_requests(bad, column="t", slo_column="slo")


def test_assign_tiers_and_workload_validation() -> None:
    """Tier shares are honoured statistically, SLOs follow tiers, and bad Workloads are refused."""
    a = np.arange(20000, dtype=float) / 100
    w = wl.assign_tiers(a, {"gold": 1.0, "free": 3.0}, slo_s={"gold": 0.2, "free": 0.5}, seed=1)
    gold = w.tier == 0  # type: ignore[comparison-overlap]
    assert abs(gold.mean() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / a.size)
    np.testing.assert_array_equal(w.slo_s, np.where(gold, 0.2, 0.5))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="slo_s\\[1\\]"):
        wl.Workload(arrivals_s=np.zeros(2), slo_s=np.array([0.1, 0.0]))
    with pytest.raises(ValueError, match="tier codes"):
        wl.Workload(arrivals_s=np.zeros(2), tier=np.array([0, 2], dtype=np.int32), tier_names=("a", "b"))
    with pytest.raises(ValueError, match="no SLO for tier"):
        wl.assign_tiers(a, {"gold": 1.0}, slo_s={"free": 1.0})


# ---- generators -----------------------------------------------------------------------------


def test_poisson_rate_and_dispersion() -> None:
    """Poisson: count within 5 sigma of rate*duration, per-second index of dispersion near 1."""
    a = wl.poisson(200.0, 500.0, seed=5)
    assert abs(a.size - 100000) < 5 * math.sqrt(100000)
    assert a.min() >= 0 and a.max() < 500.0 and np.all(np.diff(a) >= 0)
    c = wl.bin_counts(a, 1.0)
    assert c.var() / c.mean() == pytest.approx(1.0, abs=0.15)
    gaps = np.diff(a)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.02)  # exponential gaps: CV 1
    np.testing.assert_array_equal(a, wl.poisson(200.0, 500.0, seed=5))


@pytest.mark.parametrize("target", [0.5, 1.0, 1.5])
def test_bursty_achieves_requested_cv(target: float) -> None:
    """Over 20 000 s the measured per-second CV is within 7 % of the target, mean rate within 3 %."""
    for seed in range(3):
        a = wl.bursty(50.0, 20000.0, target, seed=seed)
        assert wl.cv(a, 1.0) == pytest.approx(target, rel=0.07)
        assert a.size / 20000.0 == pytest.approx(50.0, rel=0.03)
        assert a.max() < 20000.0 and np.all(np.diff(a) >= 0)


def test_bursty_low_rate_on_off_regime() -> None:
    """A CV that needs a silent calm state (rate 5, CV 3) is still met within 10 %."""
    mm = wl.mmpp_parameters(5.0, 3.0)
    assert mm.rate_low == 0.0
    a = wl.bursty(5.0, 40000.0, 3.0, seed=2)
    assert wl.cv(a, 1.0) == pytest.approx(3.0, rel=0.1)


def test_bursty_exact_mean_per_window() -> None:
    """Every 300 s window brings rate*duration arrivals up to Poisson noise; the plain MMPP scatters as MMPP.count_cv(300) says."""
    rate, d = 1200.0, 300.0
    n = rate * d
    plain = []
    for seed in range(30):
        a = wl.bursty(rate, d, 1.5, seed=seed)
        assert abs(a.size - n) < 5 * math.sqrt(n), seed  # Poisson: sd sqrt(n) = 600 of 360 000
        b = wl.bursty(rate, d, 1.5, seed=seed, exact_mean=False)
        plain.append(b.size / d)
        # same burst/calm path, one scale factor: the per-second CV is that of the plain MMPP
        assert wl.cv(a, 1.0) == pytest.approx(wl.cv(b, 1.0), rel=0.01), seed
    theory = rate * wl.mmpp_parameters(rate, 1.5).count_cv(d)  # about 304 req/s
    assert float(np.std(plain)) == pytest.approx(theory, rel=0.4)
    assert float(np.std(plain)) > 100 * math.sqrt(n) / d  # far wider than the Poisson noise left with exact_mean


def test_bursty_rejects_cv_below_poisson_floor() -> None:
    """A CV below 1/sqrt(rate*bin) is impossible for this model and raises ValueError."""
    with pytest.raises(ValueError, match="Poisson floor"):
        wl.bursty(4.0, 100.0, 0.3)


def test_flash_crowd_multiplies_rate_in_window() -> None:
    """The crowd window's rate is factor times the base rate; default duration is 2*start+length."""
    a = wl.flash_crowd(100.0, 5.0, 100.0, 50.0, seed=1)
    assert a.max() < 250.0
    inside = np.count_nonzero((a >= 100) & (a < 150)) / 50.0
    outside = np.count_nonzero((a < 100) | (a >= 150)) / 200.0
    assert inside == pytest.approx(500.0, rel=0.05) and outside == pytest.approx(100.0, rel=0.05)


def test_diurnal_peak_and_mean() -> None:
    """Over whole periods the mean rate is `rate`; the peak quarter is busier than the trough."""
    a = wl.diurnal(100.0, 2000.0, period=1000.0, amplitude=0.8, peak=250.0, seed=3)
    assert a.size / 2000.0 == pytest.approx(100.0, rel=0.03)
    ph = np.mod(a, 1000.0)
    near_peak = np.count_nonzero((ph >= 125) & (ph < 375))
    near_trough = np.count_nonzero((ph >= 625) & (ph < 875))
    # closed form: mean of 1 + 0.8 cos over the quarter around peak / trough
    q = 0.8 * math.sin(math.pi / 4) / (math.pi / 4)
    assert near_peak / near_trough == pytest.approx((1 + q) / (1 - q), rel=0.1)


GEN_BAD: list[tuple[Callable[[], Any], str]] = [
    (lambda: wl.poisson(0.0, 10.0), "rate"),
    (lambda: wl.poisson(1.0, float("nan")), "duration"),
    (lambda: wl.bursty(10.0, 10.0, -1.0), "cv"),
    (lambda: wl.flash_crowd(1.0, 2.0, -1.0, 1.0), "start"),
    (lambda: wl.diurnal(1.0, 10.0, amplitude=1.5), "amplitude"),
    (lambda: wl.scale([1.0, 2.0], 5.0, mode="stretch"), "mode"),  # type: ignore[arg-type]
    (lambda: wl.scale([1.0], 5.0), "two distinct"),
    (lambda: wl.cv([], 1.0), "empty"),
    (lambda: wl.window([1.0, -2.0], 0.0, 1.0), "negative"),
    (lambda: wl.window([1.0], 0.0, 0.0), "duration"),
]


@pytest.mark.parametrize("call,needle", GEN_BAD)
def test_bad_generator_and_transform_arguments(call: Callable[[], Any], needle: str) -> None:
    """Bad generator/transform arguments raise ValueError naming the argument."""
    with pytest.raises(ValueError, match=needle):
        call()


# ---- transforms -----------------------------------------------------------------------------


def test_scale_amplify_keeps_time_scale_and_hits_rate() -> None:
    """amplify: same span, expected rate = target, bin envelope follows the trace's envelope."""
    trace = wl.azure_llm_conv()
    out = wl.scale(trace, 200.0, bin=10.0, seed=1)
    k = wl.bin_counts(trace, 10.0).size
    assert out.max() < k * 10.0
    total = 200.0 * k * 10.0
    assert abs(out.size - total) < 5 * math.sqrt(total)
    env_in = wl.bin_counts(trace, 10.0)
    env_out = np.bincount((out // 10.0).astype(int), minlength=k)[:k]
    assert np.corrcoef(env_in, env_out)[0, 1] > 0.95
    np.testing.assert_array_equal(out, wl.scale(trace, 200.0, bin=10.0, seed=1))


def test_scale_amplify_partial_last_bin_keeps_span_and_rate() -> None:
    """amplify: a last bin the trace only partly covers is not stretched to a whole bin.

    Arrivals every 10 ms on [0, 15) (1500, last at 14.99 s, so the trace ends at 15.00 s), 10 s bins:
    counts 1000 and 500 over 10 s and 5 s, a flat 100 req/s.  Scaled to 100 req/s the expected counts
    are 1000 in [0, 10) and 500 in [10, 15), and nothing at or after 15 s (a whole last bin gave
    1333 and 667 over [0, 20)).
    """
    out = wl.scale(np.arange(1500) * 0.01, 100.0, bin=10.0, seed=3)
    assert 14.5 < out.max() < 15.0
    first = int(np.count_nonzero(out < 10.0))
    assert abs(first - 1000) < 5 * math.sqrt(1000)
    assert abs((out.size - first) - 500) < 5 * math.sqrt(500)
    # a trace shorter than one bin: 100 arrivals every 5 ms on [0, 0.5) at 400 req/s -> ~200 in [0, 0.5)
    short = wl.scale(np.arange(100) * 0.005, 400.0, bin=10.0, seed=4)
    assert short.max() < 0.5
    assert abs(short.size - 200) < 5 * math.sqrt(200)
    # whole bins keep the documented envelope: every 10 ms on [0, 20) -> ~2000 per 10 s bin at 200 req/s
    whole = wl.scale(np.arange(2000) * 0.01, 200.0, bin=10.0, seed=5)
    assert 19.5 < whole.max() < 20.0
    assert abs(int(np.count_nonzero(whole < 10.0)) - 2000) < 5 * math.sqrt(2000)
    assert abs(whole.size - 4000) < 5 * math.sqrt(4000)


def test_scale_amplify_poisson_keeps_rate_and_duration() -> None:
    """The report's repro: scale(poisson(100, 15), 100) is about 100 req/s over about 15 s, in both
    the first 10 s and the last 5 s (it was ~130/s, then ~65/s, over 20 s)."""
    out = wl.scale(wl.poisson(100.0, 15.0, seed=0), 100.0, seed=0)
    assert 14.5 < out.max() < 15.1
    assert abs(out.size - 1500) < 5 * math.sqrt(1500)
    first = int(np.count_nonzero(out < 10.0))
    assert abs(first - 1000) < 5 * math.sqrt(1000)
    assert abs(int(np.count_nonzero((out >= 10.0) & (out < 15.0))) - 500) < 5 * math.sqrt(500)


def test_scale_compress_is_a_time_squeeze() -> None:
    """compress multiplies times by mean_rate/rate, so the new mean rate is exactly the target."""
    a = np.array([0.0, 1.0, 3.0, 10.0])
    out = wl.scale(a, 4.0, mode="compress")
    np.testing.assert_allclose(out, a * (0.4 / 4.0))
    assert wl.mean_rate(out) == pytest.approx(4.0)


def test_window_and_cv_closed_forms() -> None:
    """window keeps [start, start+duration) shifted to 0; cv of counts [1, 3] is 0.5."""
    a = np.array([0.5, 1.0, 2.0, 2.5, 3.0])
    np.testing.assert_allclose(wl.window(a, 1.0, 2.0), [0.0, 1.0, 1.5])
    assert wl.cv([0.5, 1.2, 1.5, 1.9], 1.0) == pytest.approx(0.5)
    assert wl.cv([0.5, 1.2, 1.5, 1.9], 2.0) == pytest.approx(0.0)


def test_lazy_workloads_name() -> None:
    """pard.workloads resolves lazily to this package."""
    assert pard.workloads is wl


@pytest.mark.parametrize(
    "call",
    [
        lambda m: wl.poisson(1e9, 10.0, max_arrivals=m),
        lambda m: wl.bursty(1e9, 10.0, 1.5, max_arrivals=m),
        lambda m: wl.flash_crowd(1e6, 10.0, 100.0, 100.0, max_arrivals=m),
        lambda m: wl.diurnal(1e6, 1e4, max_arrivals=m),
        lambda m: wl.scale(np.array([0.0, 1.0, 100.0]), 1e9, max_arrivals=m),
    ],
)
def test_generators_refuse_huge_counts_before_allocating(call: Callable[[float], Any]) -> None:
    """Generators and scale raise TooManyArrivalsError naming the expected count and memory above the limit."""
    with pytest.raises(wl.TooManyArrivalsError, match=r"arrivals expected \(~[\d.]+ [GT]iB") as info:
        call(wl.MAX_ARRIVALS)
    assert info.value.expected > wl.MAX_ARRIVALS
    assert isinstance(info.value, ValueError)
    assert "max_arrivals=5e+07" in str(info.value)


def test_max_arrivals_keyword_sets_the_limit() -> None:
    """A lower max_arrivals refuses a small run; the default lets it through."""
    assert wl.poisson(100.0, 10.0).size > 0
    with pytest.raises(wl.TooManyArrivalsError, match=r"poisson\(rate=100, duration=10\)"):
        wl.poisson(100.0, 10.0, max_arrivals=500)


def test_bursty_warns_on_empty_or_short_windows() -> None:
    """bursty warns (PardWarning) when a window is silent or shorter than a few on/off cycles, and not for normal runs."""
    with pytest.warns(PardWarning, match=r"produced 0 arrivals .* far from the 1000 expected"):
        a = wl.bursty(100.0, 10.0, cv=2.0, seed=0)
    assert a.size == 0
    with pytest.warns(PardWarning, match="burst/calm cycles"):
        wl.bursty(100.0, 300.0, 5.0, seed=0)
    import warnings as _w

    with _w.catch_warnings():
        _w.simplefilter("error")
        b = wl.bursty(400.0, 600.0, 1.5, seed=1)
    assert abs(b.size - 240_000) < 5 * math.sqrt(240_000)


def test_messages_show_numpy_values_as_plain_numbers() -> None:
    """Argument errors quote NumPy scalars as plain numbers (0.01), never np.float64(0.01)."""
    for call in (lambda: wl.mmpp_parameters(np.float64(100.0), np.float64(0.01)),
                 lambda: wl.diurnal(10.0, 10.0, amplitude=np.float64(1.5)),
                 lambda: wl.poisson(np.float64(-1.0), 1.0)):
        with pytest.raises(ValueError) as info:
            call()
        assert "np." not in str(info.value)


def test_scale_warns_how_many_arrivals_were_out_of_order() -> None:
    """scale() on unsorted input warns (PardWarning) with the out-of-order count, and matches scaling the sorted input."""
    unsorted = np.array([3.0, 1.0, 2.0, 5.0, 4.0, 6.0])  # 2 times earlier than their predecessor
    with pytest.warns(PardWarning, match=r"2 of 6 arrival times were earlier"):
        out = wl.scale(unsorted, 10.0, mode="compress")
    np.testing.assert_allclose(out, wl.scale(np.sort(unsorted), 10.0, mode="compress"))
    with pytest.warns(PardWarning, match="2 of 6"):
        wl.scale(unsorted, 10.0, seed=3)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wl.scale(np.sort(unsorted), 10.0, seed=3)


def test_generators_reject_non_real_rates() -> None:
    """A rate given as a str, bool or complex raises TypeError naming the argument instead of being converted."""
    for bad in ("10", True, 1 + 0j, None):
        with pytest.raises(TypeError, match=r"rate must be a real number"):
            wl.poisson(bad, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="duration"):
        wl.poisson(10, "5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rate"):
        wl.scale(np.array([0.0, 1.0, 2.0]), "10")  # type: ignore[arg-type]
    assert wl.poisson(np.float64(100.0), np.int64(1)).dtype == np.float64


def test_csv_loaders_read_a_unit_the_column_name_states_as_the_cli_does(tmp_path: Path) -> None:
    """Columns ``ts_ms`` and ``slo_ms``: csv_timestamps and csv_requests read milliseconds, as load_requests
    (and so ``pard simulate``) does; they read seconds until 2026-12-03, 1000x too long and with an SLO of
    400 s, silently (a new user's test). A unit passed explicitly still wins; a bare ``ts`` stays seconds."""
    path = tmp_path / "req.csv"
    path.write_text("ts_ms,slo_ms,ts\n0,400,0\n1500,250,1.5\n2500,400,2.5\n")
    assert wl.csv_timestamps(path, column="ts_ms").tolist() == pytest.approx([0.0, 1.5, 2.5])
    assert wl.csv_timestamps(path, column="ts").tolist() == pytest.approx([0.0, 1.5, 2.5])
    assert wl.csv_timestamps(path, column="ts_ms", unit="s").tolist() == pytest.approx([0.0, 1500.0, 2500.0])
    w = wl.csv_requests(path, column="ts_ms", slo_column="slo_ms")
    assert w.arrivals_s.tolist() == pytest.approx([0.0, 1.5, 2.5]) and w.slo_s.tolist() == pytest.approx([0.4, 0.25, 0.4])
    same, _ = wl.load_requests(str(path), column="ts_ms", slo_column="slo_ms")
    assert same.arrivals_s.tolist() == pytest.approx(w.arrivals_s.tolist()) and same.slo_s.tolist() == pytest.approx(w.slo_s.tolist())
    assert wl.csv_requests(path, column="ts", slo_column="slo_ms", slo_unit="s").slo_s.tolist() == [400.0, 250.0, 400.0]
    with pytest.raises(pard.PardError, match="slo_unit must be one of"):
        wl.csv_requests(path, column="ts", slo_column="slo_ms", slo_unit="minutes")  # type: ignore[arg-type]


def test_a_flash_crowd_that_would_start_after_the_trace_ends_is_refused() -> None:
    """start 50 s, duration 30 s: the crowd would begin after the last arrival, so the trace would be plain
    Poisson traffic; it returned that silently until 2026-12-03 (a new user's test). A crowd that starts
    inside and runs past the end is clipped, as documented: its expected count is base x (30 + 9 x 5)."""
    with pytest.raises(pard.PardError, match=r"start must be < duration \(30 s\)"):
        wl.flash_crowd(100, 10, start=50, length=10, duration=30)
    arr = wl.flash_crowd(100, 10, start=25, length=10, duration=30, seed=1)
    assert abs(arr.size - 100 * (30 + 9 * 5)) < 5 * math.sqrt(100 * 75)
