"""The planner as a Ray actor: the same :class:`pard.Planner` every ``sync_interval_s``, one per pipeline.

A thread inside the actor wakes every sync interval on the deployment clock, takes every stage
actor's statistics since its previous take (one ``take_stats`` call per stage, all in flight at once),
runs :meth:`pard.Planner.update` on them -- the very statistics the local runtime's planner thread
hands it, keyed the same way -- and sends each stage its terms (one ``publish`` call per stage, not
awaited).  So the state traffic is two small messages per stage per sync; :meth:`PlannerActor.info`
counts their bytes (as pickled) and the update's CPU time.

Faults.  If this actor dies, the stages keep the terms it published last: their schedulers read
them on the hot path and nothing waits for the planner.  Ray restarts it (``max_restarts``); the
constructor runs again with the same arguments, builds a fresh :class:`pard.Planner` -- its windows
refill from the next intervals, as at start-up -- and resumes the loop.  Its clock starts at the
restart (statistics carry counts and durations, not times the planner compares across a restart),
and the first take after a restart discards what piled up while it was down, so the first interval
it ingests is a whole sync interval long.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ray

from ..planner import Planner
from .clock import Clock

__all__ = ["PlannerActor"]


class PlannerActor:
    """One pipeline's planner (a Ray actor class body; :func:`pard.ray.deploy` creates it).

    Args:
        planner_stages: ``pard.planner.PlannerStage`` per stage (the local runtime's wiring).
        policy: the policy (name or ``PolicySpec``) the planner applies.
        options: keyword arguments of :class:`pard.Planner` (``lam``, ``window_s``, ...).
        stages: the stage actors, in stage order.
        workers: worker actors per stage (the planner's ``workers`` argument).
        sync_interval_s: the period (s).
        epoch_s: the deployment's epoch on the driver's clock.
    """

    def __init__(self, planner_stages: Sequence[Any], policy: Any, options: Mapping[str, Any],
                 stages: Sequence[Any], workers: Sequence[int], sync_interval_s: float, epoch_s: float) -> None:
        self._planner = Planner(list(planner_stages), policy=policy, **dict(options))
        self._stages = list(stages)
        self._workers = [int(w) for w in workers]
        self._sync = float(sync_interval_s)
        self._clock = Clock(epoch_s)
        self._calls = 0
        self._planner_ns = 0
        self._bytes_in = 0
        self._bytes_out = 0
        self._errors: list[str] = []
        self._last_terms: list[dict[str, float]] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pard-ray-planner", daemon=True)
        self._thread.start()

    def wall_time(self) -> float:
        """This node's ``time.time()`` (clock probe)."""
        return time.time()

    def set_offset(self, offset_s: float) -> None:
        """Use ``offset_s`` (this node's clock minus the driver's) from now on."""
        self._clock.offset_s = float(offset_s)

    def pid(self) -> int:
        import os

        return os.getpid()

    def _take(self) -> list[dict[str, Any]]:
        return list(ray.get([s.take_stats.remote() for s in self._stages], timeout=max(5.0, 5 * self._sync)))

    def _loop(self) -> None:
        try:
            self._take()  # discard what piled up before this (re)start: the first interval is whole
        except Exception as e:  # noqa: BLE001 - a stage not reachable yet: the next sync retries
            self._errors.append(f"{type(e).__name__}: {e}"[:300])
        t0 = self._clock.now()
        while True:
            due = t0 + self._sync * (self._calls + 1)
            if self._stop.wait(max(0.0, due - self._clock.now())):
                return
            self._calls += 1
            try:
                self._sync_once(self._clock.now() - t0)
            except Exception as e:  # noqa: BLE001 - keep the stages on their last terms, try again next sync
                self._errors.append(f"{type(e).__name__}: {e}"[:300])

    def _sync_once(self, now_s: float) -> None:
        stats = self._take()
        c0 = time.thread_time_ns()
        terms = self._planner.update(now_s, stats, self._workers)
        kwargs = [t.publish_kwargs() for t in terms]
        self._planner_ns += time.thread_time_ns() - c0
        for s, kw in zip(self._stages, kwargs):
            s.publish.remote(kw)
        self._bytes_in += sum(len(pickle.dumps(s, protocol=5)) for s in stats)
        self._bytes_out += sum(len(pickle.dumps(kw, protocol=5)) for kw in kwargs)
        self._last_terms = kwargs

    def info(self) -> dict[str, Any]:
        """``calls``, ``planner_s`` (update CPU time), ``bytes_in``/``bytes_out`` (stats / terms, as
        pickled), ``errors`` and the ``terms`` published last -- since this incarnation started."""
        return {"calls": self._calls, "planner_s": self._planner_ns * 1e-9, "bytes_in": self._bytes_in,
                "bytes_out": self._bytes_out, "errors": list(self._errors), "terms": self._last_terms}

    def stop(self) -> None:
        """Stop the loop (the deployment is closing)."""
        self._stop.set()
