"""One clock for every actor of a deployment: the driver's, reached through the nodes' wall clocks.

A request's deadline (``send + slo``) is set by the driver and compared, at every stage, with the
time *that* stage's actor reads.  On one machine every process reads the same ``time.time()``; across
machines the wall clocks differ by the NTP error of each node (the paper synchronised its 16 machines
with NTP).  pard does not trust that blindly: when a deployment starts, the driver probes every actor
the way NTP does (Mills, RFC 5905 §8): it reads its clock ``t0``, the actor reads ``t1``, the driver
reads ``t2``; the actor's offset is ``t1 - (t0 + t2) / 2`` and the error of that estimate is at most
half the round trip, ``(t2 - t0) / 2``.  The probe with the shortest round trip of ``probes`` is
kept.  The actor then subtracts the offset from every time it reads (:class:`Clock`), so all actors
keep the driver's clock to within the kept half round trip (about 0.3-0.5 ms for an actor call on a
local cluster, see docs/ray.md), plus however far the node's clock drifts between probes -- NTP keeps
that drift slewed to well under a millisecond, and :meth:`pard.ray.RayPipeline.clock_skew` measures
it again at any time.

Times are float seconds since the deployment's epoch (the driver's ``time.time()`` when it started),
the same convention as the local runtime's seconds since start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Clock", "Offset", "actor_offset", "estimate_offset"]


class Clock:
    """Seconds since ``epoch_s`` on the driver's clock, read from this node's wall clock.

    Args:
        epoch_s: the deployment's epoch (the driver's ``time.time()``, s).
        offset_s: this node's clock minus the driver's (s), as :func:`estimate_offset` measured it.
    """

    __slots__ = ("epoch_s", "offset_s")

    def __init__(self, epoch_s: float, offset_s: float = 0.0) -> None:
        self.epoch_s = float(epoch_s)
        self.offset_s = float(offset_s)

    def now(self) -> float:
        """The driver's time since the epoch (s)."""
        return time.time() - self.offset_s - self.epoch_s


@dataclass(frozen=True)
class Offset:
    """One actor's clock offset against the driver's.

    Attributes:
        offset_s: the actor's clock minus the driver's (s).
        error_s: the bound on the estimate's error (half the kept probe's round trip, s).
        rtt_s: the kept probe's round trip (s).
    """

    offset_s: float
    error_s: float
    rtt_s: float


def estimate_offset(read_remote: Callable[[], float], probes: int = 8) -> Offset:
    """NTP-style offset of a remote clock (module doc): the probe with the shortest round trip wins.

    Args:
        read_remote: blocks for one round trip and returns the remote ``time.time()`` (s).
        probes: how many probes to make (>= 1).
    """
    best: Offset | None = None
    for _ in range(max(1, int(probes))):
        t0 = time.time()
        t1 = float(read_remote())
        t2 = time.time()
        cand = Offset(offset_s=t1 - (t0 + t2) / 2.0, error_s=(t2 - t0) / 2.0, rtt_s=t2 - t0)
        if best is None or cand.rtt_s < best.rtt_s:
            best = cand
    assert best is not None
    return best


def actor_offset(actor: Any, probes: int = 8, timeout_s: float = 30.0) -> Offset:
    """:func:`estimate_offset` of a pard Ray actor's clock (its ``wall_time()``), each probe a Ray call of at
    most ``timeout_s``: the one clock probe of deploy time and of :meth:`pard.ray.RayPipeline.clock_skew`."""
    import ray  # noqa: PLC0415 - pard.ray's modules import Ray only where they call it

    return estimate_offset(lambda: ray.get(actor.wall_time.remote(), timeout=timeout_s), probes)
