"""pard.llm.OutputLengthPredictor against an independent NumPy reference: the exact weighted quantile of
the same decayed samples (the predictor's histogram answer lies in the exact answer's bin), the fallback
from a sparse cell to its pools, the hint cap, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pard
from pard.errors import PardTypeError, PardValueError
from pard.llm import OutputLengthPredictor

# ---- the reference: raw samples, weights 2^(-age / half_life), exact weighted quantiles ----------


def _bucket(in_tokens: int) -> int:
    return min(15, int(in_tokens).bit_length())


def _need(min_samples: int, half_life: float) -> float:
    """What `min_samples` newest samples weigh together (the predictor's threshold)."""
    f = 2.0 ** (-1.0 / half_life)
    return float(sum(f ** k for k in range(min_samples)))


def _exact_quantile(lengths: np.ndarray, weights: np.ndarray, target: float) -> int:
    """The smallest sample length whose cumulative weight reaches `target`."""
    order = np.argsort(lengths, kind="stable")
    cum = np.cumsum(weights[order])
    i = int(np.searchsorted(cum, min(target, cum[-1]), side="left"))
    return int(lengths[order][min(i, len(cum) - 1)])


def _bin_range(edges: list[int], length: int) -> tuple[int, int]:
    """(first, last) length of the bin that holds `length`."""
    i = int(np.searchsorted(edges, length, side="right")) - 1
    return edges[i], edges[i + 1] - 1


class _Reference:
    """The fallback rule and the quantile computed over the raw decayed samples, not a histogram."""

    def __init__(self, max_out: int, half_life: float, min_samples: int, tiers: int) -> None:
        self.max_out, self.half_life, self.tiers = max_out, half_life, min(tiers, 16)
        self.need = _need(min_samples, half_life)
        self.samples: list[tuple[int, int, int]] = []   # (bucket, folded tier, capped length)

    def observe(self, in_tokens: int, tier: int, out: int) -> None:
        self.samples.append((_bucket(in_tokens), min(tier, self.tiers - 1), min(out, self.max_out)))

    def answer_range(self, in_tokens: int, tier: int, p: float, generated: int,
                     edges: list[int]) -> tuple[int, int]:
        """The range the predictor's answer must lie in (the bin(s) of the exact quantile); `generated + 1`
        must be a bin's lower edge, so no bin is read in part."""
        n = len(self.samples)
        if n == 0:
            return self.max_out, self.max_out
        a = np.array(self.samples, dtype=np.int64)
        w = 2.0 ** (-(n - 1 - np.arange(n)) / self.half_life)
        if w.sum() < self.need * (1 - 1e-9):
            return self.max_out, self.max_out
        above = a[:, 2] > generated
        b, t = _bucket(in_tokens), min(tier, self.tiers - 1)
        levels = [above & (a[:, 0] == b) & (a[:, 1] == t), above & (a[:, 0] == b), above]
        chosen = levels[-1]
        for sel in levels:
            if w[sel].sum() >= self.need * (1 - 1e-9):
                chosen = sel
                break
        if not chosen.any():
            return self.max_out, self.max_out
        mass = w[chosen].sum()
        lo = _exact_quantile(a[chosen, 2], w[chosen], p * mass * (1 - 1e-9))
        hi = _exact_quantile(a[chosen, 2], w[chosen], p * mass * (1 + 1e-9))
        return _bin_range(edges, lo)[0], _bin_range(edges, hi)[1]


samples_st = st.lists(st.tuples(st.integers(0, 40_000), st.integers(0, 20), st.integers(1, 1500)),
                      min_size=0, max_size=150)


@settings(max_examples=150, deadline=None)
@given(samples=samples_st, max_out=st.sampled_from([7, 64, 1024]), half_life=st.floats(2.0, 1e6),
       min_samples=st.integers(1, 12), tiers=st.integers(1, 20), in_tokens=st.integers(0, 40_000),
       tier=st.integers(0, 20), p=st.floats(0.01, 0.99), bin_index=st.integers(0, 60))
def test_quantile_lies_in_the_exact_quantiles_bin(samples: list[tuple[int, int, int]], max_out: int,
                                                 half_life: float, min_samples: int, tiers: int, in_tokens: int,
                                                 tier: int, p: float, bin_index: int) -> None:
    """The answer lies in the bin of the exact weighted quantile of the decayed samples above `generated`,
    read from the first of cell, input pool, global pool holding min_samples' worth, the cap otherwise."""
    pred = OutputLengthPredictor(max_output_tokens=max_out, half_life=half_life, min_samples=min_samples,
                                 tiers=tiers)
    ref = _Reference(max_out, half_life, min_samples, tiers)
    for i, t, out in samples:
        pred.observe(i, t, out)
        ref.observe(i, t, out)
    edges = pred.bin_edges
    generated = edges[bin_index % (len(edges) - 1)] - 1
    lo, hi = ref.answer_range(in_tokens, tier, p, generated, edges)
    got = pred.quantile(in_tokens, tier, 0, p, generated)
    assert lo <= got <= hi, (got, lo, hi)
    assert got >= generated + 1


@settings(max_examples=150, deadline=None)
@given(samples=samples_st, half_life=st.floats(2.0, 1e6), min_samples=st.integers(1, 12),
       in_tokens=st.integers(0, 40_000), tier=st.integers(0, 20), generated=st.integers(0, 1023),
       hint=st.integers(1, 2000), ps=st.lists(st.floats(0.001, 0.999), min_size=2, max_size=6))
def test_bounds_monotone_and_hint_cap(samples: list[tuple[int, int, int]], half_life: float, min_samples: int,
                                      in_tokens: int, tier: int, generated: int, hint: int,
                                      ps: list[float]) -> None:
    """For any `generated` (a bin read in part included): generated + 1 <= answer <= cap, non-decreasing
    in p, and a hint caps the unhinted answer and nothing else."""
    pred = OutputLengthPredictor(min_samples=min_samples, half_life=half_life, tiers=3)
    for i, t, out in samples:
        pred.observe(i, t, out)
    answers = [pred.quantile(in_tokens, tier, 0, p, generated) for p in sorted(ps)]
    assert answers == sorted(answers)
    assert all(generated + 1 <= a <= 1024 for a in answers)
    if generated < min(hint, 1024):
        for p, a in zip(sorted(ps), answers):
            assert pred.quantile(in_tokens, tier, hint, p, generated) == min(a, hint)
    else:
        with pytest.raises(PardValueError, match="generated"):
            pred.quantile(in_tokens, tier, hint, 0.5, generated)


def test_long_run_with_renormalisation_matches_the_reference() -> None:
    """Thousands of samples at a short half-life (the weights are renormalised many times) still give the
    exact decayed quantile's bin."""
    rng = np.random.default_rng(7)
    pred = OutputLengthPredictor(half_life=3.0, min_samples=2)
    ref = _Reference(1024, 3.0, 2, 1)
    lengths = np.where(rng.random(6000) < 0.5, rng.integers(5, 40, 6000), rng.integers(300, 900, 6000))
    for k, out in enumerate(lengths):
        pred.observe(200, 0, int(out))
        ref.observe(200, 0, int(out))
        ref.samples = ref.samples[-300:]   # older samples weigh < 2^-100: below any answer's resolution
        if k % 500 == 499:
            for p in (0.1, 0.5, 0.9):
                lo, hi = ref.answer_range(200, 0, p, 0, pred.bin_edges)
                assert lo <= pred.quantile(200, 0, 0, p) <= hi


def test_prior_then_data_and_calibration() -> None:
    """Before min_samples the answer is the cap (the hint, else max_output_tokens); calibration counts
    actual <= predicted."""
    pred = OutputLengthPredictor(max_output_tokens=512, min_samples=3)
    assert pred.quantile(10, 0, 0, 0.5) == 512
    assert pred.quantile(10, 0, 100, 0.5) == 100
    for out in (20, 20, 20):
        pred.observe(10, 0, out)
    assert pred.quantile(10, 0, 0, 0.5) in range(*_bin_range(pred.bin_edges, 20))
    pred.record_calibration(50, 50)
    pred.record_calibration(50, 51)
    assert pred.calibration() == (2, 1)
    assert pred.observed == 3
    assert repr(pred) == ("OutputLengthPredictor(max_output_tokens=512, half_life=2000.0, min_samples=3, "
                          "tiers=1, observed=3)")
    assert isinstance(pred.cell_mass(10, 0), float) and math.isclose(pred.cell_mass(10, 0), _need(3, 2000.0))


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"half_life": 0.5}, "half_life"),
    ({"half_life": float("nan")}, "half_life"),
    ({"min_samples": 0}, "min_samples"),
    ({"tiers": 0}, "tiers"),
])
def test_bad_config_names_the_field(kwargs: dict[str, float], field: str) -> None:
    """A bad option raises PardValueError naming the field."""
    with pytest.raises(PardValueError, match=field):
        OutputLengthPredictor(**kwargs)  # type: ignore[arg-type]


def test_bad_arguments_raise_pard_errors() -> None:
    """Bad counts, p out of (0, 1) and float token counts raise pard's errors, naming the field."""
    pred = OutputLengthPredictor()
    with pytest.raises(PardValueError, match="out_tokens"):
        pred.observe(10, 0, 0)
    with pytest.raises(PardValueError, match="in_tokens"):
        pred.observe(-1, 0, 5)
    with pytest.raises(PardValueError, match="tier"):
        pred.quantile(10, -1, 0, 0.5)
    with pytest.raises(PardValueError, match="p must be"):
        pred.quantile(10, 0, 0, 1.0)
    with pytest.raises(PardValueError, match="hint"):
        pred.quantile(10, 0, -5, 0.5)
    with pytest.raises(PardValueError, match="predicted"):
        pred.record_calibration(0, 3)
    with pytest.raises(PardTypeError):
        pred.observe(10, 0, 5.5)  # type: ignore[arg-type]
    with pytest.raises(PardTypeError):
        OutputLengthPredictor(max_output_tokens=100.0)  # type: ignore[arg-type]
    assert isinstance(PardValueError("x"), pard.PardError)
    assert pred.observed == 0
