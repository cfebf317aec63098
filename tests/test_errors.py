"""The structured errors of pard.errors (issue 13, Found 7): attributes, messages, pickling."""

from __future__ import annotations

import pickle

import pard


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
