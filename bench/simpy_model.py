"""A reference model of a pipeline under the ``naive`` policy, written in SimPy.

It models the batching semantics of DESIGN §3.1 independently of pard's C++ simulator, so the two can
be compared for speed (requests simulated per second of wall time) and for agreement (mean end-to-end
latency):

* every stage has one FIFO queue and ``W`` workers; a worker takes up to ``max_batch`` requests;
* when a worker's batch *starts*, it at once collects its next batch from the queue (if the queue is
  not empty); that batch waits until the running one ends (batch wait ``W in [0, d(b)]``);
* if the queue was empty at the start, the worker collects when its batch ends (``W = 0``); an idle
  worker collects and starts as soon as requests arrive; the requests of one upstream batch arrive
  at the next stage together;
* a batch of ``b`` runs ``d(b)`` seconds (deterministic), piecewise-linear in ``b`` through the
  profile's points (flat below the first point, last slope beyond the last).

Chains only (the benchmark uses ``lv``).  Nothing is dropped: ``naive`` never drops.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Generator, Sequence

import numpy as np
import simpy

__all__ = ["simulate_naive_chain"]


def _duration(profile: dict[int, float], b: int) -> float:
    pts = sorted(profile.items())
    bs = np.array([p[0] for p in pts], dtype=float)
    ds = np.array([p[1] for p in pts], dtype=float)
    if b <= bs[-1] or bs.size == 1:
        if bs.size == 1:
            return float(ds[0] * b / bs[0]) if b > bs[0] else float(ds[0])
        return float(np.interp(b, bs, ds))
    return float(ds[-1] + (ds[-1] - ds[-2]) / (bs[-1] - bs[-2]) * (b - bs[-1]))


class _Stage:
    def __init__(self, env: simpy.Environment, profile: dict[int, float], max_batch: int, workers: int) -> None:
        self.env = env
        self.queue: Deque[int] = deque()
        self.max_batch = max_batch
        self.d = [0.0] + [_duration(profile, b) for b in range(1, max_batch + 1)]
        self.signal = env.event()
        self.next: "_Stage | None" = None
        self.finish: Any = None
        for _ in range(workers):
            env.process(self.worker())

    def arrive(self, ids: Sequence[int]) -> None:
        self.queue.extend(ids)
        if not self.signal.triggered:
            self.signal.succeed()
            self.signal = self.env.event()

    def take(self) -> list[int]:
        q = self.queue
        n = min(len(q), self.max_batch)
        return [q.popleft() for _ in range(n)]

    def worker(self) -> Generator[Any, Any, None]:
        pending: list[int] = []
        while True:
            if pending:
                batch, pending = pending, []
            else:
                while not self.queue:
                    yield self.signal
                batch = self.take()
            if self.queue:
                pending = self.take()
            yield self.env.timeout(self.d[len(batch)])
            if self.next is not None:
                self.next.arrive(batch)
            else:
                self.finish(batch)


def simulate_naive_chain(
    stages: Sequence[tuple[dict[int, float], int, int]], arrivals_s: np.ndarray
) -> np.ndarray:
    """Finish time (s) of every request of ``arrivals_s`` through a chain of ``stages``.

    Args:
        stages: per stage ``(profile {batch: seconds}, max_batch, workers)``, in chain order.
        arrivals_s: sorted arrival times (s), shape ``(n,)``.

    Returns:
        float64 array ``(n,)`` of finish times.
    """
    env = simpy.Environment()
    finish = np.full(arrivals_s.size, np.nan)

    def done(batch: list[int]) -> None:
        finish[batch] = env.now

    objs = [_Stage(env, p, b, w) for p, b, w in stages]
    for a, b in zip(objs, objs[1:]):
        a.next = b
    objs[-1].finish = done

    def source() -> Generator[Any, Any, None]:
        first = objs[0]
        for i, t in enumerate(arrivals_s):
            if t > env.now:
                yield env.timeout(float(t) - env.now)
            first.arrive([i])

    env.process(source())
    env.run()
    return finish
