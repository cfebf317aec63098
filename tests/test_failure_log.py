"""pard.serve.failure_log: one log line per stage and period, the skipped failures counted into the next."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("starlette")

from pard.errors import ExecutorError  # noqa: E402
from pard.serve.failure_log import FailureLog  # noqa: E402


def _err(stage: str, rid: int) -> ExecutorError:
    return ExecutorError(f"stage {stage!r}: executor raised KeyError: 'x'", request_id=rid, stage=stage)


def test_one_line_per_stage_and_period_with_the_skipped_count(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.failure_log")
    fl = FailureLog(log, period_s=1.0)
    with caplog.at_level(logging.WARNING, logger="test.failure_log"):
        logged = [fl.note(_err("a", i), now_s=0.1 * i) for i in range(25)]  # 2.5 s of failures, 10 per second
        logged.append(fl.note(_err("b", 99), now_s=0.5))                     # another stage: its own budget
    # stage a logs at 0.0, 1.0 and 2.0 s (a failure at exactly one period logs again): 3 of 25
    assert [i for i, x in enumerate(logged[:25]) if x] == [0, 10, 20] and logged[25]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4
    assert "request 10 failed" in lines[1] and "(9 more failures of this stage" in lines[1]
    assert "request 20 failed" in lines[2] and "(9 more failures" in lines[2]
    assert "request 99 failed" in lines[3] and "more failures" not in lines[3]
