"""The driver's handle on a deployed pipeline: submit, await, report, close (the local runtime's contract).

:func:`pard.ray.deploy` returns a :class:`RayPipeline`.  The driver is where every request starts and
where its terminal state is decided -- once, first event wins -- by the local runtime's own
:class:`pard.ray.ledger.Ledger` (ids, futures, the outcome table, counts), so each request
ends in exactly one state and ``submitted = on_time + late + dropped + rejected + failed`` holds
exactly, with the same futures, exceptions and drop reasons as :class:`pard.Runtime`.  The report is
built by the same :class:`pard.recorder.RunRecorder` as the local runtime's and ``pard simulate``'s,
fed with the statistics the stage actors kept.

Traffic (:mod:`pard.ray.traffic`): a sender thread ships submitted requests to the entry stage
actors, many per call; a poller thread receives every stage's events, many batches per reply.  In a
DAG a request that ends in one branch is *forgotten* by every other stage, so its sibling branches
stop at once; so is a request the caller cancels.

Times are float seconds since the deployment's epoch on the driver's clock (:mod:`pard.ray.clock`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import ray

from ..compute_split import ComputeSplit
from ..errors import Dropped, ExecutorError, PardValueError, Rejected, RuntimeStateError
from ..outcomes import DROPPED, FAILED, LATE, ON_TIME, PENDING, REASONS, REJECTED, STATES, reason_code
from ..recorder import RunRecorder
from ..report import report_bins
from ..runtime.facade import HISTORY
from ..runtime.replay import replay as _replay
from .ledger import Ledger, Request, RequestFuture
from ..runtime.setup import PayloadShape, positive_seconds
from .traffic import Lost, Poller, Sender, fetch

__all__ = ["RayPipeline"]

_CANCELLED = reason_code("cancelled")
_REJECTED_CODE = reason_code("rejected")
_INT32_MAX = 2**31 - 1
_MAX_SLO_S = 1e9


class _Ledger(Ledger):
    """The local runtime's ledger, telling every stage actor to forget a request the caller cancelled."""

    def __init__(self, n_stages: int, n_sinks: int, now: Any, stages: Sequence[Any]) -> None:
        super().__init__(n_stages, n_sinks, now, HISTORY)
        self._stage_actors = list(stages)

    def cancel(self, r: Request) -> bool:
        if not super().cancel(r):
            return False
        for s in self._stage_actors:
            s.forget.remote([(r.id, r.deadline_s)])
        return True


class RayPipeline:
    """A pipeline served by Ray actors (create with :func:`pard.ray.deploy`, not directly).

    Mirrors :class:`pard.Runtime`: :meth:`submit`, :meth:`infer` (``await``), :meth:`replay`,
    :meth:`close`, :meth:`counts`, :meth:`outcomes`, :meth:`batches`, :meth:`report`, :meth:`overhead`.
    """

    def __init__(self, *, spec: Any, policy: Any, epoch_s: float, stages: list[Any], workers: list[list[Any]],
                 planner: Any, shape: PayloadShape, offsets: dict[str, Any]) -> None:
        self._spec = spec
        self._policy = policy
        self._epoch = float(epoch_s)
        self._stages = stages
        self._workers = workers
        self._planner = planner
        self._shape = shape
        self._offsets = offsets
        names = [st.name for st in spec.stages]
        self._entries = [names.index(n) for n in spec.entry_stages()]
        self._exits = [names.index(n) for n in spec.exit_stages()]
        self._dag = any(len(st.successors) > 1 for st in spec.stages) or len(self._entries) > 1
        self._ledger = _Ledger(len(names), len(self._exits), self.now, stages)
        self._accepting = True
        self._closed = False
        self._histories: list[dict[str, Any]] | None = None
        self._infos: list[dict[str, Any]] = []
        self._worker_cpu: list[list[float]] = []
        self._planner_info: dict[str, Any] = {}
        self._calls = {"enqueue": 0, "groups": 0, "events": 0, "forget": 0}
        self._sender = Sender([stages[k] for k in self._entries], self._calls)
        self._poller = Poller(stages, self._handle, self._calls)

    # ------------------------------------------------------------------ properties
    @property
    def pipeline(self) -> Any:
        """The :class:`pard.PipelineSpec` served."""
        return self._spec

    @property
    def policy(self) -> str:
        """The policy's name."""
        return str(self._policy.name)

    @property
    def workers(self) -> dict[str, int]:
        """Worker actors per stage."""
        return {st.name: len(w) for st, w in zip(self._spec.stages, self._workers)}

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has begun (``submit`` then raises)."""
        return not self._accepting

    @property
    def payload_shape(self) -> tuple[int, ...] | None:
        """The shape ``submit`` requires of a payload (given, declared or learnt), or None (no check)."""
        return self._shape.shape

    @property
    def clock_offsets(self) -> dict[str, Any]:
        """Each actor's clock offset against the driver's, measured at deploy (:class:`pard.ray.clock.Offset`)."""
        return dict(self._offsets)

    def worker_actors(self, stage: str) -> list[Any]:
        """The stage's worker actor handles (``ray.kill(h, no_restart=False)`` simulates a crash)."""
        return list(self._workers[self._spec.index(stage)])

    @property
    def planner_actor(self) -> Any:
        """The planner's Ray actor handle."""
        return self._planner

    def now(self) -> float:
        """Seconds since the deployment's epoch on the driver's clock."""
        return time.time() - self._epoch

    def __repr__(self) -> str:
        return (f"RayPipeline({self._spec.name!r}, policy={self.policy!r}, workers={self.workers}, "
                f"{'closed' if self._closed else 'running'}, submitted={self._ledger.out.n})")

    # ------------------------------------------------------------------ submit
    def submit(self, payload: Any, *, slo: float | None = None, tier: int = 0) -> RequestFuture:
        """Submit one request; returns its future at once (as :meth:`pard.Runtime.submit`).

        Args:
            payload: the entry stage's input (picklable; it travels to the entry worker by Ray).
            slo: end-to-end SLO in seconds in ``(0, 1e9]``; default the pipeline's.
            tier: service tier, an int in ``[0, 2**31)``.

        Raises (the request is then counted nowhere):
            PardTypeError / PardValueError: a bad ``slo``, ``tier`` or payload shape (naming it).
            pard.errors.RuntimeStateError (a RuntimeError): the pipeline is closed (as :meth:`pard.Runtime.submit`).
        """
        from ..runtime.facade import _check_slo  # the local runtime's SLO rule

        slo_s = float(self._spec.slo) if slo is None else _check_slo(slo)
        if isinstance(tier, bool) or not isinstance(tier, (int, np.integer)) or not 0 <= int(tier) <= _INT32_MAX:
            raise PardValueError(f"tier must be an int in [0, 2**31), got {tier!r}")
        shape, learning = self._shape.check(payload)
        led = self._ledger
        with led.lock:
            if not self._accepting:
                raise RuntimeStateError("this RayPipeline is closed; deploy a new one")
            if learning:
                self._shape.learn_locked(shape)
                if shape != self._shape.shape:
                    raise PardValueError(self._shape.message(shape))
            send = self.now()
            req = led.register_locked(send, slo_s, int(tier))
            req.stage = self._entries[0]
        self._sender.put((req.id, send, req.deadline_s, int(tier), payload))
        assert req.future is not None
        return req.future

    async def infer(self, payload: Any, *, slo: float | None = None, tier: int = 0) -> Any:
        """``await``-able :meth:`submit`: the output, or the request's exception.  Cancelling the
        awaiting task cancels the request."""
        fut = self.submit(payload, slo=slo, tier=tier)
        try:
            waiter = asyncio.wrap_future(fut)
        except BaseException:
            fut.cancel()
            raise
        return await waiter

    def replay(self, arrivals_s: Sequence[float] | np.ndarray, payloads: Sequence[Any], *,
               slo: float | None = None) -> list[RequestFuture]:
        """Submit one request per arrival offset (s, sorted, >= 0) in wall-clock time from now, as
        :meth:`pard.Runtime.replay` (the same function); request ``i`` gets ``payloads[i % len]``."""
        return _replay(self.submit, arrivals_s, payloads, slo=slo)

    # ------------------------------------------------------------------ events
    def _handle(self, k: int, events: list[tuple[Any, ...]]) -> list[tuple[int, float]]:
        """Apply one stage's events (:mod:`pard.ray.stage`); returns what other stages must forget."""
        led = self._ledger
        names = [st.name for st in self._spec.stages]
        done: list[tuple[Request, int, float, Any, int]] = []
        ended: list[Request] = []
        for ev in events:
            kind = ev[0]
            if kind == "batch":
                led.charge_batch(k, list(ev[1]), ev[2])
                continue
            r = led.live.get(ev[1])
            if r is None:  # ended already (a sibling branch, a cancel): first event won
                continue
            if kind == "done":
                done.append((r, ev[2], ev[3], ev[4], ev[5]))
            elif kind == "drop":
                _, rid, stage, code, t = ev
                if led.finish(r, DROPPED, stage, code, t, Dropped(rid, names[stage], REASONS[code])):
                    ended.append(r)
            elif kind == "reject":
                _, rid, stage, t = ev
                led.finish(r, REJECTED, stage, _REJECTED_CODE, t,
                           Rejected("ring_full", stage=names[stage], request_id=rid,
                                    detail="its ingress ring is full"))
            elif kind == "fail":
                _, rid, stage, text, cause, t = ev
                err = ExecutorError(text)
                if isinstance(cause, BaseException):
                    err.__cause__ = cause
                if led.finish(r, FAILED, stage, -1, t, err):
                    ended.append(r)
        if done:
            groups = {id(d[3]): d[3] for d in done}
            got = dict(zip(groups, fetch(list(groups.values()))))
            for r, stage, t, ref, pos in done:
                group = got[id(ref)]
                if isinstance(group, Lost):
                    err = ExecutorError(f"stage {names[stage]!r}: output lost: {group.error}")
                    err.__cause__ = group.error
                    if led.finish(r, FAILED, stage, -1, t, err):
                        ended.append(r)
                else:
                    self._finish(r, stage, t, group[pos])
        return [(r.id, r.deadline_s) for r in ended] if self._dag else []

    def _finish(self, r: Request, stage: int, t: float, value: Any) -> None:
        if len(self._exits) > 1:
            with self._ledger.lock:
                if r.outputs is None:
                    r.outputs = {}
                r.outputs[stage] = value
                r.sinks_left -= 1
                if r.sinks_left > 0:
                    return
                value = {self._spec.stages[i].name: v for i, v in sorted(r.outputs.items())}
        self._ledger.finish(r, ON_TIME if t <= r.deadline_s else LATE, stage, -1, t, result=value)

    # ------------------------------------------------------------------ close
    def close(self, drain: bool = True, *, timeout_s: float | None = None) -> None:
        """Stop accepting, end every request, stop and remove every actor (as :meth:`pard.Runtime.close`).

        Args:
            drain: wait until every request has ended under the policy; ``False`` cancels what is in
                flight at once (``pard.Dropped``, reason ``cancelled``).
            timeout_s: bounds the wait (s, >= 0; None: no limit); what has not ended then is cancelled.

        After ``close`` every request is terminal and the actors are gone.  Idempotent.
        PardValueError for a bad ``timeout_s``.
        """
        if timeout_s is not None:
            positive_seconds("timeout_s", timeout_s, allow_zero=True)
        if self._closed:
            return
        deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
        led = self._ledger
        with led.lock:
            self._accepting = False
            while drain and led.inflight > 0:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                led.idle.wait(timeout=0.5 if left is None else min(left, 0.5))
        self._sender.stop(_left(deadline, 10.0))
        self._cancel_rest(_left(deadline, 10.0))
        self._collect(deadline)
        self._poller.stop(_left(deadline, 10.0))
        for a in [self._planner, *self._stages, *(w for ws in self._workers for w in ws)]:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._closed = True

    def _cancel_rest(self, timeout_s: float) -> None:
        """Cancel every request still in flight: dropped, reason ``cancelled``, at the stage holding it."""
        led = self._ledger
        with led.lock:
            live = list(led.live.values())
        if not live:
            return
        where: dict[int, int] = {}
        try:
            for k, held in enumerate(ray.get([s.held_ids.remote() for s in self._stages], timeout=timeout_s)):
                for rid in held:
                    where.setdefault(rid, k)
        except Exception:  # noqa: BLE001 - a stage gone: attribute to the stage last handed to
            pass
        now = self.now()
        names = [st.name for st in self._spec.stages]
        for r in live:
            k = where.get(r.id, r.stage)
            led.finish(r, DROPPED, k, _CANCELLED, now, Dropped(r.id, names[k], "cancelled"))

    def _collect(self, deadline: float | None) -> None:
        """Stop the planner and the stages; keep their logs and counters for the report.  Past ``deadline``
        (close's ``timeout_s``) each call still gets :data:`COLLECT_GRACE_S`: the planner and stage actors
        are asyncio actors that answer while an executor hangs.  A worker actor does not (its one thread
        runs the hung executor), so the workers' CPU times get only what is left of the deadline, all at
        once: a hung one reads 0 (close ran 10 s past a 2 s timeout_s while it waited on that one)."""
        try:
            self._planner_info = dict(ray.get(self._planner.info.remote(), timeout=_left(deadline, 10.0)))
        except Exception:  # noqa: BLE001 - a planner that is down right now (being restarted)
            self._planner_info = {}
        ray.get([s.stop.remote() for s in self._stages], timeout=_left(deadline, 10.0))
        self._histories = list(ray.get([s.history.remote() for s in self._stages], timeout=_left(deadline, 60.0)))
        self._infos = list(ray.get([s.info.remote() for s in self._stages], timeout=_left(deadline, 10.0)))
        refs = [[w.cpu_s.remote() for w in ws] for ws in self._workers]
        flat = [r for rs in refs for r in rs]
        wait = 10.0 if deadline is None else max(0.0, deadline - time.monotonic())
        ready = set(ray.wait(flat, num_returns=len(flat), timeout=wait)[0]) if flat else set()
        self._worker_cpu = [[_cpu(r) if r in ready else 0.0 for r in rs] for rs in refs]

    def __enter__(self) -> RayPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(drain=True)

    # ------------------------------------------------------------------ results
    def counts(self) -> dict[str, int]:
        """Requests by state so far: ``submitted`` and each of :data:`pard.outcomes.STATES`."""
        led = self._ledger
        with led.lock:
            c = dict(zip(STATES, led.counts))
            c["submitted"] = led.out.n
        return c

    def outcomes(self) -> dict[str, np.ndarray]:
        """Per request (index = id): as :meth:`pard.Runtime.outcomes` (copies)."""
        with self._ledger.lock:
            return self._ledger.out.copy()

    def _require_closed(self) -> list[dict[str, Any]]:
        if self._histories is None:
            raise PardValueError("this needs every request ended and the stages' logs: call close() first")
        return self._histories

    def batches(self) -> dict[str, np.ndarray]:
        """One row per executed batch (``stage``, ``start_s``, ``duration_s``, ``size``, ``wait_s``),
        by start time, as :meth:`pard.Runtime.batches`; after :meth:`close`."""
        hist = self._require_closed()
        stage = np.concatenate([np.full(h["batch_size"].size, k, dtype=np.int32) for k, h in enumerate(hist)])
        cols = {n: np.concatenate([h[f"batch_{n}"] for h in hist]) for n in ("start_s", "duration_s", "size", "wait_s")}
        order = np.argsort(cols["start_s"], kind="stable")
        return {"stage": stage[order], **{n: c[order] for n, c in cols.items()}}

    def overhead(self) -> dict[str, Any]:
        """Costs after :meth:`close`: ``scheduler_s`` (the C++ scheduler calls in the stage actors, as
        :meth:`pard.Runtime.overhead`), ``planner_s``/``planner_calls`` and the state traffic
        ``planner_bytes_in``/``planner_bytes_out`` (the planner incarnation alive at close),
        ``stage_cpu_s`` and ``worker_cpu_s`` (process CPU of the actors since construction),
        ``batches``, the driver's ``calls``, and per stage ``hop_s_mean`` (a request's arrival time --
        the upstream batch's end, or its send -- to reaching the stage actor) and
        ``record_lag_s_mean`` (a batch's end on the worker to its stage actor knowing)."""
        self._require_closed()
        infos, p = self._infos, self._planner_info
        names = [st.name for st in self._spec.stages]
        return {"scheduler_s": sum(i["scheduler_s"] for i in infos),
                "planner_s": float(p.get("planner_s", 0.0)), "planner_calls": float(p.get("calls", 0)),
                "planner_bytes_in": int(p.get("bytes_in", 0)), "planner_bytes_out": int(p.get("bytes_out", 0)),
                "planner_errors": list(p.get("errors", [])),
                "stage_cpu_s": sum(i["cpu_s"] for i in infos),
                "worker_cpu_s": float(sum(sum(c) for c in self._worker_cpu)),
                "batches": sum(i["batches"] for i in infos), "calls": dict(self._calls),
                "worker_errors": {n: i["worker_errors"] for n, i in zip(names, infos)},
                "hop_s_mean": {n: i["hop_s_mean"] for n, i in zip(names, infos)},
                "record_lag_s_mean": {n: i["record_lag_s_mean"] for n, i in zip(names, infos)}}

    def _recorder(self) -> RunRecorder:
        counts = [float(len(w)) for w in self._workers]
        rec = RunRecorder(self._spec, origin_s=0.0, workers=counts)
        end = max([self.now()] + [float(h["batch_start_s"].max()) for h in self._require_closed()
                                  if h["batch_start_s"].size])
        rec.record(self._require_closed(), counts, 0.0, end)
        return rec

    def bound_capacity(self) -> dict[str, Any]:
        """The capacity (req/s) the goodput bound of :meth:`report` uses: the rule and the code of
        :meth:`pard.Runtime.bound_capacity` (:meth:`pard.recorder.RunRecorder.stage_capacity`)."""
        rec = self._recorder()
        workers = np.array([float(len(w)) for w in self._workers])
        rates = rec.stage_capacity(workers)
        k = int(np.argmin(rates))
        return {"req_s": float(rates[k]), "profile_req_s": float((workers * rec.peak).min()),
                "bottleneck": self._spec.stages[k].name,
                "speedup_by_stage": {st.name: None if math.isnan(s) else float(s)
                                     for st, s in zip(self._spec.stages, rec.speedup())}}

    def report(self, *, t0_s: float | None = None, duration_s: float | None = None,
               capacity_req_s: float | None = None) -> Any:
        """The run's :class:`pard.Report`, built by the same :class:`pard.recorder.RunRecorder` as
        :meth:`pard.Runtime.report` (same arguments); PardValueError before :meth:`close`."""
        if capacity_req_s is not None:
            positive_seconds("capacity_req_s", capacity_req_s)
        rec = self._recorder()
        out = self.outcomes()
        if (out["state"] == PENDING).any():
            raise PardValueError("report() needs every request ended: call close() first")
        send = out["send_s"]
        t0, nb = report_bins(send, t0_s, duration_s)
        return rec.report(policy=self.policy, outcomes=out, t0_s=t0, n_bins=nb, slo_s=out["slo_s"],
                          capacity_req_s=capacity_req_s, duration_s=duration_s,
                          compute_split=self._ledger_split())

    def compute_split(self) -> ComputeSplit:
        """Where the compute went so far, per stage, every request ever: as :meth:`pard.Runtime.compute_split`
        (the same C++ rule).  Batches count once the driver has heard of them."""
        return ComputeSplit.from_mapping(self._ledger_split(), len(self._spec.stages))

    def _ledger_split(self) -> dict[str, Any]:
        with self._ledger.lock:
            return self._ledger.compute.split()

    def clock_skew(self, probes: int = 8) -> dict[str, Any]:
        """Measure every actor's clock offset again (:class:`pard.ray.clock.Offset` per actor name)."""
        from .clock import actor_offset

        actors = {f"stage {st.name!r}": s for st, s in zip(self._spec.stages, self._stages)}
        for st, ws in zip(self._spec.stages, self._workers):
            for i, w in enumerate(ws):
                actors[f"worker {i} of stage {st.name!r}"] = w
        actors["the planner"] = self._planner
        return {name: actor_offset(a, probes, timeout_s=10.0) for name, a in actors.items()}


#: What each closing call to a responsive (asyncio) actor still gets past close's deadline (s).
COLLECT_GRACE_S = 1.0


def _left(deadline: float | None, cap_s: float) -> float:
    """A closing call's timeout: ``cap_s``, or what is left of ``deadline`` but at least COLLECT_GRACE_S."""
    if deadline is None:
        return cap_s
    return min(cap_s, max(COLLECT_GRACE_S, deadline - time.monotonic()))


def _cpu(ref: Any) -> float:
    """A worker's CPU seconds, or 0 when it is dead for good."""
    try:
        return float(ray.get(ref, timeout=0))
    except Exception:  # noqa: BLE001
        return 0.0
