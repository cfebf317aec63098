"""Admission at an asyncio front's door: refuse, before reading a request's body, what the pipeline
cannot answer by its deadline; hand the rest to the runtime with one absolute deadline; judge each
answer by when it leaves.

An asyncio server in front of a :class:`pard.Runtime` (``pard serve``, or a user's own) shares its
process, its cores and its event loop's time with the pipeline.  Past the server's capacity, every
request it reads and decodes costs CPU that the stages needed, and a request admitted with its budget
already spent in the front is dropped inside the pipeline after the front paid for it.  :class:`Door`
keeps that cost bounded:

* **the event loop's lag** (:class:`LoopLag`): how far behind the loop runs.  A request the handler
  sees now arrived about that long ago (it waited in the socket), so its arrival is ``now - lag``;
  past ``max_loop_lag_s`` the front itself is the bottleneck and the door refuses (reason
  ``server_busy``).
* **the door test** (``LivePipeline.door_finish_s``, ``cpp/include/pard/door.hpp``): the entry
  stage's own drop rule (DESIGN §3.2, paper Eq. 3b) applied at arrival, with the queue ahead of the
  request as its wait, and a walk of the path; the front's own cost is added -- its measured work per
  request (decoding, encoding) and the turns of the event loop a request waits for between the door and
  its answer, each as long as the loop's lag now, the last (its answer's) as long as the lag's recent
  peak -- so that a request whose answer would leave after its
  deadline is refused at the door instead of answered late (reason ``infeasible``).  Both parts follow
  the front as it is now: the lag is measured continuously, and the work is CPU time that does not grow
  with the load, so the estimate recovers as soon as the loop does (an average of whole arrival-to-answer
  times would only be refreshed by requests it admits, and once it admits none it never comes back).  Policies whose stages drop proactively (pard's drop rule) use it; the baselines
  keep their own semantics and get only the lag guard.
* **one deadline**: fixed at arrival, handed to :meth:`Runtime.submit` as an absolute time less the
  expected answer cost (:meth:`pipeline_deadline`: the work after the pipeline and the loop's recent peak
  lag), so that the stages drop what would finish in
  time for the pipeline but leave the server late.
* **on time at the answer** (:meth:`answered`): the runtime's verdict compares its finish with the
  deadline it was handed; a client sees the answer later, by its own deadline.  ``on_time`` whose answer
  is ready only after the deadline is ``late``, and the count of such answers (:attr:`late_answers`)
  tells the front's share of lates; ``late`` whose answer is ready by it is ``on_time``
  (:attr:`timely_answers`).

Everything runs on the event loop's thread except :meth:`LoopLag.now`, which any thread may read.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config.models import min_latency_path
from .aio import retry_after_s

if TYPE_CHECKING:  # pragma: no cover
    from .facade import Runtime

__all__ = ["Door", "LoopLag", "Refusal", "Ticket", "IN_FRONT_S", "IN_FRONT_REACH", "LAG_TICK_S", "MEAN_WEIGHT",
           "PEAK_DECAY_S", "EWMA_WEIGHT", "LOOP_TURNS", "RETRY_AFTER_TTL_S"]

#: The event-loop lag monitor's tick (s).
LAG_TICK_S = 0.01
#: Weight of each tick in the lag's recent mean (a time constant of about 0.1 s at 10 ms ticks).
MEAN_WEIGHT = 0.1
#: Time constant (s) over which the lag's recent peak decays: a stall of the loop is budgeted for the
#: answers of the next second, since under overload stalls recur (a burst of arrivals to refuse, the
#: process descheduled by the cores' other work) and an answer ready during one leaves late.
PEAK_DECAY_S = 1.0
#: Weight of each new sample in the front's work averages: about the last 50 requests.
EWMA_WEIGHT = 0.02
#: Turns of the event loop a request waits for between the door and its answer leaving: reading its
#: body, the pipeline's result handed back to the loop, its answer written.
LOOP_TURNS = 3
#: How long (s) an admitted request counts as work ahead of the next ones while its body is still being read,
#: at most: a body that takes longer is a slow or stalled client, and counting it would let stalled uploads
#: refuse every other client.
IN_FRONT_S = 0.5
#: ... and, within that, a request counts while it is no later than this many times the mean time admitted
#: requests took to reach the pipeline (plus one lag tick): a client that sends its headers and then trickles
#: its body is counted for milliseconds, not half a second, so a few dozen of them a second cannot hold the
#: door shut while the pipeline idles.
IN_FRONT_REACH = 4.0
#: How long (s) a refusal's Retry-After hint is reused before it is computed again.
RETRY_AFTER_TTL_S = 0.1


class LoopLag:
    """How far behind the event loop runs (s): a task sleeps :data:`LAG_TICK_S` at a time and records how
    late it woke; :meth:`now` also counts a wake-up that is overdue right now (a loop still busy),
    :attr:`mean` is its recent mean (:data:`MEAN_WEIGHT` a tick) and :attr:`peak` its recent peak (decaying
    by ``e`` every :data:`PEAK_DECAY_S`): under overload the lag comes in spikes, and a request admitted
    between two of them still waits through the next."""

    def __init__(self) -> None:
        self.last = 0.0
        self.mean = 0.0
        self.peak = 0.0
        self._due: float | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start measuring (call from the running event loop; idempotent)."""
        if self._task is None:
            self._due = time.monotonic() + LAG_TICK_S
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(LAG_TICK_S)
            now = time.monotonic()
            assert self._due is not None
            late, self._due = max(0.0, now - self._due), now + LAG_TICK_S
            # the peak decays over the time that passed (the tick and the lag itself)
            self.peak = max(late, self.peak * math.exp(-(LAG_TICK_S + late) / PEAK_DECAY_S))
            self.last = late
            self.mean += MEAN_WEIGHT * (late - self.mean)

    def now(self) -> float:
        """The loop's lag now (s): the last measured, or the current wake-up's overdue time if larger."""
        due = self._due
        if due is None:
            return 0.0
        return max(self.last, time.monotonic() - due)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
            self._due = None


class Ticket:
    """A request the door admitted, on its way to the pipeline: settle it once, with
    :meth:`Door.submitted` when it reaches the pipeline or :meth:`Door.abandoned` when it never will."""

    __slots__ = ("admitted_at", "counted")

    def __init__(self, admitted_at: float) -> None:
        self.admitted_at = admitted_at
        self.counted = True  # in Door.in_front


@dataclass(frozen=True)
class Refusal:
    """Why the door refused a request: ``reason`` (``server_busy`` or ``infeasible``), a sentence for the
    client, and when a retry could succeed (s; None when none can: the request's own SLO is shorter than
    the pipeline's fastest path)."""

    reason: str
    message: str
    retry_after_s: float | None


class Door:
    """The admission of an asyncio front to ``runtime`` (module docstring).

    Args:
        runtime: the pipeline's :class:`pard.Runtime` (started before the first :meth:`check`).
        max_loop_lag_s: refuse while the event loop runs more than this behind (s, >= 0; 0: never).
        proactive: apply the door test; default: when the runtime's policy drops with pard's rule.

    Typical use in a handler, before the body is read::

        arrived = door.arrival()
        deadline = arrived + slo
        verdict = door.check(arrived, deadline)
        if isinstance(verdict, Refusal):
            return refuse(verdict)                 # 429 with Retry-After, say
        t = time.perf_counter(); x = decode(await read_body())
        door.submitted(verdict, time.perf_counter() - t)  # or door.abandoned(verdict): it never will
        out, state = await rt.infer_outcome(x, deadline=door.pipeline_deadline(deadline))
        resumed = time.perf_counter()
        body = encode(out)
        state = door.answered(state, deadline, resumed)   # "late" if the answer leaves past the deadline
    """

    def __init__(self, runtime: Runtime, *, max_loop_lag_s: float, proactive: bool | None = None) -> None:
        if not (isinstance(max_loop_lag_s, (int, float)) and math.isfinite(max_loop_lag_s) and max_loop_lag_s >= 0):
            from ..errors import PardValueError
            raise PardValueError(f"max_loop_lag_s must be a finite number of seconds >= 0, got {max_loop_lag_s!r}")
        self.runtime = runtime
        self.max_loop_lag_s = float(max_loop_lag_s)
        self.proactive = runtime.policy_spec.drop == "pard" if proactive is None else bool(proactive)
        self.loop_lag = LoopLag()
        #: the front's mean work (s) per request before the pipeline (decoding) and after it (encoding)
        self.ingress_s = 0.0
        self.egress_s = 0.0
        #: on_time answers judged late because they left after their deadline
        self.late_answers = 0
        #: late answers (past the pipeline's deadline) judged on time because they left by the client's
        self.timely_answers = 0
        #: requests admitted and not yet submitted (their bodies being read and decoded), for at most
        #: :meth:`in_front_s`: ahead of the next request as much as the queued ones, though no stage holds them
        self.in_front = 0
        #: the mean time (s) from admission to the pipeline of the requests that reached it
        self.reach_s = 0.0
        self._front: deque[Ticket] = deque()  # the tickets counted in in_front, oldest first
        self._min_latency_s = min_latency_path(runtime.pipeline)[0]
        self._tiers = max(len(runtime.pipeline.tiers), 1)
        self._retry: Refusal | None = None
        self._retry_at = -math.inf
        self._busy_by_s: dict[int, Refusal] = {}
        self._never = Refusal("infeasible", f"the request's deadline is shorter than the pipeline's fastest path "
                              f"({self._min_latency_s:.3f} s); no retry can meet it", None)

    def start(self) -> None:
        """Start the lag monitor (from the running event loop)."""
        self.loop_lag.start()

    def stop(self) -> None:
        self.loop_lag.stop()

    def arrival(self) -> float:
        """The request's arrival on the runtime's clock (s): now, less what the event loop is behind."""
        return self.runtime.now() - self.loop_lag.now()

    def check(self, arrived_s: float, deadline_s: float, tier: int = 0) -> Refusal | Ticket:
        """A :class:`Ticket` to admit (settle it: :meth:`submitted` or :meth:`abandoned`), else a
        :class:`Refusal` saying why not.  Reads relaxed sizes and published terms: no lock.
        ``tier``: the request's tier code (a lighter tier waits behind heavier ones).

        Raises: PardValueError for an arrival or deadline that is not a finite number of seconds, or a
        tier that is not one of the pipeline's codes."""
        if not (isinstance(arrived_s, float) and isinstance(deadline_s, float) and math.isfinite(arrived_s)
                and math.isfinite(deadline_s)) or not (type(tier) is int and 0 <= tier < self._tiers):
            arrived_s, deadline_s = self._checked(arrived_s, deadline_s, tier)
        lag = self.loop_lag.now()
        if self.max_loop_lag_s > 0 and lag > self.max_loop_lag_s:
            return self._busy(math.ceil(lag))
        now = time.monotonic()
        front = self._front
        window = self.in_front_s()
        while front and (not front[0].counted or now - front[0].admitted_at > window):
            self._settle(front.popleft())
        if self.proactive:
            finish = self.runtime.door_finish_s(tier, self.in_front) + self.front_s(lag)
            if finish > deadline_s:
                return self._never if deadline_s - arrived_s < self._min_latency_s else self._later()
        ticket = Ticket(now)
        front.append(ticket)
        self.in_front += 1
        return ticket

    def _settle(self, ticket: Ticket) -> None:
        if ticket.counted:
            ticket.counted = False
            self.in_front -= 1

    def _checked(self, arrived_s: Any, deadline_s: Any, tier: Any) -> tuple[float, float]:
        """``check``'s arguments as floats, or PardValueError naming the bad one."""
        from .._checks import finite_number, show
        from ..errors import PardValueError
        out = []
        for name, value in (("arrived_s", arrived_s), ("deadline_s", deadline_s)):
            seconds = finite_number(value)
            if seconds is None:
                raise PardValueError(f"Door.check: {name} must be a finite number of seconds on the runtime's "
                                     f"clock, got {show(value)}")
            out.append(seconds)
        if type(tier) is not int or not 0 <= tier < self._tiers:
            raise PardValueError(f"Door.check: tier must be a tier code in [0, {self._tiers - 1}], got {show(tier)}")
        return out[0], out[1]

    # The refusals are a few values reused (their text names no per-request figure), so that a server can
    # keep each one's encoded answer: past its capacity most requests are refused, and each costs the front.
    def _busy(self, lag_s: int) -> Refusal:
        refusal = self._busy_by_s.get(lag_s)
        if refusal is None:
            refusal = Refusal("server_busy", f"the server runs more than server.max_loop_lag_s "
                              f"({self.max_loop_lag_s:g} s) behind; retry later", float(max(lag_s, 1)))
            if len(self._busy_by_s) < 64:
                self._busy_by_s[lag_s] = refusal
        return refusal

    def _later(self) -> Refusal:
        """The refusal of a request the pipeline cannot answer in time now, with a Retry-After hint
        (:func:`pard.runtime.aio.retry_after_s`) recomputed at most every :data:`RETRY_AFTER_TTL_S`: it walks
        every stage's profile, which costs more than the rest of a refusal, and a hint a tenth of a second
        old is as good as a new one."""
        now = time.monotonic()
        if now - self._retry_at > RETRY_AFTER_TTL_S:
            self._retry_at = now
            hint = retry_after_s(self.runtime)
            if self._retry is None or self._retry.retry_after_s != hint:
                self._retry = Refusal("infeasible", "the pipeline cannot answer by the request's deadline now; "
                                      "retry later", hint)
        assert self._retry is not None
        return self._retry

    def attainable(self, arrived_s: float, deadline_s: float) -> bool:
        """Whether a request with this deadline could ever be served (its budget covers the fastest path)."""
        return deadline_s - arrived_s >= self._min_latency_s

    def front_s(self, lag_s: float | None = None) -> float:
        """The front's expected share of a request's latency now (s): its work before and after the pipeline,
        :data:`LOOP_TURNS` - 1 turns of the event loop before the pipeline at its current lag or its recent
        mean, the larger, and the turn its answer waits for at the lag's recent peak
        (:meth:`answer_wait_s`)."""
        lag = max(self.loop_lag.now() if lag_s is None else lag_s, self.loop_lag.mean)
        return self.ingress_s + self.egress_s + (LOOP_TURNS - 1) * lag + max(lag, self._peak())

    def answer_wait_s(self) -> float:
        """How long (s) a result ready now is budgeted to wait for the event loop before its answer is
        written: the loop's lag now or its recent peak, the larger.  The mean would do for a loop that lags
        evenly; one that stalls now and then makes every answer ready during a stall leave that much later,
        and the deadline of each admitted request must hold through the next.  The peak counts up to
        ``max_loop_lag_s`` (when set): a stall longer than that is the front's overload, which the lag guard
        answers while it lasts, and a single one (a pause of the whole machine) must not close the door
        for the seconds its peak takes to decay."""
        return max(self.loop_lag.now(), self._peak())

    def _peak(self) -> float:
        peak = self.loop_lag.peak
        return min(peak, self.max_loop_lag_s) if self.max_loop_lag_s > 0 else peak

    def in_front_s(self) -> float:
        """How long (s) an admitted request counts in front of the next ones before it reaches the pipeline:
        :data:`IN_FRONT_REACH` times the mean time admitted requests took to reach it, plus the event loop's lag
        now or its recent peak (at least a tick: an admitted request waits for the loop to run its task), and
        never more than :data:`IN_FRONT_S`."""
        return min(IN_FRONT_S, IN_FRONT_REACH * self.reach_s + max(LAG_TICK_S, self.loop_lag.now(), self._peak()))

    def submitted(self, ticket: Ticket, work_s: float) -> None:
        """The request of ``ticket`` reached the pipeline after ``work_s`` (s) of the front's own work on it
        (decoding and checking it; not the time its body took to arrive)."""
        self._settle(ticket)
        self.ingress_s += EWMA_WEIGHT * (max(0.0, float(work_s)) - self.ingress_s)
        self.reach_s += EWMA_WEIGHT * (max(0.0, time.monotonic() - ticket.admitted_at) - self.reach_s)

    def abandoned(self, ticket: Ticket) -> None:
        """The request of ``ticket`` ended before it reached the pipeline (malformed, its body too large or
        late); settling it twice is harmless."""
        self._settle(ticket)

    def pipeline_deadline(self, deadline_s: float) -> float:
        """The deadline to hand the runtime: the client's, less the expected cost of answering (the work
        after the pipeline and the wait for the event loop, :meth:`answer_wait_s`)."""
        return deadline_s - self.egress_s - self.answer_wait_s()

    def answered(self, state: str, deadline_s: float, resumed_s: float) -> str:
        """The state of an answer ready now, judged by the client's ``deadline_s``: ``on_time`` past it
        becomes ``late`` (counted in :attr:`late_answers`), and ``late`` by it becomes ``on_time`` (counted in
        :attr:`timely_answers`: the pipeline finished after the earlier deadline it was handed, which keeps a
        margin for answering, and the answer still left in time).  Other states pass unchanged.
        ``resumed_s`` (``time.perf_counter()``) is when the awaiting coroutine got the pipeline's output: the
        time since is the work after the pipeline (encoding) that the next deadlines budget for."""
        self.egress_s += EWMA_WEIGHT * (max(0.0, time.perf_counter() - resumed_s) - self.egress_s)
        if state == "on_time" and self.runtime.now() > deadline_s:
            self.late_answers += 1
            return "late"
        if state == "late" and self.runtime.now() <= deadline_s:
            self.timely_answers += 1
            return "on_time"
        return state

    def report(self) -> dict[str, Any]:
        """The door's state: lag, the front's mean work before and after the pipeline (s), requests admitted
        and not yet handed to the pipeline, late answers."""
        return {"loop_lag_s": self.loop_lag.now(), "loop_lag_peak_s": self.loop_lag.peak, "ingress_s": self.ingress_s,
                "egress_s": self.egress_s, "reach_s": self.reach_s,
                "in_front": self.in_front, "late_answers": self.late_answers, "timely_answers": self.timely_answers,
                "proactive": self.proactive}
