"""Token counts on a Workload: the bundled Azure LLM trace's real pairs, draws from it, and validation."""

from __future__ import annotations

import csv
from datetime import datetime
from importlib import resources

import numpy as np
import pytest

import pard
from pard import workloads as wl


def _trace_rows() -> list[tuple[datetime, int, int]]:
    res = resources.files("pard").joinpath("data", "azure_llm_2023_conv.csv")
    with resources.as_file(res) as path, open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [(datetime.fromisoformat(r["TIMESTAMP"][:26]), int(r["ContextTokens"]), int(r["GeneratedTokens"]))
            for r in rows]


def test_bundled_trace_tokens_follow_their_requests_through_the_sort():
    rows = sorted(_trace_rows(), key=lambda r: r[0])  # stable: equal times keep file order
    w = wl.azure_llm_conv(tokens=True)
    assert w.has_tokens and w.max_tokens is None
    assert len(w) == len(rows)
    assert w.in_tokens.dtype == np.int32 and w.out_tokens.dtype == np.int32
    np.testing.assert_array_equal(w.in_tokens, [r[1] for r in rows])
    np.testing.assert_array_equal(w.out_tokens, [max(r[2], 1) for r in rows])
    np.testing.assert_array_equal(w.arrivals_s, wl.azure_llm_conv())


def test_an_unsorted_file_keeps_each_requests_tokens(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:15:47.0,10,1\n"
                 "2023-11-16 18:15:46.0,20,2\n"
                 "2023-11-16 18:15:48.5,30,0\n")
    with pytest.warns(pard.PardWarning, match="sorted"):
        w = wl.azure_llm(p, tokens=True)
    np.testing.assert_allclose(w.arrivals_s, [0.0, 1.0, 2.5])
    np.testing.assert_array_equal(w.in_tokens, [20, 10, 30])
    np.testing.assert_array_equal(w.out_tokens, [2, 1, 1])  # 0 generated still ends with one step


def test_draw_tokens_draws_real_pairs_seeded():
    pairs = {(r[1], max(r[2], 1)) for r in _trace_rows()}
    i, o = wl.draw_tokens(500, seed=3)
    assert i.shape == o.shape == (500,)
    assert all((int(a), int(b)) in pairs for a, b in zip(i, o))
    i2, o2 = wl.draw_tokens(500, seed=3)
    np.testing.assert_array_equal(i, i2)
    np.testing.assert_array_equal(o, o2)
    assert not np.array_equal(i, wl.draw_tokens(500, seed=4)[0])
    assert wl.draw_tokens(0)[0].shape == (0,)


@pytest.mark.parametrize("field, value, match", [
    ("out_tokens", [5, 0], r"out_tokens\[1\] = 0"),
    ("in_tokens", [-1, 2], r"in_tokens\[0\] = -1"),
    ("max_tokens", [1, 2**31], r"max_tokens\[1\]"),
    ("in_tokens", [1, 2, 3], r"in_tokens has shape \(3,\), expected \(2,\)"),
])
def test_bad_token_counts_name_the_field(field, value, match):
    with pytest.raises(pard.PardError, match=match):
        wl.Workload(arrivals_s=[0.0, 1.0], **{field: value})


def test_fractional_tokens_are_refused():
    with pytest.raises(pard.PardError, match="in_tokens"):
        wl.Workload(arrivals_s=[0.0, 1.0], in_tokens=[1.5, 2.0])
    with pytest.raises(pard.PardError, match="n must be"):
        wl.draw_tokens(2.0)  # type: ignore[arg-type]
