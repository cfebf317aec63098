"""The planner (C++ SyncPlanner behind pard.planner.Planner) and the simulator's C++ recorder against their
NumPy references (tests/planner_oracle.py, RunRecorder.record): the same statistics in, the same bits out."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from _cpp import run_standalone_cpp_test

import planner_oracle as oracle
import recorder_oracle
from pard import _core, config
from pard.planner import Planner, PlannerStage
from pard.policies import POLICIES, PolicySpec, get_policy
from pard.recorder import RunRecorder
from pard.wiring import core_stages, planner_stages

KEYS_NS = ("arrival", "qdelay_t", "qdelay", "batch_start", "batch_size", "batch_wait", "batch_duration")


def random_interval(rng: np.random.Generator, stages: list[PlannerStage], t_ns: int, burst: float) -> list[dict]:
    """One sync interval of plausible simulator statistics per stage, as int64 ns (the C++ form); some
    stages idle, many waits exactly 0 (ties), the arrival rate scaled by ``burst``. Stage 1 never waits
    for another batch (downstream="busy" budgets it as not backlogged) and stage 2's waits sit at a tenth
    of their batch's duration (PRECOLLECTED_WAIT's boundary, where the two comparisons must agree)."""
    out = []
    for k, st in enumerate(stages):
        if rng.random() < 0.15:
            out.append({k: np.zeros(0, np.int64) for k in KEYS_NS} | {"dropped": 0, "late": 0})
            continue
        n_arr = int(rng.poisson(400 * burst))
        nb = int(rng.integers(1, 60))
        size = rng.integers(1, st.max_batch + 1, nb).astype(np.int64)
        nq = int(size.sum())
        wait = rng.integers(0, 20_000_000, nb) * (rng.random(nb) < 0.6)
        duration = rng.integers(2_000_000, 80_000_000, nb)
        if k == 1:
            wait = np.zeros(nb, np.int64)
        elif k == 2:
            wait = duration // 10 + rng.integers(-1, 2, nb)
        out.append({
            "arrival": np.sort(rng.integers(t_ns - 10**9, t_ns, n_arr)),
            "qdelay_t": rng.integers(t_ns - 10**9, t_ns, nq),
            "qdelay": rng.integers(0, 300_000_000, nq),
            "batch_start": np.sort(rng.integers(t_ns - 10**9, t_ns, nb)),
            "batch_size": size,
            "batch_wait": wait.astype(np.int64),
            "batch_duration": duration,
            "dropped": int(rng.integers(0, 30)),
            "late": int(rng.integers(0, 5)),
        })
    return out


def as_seconds(stats_ns: list[dict]) -> list[dict]:
    """The same statistics in the form Simulator.take_stats gives Python (seconds = ns * 1e-9)."""
    out = []
    for s in stats_ns:
        d = {f"{k}_s": np.asarray(s[k], np.int64) * 1e-9 for k in KEYS_NS if k != "batch_size"}
        d["batch_size"] = np.asarray(s["batch_size"], np.int64)
        d["dropped"] = np.array([s["dropped"]], np.int64)
        d["late"] = np.array([s["late"]], np.int64)
        out.append(d)
    return out


def custom_stages() -> list[PlannerStage]:
    """A DAG (two branches joining) with a profile that ends below max_batch (d(b) extrapolated) and a
    single-point profile (d constant)."""
    return [
        PlannerStage("a", (1, 4), (0.010, 0.016), 16, paths=((1, 3), (2, 3)), entry=True),
        PlannerStage("b", (1, 2, 8), (0.004, 0.005, 0.011), 8, paths=((3,),)),
        PlannerStage("c", (3,), (0.007,), 4, paths=((3,),)),
        PlannerStage("d", (1, 16), (0.002, 0.020), 32),
    ]


def variants() -> list[PolicySpec]:
    """Every built-in policy plus the planner levers no built-in policy switches on."""
    base = get_policy("pard-paper")
    extra = [dataclasses.replace(base, name=f"x-{i}", **kw) for i, kw in enumerate([
        {"lam": 0.9},
        {"mu_at_capacity": True, "coherent_paths": True, "correct_durations": True, "idle_batch": True},
        {"mu_at_capacity": True, "mu_at_capacity_entry": False, "coherent_paths": True},
        {"downstream": "upper", "coherent_branches": True, "instant": True},
        {"downstream": "busy"},
        {"correct_durations": True, "downstream": "busy", "idle_batch": True},
        {"pace": "forks", "reactive": True},
        {"overload_upper": True, "reactive": True},
        {"overload_upper": True, "downstream": "busy", "correct_durations": True},
    ])]
    mb_paths = dataclasses.replace(get_policy("pard"), name="pard-mb-paths", downstream="busy", mu_at_capacity=True,
                                   coherent_paths=True)
    return list(POLICIES.values()) + extra + [mb_paths,
                                                                  dataclasses.replace(mb_paths, overload_upper=True)]


def same(want: list, got: list) -> bool:
    """Every field of every stage's terms equal, bit for bit."""
    return np.array_equal(np.array([dataclasses.astuple(t) for t in want]),
                          np.array([dataclasses.astuple(t) for t in got]))


@pytest.mark.filterwarnings("ignore::pard.errors.PardWarning")  # random durations: pard's drift warning
@pytest.mark.parametrize("policy", variants(), ids=lambda p: p.name)
@pytest.mark.parametrize("stages", ["lv", "custom"])
def test_planner_terms_equal_the_numpy_reference_bit_for_bit(policy: PolicySpec, stages: str) -> None:
    """Fed the same random statistics for 40 syncs (bursty input, so the window moves), the planner
    publishes exactly the NumPy reference's terms, lambda and window each time; once in the live
    runtime's float seconds (Planner.update) and once in the simulator's int64 ns (SyncPlanner.update_ns)."""
    st = planner_stages(config.builtin("lv")) if stages == "lv" else custom_stages()
    rng = np.random.default_rng(11)
    kw = dict(policy=policy, samples=2_000, seed=4, min_cv_intervals=5, cv_history_s=12.0)
    ref, live, sim_form = oracle.Planner(st, **kw), Planner(st, **kw), Planner(st, **kw)
    t_ns = 0
    for i in range(40):
        t_ns += 10**9 if i % 7 else 700_000_000
        stats = random_interval(rng, st, t_ns, burst=1.0 + 1.5 * (i % 5 == 0))
        workers = [int(w) for w in rng.integers(0, 5, len(st))]
        want = ref.update(t_ns * 1e-9, as_seconds(stats), workers)
        assert same(want, live.update(t_ns * 1e-9, as_seconds(stats), workers)), i
        sim_form.native.update_ns(t_ns * 1e-9, stats, workers)
        assert same(want, sim_form.native_terms()), i
        assert live.lam == ref.lam and live.window_s == ref.window_s


@pytest.mark.filterwarnings("ignore::pard.errors.PardWarning")
def test_planner_equals_the_reference_through_idle_syncs_then_batches() -> None:
    """Syncs in which no stage has run a batch yet (duration_scale published as 0, "none measured yet"),
    then random ones: pard's terms equal the NumPy reference's at every sync, and so do prior_terms."""
    st = planner_stages(config.builtin("lv"))
    rng = np.random.default_rng(5)
    kw = dict(policy=get_policy("pard"), samples=2_000, seed=4)
    ref, fast = oracle.Planner(st, **kw), Planner(st, **kw)
    ref.start(0.5)
    fast.start(0.5)
    assert same(ref.prior_terms(1.0, [1] * len(st)), fast.prior_terms(1.0, [1] * len(st)))
    idle = [{k: np.zeros(0, np.int64) for k in KEYS_NS} | {"dropped": 0, "late": 0} for _ in st]
    for i in range(8):
        t_ns = (i + 1) * 10**9
        stats = idle if i < 3 else random_interval(rng, st, t_ns, burst=1.0)
        workers = [1] * len(st)
        want = ref.update(t_ns * 1e-9, as_seconds(stats), workers)
        got = fast.update(t_ns * 1e-9, as_seconds(stats), workers)
        assert all(w.duration_scale == 0.0 for w in want) == (i < 3)
        assert same(want, got), i


@pytest.mark.parametrize("form", ["seconds", "ns"])
def test_recorder_equals_the_numpy_reference(form: str) -> None:
    """RunRecorder (its C++ counting fed in float seconds as the live runtime and Ray feed it, or in int64 ns
    as Simulator.sync does) reports the same sums, bins and workers as the NumPy reference fed the same
    statistics, including samples before the origin."""
    spec = config.builtin("lv")
    st = planner_stages(spec)
    rng = np.random.default_rng(3)
    ref = recorder_oracle.RunRecorder(spec, origin_s=2.0, workers=[1.0] * 5)
    rec = RunRecorder(spec, origin_s=2.0, workers=[1.0] * 5)
    core = rec.native() if form == "ns" else None
    t_prev = 0.0
    for i in range(1, 30):
        t = i * 0.7
        stats = random_interval(rng, st, int(round(t * 1e9)), burst=1.0)
        serving = [int(w) for w in rng.integers(0, 6, 5)]
        ref.record(as_seconds(stats), serving, t_prev, t)
        if core is not None:
            core.record_ns(stats, serving, t_prev, t)
        else:
            rec.record(as_seconds(stats), serving, t_prev, t)
        t_prev = t
    for name in ("submitted", "executed", "compute_s", "nominal_s"):
        assert np.array_equal(getattr(ref, name), getattr(rec, name)), name
    for a, b in zip(ref.series(2.0, 25), rec.series(2.0, 25)):
        assert np.array_equal(a, b)


MB_PATHS = dataclasses.replace(get_policy("pard"), name="pard-mb-paths", downstream="busy", mu_at_capacity=True,
                               coherent_paths=True)


@pytest.mark.filterwarnings("ignore::pard.errors.PardWarning")
@pytest.mark.parametrize("policy, kw", [
    ("pard", {}), ("pard-paper", {}), ("dagor", {}), (MB_PATHS, {"jitter_cv": 0.3}),
    (dataclasses.replace(MB_PATHS, overload_upper=True), {"jitter_cv": 0.3}),
    ("pard-paper", {"jitter_cv": 0.1, "seed": 7}),
])
def test_simulator_driven_by_sync_equals_one_driven_by_the_numpy_planner(policy: str | PolicySpec, kw: dict) -> None:
    """Two simulators on the same arrivals: one runs each interval in C++ (Simulator.sync with the planner),
    the other steps run_until / take_stats and publishes the NumPy reference planner's terms. Every
    request ends the same way at the same nanosecond."""
    spec = config.builtin("da")
    pol = get_policy(policy)
    rng = np.random.default_rng(1)
    arr = np.sort(rng.uniform(0, 30, int(30 * spec.capacity().pipeline * 1.1)))
    slo = np.full(arr.size, spec.slo)
    tiers = rng.integers(0, max(len(spec.tiers), 1), arr.size).astype(np.int32)
    weights = [float(w) for w in spec.tiers.values()]

    def simulator() -> object:
        return _core.Simulator(stages=core_stages(spec, None), policy=pol.core(), arrivals_s=arr, slo_s=slo,
                               tier=tiers, jitter_cv=kw.get("jitter_cv", 0.0), seed=kw.get("seed", 0),
                               cold_start_s=0.0, tier_weights=weights)

    fast_sim, slow_sim = simulator(), simulator()
    st = planner_stages(spec)
    fast, slow = Planner(st, policy=pol, seed=3), oracle.Planner(st, policy=pol, seed=3)
    rec = RunRecorder(spec, origin_s=0.0, workers=[1.0] * len(st)).native()
    fast.start(0.0)
    slow.start(0.0)
    for i in range(1, 40):
        fast_sim.sync(i - 1.0, float(i), rec, fast.native)
        slow_sim.run_until(float(i))
        terms = slow.update(float(i), slow_sim.take_stats(), slow_sim.serving())
        slow_sim.publish_all([tuple(t.publish_kwargs().values()) for t in terms])
    a, b = fast_sim.outcomes(), slow_sim.outcomes()
    for name in ("state", "finish_s", "drop_stage", "reason", "compute_s"):
        assert np.array_equal(a[name], b[name], equal_nan=True), name


def test_sync_planner_rejects_mismatched_statistics() -> None:
    """A stats list of the wrong length, or a clock that does not advance, is a ValueError."""
    st = planner_stages(config.builtin("tm"))
    fast = Planner(st, policy="pard-paper").native
    empty = {k: np.zeros(0, np.int64) for k in KEYS_NS}
    with pytest.raises(ValueError, match="one entry per stage"):
        fast.update_ns(1.0, [empty], [1, 1, 1])
    fast.update_ns(1.0, [empty] * 3, [1, 1, 1])
    with pytest.raises(ValueError, match="increase"):
        fast.update_ns(1.0, [empty] * 3, [1, 1, 1])


def test_standalone_cpp_sync_test(tmp_path: Path) -> None:
    """cpp/tests/test_sync.cpp (the per-sync C++ against hand-computed values; the sanitizer builds run it) passes."""
    run_standalone_cpp_test("test_sync", tmp_path)
