"""End-to-end tests of pard.simulate / pard.compare (issue 4, items 6a, 6f, 6g) against independent expectations."""

from __future__ import annotations

import numpy as np
import pytest

import pard

from pard import config
from pard.errors import PardWarning
from pard.policies import POLICIES
from pard.sim import compare, simulate
from pard.wiring import budget_fractions


def stage(name: str, d: float, *, succ: list[str] | None = None, workers: int = 1, max_batch: int = 1) -> config.StageSpec:
    """A stage whose batch of b runs d * b seconds (no batching gain), or d flat when max_batch = 1."""
    return config.StageSpec(name=name, profile={1: d}, max_batch=max_batch, workers=workers, successors=succ or [])


def poisson(rate: float, n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).exponential(1.0 / rate, n).cumsum()


def test_md1_queueing_delay_matches_pollaczek_khinchine() -> None:
    """One stage, one worker, batch 1, naive, Poisson at rho = 0.7, deterministic D: mean wait within 3 % of rho D / (2 (1 - rho))."""
    d, rho, n = 0.01, 0.7, 200_000
    spec = config.PipelineSpec(name="md1", slo=1e6, stages=[stage("s", d)])
    arr = poisson(rho / d, n)
    r = simulate(spec, arr, "naive", jitter_cv=0.0)
    assert r.on_time == n
    wait = (r.finish_s - r.send_s - d).mean()  # queueing delay + batch wait: the M/D/1 waiting time
    pk = rho * d / (2 * (1 - rho))
    assert abs(wait - pk) / pk < 0.03
    # the queueing-delay series counts the time before a request is taken into a batch only
    assert r.stages[0].mean_queue_delay_s <= wait + 1e-12


def test_lone_request_latency_is_sum_of_durations() -> None:
    """A single request through an idle chain finishes after exactly the sum of the stage durations."""
    spec = config.PipelineSpec(name="c", slo=1.0, stages=[stage("a", 0.01, succ=["b"]), stage("b", 0.02, succ=["c"]),
                                                         stage("c", 0.03)])
    for name in POLICIES:
        r = simulate(spec, np.array([0.5]), name, jitter_cv=0.0)
        assert r.on_time == 1, name
        assert r.finish_s[0] - r.send_s[0] == pytest.approx(0.06, abs=1e-6), name


def test_dropped_branch_cancels_sibling_and_counts_once() -> None:
    """A DAG branch that cannot make the SLO drops the request once; its queued sibling copy is cancelled unexecuted."""
    with pytest.warns(PardWarning, match="can never be met"):  # deliberately unreachable SLO
        spec = config.PipelineSpec(name="dag", slo=0.5, stages=[
            stage("a", 0.001, succ=["slow", "side"], workers=4),
            stage("slow", 1.0, succ=["join"]),      # alone exceeds the SLO: pard drops at once
            stage("side", 0.05, succ=["join"]),     # 20 req/s for 100 req/s of input: copies queue here
            stage("join", 0.001),
        ])
    n = 500
    arr = np.arange(n) * 0.01 + 0.001
    r = simulate(spec, arr, "pard-back", jitter_cv=0.0)
    assert r.dropped == n
    assert r.stages[1].dropped == n and r.stages[2].dropped == 0  # counted once, at the branch that dropped it
    assert r.stages[3].executed == 0
    assert r.stages[2].executed < 0.05 * n  # the side branch's copies were cancelled in its queue
    assert r.submitted == r.on_time + r.late + r.dropped + r.rejected + r.failed


def overloaded_lv(seconds: float = 20.0, load: float = 1.3, seed: int = 2) -> tuple[config.PipelineSpec, np.ndarray]:
    spec = config.builtin("lv")
    return spec, poisson(load * spec.capacity().pipeline, int(seconds * load * spec.capacity().pipeline), seed)


def test_conservation_every_policy_and_naive_never_drops() -> None:
    """On an overloaded lv run every policy conserves requests; naive drops and rejects nothing."""
    spec, arr = overloaded_lv()
    reports = compare(spec, arr, list(POLICIES))
    for name, r in reports.items():
        assert r.submitted == arr.size
        assert r.submitted == r.on_time + r.late + r.dropped + r.rejected + r.failed, name
        assert 0 <= r.on_time <= r.goodput_bound_count * 1.02 + 50, name
    assert reports["naive"].dropped == 0 and reports["naive"].rejected == 0
    assert reports["naive"].late > 0  # it was overloaded
    assert reports["pard"].on_time > reports["naive"].on_time


def test_same_seed_identical_report_other_seed_differs() -> None:
    """The same seed reproduces a run exactly; another seed changes the jittered durations."""
    spec, arr = overloaded_lv(seconds=10)
    a = simulate(spec, arr, "pard", jitter_cv=0.3, seed=3)
    b = simulate(spec, arr, "pard", jitter_cv=0.3, seed=3)
    c = simulate(spec, arr, "pard", jitter_cv=0.3, seed=4)
    assert a.to_dict(detail=True) == b.to_dict(detail=True)
    assert np.array_equal(a.state, b.state) and np.array_equal(a.finish_s, b.finish_s)
    assert not np.array_equal(a.finish_s, c.finish_s)


def test_autoscale_adds_workers_after_cold_start() -> None:
    """With autoscaling, a stage under 3x its capacity gains workers, and only after the cold start."""
    spec = config.PipelineSpec(name="one", slo=0.5, stages=[stage("s", 0.01, workers=1)])
    arr = np.linspace(0, 30, 9000, endpoint=False)  # 300 req/s vs 100 req/s per worker
    r = simulate(spec, arr, "pard", jitter_cv=0.0, autoscale=True, cold_start_s=5.0)
    w = r.workers[0]
    assert w[:5].max() == 1.0          # nobody serves before the cold start ends
    assert w[-5:].min() >= 3.0         # ceil(300 / 100 * 1.2) = 4 eventually
    fixed = simulate(spec, arr, "pard", jitter_cv=0.0)
    assert r.on_time > fixed.on_time
    assert fixed.goodput_bound_per_second == pytest.approx(3000.0)  # 30 s x 100 req/s
    # work queued in second 29 may finish in second 30 (deadlines up to 30.5 s): one more second's worth
    assert fixed.goodput_bound_count == pytest.approx(3100.0)
    assert fixed.on_time <= fixed.goodput_bound_count


def test_autoscale_sizes_a_late_first_burst_on_its_own_rate() -> None:
    """A trace whose first arrival comes at 100 s is scaled like the same trace at 0 s: ceil(300 / 100 * 1.2) = 4 workers once the first cold start ends."""
    spec = config.PipelineSpec(name="one", slo=0.5, stages=[stage("s", 0.01, workers=1)])
    arr = np.linspace(0, 30, 9000, endpoint=False)  # 300 req/s vs 100 req/s per worker, from the first second
    for shift in (0.0, 100.0):
        r = simulate(spec, arr + shift, "pard", jitter_cv=0.0, autoscale=True, cold_start_s=5.0)
        assert r.t0_s == shift
        # the first sync (at t0 + 1 s) asks for 4 workers; they serve from t0 + 6 s on
        assert r.workers[0][7:28].tolist() == [4.0] * 21, shift


def test_autoscale_on_pipeline_sizes_downstream_for_what_the_entry_sheds() -> None:
    """Chain a -> b, 100 req/s per worker each, 300 req/s offered: sized on the pipeline's rate, b gets ceil(300 / 100 * 1.2) = 4 workers with a's first cold start; on its own input (a's 100 req/s output) only 2."""
    spec = config.PipelineSpec(name="ab", slo=0.5, stages=[stage("a", 0.01, succ=["b"]), stage("b", 0.01)])
    arr = np.linspace(0, 30, 9000, endpoint=False)
    kw = dict(jitter_cv=0.0, autoscale=True, cold_start_s=5.0)
    own = simulate(spec, arr, "nexus", **kw)
    offered = simulate(spec, arr, "nexus", autoscale_on="pipeline", **kw)
    assert own.workers[0][7] == offered.workers[0][7] == 4.0  # the entry sees the offered rate either way
    assert own.workers[1][7] == 2.0
    assert offered.workers[1][7:28].tolist() == [4.0] * 21
    with pytest.raises(ValueError, match="autoscale_on must be one of stage, pipeline, got 'entry'"):
        simulate(spec, arr, "nexus", autoscale_on="entry", **kw)


def test_prior_terms_budget_downstream_for_a_burst_before_the_first_sync() -> None:
    """100 requests at t = 0 into a (10 ms) -> b (50 ms), SLO 200 ms: with no terms a runs every batch that can leave it in time (t_e <= 0.19 s: 20), with the idle-interval prior (w = d_b, so 0.1 s downstream) only those with t_e <= 0.09 s (10); b finishes 3 either way."""
    import dataclasses

    spec = config.PipelineSpec(name="ab", slo=0.2, stages=[stage("a", 0.01, succ=["b"]), stage("b", 0.05)])
    arr = np.zeros(100)
    # the published terms alone (see below), without the entry's virtual queue, which sheds this burst down to
    # what b finishes (3 run at a) whatever the terms: the lever alone
    base = dataclasses.replace(POLICIES["pard"], live_queues=False, virtual_queue=False)
    plain = simulate(spec, arr, dataclasses.replace(base, name="pard-no-prior", prior_terms=False), jitter_cv=0.0)
    prior = simulate(spec, arr, dataclasses.replace(base, name="pard-prior"), jitter_cv=0.0)  # pard publishes the prior
    assert plain.stages[0].executed == 20 and prior.stages[0].executed == 10
    assert plain.on_time == prior.on_time == 3  # b: 0.06, 0.11, 0.16 s; the fourth would end at 0.21 s
    assert not POLICIES["pard-paper"].prior_terms and POLICIES["pard"].prior_terms


def test_live_queues_stop_an_entry_feeding_a_backlog_below() -> None:
    """One request at t = 0 (b runs it: b is measured), then the same burst of 100 at t = 0.5 s. b can finish
    only 3 of the burst in time whatever a does (0.56, 0.61, 0.66 s), 4 in all. Reading b's queue as it grows
    (live_queues, in pard), a stops sooner than on the prior's terms alone (1 + 10 run at a, as the test
    above): fewer requests run at a and are then lost at b, none fewer on time, and never fewer run at a
    than b finishes. (A stage below that has run nothing yet reports no queue: its rate would be the
    profile's word alone; tests/test_live_queues.py.)"""
    import dataclasses

    spec = config.PipelineSpec(name="ab", slo=0.2, stages=[stage("a", 0.01, succ=["b"]), stage("b", 0.05)])
    arr = np.concatenate([[0.0], np.full(100, 0.5)])
    # without the entry's virtual queue, which sheds the burst down to what b finishes either way: the lever alone
    base = dataclasses.replace(POLICIES["pard"], virtual_queue=False)
    off = simulate(spec, arr, dataclasses.replace(base, name="pard-no-live", live_queues=False), jitter_cv=0.0)
    live = simulate(spec, arr, base, jitter_cv=0.0)
    assert off.on_time == live.on_time == 4
    assert 4 <= live.stages[0].executed < off.stages[0].executed == 11
    assert live.invalid_rate < off.invalid_rate


def test_prior_terms_leave_the_planner_untouched() -> None:
    """Planner.prior_terms works on a copy: the next update gives what a planner that never computed them gives."""
    from pard.planner import Planner
    from pard.wiring import planner_stages

    spec = config.builtin("lv")
    # the keys Planner.update reads (the simulator's take_stats): two arrivals and one batch of 2 per stage
    stats = [{"arrival_s": np.array([0.1, 0.2]), "qdelay_s": np.array([0.01, 0.02]), "batch_size": np.array([2]),
              "batch_wait_s": np.array([0.004]), "batch_duration_s": np.array([0.03])} for _ in spec.stages]
    a, b = (Planner(planner_stages(spec), policy="pard-paper", seed=3) for _ in range(2))  # Monte Carlo draws
    idle = a.prior_terms(1.0, [1] * len(spec.stages))  # b never computes them
    assert a.terms is None
    assert all(t.in_rate == 0.0 and t.mu == 0.0 and t.downstream_s >= 0.0 for t in idle)
    assert a.update(1.0, stats, [1] * len(spec.stages)) == b.update(1.0, stats, [1] * len(spec.stages))
    assert a.update(2.0, stats, [1] * len(spec.stages)) == b.update(2.0, stats, [1] * len(spec.stages))
    assert idle != a.terms


def test_planner_start_rejects_a_second_start() -> None:
    """A second Planner.start (the first interval already begun) is an error that names the earlier time."""
    from pard.planner import Planner
    from pard.wiring import planner_stages

    p = Planner(planner_stages(config.builtin("tm")), policy="pard")
    p.start(10.0)
    with pytest.raises(ValueError, match=r"before the first update \(the last was at 10.0\)"):
        p.start(11.0)


def test_budget_fractions_along_longest_path() -> None:
    """clipper++/nexus stage shares are d_k(max batch) over the longest path's sum."""
    spec = config.builtin("da")
    f = dict(zip(spec.stage_names, budget_fractions(spec)))
    total = spec.longest_path_duration()
    for st in spec.stages:
        assert f[st.name] == pytest.approx(st.duration(st.max_batch) / total)


def test_bad_arguments_name_the_field() -> None:
    """Bad arguments raise errors that name the argument and the value."""
    spec = config.builtin("tm")
    with pytest.raises(ValueError, match="sorted"):
        simulate(spec, [1.0, 0.5])
    with pytest.raises(ValueError, match="not finite"):
        simulate(spec, [0.0, np.nan])
    with pytest.raises(ValueError, match="jitter_cv"):
        simulate(spec, [0.0], jitter_cv=-1)
    # past CV 10 the lognormal factor's median is < 0.1 and 1e10 ran as 0 (a new user's report): refused
    with pytest.raises(ValueError, match=r"jitter_cv must be a finite number >= 0.0 and <= 10.0, got 10.5"):
        simulate(spec, [0.0], jitter_cv=10.5)
    with pytest.raises(ValueError, match="slo"):
        simulate(spec, [0.0, 1.0], slo=[0.1])
    with pytest.raises(ValueError, match="unknown policy"):
        simulate(spec, [0.0], "fifo")
    with pytest.raises(ValueError, match="workers"):
        simulate(spec, [0.0], workers=[1])
    with pytest.raises(ValueError, match="repeat"):
        compare(spec, [0.0], ["pard", "pard"])
    with pytest.raises(config.ConfigError if hasattr(config, "ConfigError") else ValueError):
        simulate("no-such-pipeline", [0.0])


def test_per_request_slo_and_empty_arrivals() -> None:
    """A per-request SLO below the pipeline's lone latency makes exactly those requests miss; no arrivals is a valid empty run."""
    spec = config.PipelineSpec(name="c", slo=1.0, stages=[stage("a", 0.05)])
    r = simulate(spec, [0.0, 1.0, 2.0], "naive", slo=[1.0, 0.01, 1.0], jitter_cv=0.0)
    assert list(r.state) == [1, 2, 1]
    e = simulate(spec, np.zeros(0), "pard")
    assert e.submitted == 0 and e.goodput == 0.0


def test_dag_estimate_uses_longest_path_end_to_end() -> None:
    """At a fan-out stage pard drops by the slow branch's path; without the prior terms, before the first
    planner sync the drop happens at that branch; with them (pard's default) at the entry from the start."""
    with pytest.warns(PardWarning, match="can never be met"):  # deliberately unreachable SLO
        spec = config.PipelineSpec(name="dag2", slo=0.3, stages=[
            stage("a", 0.01, succ=["fast", "slow"]),
            stage("fast", 0.01, succ=["join"]),
            stage("slow", 0.30, succ=["join"]),
            stage("join", 0.01),
        ])
    arr = np.arange(1, 50) * 0.1 + 0.05  # 0.15 .. 4.95 s, no queueing
    import dataclasses

    assert (simulate(spec, arr, "pard", jitter_cv=0.0).drop_stage == 0).all()
    r = simulate(spec, arr, dataclasses.replace(POLICIES["pard"], name="pard-no-prior", prior_terms=False),
                 jitter_cv=0.0)
    assert r.dropped == arr.size
    # a -> slow -> join needs 0.32 s > SLO: after the first sync (t = 1 s) the entry knows it
    late_ones = arr > 1.0 + 1e-9
    assert (r.drop_stage[late_ones] == 0).all()
    assert (r.drop_stage[~late_ones] == 2).all()
    # the fast path alone (0.03 s) would have admitted them: pard-back (no downstream terms) never drops at the entry
    back = simulate(spec, arr, "pard-back", jitter_cv=0.0)
    assert (back.drop_stage == 2).all()


def test_planner_paths_from_spec() -> None:
    """The planner's downstream paths are the spec's downstream paths as stage indices (da fans out after person_detect)."""
    from pard.wiring import planner_stages

    spec = config.builtin("da")
    idx = {n: k for k, n in enumerate(spec.stage_names)}
    for ps, name in zip(planner_stages(spec), spec.stage_names):
        expect = {tuple(idx[s] for s in p) for p in spec.downstream_paths(name) if p}
        assert set(ps.paths) == expect
        assert ps.entry == (name in spec.entry_stages())


def test_simulate_refuses_runs_over_max_visits() -> None:
    """simulate() checks requests x stages (and span x stages) against max_visits before building the simulator."""
    from pard.workloads import TooManyArrivalsError

    spec = config.builtin("tm")
    arr = np.linspace(0.0, 10.0, 1000)
    ns = len(spec.stages)
    with pytest.raises(TooManyArrivalsError, match=rf"1000 requests x {ns} stages"):
        simulate(spec, arr, "naive", max_visits=1000 * ns - 1)
    with pytest.raises(TooManyArrivalsError, match="span"):
        simulate(spec, np.array([0.0, 1e6]), "naive", max_visits=1e5)
    assert simulate(spec, arr, "naive", max_visits=1000 * ns).submitted == 1000


def test_no_policy_exceeds_the_goodput_bound_on_random_runs() -> None:
    """On random pipelines, bursty loads and SLOs (deterministic execution) no policy finishes more on time than the bound."""
    from pard import workloads as wl

    rng = np.random.default_rng(1)
    exceeded_per_second = 0
    for trial in range(10):
        ns = int(rng.integers(1, 4))
        stages = []
        for k in range(ns):
            mb = int(rng.choice([1, 2, 4, 8]))
            d1 = float(rng.uniform(0.005, 0.05))
            prof = {1: d1, mb: d1 * (1 + rng.uniform(0.2, 1.0) * (mb - 1))} if mb > 1 else {1: d1}
            stages.append({"name": f"s{k}", "profile": prof, "max_batch": mb, "workers": int(rng.integers(1, 3)),
                           "successors": [f"s{k + 1}"] if k + 1 < ns else []})
        spec = config.PipelineSpec(name="r", slo=float(rng.uniform(0.1, 2.5)), stages=stages)
        arr = wl.bursty(spec.capacity().pipeline * rng.uniform(0.6, 1.4), 30.0, 1.5, seed=int(rng.integers(10**6)))
        for pol in POLICIES:
            r = simulate(spec, arr, pol, jitter_cv=0.0, seed=trial, autoscale=trial % 3 == 0)
            assert r.on_time <= r.goodput_bound_count + 1e-6, (trial, pol, r.on_time, r.goodput_bound_count)
            exceeded_per_second += r.on_time > r.goodput_bound_per_second
    assert exceeded_per_second > 0  # the per-second figure alone is not a bound: carry-over matters


def test_compare_accepts_a_single_policy_name() -> None:
    """compare(..., policies="pard") runs one policy instead of iterating the string's letters."""
    arr = np.linspace(0.0, 2.0, 200)
    assert list(compare("tm", arr, policies="pard", jitter_cv=0.0)) == ["pard"]


def test_error_messages_show_plain_numbers() -> None:
    """Messages about NumPy values read 0.5, not np.float64(0.5)."""
    with pytest.raises(ValueError) as info:
        simulate("tm", np.array([1.0, 0.5]), "naive")
    assert "arrivals[1] = 0.5 < arrivals[0] = 1.0" in str(info.value) and "np.float64" not in str(info.value)
    with pytest.raises(ValueError) as info:
        simulate("tm", np.array([0.0, 1.0]), "naive", jitter_cv=np.float64(-2.0))
    assert "got -2.0" in str(info.value) and "np." not in str(info.value)


def test_sync_interval_below_floor_or_too_many_syncs_is_refused() -> None:
    """sync_interval_s under 1 ms, or one needing more than max_syncs planner syncs, raises ValueError naming it and the count."""
    from pard.sim import MIN_SYNC_INTERVAL_S

    arr = np.linspace(0.0, 5.0, 50)
    for bad in (1e-9, 1e-6, 0.0, -1.0, np.inf):
        with pytest.raises(ValueError, match="sync_interval_s"):
            simulate("tm", arr, "naive", planner={"sync_interval_s": bad})
    # 5 s at 1 ms: floor(5 / 0.001) + 1 = 5001 syncs
    with pytest.raises(ValueError, match=r"planner\.sync_interval_s=0\.001 needs 5001 planner syncs.*max_syncs=5000"):
        simulate("tm", arr, "naive", planner={"sync_interval_s": MIN_SYNC_INTERVAL_S}, max_syncs=5000)
    with pytest.raises(ValueError, match="max_syncs"):
        simulate("tm", arr, "naive", max_syncs=0)
    r = simulate("tm", arr, "naive", planner={"sync_interval_s": 0.5}, max_syncs=11)  # 11 syncs: exactly at the limit
    assert r.submitted == 50


def test_a_run_whose_requests_take_past_max_syncs_to_finish_stops_with_an_error() -> None:
    """SLO 1e9 s and d(1) = 1e8 s, four arrivals: the run would sync every second for about 4e8 s after the
    last arrival (a fresh user's run printed nothing for half an hour); past max_syncs syncs after the last
    arrival it stops with a PardValueError naming max_syncs and the sync interval."""
    spec = config.PipelineSpec(name="slow", slo=1e9, stages=[config.StageSpec(name="a", profile={1: 1e8}, max_batch=1)])
    with pytest.raises(pard.PardError, match=r"still in the pipeline 1000 s after the last arrival, past max_syncs=1000"):
        simulate(spec, np.array([0.0, 1.0, 2.0, 3.0]), max_syncs=1000)


def test_tiers_are_validated_against_the_spec() -> None:
    """Tier codes must be whole numbers within the spec's tiers (only 0 without tiers), of the right length, and real."""
    arr = np.linspace(0.0, 2.0, 20)
    n = arr.size
    plain = config.builtin("tm")
    assert not plain.tiers
    for bad in (5, 1, -1, np.full(n, 1e20), np.full(n, np.nan), np.full(n, 0.5)):
        with pytest.raises(ValueError, match=r"tiers.*valid: 0 \(the pipeline declares no tiers\)"):
            simulate(plain, arr, "naive", tiers=bad)
    for bad_type in ("gold", np.array(["gold"] * n), np.full(n, 1 + 0j), [True] * n):
        with pytest.raises(TypeError, match="tiers"):
            simulate(plain, arr, "naive", tiers=bad_type)
    with pytest.raises(ValueError, match=r"tiers must be a scalar or have one entry per arrival \(20\)"):
        simulate(plain, arr, "naive", tiers=np.zeros(n + 1, dtype=int))
    tiered = config.PipelineSpec(name="t", slo=1.0, stages=[stage("a", 0.01)], tiers={"gold": 2.0, "free": 1.0})
    with pytest.raises(ValueError, match=r"tiers\[3\] = 2.*valid: 0\.\.1"):
        simulate(tiered, arr, "naive", tiers=[0, 1, 0, 2] + [0] * (n - 4))
    assert simulate(tiered, arr, "naive", tiers=np.arange(n) % 2).submitted == n
    assert simulate(plain, arr, "naive", tiers=0).submitted == n


def test_arguments_name_themselves_and_are_not_coerced() -> None:
    """Strings, complex numbers, out-of-range seeds/samples and non-bool flags raise errors naming the argument."""
    arr = np.linspace(0.0, 1.0, 10)
    n = arr.size
    with pytest.raises(TypeError, match="slo"):
        simulate("tm", arr, "naive", slo=np.array(["a"] * n))
    with pytest.raises(TypeError, match="slo"):
        simulate("tm", arr, "naive", slo="0.5")
    with pytest.raises(ValueError, match=r"seed must be an int in 0\.\.2\*\*64-1"):
        simulate("tm", arr, "naive", seed=2**70)
    with pytest.raises(ValueError, match="seed"):
        simulate("tm", arr, "naive", seed=-1)
    with pytest.raises(ValueError, match=r"samples must be an int in 1\.\.1000000, got 1000000000000"):
        simulate("tm", arr, "pard", planner={"samples": 10**12})
    with pytest.raises(TypeError, match="policies"):
        compare("tm", arr, policies=None)  # type: ignore[arg-type]
    for flag in ("autoscale", "progress", "adapt_window"):
        for value in ("yes", None, 1):
            with pytest.raises(TypeError, match=flag):
                simulate("tm", arr, "naive", **{flag: value})
    with pytest.raises(TypeError, match="arrivals.*complex"):
        simulate("tm", arr.astype(complex), "naive")
    with pytest.raises(TypeError, match="arrivals.*complex"):
        simulate("tm", [0.0, 1 + 1j], "naive")
    with pytest.raises(TypeError, match="arrivals"):
        simulate("tm", ["0.0", "1.0"], "naive")
    assert simulate("tm", list(range(3)), "naive", autoscale=np.bool_(False)).submitted == 3


# ---------------------------------------------------------------- issue 9: tiers, pard vs pard-paper

def _two_tier_run(policy: str) -> "object":
    """tm with tiers gold 4 : bronze 1, equal shares, Poisson at 1.5 x capacity for 30 s (same arrivals)."""
    from pard import workloads as wl

    base = config.builtin("tm")
    spec = base.model_copy(update={"tiers": {"gold": 4.0, "bronze": 1.0}})
    arr = poisson(1.5 * spec.capacity().pipeline, 30_000, seed=7)
    arr = arr[arr < 30.0]
    w = wl.assign_tiers(arr, {"gold": 0.5, "bronze": 0.5}, seed=3)
    return simulate(spec, arr, policy, tiers=w.tier, jitter_cv=0.1, seed=1)


def test_tiers_change_pards_decisions_and_weighted_goodput() -> None:
    """Two tiers 4:1, equal shares, load 1.5: pard gives the gold tier >= 70 % of the on-time requests and
    a weighted goodput >= tier-blind pard-paper's on the same arrivals (capacity is 2/3 of the input, so
    serving gold first can give it up to 0.5 / 0.667 = 75 %)."""
    pard_r = _two_tier_run("pard")
    paper = _two_tier_run("pard-paper")
    gold, bronze = pard_r.tiers
    assert (gold.name, gold.weight, bronze.name, bronze.weight) == ("gold", 4.0, "bronze", 1.0)
    assert gold.on_time / (gold.on_time + bronze.on_time) >= 0.7
    assert pard_r.weighted_goodput >= paper.weighted_goodput
    # tier-blind pard-paper serves both tiers about alike
    pg, pb = paper.tiers
    assert abs(pg.on_time - pb.on_time) / (pg.on_time + pb.on_time) < 0.1
    for rep in (pard_r, paper):  # conservation per tier and in total
        for t in rep.tiers:
            assert t.submitted == t.on_time + t.late + t.dropped + t.rejected + t.failed
        assert sum(t.submitted for t in rep.tiers) == rep.submitted
        assert rep.weighted_goodput == pytest.approx(
            sum(t.weight * t.on_time for t in rep.tiers) / rep.duration_s)


def test_a_high_tier_with_the_tightest_slo_is_not_budgeted_the_lower_tiers_backlog() -> None:
    """A four-stage chain (10/18/30 ms at batches 1/4/8; the third stage, one worker, the bottleneck) at 1.3x
    for 60 s, gold (weight 10, 15 %) with a 0.15 s SLO, silver (3, 35 %) 0.3 s, free (1, 50 %) 0.45 s: gold
    is served first at every stage, so it meets below only the running batch and its own tier's queue.
    Budgeted the busy term's whole batch per stage below, pard dropped 3 064 of 3 102 gold at the entry and
    served 24, where tier-blind pard-paper served 244 (a new user's test); now at least a third of gold,
    more than pard-paper, and a weighted goodput above pard-paper's."""
    from pard import workloads as wl

    profile = {1: 0.010, 4: 0.018, 8: 0.030}
    spec = config.PipelineSpec(name="chain4", slo=0.3, tiers={"gold": 10.0, "silver": 3.0, "free": 1.0}, stages=[
        config.StageSpec(name=f"s{i}", profile=profile, max_batch=8, workers=1 if i == 2 else 2,
                         successors=[f"s{i + 1}"] if i < 3 else []) for i in range(4)])
    arr = wl.poisson(1.3 * spec.capacity().pipeline, 60, seed=0)
    w = wl.assign_tiers(arr, {"gold": 0.15, "silver": 0.35, "free": 0.5},
                        slo_s={"gold": 0.15, "silver": 0.3, "free": 0.45}, seed=10)
    got = {p: simulate(spec, w, p, seed=0) for p in ("pard", "pard-paper")}
    gold = {p: next(t for t in r.tiers if t.name == "gold") for p, r in got.items()}
    assert gold["pard"].on_time >= gold["pard"].submitted / 3
    assert gold["pard"].on_time > gold["pard-paper"].on_time
    assert got["pard"].weighted_goodput > got["pard-paper"].weighted_goodput
    for r in got.values():
        assert sum(t.on_time + t.late + t.dropped + t.rejected + t.failed for t in r.tiers) == r.submitted


def test_higher_tiers_with_tighter_slos_ride_out_on_off_bursts() -> None:
    """A six-stage chain (bottleneck ``n``), on/off arrivals (3 s at 1.6x capacity, 3 s off; 0.8x on average)
    for 60 s, tiers gold / silver / free weighted 4 / 2 / 1, 10 / 30 / 60 % of requests, SLOs 0.28 / 0.4 /
    0.8 s (a new user's test, 2026-12-03).  Gold and silver are served first at every stage, so in a burst
    they meet the running batch and their own tiers' queues, not the free tier's backlog.  pard served
    744 of 3 239 gold (pard-paper 1 588) and trailed pard-paper's weighted goodput by 13 %: the stages above
    counted every queued request of a tiered stage below that popped LBF (queue_lag: LBF serves the top
    tier first too), and budgeted the outranking tiers the all-tier queueing delay Σq of the stages below.
    Either fix alone leaves gold at 36 % or 67 % on time; both serve gold and silver whole."""
    from pard import workloads as wl

    S = config.StageSpec
    spec = config.PipelineSpec(name="c6", slo=2.0, tiers={"gold": 4.0, "silver": 2.0, "free": 1.0}, stages=[
        S(name="e", profile={1: 0.003, 32: 0.030}, max_batch=32, workers=1, successors=["lin"]),
        S(name="lin", profile={1: 0.002, 8: 0.016}, max_batch=8, workers=3, successors=["flat"]),
        S(name="flat", profile={1: 0.010, 4: 0.011, 16: 0.014}, max_batch=16, workers=1, successors=["m"]),
        S(name="m", profile={1: 0.006, 2: 0.008, 4: 0.012, 8: 0.020}, max_batch=8, workers=2, successors=["n"]),
        S(name="n", profile={1: 0.004, 16: 0.024}, max_batch=16, workers=1, successors=["z"]),
        S(name="z", profile={1: 0.001, 64: 0.040}, max_batch=64, workers=1)])
    rng = np.random.default_rng(0)
    peak = 0.8 * spec.capacity().pipeline * 2.0  # on half the time
    t = np.sort(rng.uniform(0.0, 60.0, rng.poisson(peak * 60.0)))
    w = wl.assign_tiers(t[(t % 6.0) < 3.0], {"gold": 0.1, "silver": 0.3, "free": 0.6},
                        slo_s={"gold": 0.28, "silver": 0.4, "free": 0.8}, seed=0)
    got = {p: simulate(spec, w, p, seed=0, jitter_cv=0.1) for p in ("pard", "pard-paper")}
    share = {t.name: t.on_time / t.submitted for t in got["pard"].tiers}
    assert share["gold"] >= 0.95 and share["silver"] >= 0.95
    assert got["pard"].weighted_goodput >= 1.2 * got["pard-paper"].weighted_goodput
    for r in got.values():
        assert sum(t.on_time + t.late + t.dropped + t.rejected + t.failed for t in r.tiers) == r.submitted


def test_a_high_tier_with_the_loosest_slo_is_served_first_also_when_calm() -> None:
    """Three stages (10/18/30 ms at batches 1/4/8; workers 2, 1, 2) under bursty traffic (CV 1.5) at 2x for 60 s;
    gold (weight 10, 15 %) at 500 ms, silver (3, 35 %) 300 ms, free (1, 50 %) 150 ms. In LBF a tiered stage
    served the earliest deadline across tiers, so free's tight SLOs went ahead of gold, and gold waited into
    the purge (a new user's trace: 419 of 4 769 gold lost, none under FCFS clipper++). Now gold is served first
    in either order: at most 1 % of it is lost, and the weighted goodput is at least pard-paper's."""
    from pard import workloads as wl

    profile = {1: 0.010, 4: 0.018, 8: 0.030}
    spec = config.PipelineSpec(name="chain3", slo=0.3, tiers={"gold": 10.0, "silver": 3.0, "free": 1.0}, stages=[
        config.StageSpec(name=f"s{i}", profile=profile, max_batch=8, workers=1 if i == 1 else 2,
                         successors=[f"s{i + 1}"] if i < 2 else []) for i in range(3)])
    arr = wl.bursty(2.0 * spec.capacity().pipeline, 60, cv=1.5, seed=1)
    w = wl.assign_tiers(arr, {"gold": 0.15, "silver": 0.35, "free": 0.5},
                        slo_s={"gold": 0.5, "silver": 0.3, "free": 0.15}, seed=10)
    got = {p: simulate(spec, w, p, seed=0) for p in ("pard", "pard-paper")}
    gold = next(t for t in got["pard"].tiers if t.name == "gold")
    assert gold.on_time >= 0.99 * gold.submitted
    assert got["pard"].weighted_goodput >= got["pard-paper"].weighted_goodput


def test_pard_paper_is_the_papers_method_and_pard_the_default() -> None:
    """pard-paper keeps the paper's values (adaptive order, full estimate, none of pard's levers); pard is
    the default of simulate and adds them."""
    paper = POLICIES["pard-paper"]
    assert (paper.order, paper.drop, paper.downstream, paper.lam) == ("adaptive", "pard", "full", None)
    assert not (paper.tiered or paper.reactive or paper.correct_durations or paper.coherent_branches)
    arr = poisson(500.0, 2000)
    assert simulate("tm", arr, jitter_cv=0.0).policy == "pard"


def test_simulate_takes_a_workload_and_matches_its_tiers_by_name() -> None:
    """A Workload's tiers are mapped to the spec's tiers by name, whatever their order; unknown names are refused."""
    from pard.config import PipelineSpec, StageSpec
    from pard.workloads import Workload

    spec = PipelineSpec(name="t", slo=1.0, tiers={"gold": 4.0, "free": 1.0},
                        stages=[StageSpec(name="s", profile={1: 0.001}, max_batch=1)])
    arr = np.array([0.1, 0.2, 0.3])
    w = Workload(arrivals_s=arr, tier=np.array([0, 1, 0], np.int32), tier_names=("free", "gold"))
    rep = pard.simulate(spec, w, "naive")
    by_name = {t.name: t.submitted for t in rep.tiers}
    assert by_name == {"gold": 1, "free": 2}
    with pytest.raises(pard.PardError, match=r"\['bronze'\] are not tiers of the pipeline"):
        pard.simulate(spec, Workload(arrivals_s=arr, tier=np.zeros(3, np.int32), tier_names=("bronze",)))


def test_workers_by_stage_name_equal_the_list_form() -> None:
    """simulate(workers={name: n}) is the list form with the other stages at the spec's workers (as Runtime
    takes it); a name that is no stage is a PardError naming it and the stages."""
    spec = pard.config.builtin("tm")
    arr = np.sort(np.random.default_rng(2).uniform(0.0, 5.0, 3000))
    listed = [2 if st.name == "vehicle_detect" else st.workers for st in spec.stages]
    a = pard.simulate(spec, arr, "pard", workers={"vehicle_detect": 2}, seed=1)
    b = pard.simulate(spec, arr, "pard", workers=listed, seed=1)
    assert (a.on_time, a.dropped, a.late) == (b.on_time, b.dropped, b.late)
    with pytest.raises(pard.PardError, match="'bogus'.*vehicle_detect"):
        pard.simulate(spec, arr, "pard", workers={"bogus": 2})


def test_compare_accepts_a_workload_with_its_slos_and_tiers() -> None:
    """compare() takes a Workload as simulate() does, using its per-request SLOs and its tiers by name.

    One stage of 10 ms, one request a second (never a queue): the 10 gold requests (SLO 1 s) are all on
    time, the 10 bronze ones (SLO 5 ms < 10 ms of work) none, under every policy.
    """
    spec = config.PipelineSpec(name="t", slo=1.0, stages=[stage("s", 0.01)], tiers={"gold": 3.0, "bronze": 1.0})
    n = 20
    codes = np.arange(n) % 2  # code 0 = "bronze", 1 = "gold": the workload's order, not the pipeline's
    work = pard.workloads.Workload(arrivals_s=np.arange(n, dtype=np.float64), slo_s=np.where(codes == 1, 1.0, 0.005),
                                   tier=codes, tier_names=("bronze", "gold"))
    reports = compare(spec, work, ["pard", "naive"], jitter_cv=0.0)
    assert list(reports) == ["pard", "naive"]
    for r in reports.values():
        by_name = {t.name: t for t in r.tiers}
        assert (by_name["gold"].submitted, by_name["gold"].on_time) == (10, 10)
        assert (by_name["bronze"].submitted, by_name["bronze"].on_time) == (10, 0)
        assert r.on_time == 10


@pytest.mark.parametrize("kwargs,needles", [
    ({"foo": 1}, ["compare", "'foo'"]),
    ({"policy": "x"}, ["compare", "policy=", "'x'", "policies="]),
])
def test_compare_refuses_unknown_keywords_as_pard_errors(kwargs: dict[str, object], needles: list[str]) -> None:
    """A keyword simulate() does not take, or policy= (compare takes policies=), is a PardTypeError naming it."""
    with pytest.raises(pard.PardError) as info:
        compare("tm", np.linspace(0.0, 1.0, 10), **kwargs)
    assert isinstance(info.value, TypeError)
    for needle in needles:
        assert needle in str(info.value)
