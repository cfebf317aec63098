"""Tests of the planner (DESIGN §3.5): windows, mu, eps, the w Monte Carlo, DAG paths, ablation modes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner_oracle import downstream_wait_quantile  # the NumPy reference's Monte Carlo, for its extremes
from pard.planner import Planner, PlannerStage, window_for_cv


def irwin_hall_cdf(x: float, n: int) -> float:
    """CDF of the sum of n independent U(0,1) (Irwin-Hall), by its closed form."""
    return sum((-1) ** k * math.comb(n, k) * (x - k) ** n for k in range(int(math.floor(x)) + 1)) / math.factorial(n)


def irwin_hall_quantile(p: float, n: int) -> float:
    """The p-quantile of the Irwin-Hall distribution, by bisection on its CDF."""
    lo, hi = 0.0, float(n)
    for _ in range(100):
        mid = (lo + hi) / 2
        if irwin_hall_cdf(mid, n) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def chain(n: int, d: float = 0.1, *, max_batch: int = 1) -> list[PlannerStage]:
    """A chain of n stages with a constant duration d at every batch size."""
    return [
        PlannerStage(
            name=f"s{k}", batch_sizes=(1, 8), durations_s=(d, d), max_batch=max_batch,
            paths=(tuple(range(k + 1, n)),) if k < n - 1 else (), entry=(k == 0),
        )
        for k in range(n)
    ]


def empty(n: int) -> list[dict[str, np.ndarray]]:
    return [{} for _ in range(n)]


def test_design_constants_match_irwin_hall() -> None:
    """DESIGN's worked w values (1.24d, 0.84d, 0.44d, 0.10d) agree with the Irwin-Hall 0.1-quantile."""
    for n, expected in [(4, 1.24), (3, 0.84), (2, 0.44), (1, 0.10)]:
        assert abs(irwin_hall_quantile(0.1, n) - expected) < 0.01


def test_w_worked_example_before_any_wait_is_observed() -> None:
    """With no observed waits, w for 4,3,2,1 downstream stages of duration d is the Irwin-Hall 0.1-quantile (+-0.02d)."""
    d = 0.1
    planner = Planner(chain(5, d), lam=0.1, seed=1, policy="pard-paper")
    terms = planner.update(1.0, empty(5), [1] * 5)
    for k, n_down in enumerate([4, 3, 2, 1]):
        assert abs(terms[k].wait_quantile_s - irwin_hall_quantile(0.1, n_down) * d) <= 0.02 * d
        # no queueing observed, batch 1: downstream = sum d + w
        assert terms[k].downstream_s == pytest.approx(n_down * d + terms[k].wait_quantile_s)
    assert terms[4].downstream_s == 0.0


def test_w_worked_example_from_observed_uniform_waits() -> None:
    """Observed batch waits uniform on [0, d] give the same w values (+-0.02d) as the closed form."""
    d = 0.05
    rng = np.random.default_rng(7)
    stats = [{"batch_wait_s": rng.uniform(0, d, 4000), "batch_size": np.ones(4000)} for _ in range(5)]
    planner = Planner(chain(5, d), lam=0.1, seed=3, policy="pard-paper")
    terms = planner.update(1.0, stats, [1] * 5)
    for k, n_down in enumerate([4, 3, 2, 1]):
        assert abs(terms[k].wait_quantile_s - irwin_hall_quantile(0.1, n_down) * d) <= 0.02 * d


def test_wait_quantile_extremes() -> None:
    """lambda = 0 gives the sum of the smallest waits and lambda = 1 the sum of the largest."""
    rng = np.random.default_rng(0)
    waits = [np.array([0.01, 0.02, 0.05]), np.array([0.0, 0.03])]
    assert downstream_wait_quantile(waits, 0.0, rng, 5000) == pytest.approx(0.01)
    assert downstream_wait_quantile(waits, 1.0, rng, 5000) == pytest.approx(0.08)
    assert downstream_wait_quantile([], 0.1, rng) == 0.0


def test_lambda_one_equals_upper_bound_and_zero_lower() -> None:
    """Without observations, lambda=1 reproduces pard-upper's w = sum d and lambda=0 pard-lower's w = 0 (approx)."""
    d = 0.1
    hi = Planner(chain(3, d), lam=1.0, policy="pard-paper").update(1.0, empty(3), [1] * 3)
    lo = Planner(chain(3, d), lam=0.0, policy="pard-paper").update(1.0, empty(3), [1] * 3)
    assert hi[0].wait_quantile_s == pytest.approx(2 * d, rel=0.01)
    assert lo[0].wait_quantile_s == pytest.approx(0.0, abs=0.03 * d)  # min of 10^4 sums of 2 U(0,d): ~0.014d


def test_ablation_downstream_modes() -> None:
    """back/sf/lower/upper publish 0, sum d, sum q + sum d, sum q + 2 sum d for a 3-stage chain."""
    d, q = 0.1, 0.02
    stats = [{"qdelay_s": np.full(10, q), "batch_size": np.ones(10), "batch_wait_s": np.zeros(10)} for _ in range(3)]
    expect = {"pard-back": 0.0, "pard-sf": 2 * d, "pard-lower": 2 * q + 2 * d, "pard-upper": 2 * q + 4 * d,
              "pard-paper": 2 * q + 2 * d}  # observed waits are 0, so w = 0 for full pard-paper
    for name, value in expect.items():
        terms = Planner(chain(3, d), policy=name).update(1.0, stats, [1] * 3)
        assert terms[0].downstream_s == pytest.approx(value), name
        assert terms[2].downstream_s == 0.0


def test_linear_weighted_queue_delay() -> None:
    """Queueing delay is the linearly weighted mean over intervals in the window: newer intervals weigh more."""
    st = chain(1)
    p = Planner(st, window_s=4.0, adapt_window=False, policy="pard-paper")
    # intervals ending at 1,2,3,4 with delays 1,2,3,4 (one sample each); at now=4, start=0 -> weights 1/4..4/4
    for t, qv in zip([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]):
        terms = p.update(t, [{"qdelay_s": np.array([qv])}], [1])
    expected = sum(w * v for w, v in zip([1, 2, 3, 4], [1, 2, 3, 4])) / 10
    assert terms[0].queue_delay_s == pytest.approx(expected)
    # one more interval: the one ending at 1 leaves the window (end <= now - window)
    terms = p.update(5.0, [{"qdelay_s": np.array([5.0])}], [1])
    assert terms[0].queue_delay_s == pytest.approx((1 * 2 + 2 * 3 + 3 * 4 + 4 * 5) / 10)


def test_mu_from_rate_and_throughput() -> None:
    """mu = arrival rate / (workers * b / d(b)) with b the weighted recent batch size and d interpolated."""
    st = [PlannerStage("s", (1, 4), (0.010, 0.040), 4, (), True)]  # d(b) = 10 ms * b
    p = Planner(st, window_s=2.0, adapt_window=False, policy="pard-paper")
    terms = p.update(1.0, [{"arrival_s": np.linspace(0, 1, 300, endpoint=False),
                            "batch_size": np.array([2.0, 2.0])}], [2])
    # rate 300/s; throughput 2 workers * 2 / 0.020 = 200/s
    assert terms[0].in_rate == pytest.approx(300.0)
    assert terms[0].mu == pytest.approx(1.5)
    assert terms[0].batch_size == pytest.approx(2.0)


def test_eps_closed_form() -> None:
    """eps = sum |T_in - T_s| / sum T_in with T_s the running mean of the window's per-interval rates."""
    p = Planner(chain(1), window_s=10.0, adapt_window=False, policy="pard-paper")
    counts = [100, 300, 100, 300]
    for t, c in enumerate(counts, start=1):
        terms = p.update(float(t), [{"arrival_s": np.full(c, t - 0.5)}], [1])
    smooth = [100, 200, 500 / 3, 200]
    expected = sum(abs(c - s) for c, s in zip(counts, smooth)) / sum(counts)
    assert terms[0].eps == pytest.approx(expected)
    inst = Planner(chain(1), policy="pard-instant", window_s=10.0, adapt_window=False)
    for t, c in enumerate(counts, start=1):
        terms = inst.update(float(t), [{"arrival_s": np.full(c, t - 0.5)}], [1])
    assert terms[0].eps == 0.0


def test_dag_uses_longest_downstream_path() -> None:
    """A stage that fans out takes the larger of its downstream paths (here through the slow branch)."""
    mk = lambda name, d, paths, entry=False: PlannerStage(name, (1, 2), (d, d), 1, paths, entry)  # noqa: E731
    stages = [
        mk("detect", 0.01, ((1, 3), (2, 3)), True),
        mk("fast", 0.01, ((3,),)),
        mk("slow", 0.20, ((3,),)),
        mk("join", 0.02, ()),
    ]
    terms = Planner(stages, policy="pard-sf").update(1.0, empty(4), [1] * 4)
    assert terms[0].downstream_s == pytest.approx(0.22)
    assert terms[1].downstream_s == pytest.approx(0.02)
    full = Planner(stages, policy="pard-paper", lam=1.0).update(1.0, empty(4), [1] * 4)
    assert full[0].downstream_s == pytest.approx(0.44, rel=0.01)


def test_window_mapping() -> None:
    """The window maps CV into DESIGN's ranges, continuously and decreasingly."""
    assert window_for_cv(0.0) == 7.0
    assert window_for_cv(0.25) == 6.0
    assert window_for_cv(0.5) == 5.0
    assert window_for_cv(0.75) == 4.0
    assert window_for_cv(1.0) == 3.0
    assert window_for_cv(1.5) == 2.0
    assert window_for_cv(5.0) == 1.0
    cvs = np.linspace(0, 3, 301)
    ws = [window_for_cv(c) for c in cvs]
    assert all(a >= b for a, b in zip(ws, ws[1:]))
    with pytest.raises(ValueError, match="cv"):
        window_for_cv(-1.0)


def test_window_resizes_with_bursty_input() -> None:
    """A steady input keeps a long window; an on/off input (CV = 1) shrinks it to 3 s."""
    steady = Planner(chain(1), policy="pard-paper")
    bursty = Planner(chain(1), policy="pard-paper")
    for t in range(1, 21):
        steady.update(float(t), [{"arrival_s": np.full(100, t - 0.5)}], [1])
        bursty.update(float(t), [{"arrival_s": np.full(200 if t % 2 else 0, t - 0.5)}], [1])
    assert steady.window_s == 7.0
    assert bursty.window_s == pytest.approx(3.0)


def test_queue_delay_published_and_admission_open() -> None:
    """Every policy publishes the stage's own queueing delay (Dagor's signal) and admits everything."""
    for name in ["dagor", "pard-paper"]:
        t = Planner(chain(1), policy=name).update(1.0, [{"qdelay_s": np.array([0.05, 0.03])}], [1])[0]
        assert t.queue_delay_s == pytest.approx(0.04)
        assert t.admit_fraction == 1.0


def test_same_seed_same_terms() -> None:
    """Two planners with one seed give identical terms; another seed differs in the Monte Carlo part only."""
    a = Planner(chain(4), seed=5, policy="pard-paper").update(1.0, empty(4), [1] * 4)
    b = Planner(chain(4), seed=5, policy="pard-paper").update(1.0, empty(4), [1] * 4)
    c = Planner(chain(4), seed=6, policy="pard-paper").update(1.0, empty(4), [1] * 4)
    assert a == b
    assert a[0].wait_quantile_s != c[0].wait_quantile_s


def test_bad_arguments() -> None:
    """Bad arguments raise ValueError naming the parameter."""
    with pytest.raises(ValueError, match="lam"):
        Planner(chain(2), lam=1.5, policy="pard-paper")
    with pytest.raises(ValueError, match="window_s"):
        Planner(chain(2), window_s=0, policy="pard-paper")
    with pytest.raises(ValueError, match="unknown policy"):
        Planner(chain(2), policy="nope")
    with pytest.raises(ValueError, match="path"):
        Planner([PlannerStage("a", (1,), (0.1,), 1, ((0,),))], policy="pard-paper")
    p = Planner(chain(2), policy="pard-paper")
    with pytest.raises(ValueError, match="one entry per stage"):
        p.update(1.0, empty(1), [1, 1])
    p.update(1.0, empty(2), [1, 1])
    with pytest.raises(ValueError, match="increase"):
        p.update(1.0, empty(2), [1, 1])


def test_profile_interpolation_matches_stage_spec() -> None:
    """PlannerStage.duration agrees with config.StageSpec.duration at every integer batch (flat below, extrapolated above)."""
    from pard import config

    st = config.StageSpec(name="s", profile={2: 0.010, 4: 0.014, 8: 0.030}, max_batch=12)
    ps = PlannerStage.from_profile("s", st.profile, st.max_batch)
    for b in range(1, 13):
        assert ps.duration(float(b)) == pytest.approx(st.duration(b))
    assert ps.duration(3.0) == pytest.approx(0.012)  # halfway between the points of 2 and 4


def test_windowed_terms_of_every_stage_match_a_plain_reference() -> None:
    """q, b, in_rate, eps and mu of each of three stages over a sliding window equal a plain-Python evaluation of §3.5's formulas."""
    rng = np.random.default_rng(7)
    stages = [PlannerStage(f"s{k}", (1, 4), (0.01 * (k + 1), 0.03 * (k + 1)), 4, (), k == 0) for k in range(3)]
    win = 3.5
    p = Planner(stages, policy="pard-sf", window_s=win, adapt_window=False)
    history: list[tuple[float, float, list[tuple[int, list[float], list[float]]]]] = []
    now, last_b = 0.0, [1.0] * 3
    for step in range(12):
        dt = [1.0, 0.5, 1.5][step % 3]
        now += dt
        raw = []
        for k in range(3):
            q = [] if (step + k) % 4 == 0 else list(rng.uniform(0, 0.05, rng.integers(1, 6)))
            b = [] if (step + k) % 5 == 0 else [float(x) for x in rng.integers(1, 6, rng.integers(1, 4))]
            raw.append((int(rng.integers(0, 50)), q, b))
        workers = [1, 2, 3]
        terms = p.update(now, [{"arrival_s": np.zeros(na), "qdelay_s": np.array(q), "batch_size": np.array(b)}
                               for na, q, b in raw], workers)
        history.append((now, dt, raw))
        start = now - win
        kept = [(end, d, r) for end, d, r in history if end > start]
        for k, st in enumerate(stages):
            wts = [(end - start) / win for end, _, _ in kept]
            qw = sum(w * len(r[k][1]) for w, (_, _, r) in zip(wts, kept))
            exp_q = sum(w * sum(r[k][1]) for w, (_, _, r) in zip(wts, kept)) / qw if qw > 0 else 0.0
            bw = sum(w * len(r[k][2]) for w, (_, _, r) in zip(wts, kept))
            if bw > 0:
                last_b[k] = sum(w * sum(r[k][2]) for w, (_, _, r) in zip(wts, kept)) / bw
            exp_b = min(max(last_b[k], 1.0), 4.0)
            exp_d = 0.01 * (k + 1) + (exp_b - 1.0) * (0.02 * (k + 1)) / 3.0  # linear between (1, d1) and (4, 3 d1)
            rate = (sum(w * r[k][0] for w, (_, _, r) in zip(wts, kept))
                    / sum(w * d for w, (_, d, _) in zip(wts, kept)))
            rates = [r[k][0] / d for _, d, r in kept]
            smooth = [sum(rates[: i + 1]) / (i + 1) for i in range(len(rates))]
            exp_eps = sum(abs(a - s) for a, s in zip(rates, smooth)) / sum(rates) if sum(rates) > 0 else 0.0
            exp_mu = rate / (workers[k] * exp_b / exp_d)
            t = terms[k]
            # the planner keeps times as int64 ns: each delay is rounded to the nearest nanosecond
            assert t.queue_delay_s == pytest.approx(exp_q, rel=1e-12, abs=0.5e-9), (step, k)
            assert t.batch_size == pytest.approx(exp_b, rel=1e-12), (step, k)
            assert t.in_rate == pytest.approx(rate, rel=1e-12), (step, k)
            assert t.eps == pytest.approx(exp_eps, rel=1e-12, abs=1e-15), (step, k)
            assert t.mu == pytest.approx(exp_mu, rel=1e-12), (step, k)
            assert t.window_s == win


@pytest.mark.parametrize("zeros", [0.0, 0.1, 0.3, 0.95, 1.0])
@pytest.mark.parametrize("lam", [0.0, 0.1, 0.5, 1.0])
def test_nearest_rank_quantile_with_many_ties(zeros: float, lam: float) -> None:
    """The lambda-quantile is the round(lambda (M - 1))-th smallest value, also when one value (0) fills much of the sample."""
    from planner_oracle import _quantile

    rng = np.random.default_rng(int(zeros * 100) + int(lam * 10))
    m = 10_000
    x = np.where(rng.random(m) < zeros, 0.0, rng.choice([0.01, 0.02, 0.5], m) + rng.random(m) * (rng.random(m) < 0.5))
    expected = sorted(x.tolist())[round(lam * (m - 1))]
    assert _quantile(x, lam) == expected
    assert _quantile(x + 3.0, lam) == sorted((x + 3.0).tolist())[round(lam * (m - 1))]  # a non-zero minimum


def test_samples_must_be_an_int_within_the_limit() -> None:
    """samples outside 1..MAX_SAMPLES (or not an int) raises ValueError naming it, before any allocation."""
    from pard.planner import MAX_SAMPLES

    for bad in (0, MAX_SAMPLES + 1, 10**12, 1.5, True):
        with pytest.raises(ValueError, match=r"samples must be an int in 1\.\.1000000"):
            Planner(chain(2, 0.01), samples=bad, policy="pard-paper")  # type: ignore[arg-type]
    Planner(chain(2, 0.01), samples=MAX_SAMPLES, policy="pard-paper")


# ---------------------------------------------------------------- issue 9: pard's planner levers
import dataclasses  # noqa: E402

from pard.policies import POLICIES  # noqa: E402


def _paper_with(**kw: object) -> object:
    return dataclasses.replace(POLICIES["pard-paper"], name="variant", **kw)


def test_busy_mode_budgets_each_downstream_wait_by_its_stages_utilisation() -> None:
    """downstream="busy": w = sum rho_i d_i with rho_i = busy seconds / worker-seconds (hand-worked: stage 1
    busy 0.5 of 1 s, stage 2 busy 0.4 of 2 worker-seconds, d = 0.1: w at the entry = 0.05 + 0.02)."""
    d = 0.1
    stats = [{}, {"batch_size": np.ones(5), "batch_duration_s": np.full(5, d)},
             {"batch_size": np.ones(4), "batch_duration_s": np.full(4, d)}]
    t = Planner(chain(3, d), policy=_paper_with(downstream="busy"), window_s=1.0,
                adapt_window=False).update(1.0, stats, [1, 1, 2])
    assert t[0].wait_quantile_s == pytest.approx(0.5 * d + 0.2 * d)
    assert t[0].downstream_s == pytest.approx(2 * d + 0.07)
    assert t[1].downstream_s == pytest.approx(d + 0.2 * d) and t[2].downstream_s == 0.0


@pytest.mark.parametrize(("qdelay", "wait", "expect"), [
    (0.03, [0.0] * 5, 0.1 + 0.05),                # never waited for a batch: max(q, rho d) = rho d
    (0.07, [0.0] * 5, 0.1 + 0.07),                # ... and q above rho d: max(q, rho d) = q
    (0.03, [0.005] * 5, 0.1 + 0.05),              # a live formation's wait (a twentieth of d): the same
    (0.03, [0.1, 0.0, 0.0, 0.0, 0.0], 0.1 + 0.03 + 0.05),  # one batch waited a whole batch: q + rho d
])
def test_busy_mode_adds_the_running_batch_to_the_queue_only_where_a_stage_was_backlogged(
        qdelay: float, wait: list[float], expect: float) -> None:
    """downstream="busy", stage 1 busy half the second (rho 0.5, d = 0.1 s) with a mean queueing delay q:
    a request that waited in its queue for the running batch and was collected as it ended has q holding
    that residual, so the stage's wait is max(q, rho d); only where some request, once collected, waited
    for another batch (batch wait over a tenth of its batch's duration) is it q + rho d (DESIGN 3.1)."""
    d = 0.1
    stats = [{}, {"batch_size": np.ones(5), "batch_duration_s": np.full(5, d), "qdelay_s": np.full(5, qdelay),
                  "batch_wait_s": np.asarray(wait)}]
    t = Planner(chain(2, d), policy=_paper_with(downstream="busy"), window_s=1.0,
                adapt_window=False).update(1.0, stats, [1, 1])
    assert t[0].downstream_s == pytest.approx(expect)
    assert t[0].floor_downstream_s == pytest.approx(qdelay + d)  # step 1b's floor: sum q + sum d, unchanged
    assert t[0].outrank_downstream_s == pytest.approx(min(qdelay, d / 2) + d)  # a tier served first: min(q, d/2) + d


def test_outrank_term_caps_each_stage_below_at_half_its_batch_and_takes_the_worst_path() -> None:
    """outrank_downstream_s (the term of a tier served first below): per path, sum over its stages of
    min(q_i, d_i / 2) + d_i, the most over paths; the all-tier q_i of a stage with a backlog is what the lower
    tiers wait.  A fork 0 -> {1, 2}: stage 1 d 0.1 s q 0.3 s (backlogged: 0.05 + 0.1), stage 2 d 0.1 s
    q 0.02 s (0.02 + 0.1); the entry's term is the larger, 0.15; the floor keeps sum q + sum d = 0.4."""
    d = 0.1
    stats = [{}, {"batch_size": np.ones(5), "batch_duration_s": np.full(5, d), "qdelay_s": np.full(5, 0.3)},
             {"batch_size": np.ones(5), "batch_duration_s": np.full(5, d), "qdelay_s": np.full(5, 0.02)}]
    stages = chain(3, d)
    stages = [dataclasses.replace(stages[0], paths=((1,), (2,))), dataclasses.replace(stages[1], paths=()),
              stages[2]]
    t = Planner(stages, policy=_paper_with(downstream="busy"), window_s=1.0, adapt_window=False).update(
        1.0, stats, [1, 1, 1])
    assert t[0].outrank_downstream_s == pytest.approx(0.05 + d)
    assert t[0].floor_downstream_s == pytest.approx(0.3 + d)
    assert t[1].outrank_downstream_s == 0.0 and t[2].outrank_downstream_s == 0.0  # nothing below a sink


def test_busy_mode_utilisation_is_the_larger_of_window_and_last_interval() -> None:
    """rho over a 2 s window weighs the intervals 0.5 and 1: busy then idle gives 0.5 / 1.5 = 1/3 (the last
    interval's 0 is lower); idle then busy gives the last interval's 1 (a burst shows within one sync); a
    stage without workers counts as busy."""
    d = 0.1
    busy = [{}, {"batch_size": np.ones(10), "batch_duration_s": np.full(10, d)}]
    idle: list[dict[str, np.ndarray]] = [{}, {}]
    pol = _paper_with(downstream="busy")
    p = Planner(chain(2, d), policy=pol, window_s=2.0, adapt_window=False)
    p.update(1.0, busy, [1, 1])
    assert p.update(2.0, idle, [1, 1])[0].wait_quantile_s == pytest.approx(d / 3)
    q = Planner(chain(2, d), policy=pol, window_s=2.0, adapt_window=False)
    q.update(1.0, idle, [1, 1])
    assert q.update(2.0, busy, [1, 1])[0].wait_quantile_s == pytest.approx(d)
    r = Planner(chain(2, d), policy=pol, window_s=2.0, adapt_window=False)
    assert r.update(1.0, idle, [1, 0])[0].wait_quantile_s == pytest.approx(d)


def test_mu_at_capacity_measures_load_against_full_batches() -> None:
    """A stage with d(1) = 10 ms, d(8) = 20 ms serving 100 req/s in batches of 1: the paper's mu at the
    current batch size is 100 / (1 / 0.01) = 1.0; against full batches 100 / (8 / 0.02) = 0.25."""
    st = PlannerStage("s", (1, 8), (0.01, 0.02), 8, (), True)
    stats = [{"arrival_s": np.full(100, 0.5), "batch_size": np.ones(100)}]
    paper = Planner([st], policy="pard-paper", window_s=1.0, adapt_window=False).update(1.0, stats, [1])
    cap = Planner([st], policy=_paper_with(mu_at_capacity=True), window_s=1.0, adapt_window=False).update(
        1.0, stats, [1])
    assert paper[0].mu == pytest.approx(1.0) and cap[0].mu == pytest.approx(0.25)


def test_mu_at_capacity_entry_false_keeps_the_papers_mu_at_entry_stages_only() -> None:
    """The same stage twice in a chain, each serving 100 req/s in batches of 1 (d(1) = 10 ms, d(8) = 20 ms):
    with ``mu_at_capacity_entry=False`` the entry keeps the paper's mu, 100 / (1 / 0.01) = 1.0, and the
    stage below takes it against full batches, 100 / (8 / 0.02) = 0.25; with the default (True) both take
    0.25.  ``pard`` sets it False."""
    stages = [PlannerStage("a", (1, 8), (0.01, 0.02), 8, ((1,),), True),
              PlannerStage("b", (1, 8), (0.01, 0.02), 8, (), False)]
    stats = [{"arrival_s": np.full(100, 0.5), "batch_size": np.ones(100)} for _ in stages]
    split = Planner(stages, policy=_paper_with(mu_at_capacity=True, mu_at_capacity_entry=False), window_s=1.0,
                    adapt_window=False).update(1.0, stats, [1, 1])
    both = Planner(stages, policy=_paper_with(mu_at_capacity=True), window_s=1.0, adapt_window=False).update(
        1.0, stats, [1, 1])
    assert [t.mu for t in split] == pytest.approx([1.0, 0.25])
    assert [t.mu for t in both] == pytest.approx([0.25, 0.25])
    assert POLICIES["pard"].mu_at_capacity and not POLICIES["pard"].mu_at_capacity_entry


def test_correct_durations_scales_d_by_measured_over_profiled() -> None:
    """Batches that ran twice their profiled time double every d term and publish duration_scale 2;
    without the lever the scale stays 1."""
    d = 0.1
    stats = [{"batch_size": np.array([1, 1]), "batch_duration_s": np.array([2 * d, 2 * d])} for _ in range(3)]
    on = Planner(chain(3, d), policy=_paper_with(downstream="sf", correct_durations=True)).update(1.0, stats, [1] * 3)
    off = Planner(chain(3, d), policy="pard-sf").update(1.0, stats, [1] * 3)
    assert on[0].duration_scale == pytest.approx(2.0) and off[0].duration_scale == 1.0
    assert on[0].downstream_s == pytest.approx(4 * d) and off[0].downstream_s == pytest.approx(2 * d)
    # service rate at full batches: workers * B / (d(B) * scale) = 1 * 1 / 0.2
    assert on[1].service_rate == pytest.approx(5.0) and off[1].service_rate == pytest.approx(10.0)


def test_coherent_branches_share_the_most_loaded_branchs_mu() -> None:
    """A DAG 0 -> {1, 2 -> 3} -> 4: with coherent_branches, stages 2 and 3 (parallel to 1, joined at 4)
    publish stage 1's larger load factor, stage 1 the largest of 2 and 3, and 0 and 4 their own; without
    the lever every stage publishes its own."""
    d = 0.01
    def mk(name: str, paths: tuple[tuple[int, ...], ...], entry: bool = False) -> PlannerStage:
        return PlannerStage(name, (1,), (d,), 1, paths, entry)
    stages = [mk("a", ((1, 4), (2, 3, 4)), True), mk("b", ((4,),)), mk("c", ((3, 4),)), mk("e", ((4,),)),
              mk("j", ())]
    rates = [50, 200, 50, 20, 50]  # one worker at batch 1 serves 100 req/s: mu = rate / 100
    stats = [{"arrival_s": np.full(r, 0.5)} for r in rates]
    on = Planner(stages, policy=_paper_with(coherent_branches=True), window_s=1.0, adapt_window=False)
    off = Planner(stages, policy="pard-paper", window_s=1.0, adapt_window=False)
    mu_on = [t.mu for t in on.update(1.0, stats, [1] * 5)]
    mu_off = [t.mu for t in off.update(1.0, stats, [1] * 5)]
    assert mu_off == pytest.approx([0.5, 2.0, 0.5, 0.2, 0.5])
    assert mu_on == pytest.approx([0.5, 2.0, 2.0, 2.0, 0.5])
