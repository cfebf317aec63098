"""Benchmarks of the live runtime (issues 5 and 15): the cost per request of pard.Runtime's machinery.

Stages that do no work (identity over the batch), so what is timed is the runtime itself: submit,
the C++ stage schedulers, the worker threads' batch forming and hand-over, the futures.  One timed
call pushes ``N`` requests -- from one thread, or split over ``THREADS`` submitting threads -- and
waits for all of them.  Two shapes: one stage, and three stages in a chain (the shape of the
built-in ``tm``), batches of up to ``MAX_B`` = 64.

Baseline, measured in the same run (issue 15): the same pipeline hand-written in plain Python --
``queue.SimpleQueue``, one thread per stage forming batches of up to 64, a
``concurrent.futures.Future`` per request (FCFS, no deadlines, no drops, no statistics) -- what a
user would write in an afternoon.  ``test_scheduler_share_mild_overload`` measures the scheduler's
share of request latency (``Runtime.overhead()``) on a stage whose executor takes real time, fed
slightly above its capacity.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from pard.config import PipelineSpec, StageSpec
from pard.runtime import Runtime

__all__: list[str] = []

N = 8000
MAX_B = 64
THREADS = 8
#: stage names of each shape (``tm``'s stage names for the three-stage chain)
SHAPES = {"1 stage": ["s0"], "tm (3 stages)": ["vehicle_detect", "vehicle_classify", "plate_ocr"]}


def _spec(names: list[str]) -> PipelineSpec:
    return PipelineSpec(name="bench", slo=60.0, stages=[
        StageSpec(name=n, profile={1: 1e-5, MAX_B: 1e-4}, max_batch=MAX_B,
                  successors=[names[i + 1]] if i + 1 < len(names) else [])
        for i, n in enumerate(names)
    ])


def _identity(xs: list[Any]) -> list[Any]:
    return list(xs)


class _QueuePipeline:
    """The plain Python pipeline: per stage a SimpleQueue and one thread forming batches of up to
    MAX_B; a concurrent.futures.Future per request."""

    def __init__(self, n_stages: int) -> None:
        self.qs: list[queue.SimpleQueue[Any]] = [queue.SimpleQueue() for _ in range(n_stages)]
        self.threads = [threading.Thread(target=self._run, args=(self.qs[k], self.qs[k + 1] if k + 1 < n_stages else None),
                                         daemon=True) for k in range(n_stages)]
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
        self.qs[0].put((payload, fut))
        return fut

    def close(self) -> None:
        self.qs[0].put(None)
        for t in self.threads:
            t.join()


def _drive(submit: Any, threads: int) -> None:
    """Submit N requests (split over ``threads`` threads) and wait for every result."""
    def part(n: int) -> None:
        futs = [submit(i) for i in range(n)]
        for f in futs:
            f.result()

    if threads == 1:
        part(N)
        return
    ts = [threading.Thread(target=part, args=(N // threads,)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _group(shape: str, threads: int) -> str:
    return f"runtime per request: {shape}, {threads} submitting thread{'s' if threads > 1 else ''}"


@pytest.mark.parametrize("threads", [1, THREADS])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_queue_pipeline_baseline(benchmark: Any, shape: str, threads: int) -> None:
    """The plain Python pipeline (SimpleQueue, a batching thread per stage, a Future per request): baseline."""
    benchmark.group = _group(shape, threads)
    pipe = _QueuePipeline(len(SHAPES[shape]))
    try:
        benchmark.pedantic(_drive, args=(pipe.submit, threads), rounds=5, warmup_rounds=1)
    finally:
        pipe.close()
    benchmark.extra_info.update(items=N, label="plain Python pipeline (baseline)", baseline=True)


@pytest.mark.parametrize("policy", ["naive", "pard"])
@pytest.mark.parametrize("threads", [1, THREADS])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_runtime_per_request(benchmark: Any, shape: str, threads: int, policy: str) -> None:
    """pard.Runtime end to end (submit, stages, futures) per request, identity executors."""
    benchmark.group = _group(shape, threads)
    names = SHAPES[shape]
    rt = Runtime(_spec(names), {n: _identity for n in names}, policy=policy, planner={"sync_interval_s": 0.2})
    try:
        benchmark.pedantic(_drive, args=(rt.submit, threads), rounds=5, warmup_rounds=1)
        ov = rt.overhead()
        n = rt.counts()["submitted"]
    finally:
        rt.close()
    benchmark.extra_info.update(items=N, label=f"pard Runtime, {policy}")
    benchmark.extra_info["scheduler_ns_per_request"] = ov["scheduler_s"] * 1e9 / n


def _sleeping(d_s: float) -> Any:
    def run(xs: list[Any]) -> list[Any]:
        time.sleep(d_s)
        return list(xs)
    return run


@pytest.mark.benchmark(group="runtime: scheduler share of latency, mild overload (no baseline)")
@pytest.mark.parametrize("policy", ["pard", "naive"])
def test_scheduler_share_mild_overload(benchmark: Any, policy: str) -> None:
    """Scheduler time per request over mean request latency, one stage fed 1.1x its capacity for 3 s."""
    d_s, b = 0.004, 16  # a batch of 16 takes 4 ms: 4 000 req/s capacity
    spec = PipelineSpec(name="mild", slo=0.05, stages=[StageSpec(name="s", profile={1: d_s, b: d_s}, max_batch=b)])
    shares: list[float] = []

    def run() -> None:
        rt = Runtime(spec, {"s": _sleeping(d_s)}, policy=policy, planner={"sync_interval_s": 0.25})
        rate = 1.1 * b / d_s
        futs = rt.replay(np.arange(0.0, 3.0, 1.0 / rate), [0])
        rt.close()
        out = rt.outcomes()
        done = np.isin(out["state"], [1, 2])
        lat = float(np.mean(out["finish_s"][done] - out["send_s"][done]))
        ov = rt.overhead()
        shares.append(ov["scheduler_s"] / len(futs) / lat)

    benchmark.pedantic(run, rounds=3, warmup_rounds=0)
    benchmark.extra_info.update(items=1, label=f"scheduler share of latency ({policy})", share=shares)
