"""Benchmarks of the live runtime (issue 5): the cost per request of pard.Runtime's machinery.

A two-stage chain whose stages do no work (identity over the batch), so what is timed is the
runtime itself: submit, the C++ stage schedulers, the worker threads' batch forming and hand-over,
the futures.  One timed call pushes ``N`` requests from one thread and waits for all of them.

Baseline, measured in the same run: the same two-stage pipeline hand-written with
``queue.SimpleQueue`` and one worker thread per stage that drains up to ``MAX_B`` requests per batch
(FCFS, no deadlines, no drops, no statistics) -- the least a Python pipeline with batching and
futures costs.  A second row reports the CPU time spent inside the scheduler calls and the
planner per request (``Runtime.overhead()``), which is what the paper's "scheduler overhead"
counts.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any

import pytest

from pard.config import PipelineSpec, StageSpec
from pard.runtime import Runtime

__all__: list[str] = []

N = 4000
MAX_B = 32


def _spec() -> PipelineSpec:
    return PipelineSpec(name="bench", slo=60.0, stages=[
        StageSpec(name="a", profile={1: 1e-4, MAX_B: 1e-3}, max_batch=MAX_B, successors=["b"]),
        StageSpec(name="b", profile={1: 1e-4, MAX_B: 1e-3}, max_batch=MAX_B),
    ])


def _identity(xs: list[Any]) -> list[Any]:
    return list(xs)


class _QueuePipeline:
    """Two stages of SimpleQueue + one worker thread each, batches of up to MAX_B, futures."""

    def __init__(self) -> None:
        self.q1: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.q2: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._run, args=(self.q1, self.q2), daemon=True),
                        threading.Thread(target=self._run, args=(self.q2, None), daemon=True)]
        for t in self.threads:
            t.start()

    @staticmethod
    def _run(src: queue.SimpleQueue[Any], dst: queue.SimpleQueue[Any] | None) -> None:
        while True:
            first = src.get()
            if first is None:
                if dst is not None:
                    dst.put(None)
                return
            batch = [first]
            while len(batch) < MAX_B:
                try:
                    item = src.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    src.put(None)
                    break
                batch.append(item)
            outs = _identity([p for p, _ in batch])
            for (_, fut), o in zip(batch, outs):
                if dst is None:
                    fut.set_result(o)
                else:
                    dst.put((o, fut))

    def submit(self, payload: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self.q1.put((payload, fut))
        return fut

    def close(self) -> None:
        self.q1.put(None)
        for t in self.threads:
            t.join()


@pytest.mark.benchmark(group="runtime: end-to-end cost per request, 2 empty stages")
def test_runtime_per_request(benchmark: Any) -> None:
    """pard.Runtime (naive policy) end to end: submit + 2 stages + future, per request."""
    rt = Runtime(_spec(), {"a": _identity, "b": _identity}, policy="naive")

    def run() -> None:
        futs = [rt.submit(i) for i in range(N)]
        for f in futs:
            f.result()

    try:
        benchmark.pedantic(run, rounds=7, warmup_rounds=1)
    finally:
        rt.close()
    benchmark.extra_info.update(items=N, label="pard Runtime, naive (2 stages)")


@pytest.mark.benchmark(group="runtime: end-to-end cost per request, 2 empty stages")
def test_runtime_per_request_pard(benchmark: Any) -> None:
    """pard.Runtime under the pard policy (planner terms, drop test) end to end, per request."""
    rt = Runtime(_spec(), {"a": _identity, "b": _identity}, policy="pard", sync_interval_s=0.2)

    def run() -> None:
        futs = [rt.submit(i) for i in range(N)]
        for f in futs:
            f.result()

    try:
        benchmark.pedantic(run, rounds=7, warmup_rounds=1)
        ov = rt.overhead()
        n = rt.counts()["submitted"]
    finally:
        rt.close()
    benchmark.extra_info.update(items=N, label="pard Runtime, pard (2 stages)")
    benchmark.extra_info["scheduler_ns_per_request"] = ov["scheduler_s"] * 1e9 / n
    benchmark.extra_info["planner_ns_per_request"] = ov["planner_s"] * 1e9 / n


@pytest.mark.benchmark(group="runtime: end-to-end cost per request, 2 empty stages")
def test_queue_pipeline_baseline(benchmark: Any) -> None:
    """Hand-written SimpleQueue pipeline with batching and futures (baseline), per request."""
    pipe = _QueuePipeline()

    def run() -> None:
        futs = [pipe.submit(i) for i in range(N)]
        for f in futs:
            f.result()

    try:
        benchmark.pedantic(run, rounds=7, warmup_rounds=1)
    finally:
        pipe.close()
    benchmark.extra_info.update(items=N, label="SimpleQueue pipeline (baseline)", baseline=True)


@pytest.mark.benchmark(group="runtime: scheduler + planner CPU per request (no baseline)")
@pytest.mark.parametrize("policy", ["pard", "naive"])
def test_scheduler_cpu_per_request(benchmark: Any, policy: str) -> None:
    """CPU time inside the C++ scheduler calls and the planner, per request (Runtime.overhead)."""
    samples: list[float] = []

    def run() -> None:
        rt = Runtime(_spec(), {"a": _identity, "b": _identity}, policy=policy, sync_interval_s=0.1)
        futs = [rt.submit(i) for i in range(N)]
        for f in futs:
            f.result()
        rt.close()
        ov = rt.overhead()
        samples.append((ov["scheduler_s"] + ov["planner_s"]) * 1e9 / N)

    benchmark.pedantic(run, rounds=5, warmup_rounds=0)
    benchmark.extra_info.update(label=f"scheduler + planner CPU per request ({policy})", cpp_ns=samples)
