"""pard.runtime.door.Door, the admission an asyncio front puts before reading a request's body: its tickets,
the requests it counts in front of the next ones, its refusals and its argument checks (no timing)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

import pard
from pard.runtime import door as door_mod
from pard.errors import PardValueError
from pard.runtime.door import Door, Refusal, Ticket

from _cpp import run_standalone_cpp_test

SPEC = pard.PipelineSpec(name="d", slo=0.5, stages=[
    pard.StageSpec(name="a", profile={1: 0.01, 8: 0.02}, max_batch=8, successors=["b"]),
    pard.StageSpec(name="b", profile={1: 0.01, 8: 0.02}, max_batch=8)])


def _with_door(body: Any) -> Any:
    async def main() -> Any:
        with pard.Runtime(SPEC, {"a": lambda xs: xs, "b": lambda xs: xs}) as rt:
            d = Door(rt, max_loop_lag_s=0.0)
            d.start()
            try:
                return await body(rt, d)
            finally:
                d.stop()
    return asyncio.run(main())


def test_admitted_requests_count_in_front_until_settled_once() -> None:
    """Each admission is a Ticket counted in front of the next requests; submitted or abandoned settles it,
    and settling twice changes nothing."""
    async def body(rt: pard.Runtime, d: Door) -> None:
        now = rt.now()
        tickets = [d.check(now, now + 10.0) for _ in range(3)]
        assert all(isinstance(t, Ticket) for t in tickets) and d.in_front == 3
        d.submitted(tickets[0], 0.001)
        d.abandoned(tickets[1])
        d.abandoned(tickets[1])
        d.submitted(tickets[0], 0.001)
        assert d.in_front == 1
        d.abandoned(tickets[2])
        assert d.in_front == 0
    _with_door(body)


def test_requests_in_front_make_the_door_refuse_and_stalled_ones_age_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """With enough admitted requests in front (their bodies still being read), a request whose deadline their
    work would pass is refused as infeasible, with a retry hint; once those requests have been in front
    longer than IN_FRONT_S (set to 0 here: a stalled upload) they stop counting and the same request is
    admitted."""
    async def body(rt: pard.Runtime, d: Door) -> None:
        d.reach_s = 1.0  # admitted requests have taken long to reach the pipeline: count them IN_FRONT_S
        now = rt.now()
        # stage a serves 8 / 0.02 s = 400 req/s at most: 400 requests in front are a second of work
        held = [d.check(now, now + 100.0) for _ in range(400)]
        assert all(isinstance(t, Ticket) for t in held)
        refused = d.check(rt.now(), rt.now() + 0.3)
        assert isinstance(refused, Refusal) and refused.reason == "infeasible" and refused.retry_after_s
        monkeypatch.setattr(door_mod, "IN_FRONT_S", 0.0)
        again = d.check(rt.now(), rt.now() + 0.3)
        assert isinstance(again, Ticket) and d.in_front == 1
    _with_door(body)


def test_a_request_counts_in_front_only_a_few_times_as_long_as_requests_take_to_reach_the_pipeline() -> None:
    """Requests reach the pipeline 2 ms after admission (reach_s): one admitted 0.45 s ago (its client trickles
    its body) no longer counts in front of the next requests, one admitted now does; the window is
    IN_FRONT_REACH x reach_s plus the loop's lag (at least a tick), never past IN_FRONT_S (0.5 s, which would
    still count it).  Ages are set on the tickets, not waited."""
    async def body(rt: pard.Runtime, d: Door) -> None:
        now = rt.now()
        first = d.check(now, now + 100.0)
        assert isinstance(first, Ticket)
        d.submitted(first, 0.0)
        d.reach_s = 0.002
        assert door_mod.IN_FRONT_REACH * 0.002 + door_mod.LAG_TICK_S <= d.in_front_s() < 0.45
        stalled = d.check(now, now + 100.0)
        assert isinstance(stalled, Ticket) and d.in_front == 1
        stalled.admitted_at -= 0.45
        fresh = d.check(rt.now(), rt.now() + 100.0)  # the check ages the stalled one out first
        assert isinstance(fresh, Ticket) and d.in_front == 1 and not stalled.counted and fresh.counted
        d.reach_s = 10.0
        assert d.in_front_s() == door_mod.IN_FRONT_S
    _with_door(body)


def test_a_stall_of_the_loop_is_budgeted_for_the_next_answers() -> None:
    """A stall of the event loop (the loop blocked 0.2 s) stays in the lag's peak after the loop runs freely
    again, and the deadline handed to the pipeline keeps that much for the answer's wait: a result ready
    during the next stall still leaves by the client's deadline; with a lag guard, up to its threshold."""
    async def body(rt: pard.Runtime, d: Door) -> None:
        time.sleep(0.2)  # the loop is blocked: the lag monitor's tick is overdue by about this much
        await asyncio.sleep(0.05)  # the monitor wakes, records the stall, then ticks on time again
        assert d.loop_lag.peak >= 0.15
        assert d.answer_wait_s() >= 0.15
        assert d.pipeline_deadline(100.0) <= 100.0 - 0.15
        assert d.front_s() >= d.answer_wait_s()
        assert d.report()["loop_lag_peak_s"] == d.loop_lag.peak
        # with a lag guard, the peak counts only up to max_loop_lag_s: one long pause does not close the door
        guarded = Door(rt, max_loop_lag_s=0.05)
        guarded.loop_lag.peak = 2.0
        assert guarded.answer_wait_s() == pytest.approx(0.05)
        assert guarded.pipeline_deadline(100.0) == pytest.approx(100.0 - 0.05)
    _with_door(body)


def test_answers_are_judged_by_the_clients_deadline_both_ways() -> None:
    """``answered``: on_time past the client's deadline is late; late (past the earlier deadline the runtime
    was handed) by it is on time; each move is counted; other states pass unchanged."""
    async def body(rt: pard.Runtime, d: Door) -> None:
        now, t = rt.now(), time.perf_counter()
        assert d.answered("on_time", now - 1.0, t) == "late" and d.late_answers == 1
        assert d.answered("late", now + 10.0, t) == "on_time" and d.timely_answers == 1
        assert d.answered("late", now - 1.0, t) == "late" and d.answered("on_time", now + 10.0, t) == "on_time"
        assert d.answered("dropped", now + 10.0, t) == "dropped"
        assert (d.late_answers, d.timely_answers) == (1, 1)
    _with_door(body)


def test_a_deadline_shorter_than_the_fastest_path_is_refused_without_a_retry_hint() -> None:
    """The fastest path is 20 ms (d(1) of two stages): a 5 ms budget is refused and no retry can help."""
    async def body(rt: pard.Runtime, d: Door) -> None:
        now = rt.now()
        refused = d.check(now, now + 0.005)
        assert isinstance(refused, Refusal) and refused.reason == "infeasible" and refused.retry_after_s is None
        assert not d.attainable(now, now + 0.005) and d.attainable(now, now + 0.05)
    _with_door(body)


@pytest.mark.parametrize(("args", "match"), [
    ((0.0, float("nan")), "deadline_s must be a finite number"),
    ((float("inf"), 1.0), "arrived_s must be a finite number"),
    ((0.0, "soon"), "deadline_s must be a finite number.*'soon'"),
    ((0.0, 10 ** 400), "deadline_s must be a finite number.*an int of"),
    ((0.0, 1.0, 1), r"tier must be a tier code in \[0, 0\], got 1"),
    ((0.0, 1.0, "gold"), "tier must be a tier code"),
])
def test_bad_arguments_are_named(args: tuple[Any, ...], match: str) -> None:
    """A non-finite or non-number time, or a tier the pipeline does not have, is a PardValueError naming it."""
    async def body(rt: pard.Runtime, d: Door) -> None:
        with pytest.raises(PardValueError, match=match):
            d.check(*args)
    _with_door(body)


def test_max_loop_lag_must_be_a_number_of_seconds() -> None:
    """Door(max_loop_lag_s=-1) is refused, naming the argument."""
    with pard.Runtime(SPEC, {"a": lambda xs: xs, "b": lambda xs: xs}) as rt:
        with pytest.raises(PardValueError, match="max_loop_lag_s"):
            Door(rt, max_loop_lag_s=-1.0)


def test_standalone_cpp_door(tmp_path: Path) -> None:
    """The C++ door test (the path walk's refusals on hand-built HBF and LBF stages) passes."""
    run_standalone_cpp_test("test_door", tmp_path)
