"""LLM stages' learned pieces (DESIGN §3.8): the online output-length predictor.

An LLM stage cannot know a request's output length before its end-of-sequence token, so the deadline
rules read a quantile of the output-length distribution learned from the requests that finished.
:class:`OutputLengthPredictor` is ``cpp/include/pard/llm/output_length.hpp``'s predictor (the one the
simulator and the live runtime run), with keyword-only options, :class:`pard.PardError` subclasses for
bad input and a ``__repr__``.  The idea of scheduling on online output-length quantiles follows SCORPIO
and SageSched; the histogram (log2 input buckets x tiers, eighth-octave length bins, exponential decay)
is pard's own.
"""

from __future__ import annotations

from . import _core
from .errors import PardTypeError, PardValueError

__all__ = ["OutputLengthPredictor"]


def _translate(exc: Exception) -> Exception:
    """The core's ValueError / TypeError as pard's own (the message names the field and value)."""
    if isinstance(exc, ValueError):
        return PardValueError(str(exc))
    return PardTypeError(str(exc))


class OutputLengthPredictor(_core.OutputLengthPredictor):
    """Online quantiles of an LLM stage's output length in tokens.

    Each finished request is one sample (:meth:`observe`) of three histograms: its condition cell (log2
    bucket of its input tokens x its tier; tiers >= 16 share the last), its input bucket's pool and the
    global pool.  A sample's weight halves every ``half_life`` samples observed, so the predictor follows
    drift.  :meth:`quantile` answers from the first of cell, pool, global whose mass above the tokens
    already generated is that of ``min_samples`` fresh samples; before the predictor holds that much it
    returns the prior, the cap.  Answers are exact to within one bin (bins are one token wide up to 13,
    then an eighth octave, about 9 % of the length).  Not thread-safe.

    Args:
        max_output_tokens: the stage's output cap (tokens, >= 1); longer samples count at the cap.
        half_life: samples after which a sample weighs half (float, >= 1).
        min_samples: the mass, in fresh samples, a histogram needs before it answers (>= 1).
        tiers: how many tier codes the stage sees (>= 1).

    Raises:
        PardValueError: a value out of range (the message names the field and the value).
        PardTypeError: a non-int token count or tier (floats are refused, not truncated).
    """

    def __init__(self, *, max_output_tokens: int = 1024, half_life: float = 2000.0, min_samples: int = 32,
                 tiers: int = 1) -> None:
        try:
            super().__init__(max_output_tokens=max_output_tokens, half_life=half_life, min_samples=min_samples,
                             tiers=tiers)
        except (ValueError, TypeError) as exc:
            raise _translate(exc) from None

    def observe(self, in_tokens: int, tier: int, out_tokens: int) -> None:
        """Record a finished request: ``in_tokens`` input tokens (>= 0, 0 = unknown), tier code ``tier``
        (>= 0) and ``out_tokens`` output tokens (>= 1).

        Raises:
            PardValueError, PardTypeError: as the class says.
        """
        try:
            super().observe(in_tokens, tier, out_tokens)
        except (ValueError, TypeError) as exc:
            raise _translate(exc) from None

    def quantile(self, in_tokens: int, tier: int, hint: int, p: float, generated: int = 0) -> int:
        """The ``p``-quantile (0 < p < 1) of the output length (tokens) of a request with ``in_tokens``
        input tokens, tier ``tier`` and client hint ``hint`` (``max_tokens``; 0 = none) that has already
        generated ``generated`` tokens (0 at admission).

        Returns:
            An int in ``[generated + 1, cap]``, ``cap = min(hint, max_output_tokens)`` (``max_output_tokens``
            without a hint); ``cap`` before the predictor holds ``min_samples`` samples, or when no sample
            kept is longer than ``generated``.  Non-decreasing in ``p``.

        Raises:
            PardValueError: ``p`` outside (0, 1), a negative count, or ``generated >= cap``.
            PardTypeError: a non-int count.
        """
        try:
            return int(super().quantile(in_tokens, tier, hint, p, generated))
        except (ValueError, TypeError) as exc:
            raise _translate(exc) from None

    def record_calibration(self, predicted: int, actual: int) -> None:
        """Record that a request predicted ``predicted`` tokens (>= 1) at admission finished with ``actual``
        (>= 0); :meth:`calibration` counts them.

        Raises:
            PardValueError, PardTypeError: as the class says.
        """
        try:
            super().record_calibration(predicted, actual)
        except (ValueError, TypeError) as exc:
            raise _translate(exc) from None

    def calibration(self) -> tuple[int, int]:
        """``(n, under)``: the records of :meth:`record_calibration`, and those with ``actual <= predicted``
        (a calibrated p-quantile has ``under / n`` close to p)."""
        n, under = super().calibration()
        return int(n), int(under)

    def __repr__(self) -> str:
        return (f"OutputLengthPredictor(max_output_tokens={self.max_output_tokens}, half_life={self.half_life!r}, "
                f"min_samples={self.min_samples}, tiers={self.tiers}, observed={self.observed})")

