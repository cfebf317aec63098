"""The one table of outcome states and drop reasons (DESIGN §4).

Every request ends in exactly one terminal state; the codes are those of the C++ ``Outcome`` enum
(``cpp/include/pard/outcome.hpp``), which ``pard._core.Simulator.outcomes()["state"]`` reports, and
the live runtime records the same codes.  Drop reasons are taken from ``pard._core.REASONS`` (the
C++ ``Reason`` enum of ``cpp/include/pard/policy.hpp``), so a reason code means the same thing in
the simulator, the runtime, a :class:`pard.report.Report` and a :class:`pard.Dropped`.

Conservation: ``submitted = on_time + late + dropped + rejected + failed`` once nothing is pending.
"""

from __future__ import annotations

from . import _core

__all__ = ["STATES", "REASONS", "PENDING", "ON_TIME", "LATE", "DROPPED", "REJECTED", "FAILED",
           "TERMINAL", "reason_code"]

#: Outcome state names by code (``state[i]`` of an outcomes array indexes this tuple).
STATES: tuple[str, ...] = ("pending", "on_time", "late", "dropped", "rejected", "failed")
PENDING, ON_TIME, LATE, DROPPED, REJECTED, FAILED = range(len(STATES))
#: The terminal states, in the order of the conservation identity.
TERMINAL: tuple[str, ...] = STATES[1:]

#: Drop reason names by code, from the C++ core (``pard._core.REASONS``).
REASONS: tuple[str, ...] = tuple(_core.REASONS)


def reason_code(name: str) -> int:
    """The code of drop reason ``name`` (an index into :data:`REASONS`); KeyError when unknown."""
    try:
        return REASONS.index(name)
    except ValueError:
        raise KeyError(f"unknown drop reason {name!r}; reasons are {', '.join(REASONS)}") from None
