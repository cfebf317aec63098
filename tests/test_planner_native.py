"""The simulator's per-sync work in C++ (pard.planner_native) against the Python planner and recorder it
transcribes: the same statistics in, the same bits out (the Python code is the reference model)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from _cpp import run_standalone_cpp_test

from pard import config, sim
from pard.planner import Planner, PlannerStage
from pard.planner_native import covers, native_planner, native_recorder
from pard.policies import POLICIES, PolicySpec, get_policy
from pard.recorder import RunRecorder
from pard.wiring import planner_stages

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
    """Every covered built-in policy plus the planner levers no built-in policy switches on."""
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
    return [p for p in POLICIES.values() if covers(p)] + extra + [mb_paths,
                                                                  dataclasses.replace(mb_paths, overload_upper=True)]


@pytest.mark.filterwarnings("ignore::pard.errors.PardWarning")  # random durations: pard's drift warning
@pytest.mark.parametrize("policy", variants(), ids=lambda p: p.name)
@pytest.mark.parametrize("stages", ["lv", "custom"])
def test_native_planner_terms_equal_python_planner_bit_for_bit(policy: PolicySpec, stages: str) -> None:
    """Fed the same random statistics for 40 syncs (bursty input, so the window moves), the C++ planner
    publishes exactly the Python planner's terms, lambda and window each time."""
    st = planner_stages(config.builtin("lv")) if stages == "lv" else custom_stages()
    rng = np.random.default_rng(11)
    kw = dict(policy=policy, samples=2_000, seed=4, min_cv_intervals=5, cv_history_s=12.0)
    ref = Planner(st, **kw)
    fast_src = Planner(st, **kw)
    fast = native_planner(fast_src)
    assert fast is not None
    t_ns = 0
    for i in range(40):
        t_ns += 10**9 if i % 7 else 700_000_000
        stats = random_interval(rng, st, t_ns, burst=1.0 + 1.5 * (i % 5 == 0))
        workers = [int(w) for w in rng.integers(0, 5, len(st))]
        want = ref.update(t_ns * 1e-9, as_seconds(stats), workers)
        got = fast.update_ns(t_ns * 1e-9, stats, workers)
        for k, (w, g) in enumerate(zip(want, got)):
            kw = w.publish_kwargs()
            late = ("path_rate", "overload_downstream_s", "floor_downstream_s", "outrank_downstream_s")
            expect = (*(v for f, v in kw.items() if f not in late), w.in_rate, kw["path_rate"], w.demand_rate,
                      kw["overload_downstream_s"], kw["floor_downstream_s"], kw["outrank_downstream_s"])
            assert np.array_equal(np.array(expect), np.array(g)), (i, k, expect, g)
        assert fast.lam == ref.lam and fast.window_s == ref.window_s


@pytest.mark.filterwarnings("ignore::pard.errors.PardWarning")
def test_native_planner_equals_python_through_idle_syncs_then_batches() -> None:
    """Syncs in which no stage has run a batch yet (duration_scale published as 0, "none measured yet"),
    then random ones: pard's terms from the C++ planner equal the Python planner's at every sync."""
    st = planner_stages(config.builtin("lv"))
    rng = np.random.default_rng(5)
    kw = dict(policy=get_policy("pard"), samples=2_000, seed=4)
    ref, fast = Planner(st, **kw), native_planner(Planner(st, **kw))
    assert fast is not None
    idle = [{k: np.zeros(0, np.int64) for k in KEYS_NS} | {"dropped": 0, "late": 0} for _ in st]
    for i in range(8):
        t_ns = (i + 1) * 10**9
        stats = idle if i < 3 else random_interval(rng, st, t_ns, burst=1.0)
        workers = [1] * len(st)
        want = ref.update(t_ns * 1e-9, as_seconds(stats), workers)
        got = fast.update_ns(t_ns * 1e-9, stats, workers)
        assert [w.duration_scale for w in want] == [g[6] for g in got]
        assert all(w.duration_scale == 0.0 for w in want) == (i < 3)
        for w, g in zip(want, got):
            kwp = w.publish_kwargs()
            late = ("path_rate", "overload_downstream_s", "floor_downstream_s", "outrank_downstream_s")
            expect = (*(v for f, v in kwp.items() if f not in late), w.in_rate, kwp["path_rate"], w.demand_rate,
                      kwp["overload_downstream_s"], kwp["floor_downstream_s"], kwp["outrank_downstream_s"])
            assert np.array_equal(np.array(expect), np.array(g)), (i, expect, g)


def test_native_recorder_equals_python_recorder() -> None:
    """RunRecorder fed in C++ (SimRecorder, then absorb) reports the same sums, bins and workers as
    RunRecorder.record fed the same statistics, including samples before the origin."""
    spec = config.builtin("lv")
    st = planner_stages(spec)
    rng = np.random.default_rng(3)
    py_rec = RunRecorder(spec, origin_s=2.0, workers=[1.0] * 5)
    c_rec = RunRecorder(spec, origin_s=2.0, workers=[1.0] * 5)
    core = native_recorder(c_rec)
    t_prev = 0.0
    for i in range(1, 30):
        t = i * 0.7
        stats = random_interval(rng, st, int(round(t * 1e9)), burst=1.0)
        serving = [int(w) for w in rng.integers(0, 6, 5)]
        py_rec.record(as_seconds(stats), serving, t_prev, t)
        core.record_ns(stats, serving, t_prev, t)
        t_prev = t
    c_rec.absorb(core.totals())
    for name in ("submitted", "executed", "compute_s", "nominal_s"):
        assert np.array_equal(getattr(py_rec, name), getattr(c_rec, name)), name
    for a, b in zip(py_rec.series(2.0, 25), c_rec.series(2.0, 25)):
        assert np.array_equal(a, b)


MB_PATHS = dataclasses.replace(get_policy("pard"), name="pard-mb-paths", downstream="busy", mu_at_capacity=True,
                               coherent_paths=True)


@pytest.mark.parametrize("policy, kw", [
    ("pard", {}), ("pard-paper", {}), ("naive", {}), ("dagor", {}), (MB_PATHS, {"jitter_cv": 0.3}),
    (dataclasses.replace(MB_PATHS, overload_upper=True), {"jitter_cv": 0.3}),
    ("pard", {"autoscale": True, "cold_start_s": 2.0}), ("pard-paper", {"jitter_cv": 0.1, "seed": 7}),
])
def test_simulate_native_and_python_sync_give_identical_reports(monkeypatch: pytest.MonkeyPatch, policy: str | PolicySpec,
                                                                 kw: dict) -> None:
    """simulate() with the per-sync work in C++ and with it in Python gives the same report, bit for bit."""
    spec = config.builtin("da")
    rng = np.random.default_rng(1)
    arr = np.sort(rng.uniform(0, 30, int(30 * spec.capacity().pipeline * 1.1)))
    tiers = rng.integers(0, max(len(spec.tiers), 1), arr.size) if spec.tiers else None
    fast = sim.simulate(spec, arr, policy, tiers=tiers, **kw)
    monkeypatch.setattr(sim, "NATIVE_SYNC", False)
    slow = sim.simulate(spec, arr, policy, tiers=tiers, **kw)
    for name in ("state", "finish_s", "drop_stage", "reason", "compute_s"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name), equal_nan=True), name
    assert fast.to_json(detail=True) == slow.to_json(detail=True)


def test_sync_planner_rejects_mismatched_statistics() -> None:
    """A stats list of the wrong length, or a clock that does not advance, is a ValueError."""
    st = planner_stages(config.builtin("tm"))
    fast = native_planner(Planner(st, policy="pard-paper"))
    empty = {k: np.zeros(0, np.int64) for k in KEYS_NS}
    with pytest.raises(ValueError, match="one entry per stage"):
        fast.update_ns(1.0, [empty], [1, 1, 1])
    fast.update_ns(1.0, [empty] * 3, [1, 1, 1])
    with pytest.raises(ValueError, match="increase"):
        fast.update_ns(1.0, [empty] * 3, [1, 1, 1])


def test_standalone_cpp_sync_test(tmp_path: Path) -> None:
    """cpp/tests/test_sync.cpp (the per-sync C++ against hand-computed values; the sanitizer builds run it) passes."""
    run_standalone_cpp_test("test_sync", tmp_path)
