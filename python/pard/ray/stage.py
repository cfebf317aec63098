"""A stage as a Ray actor: the stage's C++ ``StageScheduler`` and a dispatcher per worker actor.

Layout (docs/ray.md says why): one queue per stage, held by this actor, that the stage's worker
actors are fed from -- DESIGN §3.4's shared, work-conserving DEPQ, not the paper's per-worker queues
behind a dispatcher.  For each worker actor a coroutine ("slot") runs the local runtime's batching
rule (DESIGN §3.1): an idle worker gets a batch as soon as a request arrives; when a batch starts,
the slot forms the next one at once (expected start = now + d(b)) and *sends it to the worker right
away*, so it waits in the worker's call queue and starts the moment the running batch ends -- no
round trip between batches.  The actor is an asyncio actor: every method and slot runs on one event
loop thread, so the scheduler, the request table and the logs need no locks.

Per batch: one ``StageWorker.run`` call, one ``enqueue`` call per successor stage (carrying the
ref of the batch's output group, :mod:`pard.ray.worker`), and events for the driver (one long-poll
reply carries any number of batches).  Payloads are object refs throughout; this actor never reads
one (Ray may inline a *small* output group into this actor, its owner, rather than the object
store: that is Ray's own choice for objects under 100 KiB).

Requests here: ``_Req`` (keys, the payload refs, and whether it is in a batch).  A request that has
become terminal elsewhere (a sibling DAG branch dropped it, the caller cancelled it, ``close``) is
*forgotten*: a queued one becomes a ghost that ``_form`` discards (topping the batch up, as the
local runtime does), a running one's output is discarded, and one that has not arrived yet is
discarded on arrival.

Faults.  A worker actor that dies mid-batch fails that batch's requests (event ``fail`` with the
Ray error as the cause); the batch it had been sent next never started, so its requests go back into
the queue with their original keys.  The slot then waits for Ray to restart the worker
(``max_restarts``) while the other slots keep serving; once restarts are exhausted the slot ends,
and when a stage has no slot left, every request queued or arriving there fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ray.exceptions import ActorUnavailableError, RayActorError

from ..outcomes import reason_code
from ..wiring import core_profile, stage_scheduler
from .clock import Clock
from .stage_log import StageLog

__all__ = ["StageActor"]

_REJECTED_CODE = reason_code("rejected")
#: Bounds of how early (s) a slot collects a batch before the running one's expected end.
_MIN_LEAD_S, _MAX_LEAD_S = 0.5e-3, 20e-3
#: How long a forgotten id that never arrived is remembered after its deadline (s).
_FORGET_GRACE_S = 10.0


class _Req:
    __slots__ = ("send", "deadline", "tier", "arrival", "refs", "ghost", "running")

    def __init__(self, send: float, deadline: float, tier: int, arrival: float,
                 refs: list[tuple[Any, int]]) -> None:
        self.send = send
        self.deadline = deadline
        self.tier = tier
        self.arrival = arrival
        self.refs: list[tuple[Any, int]] | None = refs  # (payload group ref, position) per part
        self.ghost = False
        self.running = False


class _Batch:
    __slots__ = ("ids", "t_b", "start_est", "outs", "record")

    def __init__(self, ids: list[int], t_b: float, start_est: float, outs: Any, record: Any) -> None:
        self.ids = ids
        self.t_b = t_b  # when it was collected (the batch wait W counts from here)
        self.start_est = start_est  # when it starts (expected, then known from the batch before it)
        self.outs = outs
        self.record = record


def _portable(exc: BaseException) -> tuple[str, Any]:
    import pickle

    text = f"{type(exc).__name__}: {exc}"
    try:
        pickle.dumps(exc)
    except Exception:  # noqa: BLE001 - travels as text only
        return text, None
    return text, exc


class StageActor:
    """One stage (a Ray actor class body; :func:`pard.ray.deploy` creates it with ``max_concurrency``).

    Args:
        spec: the :class:`pard.PipelineSpec`; index: this stage's position in ``spec.stages``.
        policy: the :class:`pard.PolicySpec`; ring_capacity: the ingress ring's slots.  The scheduler
            is built by :func:`pard.wiring.stage_scheduler`, as the local runtime builds its own.
        epoch_s: the deployment's epoch on the driver's clock.
    """

    def __init__(self, spec: Any, index: int, policy: Any, ring_capacity: int, epoch_s: float) -> None:
        st = spec.stages[index]
        names = [s.name for s in spec.stages]
        order = spec.topological_order()
        self._sched = stage_scheduler(spec, index, policy, ring_capacity)
        self._prof = core_profile(st)
        name, max_batch = st.name, st.batch_limit  # the largest batch it forms
        entry = not spec.predecessors(st.name)
        preds = [names.index(p) for p in sorted(spec.predecessors(st.name), key=order.index)]
        self._k = int(index)
        self._name = name
        self._max_batch = int(max_batch)
        self._entry = bool(entry)
        self._preds = list(preds)
        self._clock = Clock(epoch_s)
        self._reqs: dict[int, _Req] = {}
        self._parts: dict[int, dict[int, tuple[tuple[Any, int], float]]] = {}  # join: rid -> {pred: (part, arrival)}
        self._gone: dict[int, float] = {}  # forgotten before arriving: rid -> deadline
        self._pending = 0  # pushed into the scheduler, not yet returned by form_batch
        self._work: asyncio.Condition | None = None
        self._events: list[tuple[Any, ...]] = []
        self._has_events: asyncio.Event | None = None
        self._stop = False
        self._workers: list[Any] = []
        self._succ: list[Any] = []
        self._slots: list[asyncio.Task[None]] = []
        self._live_slots = 0
        self._dead: tuple[str, Any] | None = None
        self._log = StageLog()  # the planner takes it every sync, the report reads it whole
        self._drops = 0
        self._sched_ns = 0
        self._worker_errors: list[str] = []
        self._lead_s = 2e-3  # moving average of that lag: how early _collect_late collects
        self._cpu0 = time.process_time()  # the process's start-up (imports) is not serving cost

    # ------------------------------------------------------------------ wiring
    def wall_time(self) -> float:
        """This node's ``time.time()`` (clock probe)."""
        return time.time()

    def set_offset(self, offset_s: float) -> None:
        """Use ``offset_s`` (this node's clock minus the driver's) from now on."""
        self._clock.offset_s = float(offset_s)

    async def connect(self, workers: Sequence[Any], successors: Sequence[Any]) -> int:
        """Attach the worker actors and the successor stage actors; start one slot per worker."""
        self._work = asyncio.Condition()
        self._has_events = asyncio.Event()
        self._workers = list(workers)
        self._succ = list(successors)
        loop = asyncio.get_running_loop()
        self._live_slots = len(self._workers)
        self._slots = [loop.create_task(self._slot(w)) for w in self._workers]
        return self._live_slots

    # ------------------------------------------------------------------ arrivals
    async def enqueue(self, items: Sequence[tuple[int, float, float, int, float, int, int]], groups: Sequence[Any],
                      from_stage: int = -1) -> None:
        """Requests arriving: ``(id, send_s, deadline_s, tier, arrival_s, group, position)`` each, the
        payload being element ``position`` of the object ``groups[group]`` refers to.

        ``from_stage`` names the predecessor that sent them (a join waits for every predecessor).
        """
        pushed = 0
        now = self._clock.now()
        for rid, send, deadline, tier, arrival, g, e in items:
            self._log.hop_s += now - arrival
            self._log.hops += 1
            ref = (groups[g], e)
            if rid in self._gone:
                del self._gone[rid]
                continue
            if len(self._preds) > 1:
                parts = self._parts.setdefault(rid, {})
                parts[from_stage] = (ref, arrival)
                if len(parts) < len(self._preds):
                    continue
                del self._parts[rid]
                refs = [parts[p][0] for p in self._preds]
                arrival = max(a for _, a in parts.values())
            else:
                refs = [ref]
            pushed += self._push(rid, send, deadline, tier, arrival, refs)
        if pushed and self._work is not None:
            async with self._work:
                self._work.notify(pushed)

    def _push(self, rid: int, send: float, deadline: float, tier: int, arrival: float,
              refs: list[tuple[Any, int]]) -> int:
        if self._dead is not None:
            self._emit(("fail", rid, self._k, f"stage {self._name!r} has no live worker: {self._dead[0]}",
                        self._dead[1], self._clock.now()))
            return 0
        t = time.perf_counter_ns()
        ok = self._sched.submit(rid, send, deadline, arrival, tier)
        self._sched_ns += time.perf_counter_ns() - t
        if not ok:  # full ring: back-pressure (entry: rejected; later stage: dropped, reason rejected)
            now = self._clock.now()
            self._emit(("reject", rid, self._k, now) if self._entry else ("drop", rid, self._k, _REJECTED_CODE, now))
            return 0
        self._reqs[rid] = _Req(send, deadline, tier, arrival, refs)
        self._log.arrivals.append(arrival)
        self._pending += 1
        return 1

    def forget(self, items: Sequence[tuple[int, float]]) -> None:
        """Requests ended elsewhere, ``(id, deadline_s)`` each: discard them here (module doc)."""
        for rid, deadline in items:
            r = self._reqs.get(rid)
            if r is not None:
                r.ghost = True
                r.refs = None
            elif self._parts.pop(rid, None) is None:
                self._gone[rid] = deadline
        if len(self._gone) > 1024:
            limit = self._clock.now() - _FORGET_GRACE_S
            self._gone = {r: d for r, d in self._gone.items() if d > limit}

    # ------------------------------------------------------------------ batches
    def _emit(self, event: tuple[Any, ...]) -> None:
        self._events.append(event)
        if self._has_events is not None:
            self._has_events.set()

    def _form(self, now: float, t_e: float) -> list[int]:
        """One ``form_batch`` (topped up past ghosts); emits its drops; returns the batch's ids."""
        batch: list[int] = []
        for _ in range(4):
            t = time.thread_time_ns()
            ids, dropped, reasons = self._sched.form_batch(now, t_e)
            self._sched_ns += time.thread_time_ns() - t
            self._pending -= len(ids) + len(dropped)
            for rid, code in zip(dropped.tolist(), reasons.tolist()):
                r = self._reqs.pop(rid, None)
                if r is not None and not r.ghost:
                    self._drops += 1
                    self._emit(("drop", rid, self._k, int(code), now))
            ghosts = 0
            for rid in ids.tolist():
                r = self._reqs.get(rid)
                if r is None or r.ghost:
                    self._reqs.pop(rid, None)
                    ghosts += 1
                elif len(batch) < self._max_batch:
                    batch.append(rid)
                else:  # surplus of a top-up: back into the queue with its original keys
                    self._resubmit(rid, r, now)
            if not ghosts or len(batch) >= self._max_batch or self._pending <= 0:
                break
        for rid in batch:
            r = self._reqs[rid]
            r.running = True
            self._log.q_t.append(now)
            self._log.q_s.append(now - r.arrival)
        return batch

    def _resubmit(self, rid: int, r: _Req, now: float) -> None:
        t = time.perf_counter_ns()
        ok = self._sched.submit(rid, r.send, r.deadline, r.arrival, r.tier)
        self._sched_ns += time.perf_counter_ns() - t
        if ok:
            r.running = False
            self._pending += 1
        else:  # pragma: no cover - the ring was just drained
            self._reqs.pop(rid, None)
            self._emit(("drop", rid, self._k, _REJECTED_CODE, now))

    def _dispatch(self, worker: Any, ids: list[int], t_b: float, start_est: float) -> _Batch:
        """Send one batch to ``worker``: each distinct payload group once, as a top-level ref."""
        layout: list[list[tuple[int, int]]] = []
        groups: list[Any] = []
        seen: dict[int, int] = {}  # by identity: a group is an ObjectRef or (small, inlined) a list
        for rid in ids:
            where = []
            for ref, e in self._reqs[rid].refs or ():
                g = seen.get(id(ref))
                if g is None:
                    g = seen[id(ref)] = len(groups)
                    groups.append(ref)
                where.append((g, e))
            layout.append(where)
        outs, record = worker.run.options(num_returns=2).remote(layout, *groups)
        return _Batch(ids, t_b, start_est, outs, record)

    async def _wait_work(self) -> bool:
        assert self._work is not None
        async with self._work:
            await self._work.wait_for(lambda: self._pending > 0 or self._stop)
        return not self._stop

    async def _slot(self, worker: Any) -> None:
        """One worker's dispatcher: DESIGN §3.1's batching rule across the actor boundary (module doc)."""
        nxt: _Batch | None = None
        try:
            while not self._stop:
                if nxt is None:
                    if not await self._wait_work():
                        return
                    now = self._clock.now()
                    ids = self._form(now, now)
                    if not ids:
                        continue
                    cur = self._dispatch(worker, ids, now, now)
                else:
                    cur, nxt = nxt, None
                # cur is starting (or started when the batch before it ended): collect the next one now
                end_est = cur.start_est + self._prof.duration(len(cur.ids))
                if self._pending > 0 and not self._stop:
                    t = self._clock.now()
                    ids = self._form(t, max(t, end_est))
                    if ids:
                        nxt = self._dispatch(worker, ids, t, max(t, end_est))
                record = asyncio.ensure_future(cur.record)
                if nxt is None:
                    nxt = await self._collect_late(worker, record, end_est)
                try:
                    rec = await record
                except RayActorError as e:
                    self._batch_failed(cur, e)
                    if nxt is not None:  # sent after cur, so it never started: back into the queue
                        await self._requeue(nxt)
                        nxt = None
                    if not await self._worker_back(worker, e):
                        return
                    continue
                self._batch_done(cur, rec)
                if nxt is not None:  # it started when cur ended, or when it reached the worker after that
                    nxt.start_est = max(float(rec[1]), nxt.t_b)
        finally:
            if nxt is not None:
                await self._requeue(nxt)
            self._live_slots -= 1
            if self._live_slots <= 0 and not self._stop:
                self._stage_dead()

    async def _collect_late(self, worker: Any, record: asyncio.Future[Any], end_est: float) -> _Batch | None:
        """The queue was empty when the batch started: collect the next batch *as it ends* (DESIGN §3.1).

        The end is known here only a round trip late, so the slot collects ``lead`` seconds before the
        expected end (``lead``: the recent delay between a batch's end on the worker and its record
        arriving here) and sends the batch then; it waits in the worker's queue for the running one.
        Requests that arrive after that, while the batch still runs, wait for the next one.
        """
        while not record.done() and not self._stop:
            t = self._clock.now()
            early = end_est - self._lead_s - t
            if early > 0:
                await asyncio.wait([record], timeout=early)
                continue
            if self._pending > 0:
                ids = self._form(t, max(t, end_est))
                if ids:
                    return self._dispatch(worker, ids, t, max(t, end_est))
                continue
            work = asyncio.ensure_future(self._wait_work())
            await asyncio.wait([record, work], return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
        return None

    async def _worker_back(self, worker: Any, err: BaseException) -> bool:
        """Wait for Ray to restart a failed worker; False once it is dead for good."""
        self._worker_errors.append(f"{type(err).__name__}: {err}"[:300])
        while not self._stop:
            try:
                await worker.pid.remote()
                return True
            except ActorUnavailableError:  # restarting, or briefly unreachable: ask again
                await asyncio.sleep(0.05)
            except RayActorError as e:  # ActorDiedError: its restarts are used up
                self._dead = (f"its worker actors died: {type(e).__name__}: {e}"[:400], None)
                return False
        return False

    def _stage_dead(self) -> None:
        """No worker left: every request queued or held here fails; later arrivals fail in ``_push``."""
        if self._dead is None:
            self._dead = ("no worker actor left", None)
        now = self._clock.now()
        text = f"stage {self._name!r} has no live worker: {self._dead[0]}"
        for rid, r in list(self._reqs.items()):
            if not r.ghost:
                self._emit(("fail", rid, self._k, text, None, now))
        self._reqs.clear()
        for rid in list(self._parts):
            self._emit(("fail", rid, self._k, text, None, now))
        self._parts.clear()

    async def _requeue(self, b: _Batch) -> None:
        now = self._clock.now()
        n = 0
        for rid in b.ids:
            r = self._reqs.get(rid)
            if r is None or r.ghost:
                self._reqs.pop(rid, None)
                continue
            self._resubmit(rid, r, now)
            n += 1
        if n and self._work is not None:
            async with self._work:
                self._work.notify(n)

    def _batch_failed(self, b: _Batch, err: BaseException) -> None:
        text, cause = _portable(err)
        now = self._clock.now()
        msg = f"stage {self._name!r}: worker actor died during the batch ({text})"
        for rid in b.ids:
            r = self._reqs.pop(rid, None)
            if r is not None and not r.ghost:
                self._emit(("fail", rid, self._k, msg, cause, now))

    def _batch_done(self, b: _Batch, record: Any) -> None:
        start, end, error, join_errors, _cpu = record
        lag = self._clock.now() - end
        self._log.lag_s += lag
        self._lead_s = min(_MAX_LEAD_S, max(_MIN_LEAD_S, 0.8 * self._lead_s + 0.2 * lag))
        size = len(b.ids)
        self._log.batches.append((start, end - start, size, start - b.t_b))
        self._emit(("batch", b.ids, end - start))
        per_succ: list[list[tuple[int, float, float, int, float, int, int]]] = [[] for _ in self._succ]
        for pos, rid in enumerate(b.ids):
            r = self._reqs.pop(rid, None)
            if r is None or r.ghost:
                continue
            failure = error if error is not None else join_errors.get(pos)
            if failure is not None:
                what = "executor raised" if error is not None else "join raised"
                self._emit(("fail", rid, self._k, f"stage {self._name!r}: {what} {failure[0]}", failure[1], end))
            elif not self._succ:
                self._emit(("done", rid, self._k, end, b.outs, pos))
            else:
                for items in per_succ:
                    items.append((rid, r.send, r.deadline, r.tier, end, 0, pos))
        for succ, items in zip(self._succ, per_succ):
            if items:
                succ.enqueue.remote(items, [b.outs], self._k)

    # ------------------------------------------------------------------ driver and planner
    async def events(self, timeout_s: float = 0.25) -> list[tuple[Any, ...]]:
        """Long poll: the events since the last call, waiting up to ``timeout_s`` for the first."""
        if not self._events and self._has_events is not None and not self._stop:
            self._has_events.clear()
            try:
                await asyncio.wait_for(self._has_events.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
        out, self._events = self._events, []
        return out

    def publish(self, terms: Mapping[str, float]) -> None:
        """The planner's terms for this stage (the keyword arguments of ``StageScheduler.publish``)."""
        self._sched.publish(**terms)

    def take_stats(self) -> dict[str, Any]:
        """The samples since the previous call (:meth:`pard.ray.stage_log.StageLog.take`)."""
        return self._log.take()

    def history(self) -> dict[str, Any]:
        """Every sample since the start (:meth:`pard.ray.stage_log.StageLog.history`)."""
        return self._log.history()

    def held_ids(self) -> list[int]:
        """The ids queued, in a batch or waiting for a join part here (not forgotten)."""
        return [rid for rid, r in self._reqs.items() if not r.ghost] + list(self._parts)

    def info(self) -> dict[str, Any]:
        """Counters: scheduler time (s), this process's CPU time since construction (s), batches, queued, worker errors."""
        return {"scheduler_s": self._sched_ns * 1e-9, "cpu_s": time.process_time() - self._cpu0, "batches": len(self._log.batches),
                "queued": self._sched.queued(), "held": len(self._reqs), "live_workers": self._live_slots,
                "worker_errors": list(self._worker_errors), "order": self._sched.current_order,
                "dead": None if self._dead is None else self._dead[0], **self._log.delays()}

    async def stop(self) -> None:
        """Stop the slots (after the driver has ended every request)."""
        self._stop = True
        if self._work is not None:
            async with self._work:
                self._work.notify_all()
        if self._has_events is not None:
            self._has_events.set()
        for t in self._slots:
            t.cancel()

