"""The driver's handle on a deployed pipeline: submit, await, report, close (the local runtime's contract).

:func:`pard.ray.deploy` returns a :class:`RayPipeline`.  The driver is where every request starts and
where its terminal state is decided -- once, first event wins -- so that each request ends in exactly
one state and ``submitted = on_time + late + dropped + rejected + failed`` holds exactly, as with
:class:`pard.Runtime` (whose state table, drop reasons and futures this class mirrors).

Two driver threads do the traffic, each one call for many requests:

* the *sender*: ``submit`` queues ``(id, send, deadline, tier, payload)``; the sender puts the
  payloads queued meanwhile into the object store as one group (``ray.put`` of a list, split at
  :data:`GROUP_BYTES`: Ray's cost per object is paid per group, not per request) and ships their
  keys in one ``enqueue`` call per entry stage; the next call carries whatever was submitted while
  the previous ones travelled (at most :data:`SENDS_IN_FLIGHT` calls in flight per entry stage);
* the *poller* keeps one long-poll ``events`` call open per stage actor; a reply carries the drops,
  failures, finishes (with the output's object ref) and per-batch compute shares of any number of
  batches.  Outputs are fetched in one ``ray.get`` per reply, straight from the node that made them.

In a DAG a request that ends in one branch is *forgotten* by every other stage (one ``forget`` call
per stage per reply), so its sibling branches stop at once; so is a request the caller cancels.

Times are float seconds since the deployment's epoch on the driver's clock (:mod:`pard.ray.clock`).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any

import numpy as np

import ray

from .. import _core
from ..errors import Dropped, ExecutorError, Rejected
from . import record

__all__ = ["RayPipeline", "RayRequestFuture", "STATES", "GROUP_BYTES", "INLINE_BYTES", "SENDS_IN_FLIGHT"]

#: A payload group the sender puts holds at most this many bytes of payload (``nbytes``), so that an
#: entry batch never fetches much more than its own payloads; a larger payload is a group of its own.
GROUP_BYTES = 1 << 20
#: A payload group smaller than this travels inline in the ``enqueue`` call and the stage's ``run``
#: call rather than through the object store -- Ray's own rule for small task results
#: (``max_direct_call_object_size``, 100 KiB): for small payloads the shared-memory store costs more
#: (a put, then a fetch before the batch can start) than carrying the bytes twice.
INLINE_BYTES = 100 * 1024
#: Enqueue calls the sender keeps in flight per entry stage before it waits for the oldest: more
#: cuts the entry hop's delay under load, fewer cuts the calls (and the stage actor's CPU).
SENDS_IN_FLIGHT = 2

#: Outcome state codes, as :data:`pard.runtime.STATES`.
STATES = ("pending", "on_time", "late", "dropped", "rejected", "failed")
_PENDING, _ON_TIME, _LATE, _DROPPED, _REJECTED, _FAILED = range(6)
_REASONS: list[str] = list(_core.REASONS)
_CANCELLED = _REASONS.index("cancelled")
_REJECTED_CODE = _REASONS.index("rejected")
_INT32_MAX = 2**31 - 1
_MAX_SLO_S = 1e9


class RayRequestFuture(Future):  # type: ignore[type-arg]
    """A :class:`concurrent.futures.Future` for one request (as ``pard.runtime.RequestFuture``).

    ``result()`` returns the pipeline's output (a dict ``{exit stage: output}`` for several exits) or
    raises ``pard.Dropped`` / ``pard.Rejected`` / ``pard.ExecutorError``.  ``cancel()`` succeeds
    while the request has not ended: it ends as dropped (reason ``cancelled``) and every stage
    forgets it.
    """

    request_id: int

    def __init__(self, pipeline: RayPipeline, rid: int) -> None:
        super().__init__()
        self._pipeline = pipeline
        self.request_id = rid

    def cancel(self) -> bool:
        if not self._pipeline._cancel(self.request_id):
            return False
        return super().cancel()


class _Live:
    __slots__ = ("future", "deadline", "outputs", "sinks_left")

    def __init__(self, future: RayRequestFuture, deadline: float, sinks: int) -> None:
        self.future = future
        self.deadline = deadline
        self.outputs: dict[int, Any] | None = None
        self.sinks_left = sinks


class _Table:
    """Growable per-request outcome arrays (the form of ``pard.Runtime.outcomes()``)."""

    _FIELDS = (("send_s", np.float64, 0.0), ("slo_s", np.float64, 0.0), ("tier", np.int32, 0),
               ("state", np.int8, 0), ("finish_s", np.float64, np.nan), ("drop_stage", np.int32, -1),
               ("reason", np.int32, -1), ("compute_s", np.float64, 0.0))

    def __init__(self) -> None:
        self.n = 0
        self.cols = {name: np.full(1024, fill, dtype=dt) for name, dt, fill in self._FIELDS}

    def append(self, send_s: float, slo_s: float, tier: int) -> int:
        i = self.n
        if i == self.cols["send_s"].size:
            for name, dt, fill in self._FIELDS:
                old = self.cols[name]
                new = np.full(old.size * 2, fill, dtype=dt)
                new[: old.size] = old
                self.cols[name] = new
        c = self.cols
        c["send_s"][i], c["slo_s"][i], c["tier"][i] = send_s, slo_s, tier
        self.n = i + 1
        return i

    def copy(self) -> dict[str, np.ndarray]:
        return {name: col[: self.n].copy() for name, col in self.cols.items()}


def _shape_of(payload: Any) -> tuple[int, ...] | None:
    shape = getattr(payload, "shape", None)
    try:
        return tuple(int(d) for d in (np.shape(payload) if shape is None else shape))
    except Exception:  # noqa: BLE001 - ragged or odd payloads have no shape
        return None


class RayPipeline:
    """A pipeline served by Ray actors (create with :func:`pard.ray.deploy`, not directly).

    Mirrors :class:`pard.Runtime`: :meth:`submit`, :meth:`infer` (``await``), :meth:`replay`,
    :meth:`close`, :meth:`counts`, :meth:`outcomes`, :meth:`report`, :meth:`overhead`.
    """

    def __init__(self, *, spec: Any, policy: Any, epoch_s: float, stages: list[Any], workers: list[list[Any]],
                 planner: Any, entries: list[int], exits: list[int], payload_shape: tuple[int, ...] | None,
                 learn_shape: bool, offsets: dict[str, Any], dag: bool, sync_interval_s: float) -> None:
        self._spec = spec
        self._policy = policy
        self._epoch = float(epoch_s)
        self._stages = stages
        self._workers = workers
        self._planner = planner
        self._entries = entries
        self._exits = exits
        self._exit_set = frozenset(exits)
        self._payload_shape = payload_shape
        self._learn_shape = learn_shape
        self._offsets = offsets
        self._dag = dag
        self._sync_s = float(sync_interval_s)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._table = _Table()
        self._counts = [0] * 6
        self._live: dict[int, _Live] = {}
        self._accepting = True
        self._closed = False
        self._stop = threading.Event()
        self._outbox: list[tuple[int, float, float, int, Any]] = []
        self._outbox_cv = threading.Condition(threading.Lock())
        self._histories: list[dict[str, Any]] | None = None
        self._infos: list[dict[str, Any]] | None = None
        self._planner_info: dict[str, Any] | None = None
        self._batches_seen = 0
        self._calls = {"enqueue": 0, "events": 0, "forget": 0}
        self._sender = threading.Thread(target=self._send_loop, name="pard-ray-sender", daemon=True)
        self._poller = threading.Thread(target=self._poll_loop, name="pard-ray-poller", daemon=True)
        self._sender.start()
        self._poller.start()

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
        """True once :meth:`close` has begun."""
        return not self._accepting

    @property
    def clock_offsets(self) -> dict[str, Any]:
        """Each actor's clock offset against the driver's as measured at deploy (``pard.ray.clock.Offset``)."""
        return dict(self._offsets)

    def stage_actor(self, stage: str) -> Any:
        """The stage's Ray actor handle."""
        return self._stages[self._spec.index(stage)]

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
        state = "closed" if self._closed else "running"
        return (f"RayPipeline({self._spec.name!r}, policy={self.policy!r}, workers={self.workers}, {state}, "
                f"submitted={self._table.n})")

    # ------------------------------------------------------------------ submit
    def submit(self, payload: Any, *, slo: float | None = None, tier: int = 0) -> RayRequestFuture:
        """Submit one request; returns its future at once (as :meth:`pard.Runtime.submit`).

        Args:
            payload: the entry stage's input (any picklable object; it goes into Ray's object store).
            slo: end-to-end SLO in seconds in ``(0, 1e9]``; default the pipeline's.
            tier: service tier, an int in ``[0, 2**31)``.

        Raises (the request is then counted nowhere):
            TypeError / ValueError: a bad ``slo``, ``tier`` or payload shape (the message names it).
            RuntimeError: the pipeline is closed.
        """
        slo_s = float(self._spec.slo) if slo is None else _check_slo(slo)
        if isinstance(tier, bool) or not isinstance(tier, (int, np.integer)):
            raise TypeError(f"tier must be an int, got {type(tier).__name__}: {tier!r}")
        if not 0 <= int(tier) <= _INT32_MAX:
            raise ValueError(f"tier must be in [0, 2**31), got {tier!r}")
        if self._payload_shape is not None or self._learn_shape:
            shape = _shape_of(payload)
            with self._lock:
                if self._payload_shape is None and shape is not None:
                    self._payload_shape, self._learn_shape = shape, False
            if shape != self._payload_shape:
                raise ValueError(f"payload shape {shape} does not match the entry stage's payload_shape "
                                 f"{self._payload_shape}; a payload of another shape would fail its whole batch")
        with self._lock:
            if not self._accepting:
                raise RuntimeError("this RayPipeline is closed; deploy a new one")
            send = self.now()
            rid = self._table.append(send, slo_s, int(tier))
            fut = RayRequestFuture(self, rid)
            self._live[rid] = _Live(fut, send + slo_s, len(self._exits))
            self._counts[_PENDING] += 1
        with self._outbox_cv:
            self._outbox.append((rid, send, send + slo_s, int(tier), payload))
            self._outbox_cv.notify()
        return fut

    async def infer(self, payload: Any, *, slo: float | None = None, tier: int = 0) -> Any:
        """``await``-able :meth:`submit`: the output, or the request's exception.  Cancelling the task
        cancels the request."""
        fut = self.submit(payload, slo=slo, tier=tier)
        try:
            waiter = asyncio.wrap_future(fut)
        except BaseException:
            fut.cancel()
            raise
        return await waiter

    def replay(self, arrivals_s: Sequence[float] | np.ndarray, payloads: Sequence[Any], *,
               slo: float | None = None) -> list[RayRequestFuture]:
        """Submit one request per arrival offset (s, sorted, >= 0) in wall-clock time from now
        (as :meth:`pard.Runtime.replay`); request ``i`` gets ``payloads[i % len(payloads)]``."""
        arr = np.asarray(arrivals_s, dtype=np.float64)
        if arr.ndim != 1 or (arr.size and (not np.isfinite(arr).all() or arr[0] < 0 or (np.diff(arr) < 0).any())):
            raise ValueError("arrivals_s must be a sorted 1-D array of finite seconds >= 0")
        if len(payloads) == 0:
            raise ValueError("payloads must hold at least one payload")
        refs = payloads  # each payload is put once per request: a request owns its own object
        out: list[RayRequestFuture] = []
        start = time.perf_counter()
        for i, t in enumerate(arr.tolist()):
            lag = t - (time.perf_counter() - start)
            if lag > 0:
                time.sleep(lag)
            out.append(self.submit(refs[i % len(refs)], slo=slo))
        return out

    # ------------------------------------------------------------------ threads
    def _send_loop(self) -> None:
        inflight: list[list[Any]] = []  # the enqueue calls sent and not yet answered, oldest first
        while True:
            with self._outbox_cv:
                while not self._outbox and not self._stop.is_set():
                    self._outbox_cv.wait(0.5)
                if not self._outbox and self._stop.is_set():
                    return
                items, self._outbox = self._outbox, []
            if len(inflight) >= SENDS_IN_FLIGHT:  # this call will carry what queued meanwhile
                ray.wait(inflight[0], num_returns=len(inflight[0]), timeout=30.0)
                inflight.pop(0)
            keys, groups = _grouped(items)
            inflight.append([self._stages[k].enqueue.remote(keys, groups, -1) for k in self._entries])
            self._calls["enqueue"] += len(self._entries)
            self._calls["groups"] = self._calls.get("groups", 0) + len(groups)

    def _poll_loop(self) -> None:
        polls = {s.events.remote(): k for k, s in enumerate(self._stages)}
        while polls:
            ready, _ = ray.wait(list(polls), num_returns=1, timeout=0.2)
            forgets: list[tuple[int, float]] = []
            for ref in ready:
                k = polls.pop(ref)
                try:
                    events = ray.get(ref)
                except Exception:  # noqa: BLE001 - stage actor gone (closing): stop polling it
                    continue
                self._calls["events"] += 1
                forgets.extend(self._handle(k, events))
                if not self._stop.is_set():
                    polls[self._stages[k].events.remote()] = k
            if self._stop.is_set() and not ready:
                break
            if forgets:
                for s in self._stages:
                    s.forget.remote(forgets)
                self._calls["forget"] += len(self._stages)

    def _handle(self, k: int, events: list[tuple[Any, ...]]) -> list[tuple[int, float]]:
        """Apply one stage's events; returns the ``(id, deadline)`` other stages must forget."""
        done: list[tuple[int, int, float, Any, int]] = []
        forgets: list[tuple[int, float]] = []
        for ev in events:
            kind = ev[0]
            if kind == "batch":
                _, ids, share = ev
                with self._lock:
                    cs = self._table.cols["compute_s"]
                    for rid in ids:
                        cs[rid] += share
                self._batches_seen += 1
            elif kind == "done":
                done.append((ev[1], ev[2], ev[3], ev[4], ev[5]))
            elif kind == "drop":
                _, rid, stage, code, t = ev
                if self._terminal(rid, _DROPPED, stage, code, t, Dropped(rid, self._spec.stages[stage].name,
                                                                          _REASONS[code])):
                    forgets.append((rid, self._deadline(rid)))
            elif kind == "reject":
                _, rid, stage, t = ev
                self._terminal(rid, _REJECTED, stage, _REJECTED_CODE, t,
                               Rejected(f"stage {self._spec.stages[stage].name!r}'s ingress ring is full"))
            elif kind == "fail":
                _, rid, stage, text, cause, t = ev
                err = ExecutorError(text)
                if isinstance(cause, BaseException):
                    err.__cause__ = cause
                if self._terminal(rid, _FAILED, stage, -1, t, err):
                    forgets.append((rid, self._deadline(rid)))
        if done:
            uniq = list({id(d[3]): d[3] for d in done}.values())
            got = dict(zip(map(id, uniq), _fetch(uniq)))
            for rid, stage, t, ref, pos in done:
                group = got[id(ref)]
                value = group if isinstance(group, _Lost) else group[pos]
                if isinstance(value, _Lost):
                    err = ExecutorError(f"stage {self._spec.stages[stage].name!r}: output lost: {value.error}")
                    err.__cause__ = value.error
                    self._terminal(rid, _FAILED, stage, -1, t, err)
                else:
                    self._finish(rid, stage, t, value)
        return forgets if self._dag else []

    def _deadline(self, rid: int) -> float:
        c = self._table.cols
        return float(c["send_s"][rid] + c["slo_s"][rid])

    def _finish(self, rid: int, stage: int, t: float, value: Any) -> None:
        with self._lock:
            live = self._live.get(rid)
            if live is None:
                return
            if len(self._exits) > 1:
                if live.outputs is None:
                    live.outputs = {}
                live.outputs[stage] = value
                live.sinks_left -= 1
                if live.sinks_left > 0:
                    return
                value = {self._spec.stages[i].name: v for i, v in sorted(live.outputs.items())}
        state = _ON_TIME if t <= live.deadline else _LATE
        self._terminal(rid, state, stage, -1, t, result=value)

    def _terminal(self, rid: int, state: int, stage: int, reason: int, t: float,
                  exc: BaseException | None = None, result: Any = None) -> bool:
        """Move request ``rid`` to a terminal state (the first caller wins); resolve its future."""
        with self._lock:
            live = self._live.pop(rid, None)
            if live is None:
                return False
            c = self._table.cols
            c["state"][rid] = state
            c["finish_s"][rid] = t
            if state in (_DROPPED, _REJECTED, _FAILED):
                c["drop_stage"][rid] = stage
            if state in (_DROPPED, _REJECTED):
                c["reason"][rid] = reason
            self._counts[_PENDING] -= 1
            self._counts[state] += 1
            if self._counts[_PENDING] == 0:
                self._idle.notify_all()
        fut = live.future
        try:
            if fut.cancelled():
                return True
            if exc is not None:
                fut.set_exception(exc)
            elif state in (_ON_TIME, _LATE):
                fut.set_result(result)
        except InvalidStateError:  # pragma: no cover - cancelled concurrently
            pass
        return True

    def _cancel(self, rid: int) -> bool:
        """``future.cancel()``: dropped with reason ``cancelled``; every stage forgets the request."""
        with self._lock:
            live = self._live.pop(rid, None)
            if live is None:
                return False
            c = self._table.cols
            c["state"][rid] = _DROPPED
            c["finish_s"][rid] = self.now()
            c["drop_stage"][rid] = self._entries[0]
            c["reason"][rid] = _CANCELLED
            self._counts[_PENDING] -= 1
            self._counts[_DROPPED] += 1
            if self._counts[_PENDING] == 0:
                self._idle.notify_all()
        for s in self._stages:
            s.forget.remote([(rid, live.deadline)])
        return True

    # ------------------------------------------------------------------ close
    def close(self, drain: bool = True, *, timeout_s: float | None = None) -> None:
        """Stop accepting, end every request, stop and remove every actor (as :meth:`pard.Runtime.close`).

        Args:
            drain: wait until every request has ended under the policy; ``False`` cancels what is in
                flight at once (``pard.Dropped``, reason ``cancelled``).
            timeout_s: bounds the wait (s, >= 0; None: no limit); what has not ended then is cancelled.

        After ``close`` every request is terminal.  Idempotent.  ValueError for a bad ``timeout_s``.
        """
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                      or not (math.isfinite(float(timeout_s)) and float(timeout_s) >= 0)):
            raise ValueError(f"timeout_s must be a finite number of seconds >= 0 or None, got {timeout_s!r}")
        if self._closed:
            return
        deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
        with self._lock:
            self._accepting = False
        if drain:
            with self._lock:
                while self._counts[_PENDING] > 0:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    self._idle.wait(timeout=0.5 if left is None else min(left, 0.5))
        self._cancel_rest()
        self._stop.set()
        with self._outbox_cv:
            self._outbox_cv.notify_all()
        self._sender.join(10.0)
        try:
            self._planner_info = ray.get(self._planner.info.remote(), timeout=10.0)
        except Exception:  # noqa: BLE001 - a planner that is down right now
            self._planner_info = None
        try:
            ray.get([s.stop.remote() for s in self._stages], timeout=10.0)
            self._histories = ray.get([s.history.remote() for s in self._stages], timeout=30.0)
            self._infos = ray.get([s.info.remote() for s in self._stages], timeout=10.0)
            self._worker_cpu = [ray.get([w.cpu_s.remote() for w in ws], timeout=10.0) for ws in self._workers]
        finally:
            self._poller.join(10.0)
            for a in [self._planner, *self._stages, *(w for ws in self._workers for w in ws)]:
                try:
                    ray.kill(a, no_restart=True)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            self._closed = True

    def _cancel_rest(self) -> None:
        """Cancel every request still in flight (dropped, reason ``cancelled``, at the stage that held it)."""
        with self._lock:
            rids = list(self._live)
        if not rids:
            return
        where: dict[int, int] = {}
        try:  # the stage holding each one (its drop is attributed there, as the local runtime does)
            for k, held in enumerate(ray.get([s.held_ids.remote() for s in self._stages], timeout=10.0)):
                for rid in held:
                    where.setdefault(rid, k)
        except Exception:  # noqa: BLE001 - a stage gone: attribute to the entry stage
            pass
        now = self.now()
        for rid in rids:
            stage = where.get(rid, self._entries[0])
            self._terminal(rid, _DROPPED, stage, _CANCELLED, now,
                           Dropped(rid, self._spec.stages[stage].name, "cancelled"))

    def __enter__(self) -> RayPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(drain=True)

    # ------------------------------------------------------------------ results
    def counts(self) -> dict[str, int]:
        """Requests by state so far: ``submitted`` and each of :data:`STATES`."""
        with self._lock:
            c = dict(zip(STATES, self._counts))
            c["submitted"] = self._table.n
        return c

    def outcomes(self) -> dict[str, np.ndarray]:
        """Per request (index = id): as :meth:`pard.Runtime.outcomes` (copies)."""
        with self._lock:
            return self._table.copy()

    def batches(self) -> dict[str, np.ndarray]:
        """One row per executed batch (``stage``, ``start_s``, ``duration_s``, ``size``, ``wait_s``),
        by start time; after :meth:`close`."""
        hist = self._require_closed()
        rows = sorted(((k, *b) for k, h in enumerate(hist) for b in h["batches"]), key=lambda r: r[1])
        return {"stage": np.asarray([r[0] for r in rows], dtype=np.int32),
                "start_s": np.asarray([r[1] for r in rows], dtype=np.float64),
                "duration_s": np.asarray([r[2] for r in rows], dtype=np.float64),
                "size": np.asarray([r[3] for r in rows], dtype=np.int64),
                "wait_s": np.asarray([r[4] for r in rows], dtype=np.float64)}

    def _require_closed(self) -> list[dict[str, Any]]:
        if self._histories is None:
            raise ValueError("this needs every request ended and the stages' logs: call close() first")
        return self._histories

    def overhead(self) -> dict[str, Any]:
        """Costs after :meth:`close`: ``scheduler_s`` (C++ scheduler calls in the stage actors, as
        :meth:`pard.Runtime.overhead`), ``planner_s``/``planner_calls`` and the state traffic
        ``planner_bytes_in``/``planner_bytes_out`` (this planner incarnation), ``stage_cpu_s`` and
        ``worker_cpu_s`` (process CPU of the actors), ``batches``, the driver's ``calls``, and per
        stage ``hop_s_mean`` (a request's delay from its arrival time -- the upstream batch's end, or
        its send -- to reaching the stage actor) and ``record_lag_s_mean`` (a batch's end on the worker
        to the stage actor learning of it)."""
        self._require_closed()
        infos = self._infos or []
        p = self._planner_info or {}
        return {"scheduler_s": sum(i["scheduler_s"] for i in infos),
                "planner_s": float(p.get("planner_s", 0.0)), "planner_calls": float(p.get("calls", 0)),
                "planner_bytes_in": int(p.get("bytes_in", 0)), "planner_bytes_out": int(p.get("bytes_out", 0)),
                "planner_errors": list(p.get("errors", [])),
                "stage_cpu_s": sum(i["cpu_s"] for i in infos),
                "worker_cpu_s": float(sum(sum(c) for c in self._worker_cpu)),
                "batches": sum(i["batches"] for i in infos), "calls": dict(self._calls),
                "worker_errors": {st.name: i["worker_errors"] for st, i in zip(self._spec.stages, infos)},
                "hop_s_mean": {st.name: i["hop_s_mean"] for st, i in zip(self._spec.stages, infos)},
                "record_lag_s_mean": {st.name: i["record_lag_s_mean"] for st, i in zip(self._spec.stages, infos)}}

    def bound_capacity(self) -> dict[str, Any]:
        """The capacity the goodput bound of :meth:`report` uses (the rule of ``pard.Runtime``)."""
        return record.bound_capacity(self._spec, [len(w) for w in self._workers], self._require_closed())

    def report(self, *, t0_s: float | None = None, duration_s: float | None = None,
               capacity_req_s: float | None = None) -> Any:
        """The run's :class:`pard.Report`, the same class and fields as :meth:`pard.Runtime.report`.

        Raises ValueError before :meth:`close`.
        """
        hist = self._require_closed()
        return record.build_report(policy=self.policy, spec=self._spec, out=self.outcomes(), histories=hist,
                                   workers=[len(w) for w in self._workers], t0_s=t0_s, duration_s=duration_s,
                                   capacity_req_s=capacity_req_s)

    def clock_skew(self, probes: int = 8) -> dict[str, Any]:
        """Measure every live actor's clock offset again (``pard.ray.clock.Offset`` per actor name)."""
        from .clock import estimate_offset

        actors = {f"stage:{st.name}": s for st, s in zip(self._spec.stages, self._stages)}
        for st, ws in zip(self._spec.stages, self._workers):
            for i, w in enumerate(ws):
                actors[f"worker:{st.name}:{i}"] = w
        actors["planner"] = self._planner
        return {name: estimate_offset(lambda a=a: ray.get(a.wall_time.remote(), timeout=10.0), probes)
                for name, a in actors.items()}


def _grouped(items: list[tuple[int, float, float, int, Any]]) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """Put the payloads of ``items`` into the object store in groups of at most :data:`GROUP_BYTES`;
    returns the ``enqueue`` keys ``(id, send, deadline, tier, arrival = send, group, position)`` and the refs."""
    keys: list[tuple[Any, ...]] = []
    groups: list[Any] = []
    chunk: list[Any] = []
    size = 0
    for rid, send, deadline, tier, payload in items:
        nbytes = int(getattr(payload, "nbytes", 0) or 0)
        if chunk and size + nbytes > GROUP_BYTES:
            groups.append(_stored(chunk, size))
            chunk, size = [], 0
        keys.append((rid, send, deadline, tier, send, len(groups), len(chunk)))
        chunk.append(payload)
        size += nbytes
    if chunk:
        groups.append(_stored(chunk, size))
    return keys, groups


def _stored(chunk: list[Any], nbytes: int) -> Any:
    """A group as Ray treats a task's return value: inline (the list itself) under
    :data:`INLINE_BYTES`, else one object in the object store (its ref)."""
    return chunk if nbytes < INLINE_BYTES else ray.put(chunk)


class _Lost:
    """An output that could not be fetched (its node or owner died)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _fetch(refs: list[Any]) -> list[Any]:
    """The values of ``refs`` in one ``ray.get``; one by one, as :class:`_Lost` where that fails."""
    try:
        return list(ray.get(refs, timeout=60.0))
    except Exception:  # noqa: BLE001 - find which ones are lost
        out: list[Any] = []
        for r in refs:
            try:
                out.append(ray.get(r, timeout=10.0))
            except Exception as e:  # noqa: BLE001
                out.append(_Lost(e))
        return out


def _check_slo(slo: Any) -> float:
    if isinstance(slo, bool) or not isinstance(slo, (int, float, np.integer, np.floating)):
        raise TypeError(f"slo must be a number of seconds, got {type(slo).__name__}: {slo!r}")
    v = float(slo)
    if not (math.isfinite(v) and 0 < v <= _MAX_SLO_S):
        raise ValueError(f"slo must be a number of seconds in (0, {_MAX_SLO_S:g}], got {slo!r}")
    return v

