"""Simulator benchmarks (issue 4 item 7): simulated requests per second, and pard vs a SimPy model.

Run: ``PYTHONPATH=python python -m pytest bench/test_bench_simulator.py --benchmark-only -s``.
Figures are recorded in bench/RESULTS.md ("Simulator and comparison (issue 4)"; issue 15: "Simulator speed,
second round", whose rows are the ``-k large`` tests).  Speed is reported,
not asserted (the machine is shared); the SimPy comparison asserts agreement of the mean latency.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from simpy_model import simulate_naive_chain  # noqa: E402

from pard import config  # noqa: E402
from pard.sim import simulate  # noqa: E402


def poisson(rate: float, seconds: float, seed: int = 0) -> np.ndarray:
    n = int(rate * seconds)
    return np.random.default_rng(seed).exponential(1.0 / rate, n).cumsum()


def _rate(benchmark: Any, n: int) -> float:
    return n / benchmark.stats.stats.mean


@pytest.mark.parametrize("policy", ["naive", "pard-paper", "pard"])
@pytest.mark.parametrize("scale", [1, 10])
def test_simulated_requests_per_second_lv(benchmark: Any, policy: str, scale: int) -> None:
    """Requests simulated per wall second on lv at load 0.9 (workers x scale), planner included."""
    spec = config.builtin("lv")
    if scale != 1:
        spec = spec.with_workers({st.name: st.workers * scale for st in spec.stages})
    arr = poisson(0.9 * spec.capacity().pipeline, 60.0)
    report = benchmark.pedantic(simulate, args=(spec, arr, policy), rounds=3, iterations=1)
    rate = _rate(benchmark, arr.size)
    benchmark.extra_info.update(requests=int(arr.size), simulated_req_per_s=rate)
    print(f"\nlv x{scale} workers, {policy}: {arr.size} requests, {rate:,.0f} simulated req/s")
    assert report.submitted == arr.size


@pytest.mark.parametrize("coherent", [False, True])
def test_simulated_requests_per_second_da_branches_overloaded(benchmark: Any, coherent: bool) -> None:
    """Requests simulated per wall second on da with both branches short (load 2x their capacity), pard with
    and without the coherent rank on its branch stages (the baseline: coherent_rank=False, same run). The rank
    key and the re-keying on each order switch are the cost; the goodput each reaches is printed."""
    import dataclasses

    from pard.policies import POLICIES

    spec = config.builtin("da").with_workers({"person_detect": 8, "pose": 2, "face_detect": 1})
    arr = poisson(2.0 * spec.capacity().pipeline, 60.0, seed=3)
    pol = dataclasses.replace(POLICIES["pard"], coherent_rank=coherent)
    report = benchmark.pedantic(simulate, args=(spec, arr, pol), rounds=3, iterations=1)
    rate = _rate(benchmark, arr.size)
    benchmark.extra_info.update(requests=int(arr.size), simulated_req_per_s=rate, goodput_ratio=report.goodput_ratio)
    print(f"\nda, branches at 2x, coherent_rank={coherent}: {arr.size} requests, {rate:,.0f} simulated req/s, "
          f"goodput / bound {report.goodput_ratio:.4f}")
    assert report.submitted == arr.size


@pytest.mark.parametrize("load", [0.3, 0.7])
def test_vs_simpy_naive_lv(benchmark: Any, load: float) -> None:
    """pard's simulate() vs the SimPy model of the same naive lv chain: speed ratio and mean latency (2 %)."""
    spec = config.builtin("lv")
    arr = poisson(load * spec.capacity().pipeline, 30.0, seed=1)
    stages = [(dict(st.profile), st.max_batch, st.workers) for st in spec.stages]
    t0 = time.perf_counter()
    finish_simpy = simulate_naive_chain(stages, arr)
    simpy_s = time.perf_counter() - t0
    report = benchmark.pedantic(simulate, args=(spec, arr, "naive"), kwargs={"jitter_cv": 0.0},
                                rounds=5, iterations=1)
    pard_s = benchmark.stats.stats.mean
    lat_pard = float((report.finish_s - report.send_s).mean())
    lat_simpy = float((finish_simpy - arr).mean())
    ratio = simpy_s / pard_s
    benchmark.extra_info.update(requests=int(arr.size), simpy_s=simpy_s, pard_s=pard_s, speedup=ratio,
                                mean_latency_pard_s=lat_pard, mean_latency_simpy_s=lat_simpy)
    print(f"\nnaive lv load {load}, {arr.size} requests: SimPy {simpy_s:.2f} s, pard {pard_s * 1e3:.1f} ms -> {ratio:.0f}x; "
          f"mean latency pard {lat_pard * 1e3:.3f} ms, SimPy {lat_simpy * 1e3:.3f} ms")
    assert report.on_time + report.late == arr.size
    assert abs(lat_pard - lat_simpy) / lat_simpy < 0.02


@pytest.mark.parametrize("load", [0.3, 0.7])
def test_vs_simpy_event_loop_only(benchmark: Any, load: float) -> None:
    """The C++ event loop alone (build, one run_until to the end, outcomes) vs the same SimPy model.

    ``naive`` reads nothing the planner publishes, so one ``run_until`` over the whole run is an exact
    simulation of it; this isolates the event loop from simulate()'s per-second Python work.
    """
    from pard import _core
    from pard.wiring import core_stages

    spec = config.builtin("lv")
    arr = poisson(load * spec.capacity().pipeline, 30.0, seed=1)
    stages = [(dict(st.profile), st.max_batch, st.workers) for st in spec.stages]
    t0 = time.perf_counter()
    finish_simpy = simulate_naive_chain(stages, arr)
    simpy_s = time.perf_counter() - t0
    core = core_stages(spec)
    pol = _core.Policy(order="fcfs", drop="none")

    def run() -> Any:
        sim = _core.Simulator(stages=core, policy=pol, arrivals_s=arr, slo_s=np.full(arr.size, spec.slo),
                              tier=np.zeros(arr.size, np.int32), jitter_cv=0.0, seed=0)
        sim.run_until(1e9)
        return sim.outcomes()

    out = benchmark.pedantic(run, rounds=5, iterations=1)
    loop_s = benchmark.stats.stats.mean
    lat = float((out["finish_s"] - arr).mean())
    lat_simpy = float((finish_simpy - arr).mean())
    benchmark.extra_info.update(requests=int(arr.size), simpy_s=simpy_s, loop_s=loop_s, speedup=simpy_s / loop_s)
    print(f"\nevent loop only, naive lv load {load}, {arr.size} requests: SimPy {simpy_s:.3f} s, "
          f"C++ loop {loop_s * 1e3:.1f} ms -> {simpy_s / loop_s:.0f}x ({arr.size / loop_s:,.0f} req/s)")
    assert abs(lat - lat_simpy) / lat_simpy < 0.02


@pytest.fixture(scope="module")
def lv_large() -> dict[str, Any]:
    """lv at load 0.9 for 300 s (~270 000 Poisson arrivals) and the SimPy model's run on them (timed once)."""
    spec = config.builtin("lv")
    arr = poisson(0.9 * spec.capacity().pipeline, 300.0, seed=2)
    stages = [(dict(st.profile), st.max_batch, st.workers) for st in spec.stages]
    t0 = time.perf_counter()
    finish = simulate_naive_chain(stages, arr)
    return {"spec": spec, "arrivals": arr, "simpy_s": time.perf_counter() - t0, "simpy_finish": finish}


@pytest.mark.parametrize("policy", ["naive", "pard", "pard-paper"])
def test_vs_simpy_large_lv(benchmark: Any, lv_large: dict[str, Any], policy: str) -> None:
    """simulate() on 300 s of lv at load 0.9 (~270 000 requests, fixed costs amortised) vs the SimPy naive model on the same arrivals.

    For ``naive`` (jitter 0, the SimPy model's semantics) the mean latency must agree within 2 %; ``pard``
    and ``pard-paper`` have no SimPy counterpart, so its ratio is to the SimPy *naive* run (the cost of the policy and its
    planner relative to that baseline), not a like-for-like comparison.
    """
    spec, arr, simpy_s = lv_large["spec"], lv_large["arrivals"], lv_large["simpy_s"]
    report = benchmark.pedantic(simulate, args=(spec, arr, policy), kwargs={"jitter_cv": 0.0},
                                rounds=3, iterations=1)
    pard_s = benchmark.stats.stats.mean
    ratio = simpy_s / pard_s
    lat_pard = float(np.nanmean(report.finish_s - report.send_s))
    lat_simpy = float((lv_large["simpy_finish"] - arr).mean())
    benchmark.extra_info.update(requests=int(arr.size), simpy_s=simpy_s, pard_s=pard_s, speedup=ratio,
                                simulated_req_per_s=arr.size / pard_s, simpy_req_per_s=arr.size / simpy_s,
                                mean_latency_pard_s=lat_pard, mean_latency_simpy_s=lat_simpy)
    print(f"\n{policy} lv load 0.9, 300 s, {arr.size} requests: SimPy naive {simpy_s:.2f} s "
          f"({arr.size / simpy_s:,.0f} req/s), pard {pard_s * 1e3:.1f} ms ({arr.size / pard_s:,.0f} req/s) -> "
          f"{ratio:.0f}x; mean latency pard {lat_pard * 1e3:.3f} ms, SimPy {lat_simpy * 1e3:.3f} ms")
    assert report.submitted == arr.size
    if policy == "naive":
        assert report.on_time + report.late == arr.size
        assert abs(lat_pard - lat_simpy) / lat_simpy < 0.02


def test_vs_simpy_large_event_loop_only(benchmark: Any, lv_large: dict[str, Any]) -> None:
    """The C++ event loop alone (build, one run_until, outcomes) on the same ~270 000 requests vs the SimPy model."""
    from pard import _core
    from pard.wiring import core_stages

    spec, arr, simpy_s = lv_large["spec"], lv_large["arrivals"], lv_large["simpy_s"]
    core = core_stages(spec)
    pol = _core.Policy(order="fcfs", drop="none")

    def run() -> Any:
        sim = _core.Simulator(stages=core, policy=pol, arrivals_s=arr, slo_s=np.full(arr.size, spec.slo),
                              tier=np.zeros(arr.size, np.int32), jitter_cv=0.0, seed=0)
        sim.run_until(1e9)
        return sim.outcomes()

    out = benchmark.pedantic(run, rounds=3, iterations=1)
    loop_s = benchmark.stats.stats.mean
    lat = float((out["finish_s"] - arr).mean())
    lat_simpy = float((lv_large["simpy_finish"] - arr).mean())
    benchmark.extra_info.update(requests=int(arr.size), simpy_s=simpy_s, loop_s=loop_s, speedup=simpy_s / loop_s)
    print(f"\nevent loop only, naive lv load 0.9, 300 s, {arr.size} requests: SimPy {simpy_s:.2f} s, "
          f"C++ loop {loop_s * 1e3:.1f} ms -> {simpy_s / loop_s:.0f}x ({arr.size / loop_s:,.0f} req/s)")
    assert abs(lat - lat_simpy) / lat_simpy < 0.02


def _lv_workers(total: int) -> Any:
    """lv with ``total`` workers split over its stages as bench/paper/e4_scale.py does (the paper's scale runs)."""
    sys.path.insert(0, str(Path(__file__).parent / "paper"))
    import e4_scale

    return e4_scale.scaled(config.builtin("lv"), total)


@pytest.mark.parametrize("load", [0.9, 1.2])
@pytest.mark.parametrize("total", [64, 1000])
def test_cost_per_request_vs_workers_lv(benchmark: Any, total: int, load: float) -> None:
    """simulate() cost per request on lv (pard-paper, fixed workers, jitter 0.1, Poisson) with 1000 workers vs
    the 64-worker baseline of the same run, ~245 000-330 000 requests each: a per-event cost that grows with the
    worker count shows as a ratio well below 1 (before 2026-12-01's fix, the busy-stage purge scanned every
    worker on every arrival: 0.2-0.3x)."""
    spec = _lv_workers(total)
    cap = spec.capacity().pipeline
    arr = poisson(load * cap, 3.0 * 1000 / total)  # the same number of requests at both sizes
    benchmark.group = f"simulate lv pard-paper load {load}: cost per request vs workers"
    report = benchmark.pedantic(simulate, args=(spec, arr, "pard-paper"),
                                kwargs={"autoscale": False, "jitter_cv": 0.1}, rounds=3, iterations=1)
    benchmark.extra_info.update(items=int(arr.size), workers=total, baseline=total == 64)
    print(f"\nlv {total} workers, load {load}: {arr.size} requests, "
          f"{benchmark.stats.stats.median * 1e9 / arr.size:.0f} ns/request (median of 3)")
    assert report.submitted == arr.size
