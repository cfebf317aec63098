"""One error hierarchy (issue 11) and structured errors (issue 13, Found 7): the public API with bad arguments
raises PardError subclasses naming argument and value; attributes, messages, pickling."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pard
from pard import errors, workloads
from pard.config import PipelineSpec, StageSpec


def _spec() -> PipelineSpec:
    return PipelineSpec(name="p", slo=1.0, stages=[StageSpec(name="a", profile={1: 0.001, 4: 0.002}, max_batch=4)])


def _runtime(**kwargs: Any) -> pard.Runtime:
    return pard.Runtime(_spec(), {"a": lambda xs: list(xs)}, start=False, **kwargs)


_ARR = np.arange(10) * 0.01

#: (what, call, argument name expected in the message, value expected in the message)
CASES: list[tuple[str, Callable[[], Any], str, str]] = [
    ("simulate jitter_cv", lambda: pard.simulate(_spec(), _ARR, jitter_cv=-1.0), "jitter_cv", "-1.0"),
    ("simulate sync_interval_s", lambda: pard.simulate(_spec(), _ARR, planner={"sync_interval_s": 0.0}), "sync_interval_s", "0.0"),
    ("simulate seed", lambda: pard.simulate(_spec(), _ARR, seed=-3), "seed", "-3"),
    ("simulate samples", lambda: pard.simulate(_spec(), _ARR, planner={"samples": 0}), "planner.samples", "0"),
    ("simulate slo", lambda: pard.simulate(_spec(), _ARR, slo=-2.0), "slo", "-2.0"),
    ("simulate workers", lambda: pard.simulate(_spec(), _ARR, workers=[0]), "workers", "[0]"),
    ("simulate tiers", lambda: pard.simulate(_spec(), _ARR, tiers=7), "tiers", "7"),
    ("simulate arrivals", lambda: pard.simulate(_spec(), [0.5, 0.1]), "arrivals", "0.1"),
    ("simulate arrivals type", lambda: pard.simulate(_spec(), ["a"]), "arrivals", "'a'"),
    ("simulate pipeline", lambda: pard.simulate(42, _ARR), "pipeline", "42"),  # type: ignore[arg-type]
    ("compare policies", lambda: pard.compare(_spec(), _ARR, policies=["naive", "naive"]), "policies", "'naive'"),
    ("Runtime sync_interval_s", lambda: _runtime(planner={"sync_interval_s": 0}), "sync_interval_s", "0"),
    ("Runtime blas_threads", lambda: _runtime(blas_threads=0), "blas_threads", "0"),
    ("Runtime workers", lambda: _runtime(workers=[0]), "workers", "0"),
    ("Runtime planner", lambda: _runtime(planner={"speed": 1}), "planner", "speed"),
    ("Runtime stages", lambda: pard.Runtime(_spec(), {"a": 5}, start=False), "stages", "5"),
    ("submit slo", lambda: _started().submit(1, slo=-1.0), "slo", "-1.0"),
    ("submit slo type", lambda: _started().submit(1, slo="fast"), "slo", "'fast'"),  # type: ignore[arg-type]
    ("submit tier", lambda: _started().submit(1, tier=-5), "tier", "-5"),
    ("close timeout_s", lambda: _runtime().close(timeout_s=-1.0), "timeout_s", "-1.0"),
    ("report capacity_req_s", lambda: _runtime().report(capacity_req_s=0.0), "capacity_req_s", "0.0"),
    ("StageSpec profile", lambda: StageSpec(name="a", profile={1: -0.5}, max_batch=1), "profile", "-0.5"),
    ("StageSpec max_batch", lambda: StageSpec(name="a", profile={1: 0.5}, max_batch=0), "max_batch", "0"),
    ("StageSpec.duration batch", lambda: _spec().stages[0].duration(0), "batch", "0"),
    ("PipelineSpec slo", lambda: PipelineSpec(name="p", slo=-1.0, stages=_spec().stages), "slo", "-1.0"),
    ("config.loads format", lambda: pard.config.loads("{}", format="xml"), "format", "'xml'"),  # type: ignore[arg-type]
    ("config.load name", lambda: pard.config.load("no-such-pipeline"), "no-such-pipeline", "no-such-pipeline"),
    ("poisson rate", lambda: workloads.poisson(-1.0, 10.0), "rate", "-1.0"),
    ("poisson duration type", lambda: workloads.poisson(1.0, "long"), "duration", "'long'"),  # type: ignore[arg-type]
    ("bursty cv", lambda: workloads.bursty(10.0, 10.0, -1.0), "cv", "-1.0"),
    ("scale rate", lambda: workloads.scale([0.0, 1.0, 2.0], -5.0), "rate", "-5.0"),
    ("load_trace trace", lambda: workloads.load_trace("no/such.csv", trace_format=None, scaling="amplify", rate=1.0,
                                                      start_s=0.0, duration_s=1.0, seed=0), "trace", "'no/such.csv'"),
]

_OPEN: list[pard.Runtime] = []


def _started() -> pard.Runtime:
    rt = pard.Runtime(_spec(), {"a": lambda xs: list(xs)})
    _OPEN.append(rt)
    return rt


@pytest.fixture(autouse=True)
def _close_runtimes() -> Any:
    yield
    while _OPEN:
        _OPEN.pop().close(drain=False)


@pytest.mark.parametrize("what, call, arg, value", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_raises_pard_error_naming_it(what: str, call: Callable[[], Any], arg: str, value: str) -> None:
    """Each bad argument raises a PardError that is also a ValueError or TypeError, naming the argument and value."""
    with pytest.raises(errors.PardError) as info:
        call()
    exc = info.value
    assert isinstance(exc, (ValueError, TypeError)), f"{what}: {type(exc).__mro__}"
    assert arg in str(exc) and value in str(exc), f"{what}: {exc}"


def test_hierarchy() -> None:
    """UsageError, TooManyArrivalsError, ConfigError and TraceError are PardErrors and ValueErrors."""
    for cls in (errors.UsageError, errors.TooManyArrivalsError, errors.ConfigError, errors.TraceError,
                errors.PardValueError):
        assert issubclass(cls, errors.PardError) and issubclass(cls, ValueError)
    assert issubclass(errors.PardTypeError, TypeError) and issubclass(errors.MissingExtraError, ImportError)
    assert workloads.TooManyArrivalsError is errors.TooManyArrivalsError
    e = errors.TooManyArrivalsError("too many", expected=10.0, limit=5.0)
    back = pickle.loads(pickle.dumps(e))
    assert (str(back), back.expected, back.limit) == ("too many", 10.0, 5.0)


def test_executor_error_carries_request_stage_and_cause() -> None:
    """ExecutorError exposes request_id, stage and cause (also as __cause__) and survives pickling."""
    cause = ZeroDivisionError("division by zero")
    err = pard.ExecutorError("stage 'a': executor raised ZeroDivisionError", request_id=7, stage="a", cause=cause)
    assert (err.request_id, err.stage, err.cause) == (7, "a", cause)
    assert err.__cause__ is cause
    back = pickle.loads(pickle.dumps(err))
    assert (back.request_id, back.stage, str(back)) == (7, "a", str(err))
    assert isinstance(back.cause, ZeroDivisionError)


def test_executor_error_without_context_has_none_fields() -> None:
    """An ExecutorError built from a message alone has request_id, stage and cause None."""
    err = pard.ExecutorError("boom")
    assert (err.request_id, err.stage, err.cause) == (None, None, None)


def test_dropped_and_rejected_carry_retry_after() -> None:
    """Dropped and Rejected carry retry_after_s (None by default), show it in the message and pickle it."""
    d = pard.Dropped(3, "det", "infeasible", retry_after_s=0.25)
    assert d.retry_after_s == 0.25 and "retry after 0.250 s" in str(d)
    assert pard.Dropped(3, "det", "infeasible").retry_after_s is None
    r = pard.Rejected("ingress ring is full", retry_after_s=1.5, stage="det")
    assert (r.retry_after_s, r.stage) == (1.5, "det")
    assert str(r) == "request rejected at stage 'det': ingress ring is full; retry after 1.500 s"
    for e in (d, r):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.retry_after_s == e.retry_after_s


def test_messages_have_no_doubled_quotes() -> None:
    """A stage name in a message is quoted once, never followed by a possessive quote ("'a''s")."""
    for e in (pard.Rejected("ingress ring is full", stage="a"), pard.Dropped(1, "a", "infeasible")):
        assert "''" not in str(e) and "'a'" in str(e)


def test_runtime_executor_error_names_request_stage_and_cause() -> None:
    """A failing executor's requests end with an ExecutorError carrying their own id, the stage and the cause."""
    spec = pard.PipelineSpec.from_dict({"name": "one", "slo": 5.0, "stages": [
        {"name": "boom", "profile": {1: 0.001}, "max_batch": 4, "workers": 1, "successors": []}]})

    def fail(batch: list[object]) -> list[object]:
        raise ZeroDivisionError("no")

    with pard.Runtime(spec, {"boom": pard.CallableExecutor(fail)}) as rt:
        futs = [rt.submit(i) for i in range(3)]
        errs = [f.exception(timeout=30.0) for f in futs]
    for f, e in zip(futs, errs):
        assert isinstance(e, pard.ExecutorError)
        assert (e.request_id, e.stage) == (f.request_id, "boom")
        assert isinstance(e.cause, ZeroDivisionError) and e.__cause__ is e.cause
    assert rt.counts()["failed"] == 3
