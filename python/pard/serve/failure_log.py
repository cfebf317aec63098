"""Executor failures in the server log, rate-limited per stage.

A stage whose executor fails on every batch would otherwise write one log line per request: at
thousands of requests per second that is the log's whole volume.  ``pard serve`` logs each failure
here (:class:`pard.serve.service.ServedPipeline`), whether or not the 500's body carries its text.
"""

from __future__ import annotations

import logging
import threading
import time

from ..errors import ExecutorError

__all__ = ["FailureLog"]


class FailureLog:
    """Logs executor failures at WARNING, at most one line per stage per ``period_s`` seconds; the
    failures not logged are counted into the next line of that stage.  Thread-safe."""

    def __init__(self, logger: logging.Logger, period_s: float = 1.0) -> None:
        self._log = logger
        self._period_s = period_s
        self._last: dict[str | None, float] = {}
        self._skipped: dict[str | None, int] = {}
        self._lock = threading.Lock()

    def note(self, e: ExecutorError, now_s: float | None = None) -> bool:
        """Log ``e`` unless its stage logged less than ``period_s`` ago; True when it was logged."""
        now = time.monotonic() if now_s is None else now_s
        with self._lock:
            last = self._last.get(e.stage)
            if last is not None and now - last < self._period_s:
                self._skipped[e.stage] = self._skipped.get(e.stage, 0) + 1
                return False
            self._last[e.stage] = now
            skipped = self._skipped.pop(e.stage, 0)
        more = f" ({skipped} more failures of this stage since the last line)" if skipped else ""
        self._log.warning("pard serve: request %s failed: %s%s", e.request_id, e, more)
        return True
