"""Whether the served pipeline has stopped answering (a hung stage), for ``/v2/health/ready``.

A request that waits ``server.answer_grace_s`` past its deadline is answered 504 and cancelled
(:mod:`pard.serve.service`). One such give-up alone says little (an event loop that fell behind on a
burst gives up too), but if the pipeline then finishes nothing while it still holds work, a stage is not
coming back: a load balancer should send the traffic to another replica. So the pipeline counts as
*stalled* from a give-up until either

* the runtime finishes a request (on time or late; a cancelled request whose batch was already running
  counts too, so the hung batch's own return ends it), or
* the runtime holds no request at all (nothing can finish, and nothing is hung).

While stalled, readiness answers 503; inference requests are still served, so direct clients and the
hung batch's return can end it. Every call comes from the event loop's thread (the ASGI handlers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("pard.serve")


class StallWatch:
    """Tracks give-ups against the runtime's progress.

    Args:
        counts: the runtime's counts now (``pard.Runtime.counts``: ``on_time``, ``late``, ``pending``...).
    """

    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self._counts = counts
        self._finished_at_give_up: int | None = None  # on_time + late when the last give-up happened

    def gave_up(self) -> None:
        """A request was answered 504 for want of an answer from the pipeline."""
        was = self._finished_at_give_up is not None
        self._finished_at_give_up = self._finished(self._counts())
        if not was:
            log.warning("a request got no answer from the pipeline past its deadline; /v2/health/ready answers "
                        "503 until the pipeline finishes a request (a stage may be hung in its executor)")

    @property
    def stalled(self) -> bool:
        """True from a give-up until the runtime finishes a request or holds none."""
        if self._finished_at_give_up is None:
            return False
        c = self._counts()
        if self._finished(c) != self._finished_at_give_up or c.get("pending", 0) == 0:
            self._finished_at_give_up = None
            log.warning("the pipeline answers again; /v2/health/ready is back to 200")
            return False
        return True

    @staticmethod
    def _finished(c: dict[str, int]) -> int:
        return int(c.get("on_time", 0)) + int(c.get("late", 0))
