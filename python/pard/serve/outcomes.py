"""How ``pard serve`` counts each request under exactly one outcome: the tier outcome of an answer, the
outcome ``pard_requests_total`` counts it under, and the report's ``outcomes`` (the runtime's counts with
the server's own moved in)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["tier_outcome", "answered_outcome", "merged_outcomes", "tier_report"]

#: An answer's outcome -> its tier outcome, where they differ (a queue-limit 429 is a rejection).
_TIER_OUTCOME = {"queue_full": "rejected"}
#: A tier outcome -> pard_requests_total's, where they differ: no answer to a client that hung up counts as
#: dropped, the 429 at the door as rejected, and a body that never arrived (408) as dropped, as the report's
#: ``outcomes`` count them.
_ANSWERED = {"client_closed": "dropped", "busy": "rejected", "body_timeout": "dropped"}


def tier_outcome(outcome: str, headers: Mapping[str, str]) -> str:
    """The tier outcome of an answer: a 200's is its ``X-Pard-Outcome`` (on_time or late, by when it left)."""
    return _TIER_OUTCOME.get(outcome, headers.get("x-pard-outcome", outcome))


def answered_outcome(tier: str) -> str:
    """``pard_requests_total``'s outcome of an answer whose tier outcome is ``tier``."""
    return _ANSWERED.get(tier, tier)


def merged_outcomes(rt: Mapping[str, int], counts: Mapping[str, int], late_answers: int,
                    orphans: Mapping[str, int], unencoded: Mapping[str, int], timely_answers: int = 0,
                    closed_mid_body: int = 0) -> dict[str, int]:
    """``ServedPipeline.report``'s ``outcomes``: the runtime's counts ``rt`` with the server's own moved in,
    so that every answer is counted under exactly one outcome (``late_answers``: the runtime's on_time
    answered after the deadline; ``timely_answers``: its late answered by the deadline; ``closed_mid_body``:
    the server's ``client_closed`` whose client hung up before its body arrived, which the runtime never saw)."""
    merged = {k: int(rt.get(k, 0)) for k in ("on_time", "late", "dropped", "rejected", "failed", "pending")}
    merged["rejected"] += counts["queue_full"] + counts["busy"]
    merged["dropped"] += counts["body_timeout"]  # its body never arrived by its deadline: the runtime never saw it
    merged["dropped"] += closed_mid_body  # nor the body of a client that hung up first
    merged["on_time"] -= late_answers  # answered after their deadline (_timed)
    merged["late"] += late_answers
    merged["late"] -= timely_answers  # finished past the pipeline's deadline, answered by the client's
    merged["on_time"] += timely_answers
    for state, n in orphans.items():  # finished after their client hung up: no answer went out
        merged[state] -= n
        merged["dropped"] += n
    for state, n in unencoded.items():  # finished, but answered 500 output_error: counted there alone
        merged[state] -= n
    for k in ("invalid", "unavailable", "output_error"):
        merged[k] = counts[k]
    return merged


def tier_report(tiers: Mapping[str, float], tier_counts: Mapping[tuple[int, str], int],
                outcomes: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per tier (by name; ``"default"`` when the pipeline declares none): its weight, the answers of its
    decoded requests by outcome (``tier_counts``: (tier code, tier outcome) -> count; a 200 as on_time or
    late by when it left, as the report's totals), and ``weighted_on_time`` = weight x on_time.  A request
    refused before its tier was read (malformed, unknown model, not ready) is in no tier."""
    out: dict[str, dict[str, float]] = {}
    for code, (name, weight) in enumerate((dict(tiers) or {"default": 1.0}).items()):
        row: dict[str, float] = {"weight": float(weight)}
        row.update({o: tier_counts.get((code, o), 0) for o in outcomes})
        row["weighted_on_time"] = float(weight) * row["on_time"]
        out[name] = row
    return out
