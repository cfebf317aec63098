"""pard's exception and warning hierarchy.

Every error pard raises on bad input derives from :class:`PardError` and also from the
built-in type a caller would expect (``ValueError`` or ``TypeError``), so ``except ValueError``
keeps working.  Messages quote the offending value and say what was expected.
"""

from __future__ import annotations

__all__ = [
    "PardError",
    "ConfigError",
    "TraceError",
    "Dropped",
    "Rejected",
    "ExecutorError",
    "PardWarning",
]


class PardError(Exception):
    """Base class of every exception raised by pard."""


class ConfigError(PardError, ValueError):
    """A pipeline or stage specification is invalid (names the field and the value)."""


class TraceError(PardError, ValueError):
    """An arrival trace cannot be read (names the file, the line or column, and the problem)."""


class Dropped(PardError):
    """A request was dropped by the scheduler.

    Attributes:
        request_id: the request's id (int).
        stage: name of the stage that dropped it (str).
        reason: drop reason, one of ``pard.DROP_REASONS`` (e.g. ``"infeasible"``).
        retry_after_s: a hint in seconds for when a retry could be served, or None (set by
            ``Runtime.infer``).
    """

    def __init__(self, request_id: int, stage: str, reason: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(f"request {request_id} dropped at stage {stage!r}: {reason}")
        self.request_id = request_id
        self.stage = stage
        self.reason = reason
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[type, tuple[int, str, str]]:
        return (type(self), (self.request_id, self.stage, self.reason))


class Rejected(PardError):
    """A request was refused at admission (e.g. the ingress ring is full: back-pressure).

    Attributes:
        reason: why (str).  retry_after_s: a hint in seconds, or None.  stage: the stage that
        refused it (str), or None.  request_id: the request's id (int), or None.
    """

    def __init__(self, reason: str, retry_after_s: float | None = None, *, stage: str | None = None,
                 request_id: int | None = None) -> None:
        hint = "" if retry_after_s is None else f"; retry after {retry_after_s:.3f} s"
        super().__init__(f"request rejected: {reason}{hint}")
        self.reason = reason
        self.retry_after_s = retry_after_s
        self.stage = stage
        self.request_id = request_id

    def __reduce__(self) -> tuple[type, tuple[str, float | None]]:
        return (type(self), (self.reason, self.retry_after_s))


class ExecutorError(PardError):
    """A stage's executor raised; the batch's requests end in state ``failed``.

    Attributes:
        request_id: the request's id (int) where known (``Runtime.infer`` sets it), else None.
    """

    request_id: int | None = None


class PardWarning(UserWarning):
    """A recoverable problem pard fixed for you (e.g. unsorted timestamps were sorted)."""
