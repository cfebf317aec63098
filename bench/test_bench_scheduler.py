"""Benchmarks of the scheduler and simulator core (issue 4): drop decision, form_batch, simulator speed.

Groups (the summary table of bench/conftest.py prints median ns per item and ratios to the
baseline of each group, all measured in the same run):
  * ``drop-decision``: the Eq. 3b test ``t_e + d_k(b) + downstream > deadline`` per request, timed
    in C++ by ``_core_bench.bench_drop_decision``; baselines: the same test in a Python loop, and NumPy.
  * ``form-batch``: one request through a stage (submit, drain into the DEPQ, pop, drop test) with a
    queue of 1 000 and batches of 8; C++ (``_core_bench.bench_form_batch``), the bound StageScheduler driven
    from Python, and a ``heapq`` baseline doing the same work in Python.
  * ``sim-lv``: simulated requests of the built-in ``lv`` pipeline (5 stages) per second of wall
    time, under naive and pard, with a planner stand-in publishing constant terms every simulated
    second (no Python per request). simapi's SimPy model of the same pipeline is the baseline for
    the 100x target; it lives in simapi's benchmark.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pytest

from pard import _core, _core_bench

__all__: list[str] = []

N_DECISIONS = 1_000_000
QUEUE = 1_000
BATCH = 8


# ---- drop decision ----------------------------------------------------------------------------


def _deadlines(n: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.integers(0, 2_000_000, size=n, dtype=np.int64)


def test_drop_decision_cpp(benchmark: Any) -> None:
    benchmark.group = "drop-decision"
    results: list[float] = []
    benchmark.extra_info.update(label="C++ pard_drops (Eq. 3b), per request", cpp_ns=results)
    benchmark.pedantic(lambda: results.append(_core_bench.bench_drop_decision(N_DECISIONS)), rounds=5)


def test_drop_decision_python(benchmark: Any) -> None:
    benchmark.group = "drop-decision"
    dl = _deadlines(100_000).tolist()
    t_e, d_k, downstream = 400_000, 300_000, 300_000

    def work() -> int:
        return sum(1 for x in dl if t_e + d_k + downstream > x)

    benchmark.extra_info.update(items=len(dl), label="Python loop (baseline)", baseline=True)
    benchmark.pedantic(work, rounds=5)


def test_drop_decision_numpy(benchmark: Any) -> None:
    benchmark.group = "drop-decision"
    dl = _deadlines(N_DECISIONS)
    thr = 400_000 + 300_000 + 300_000
    benchmark.extra_info.update(items=dl.size, label="NumPy vectorised compare")
    benchmark.pedantic(lambda: int(np.count_nonzero(dl < thr)), rounds=5)


# ---- form_batch -----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["pard-paper", "pard"])
def test_form_batch_cpp(benchmark: Any, variant: str) -> None:
    """C++ submit + form_batch per request; ``pard`` adds the tier heaps and the hot-path overload test
    (bench_form_batch publishes a service rate so the test runs on every batch, never firing)."""
    benchmark.group = "form-batch"
    results: list[float] = []
    pol = (_core.Policy(order="lbf", drop="pard") if variant == "pard-paper"
           else _core.Policy(order="adaptive", drop="pard", tiered=True, reactive=True))
    benchmark.extra_info.update(label=f"C++ StageScheduler submit+form_batch ({variant})", cpp_ns=results)
    benchmark.pedantic(lambda: results.append(_core_bench.bench_form_batch(QUEUE, BATCH, pol, 200)), rounds=5)


def test_form_batch_bound(benchmark: Any) -> None:
    benchmark.group = "form-batch"
    prof = _core.Profile([1], [1e-6])
    s = _core.StageScheduler(stage=0, profile=prof, max_batch=BATCH, policy=_core.Policy(order="lbf", drop="pard"),
                             budget_fraction=1.0, ring_capacity=1024)
    dl = (10.0 + np.random.default_rng(2).random(QUEUE)).tolist()
    submit, form = s.submit, s.form_batch

    def work() -> None:
        for i, d in enumerate(dl):
            submit(i, 0.0, d, 0.0)
        while form(0.0, 0.0)[0].size:
            pass

    benchmark.extra_info.update(items=QUEUE, label="pard StageScheduler from Python")
    benchmark.pedantic(work, rounds=20, warmup_rounds=1)


def test_form_batch_heapq(benchmark: Any) -> None:
    benchmark.group = "form-batch"
    dl = (10.0 + np.random.default_rng(2).random(QUEUE)).tolist()

    def work() -> None:
        heap: list[tuple[float, int]] = []
        for i, d in enumerate(dl):
            heapq.heappush(heap, (d, i))
        while heap:
            batch = []
            thr = 0.0 + 1e-6 + 0.0
            while heap and len(batch) < BATCH:
                d, i = heapq.heappop(heap)
                if not thr > d:
                    batch.append(i)

    benchmark.extra_info.update(items=QUEUE, label="heapq + Python drop test (baseline)", baseline=True)
    benchmark.pedantic(work, rounds=20, warmup_rounds=1)


# ---- simulator speed ------------------------------------------------------------------------------


def _lv_stages() -> tuple[list[dict[str, Any]], float]:
    from pard.config import builtin

    spec = builtin("lv")
    names = [s.name for s in spec.stages]
    stages = []
    for s in spec.stages:
        sizes = sorted(s.profile)
        stages.append(dict(name=s.name, profile=_core.Profile(sizes, [s.profile[b] for b in sizes]),
                           max_batch=s.max_batch, workers=s.workers,
                           successors=[names.index(x) for x in s.successors], budget_fraction=0.2))
    return stages, float(spec.capacity().pipeline)


@pytest.mark.parametrize("load", [0.9, 1.2])
@pytest.mark.parametrize("policy", ["naive", "pard"])
def test_sim_lv(benchmark: Any, policy: str, load: float) -> None:
    benchmark.group = "sim-lv"
    stages, cap = _lv_stages()
    n = 300_000
    arrivals = np.cumsum(np.random.default_rng(3).exponential(1.0 / (load * cap), n))
    pol = _core.Policy(order="fcfs", drop="none") if policy == "naive" else _core.Policy(order="adaptive", drop="pard")

    def work() -> None:
        sim = _core.Simulator(stages=stages, policy=pol, arrivals_s=arrivals, slo_s=np.full(n, 0.5),
                              tier=np.zeros(n, np.int32), jitter_cv=0.1, seed=1)
        t = 0.0
        while sim.run_until(t):
            sim.take_stats()
            for k in range(len(stages)):
                sim.publish(k, downstream_s=0.03 * (len(stages) - 1 - k), mu=load, eps=0.1, queue_delay_s=0.0)
            t += 1.0
        assert int(np.count_nonzero(sim.outcomes()["state"] == 0)) == 0

    benchmark.extra_info.update(items=n, label=f"C++ Simulator lv {policy} load {load}")
    benchmark.pedantic(work, rounds=3, warmup_rounds=0)
