"""pard's exception and warning hierarchy.

Every error pard raises on bad input derives from :class:`PardError` and also from the
built-in type a caller would expect (``ValueError`` or ``TypeError``), so ``except ValueError``
keeps working.  Messages quote the offending value and say what was expected.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "PardError",
    "REJECT_REASONS",
    "PardValueError",
    "PardTypeError",
    "ConfigError",
    "UnknownStageError",
    "TraceError",
    "UsageError",
    "TooManyArrivalsError",
    "MissingExtraError",
    "RuntimeStateError",
    "Dropped",
    "Rejected",
    "ExecutorError",
    "PromptRefused",
    "PardWarning",
]


class PardError(Exception):
    """Base class of every exception raised by pard."""


class PardValueError(PardError, ValueError):
    """An argument has the right type but a bad value (the message names the argument and the value)."""


class PardTypeError(PardError, TypeError):
    """An argument has the wrong type (the message names the argument, its type and the value)."""


class ConfigError(PardValueError):
    """A pipeline or stage specification is invalid (names the field and the value)."""


class UnknownStageError(PardError, KeyError):
    """A stage name the pipeline does not have (names it and lists the stages); a KeyError too, so code that
    looked names up with ``except KeyError`` keeps working."""

    def __str__(self) -> str:  # KeyError's own str() would quote the whole message
        return str(self.args[0]) if self.args else ""


class TraceError(PardValueError):
    """An arrival trace cannot be read (names the file, the line or column, and the problem)."""


class UsageError(PardValueError):
    """Bad command-line input; the message names the option and the value (``pard`` exits 2)."""


class TooManyArrivalsError(PardValueError):
    """A request for more arrivals (or simulator state) than a stated limit, refused before allocating.

    Attributes:
        expected: the size asked for (arrivals, or request-stage visits).  limit: the limit.
    """

    def __init__(self, message: str, *, expected: float, limit: float) -> None:
        super().__init__(message)
        self.expected = expected
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_too_many, (str(self), self.expected, self.limit))


def _rebuild_too_many(message: str, expected: float, limit: float) -> TooManyArrivalsError:
    return TooManyArrivalsError(message, expected=expected, limit=limit)


class RuntimeStateError(PardError, RuntimeError):
    """The runtime cannot do this now: not started, closed, a stage dead, or a call from the wrong
    thread (a ``RuntimeError`` too, as it was before it had its own type)."""


class MissingExtraError(PardError, ImportError):
    """An optional dependency is not installed; the message names the extra that provides it."""


class Dropped(PardError):
    """A request was dropped by the scheduler.

    Attributes:
        request_id: the request's id (int).
        stage: name of the stage that dropped it (str).
        reason: drop reason, one of :data:`pard.outcomes.REASONS` (e.g. ``"infeasible"``).
        retry_after_s: when the caller may retry with a fair chance (seconds), or None when pard
            has no estimate.
    """

    def __init__(self, request_id: int, stage: str, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(f"request {request_id} dropped at stage {stage!r}: {reason}{_hint(retry_after_s)}")
        self.request_id = request_id
        self.stage = stage
        self.reason = reason
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[type, tuple[int, str, str, float | None]]:
        return (type(self), (self.request_id, self.stage, self.reason, self.retry_after_s))


class Rejected(PardError):
    """A request was refused at admission (back-pressure: a full queue or ingress ring).

    Attributes:
        reason: why, a code a caller can branch on: ``"queue_full"`` (the stage held ``max_queue_size``
            requests) or ``"ring_full"`` (its lock-free ingress ring was full); see :data:`REJECT_REASONS`.
        detail: the same in words, with the figures (e.g. ``"its queue is full (2 queued,
            max_queue_size 2)"``), or None.
        retry_after_s: when the caller may retry (seconds), or None when pard has no estimate.
        stage: name of the stage that refused it, or None (e.g. refused before any stage).
        request_id: the refused request's id (int, the id its future carries), or None when the
            refusal came before an id was given.
    """

    def __init__(self, reason: str, retry_after_s: float | None = None, stage: str | None = None,
                 request_id: int | None = None, detail: str | None = None) -> None:
        where = "" if stage is None else f" at stage {stage!r}"
        rid = "" if request_id is None else f" {request_id}"
        super().__init__(f"request{rid} rejected{where}: {detail or reason}{_hint(retry_after_s)}")
        self.reason = reason
        self.detail = detail
        self.retry_after_s = retry_after_s
        self.stage = stage
        self.request_id = request_id

    def __reduce__(self) -> tuple[type, tuple[str, float | None, str | None, int | None, str | None]]:
        return (type(self), (self.reason, self.retry_after_s, self.stage, self.request_id, self.detail))


#: The codes of :attr:`Rejected.reason`.
REJECT_REASONS = ("queue_full", "ring_full")


class ExecutorError(PardError):
    """A stage's executor (or a join, or a worker thread) failed; the request ends in state ``failed``.

    Attributes:
        request_id: the failed request's id (int), or None when the error is not about one request.
        stage: name of the stage whose executor failed (str), or None.
        cause: the exception the executor raised (also ``__cause__``), or None.
    """

    def __init__(self, message: str, request_id: int | None = None, stage: str | None = None,
                 cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.stage = stage
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause

    def __reduce__(self) -> tuple[type, tuple[str, int | None, str | None, BaseException | None]]:
        return (type(self), (str(self), self.request_id, self.stage, self.cause))


class PromptRefused(PardValueError):
    """An LLM stage refused a request's prompt as it joined (a token id outside the engine's vocabulary, a
    prompt longer than its context, ``in_tokens`` contradicting the payload's token ids): that request ends
    ``failed`` with it as its :class:`ExecutorError`'s ``cause``, and the step's other sequences run on.  The
    message names the field and the value and nothing else, so ``pard serve`` shows it to the client."""


def _hint(retry_after_s: float | None) -> str:
    return "" if retry_after_s is None else f"; retry after {retry_after_s:.3f} s"


class PardWarning(UserWarning):
    """A recoverable problem pard fixed for you (e.g. unsorted timestamps were sorted)."""
