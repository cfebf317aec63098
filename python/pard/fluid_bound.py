"""The goodput bound no policy can beat: a fluid schedule of 1 s bins (DESIGN §4).  With an llm stage the
capacity it is given is read at mean lengths, and token-level batching can beat that: there it is a reference.

:func:`fluid_goodput_bound` serves, in each bin, the pending work with the earliest deadline bin first
(optimal for unit jobs with release and due bins); :func:`fluid_bound_share` splits that schedule
between a set of counted requests and the rest (the flash crowd's share of a run's bound).
:mod:`pard.report` uses both and re-exports them.
"""

from __future__ import annotations

import heapq

import numpy as np
import numpy.typing as npt

from .errors import PardValueError

__all__ = ["fluid_goodput_bound", "fluid_bound_share"]

F64 = npt.NDArray[np.float64]


def fluid_goodput_bound(
    send_s: F64, slo_s: F64 | float | None, capacity: F64, t0_s: float, tail_capacity: float | None = None
) -> float:
    """The most requests any policy can finish within their SLO in a fluid model of 1 s bins (requests): an
    upper bound for every real schedule, not always a reachable one.

    Bin ``t`` covers ``[t0_s + t, t0_s + t + 1)`` and can serve ``capacity[t]`` requests (the
    bottleneck stage's throughput at its best batch size, times its workers).  A request sent in bin
    ``s`` with deadline ``send + slo`` in bin ``D`` can only be served in bins ``s .. D``; unserved work
    carries over to the next bin but expires after its deadline's bin.  The bound is the largest
    number of requests served in this relaxation (work is divisible and may use a whole bin, even
    before the request's send time within its bin), found by serving, in each bin, the pending work
    with the earliest deadline bin first (optimal for unit jobs with release and due bins):

        pending_t = arrivals_t + carry_{t-1};   served_t = min(capacity_t, pending_t),
        carry_t = pending_t - served_t minus the work whose deadline bin is t.

    Every on-time request's bottleneck work fits this schedule, so no policy beats the bound (exactly
    so for deterministic execution times).  With ``slo_s`` None, or every deadline in its send bin,
    nothing carries over and the bound is DESIGN §4's ``sum_t min(arrivals_t, capacity_t)``.

    Args:
        send_s: send times (s), shape ``(n,)``.
        slo_s: SLO per request (s), scalar or shape ``(n,)``, or None (no carry-over).
        capacity: req/s per bin, shape ``(n_bins,)``; requests sent outside the bins go to the edge bin.
        t0_s: start of bin 0 (s).
        tail_capacity: req/s of the bins after the last one (work may finish there); default the
            largest of ``capacity``.
    """
    cap = np.asarray(capacity, dtype=np.float64)
    nb = cap.shape[0]
    send = np.asarray(send_s, dtype=np.float64)
    if nb == 0 or send.size == 0:
        return 0.0
    sb = np.clip(np.floor(send - t0_s), 0, nb - 1).astype(np.int64)
    arrivals = np.bincount(sb, minlength=nb).astype(np.float64)
    if slo_s is None or bool((arrivals <= cap).all()):
        return float(np.minimum(arrivals, cap).sum())
    slo = np.broadcast_to(np.asarray(slo_s, dtype=np.float64), send.shape)
    db = np.maximum(np.floor(send + slo - t0_s).astype(np.int64), sb)
    lag = db - sb
    lmax = int(lag.max())
    if lmax == 0:
        return float(np.minimum(arrivals, cap).sum())
    tail = float(cap.max() if tail_capacity is None else tail_capacity)
    return _edf_served(sb, db, cap, tail, None)


def fluid_bound_share(
    send_s: F64, slo_s: F64 | float, capacity: F64, t0_s: float, counted: npt.ArrayLike,
    tail_capacity: float | None = None,
) -> float:
    """The share of :func:`fluid_goodput_bound`'s schedule that goes to the ``counted`` requests (requests).

    The fluid schedule is run over *every* request, so the counted ones compete with the others for
    capacity (e.g. a flash crowd's requests with the ones sent just before it, which are still queued when
    it starts); earliest deadline bin first as there, and within one deadline bin the served work is split
    between counted and other requests in proportion to their pending work.  Summed over a mask and its
    complement it gives :func:`fluid_goodput_bound`; with every request counted it equals it.

    Args:
        send_s, slo_s, capacity, t0_s, tail_capacity: as :func:`fluid_goodput_bound` (``slo_s`` required).
        counted: bool mask over the requests, shape ``(n,)``.

    Raises:
        ValueError: ``counted`` is not one bool per request.
    """
    cap = np.asarray(capacity, dtype=np.float64)
    nb = cap.shape[0]
    send = np.asarray(send_s, dtype=np.float64)
    mask = np.asarray(counted)
    if mask.shape != send.shape or mask.dtype != np.bool_:
        raise PardValueError(f"counted must be a bool mask of shape {send.shape}, got {mask.dtype} {mask.shape}")
    if nb == 0 or send.size == 0 or not mask.any():
        return 0.0
    sb = np.clip(np.floor(send - t0_s), 0, nb - 1).astype(np.int64)
    slo = np.broadcast_to(np.asarray(slo_s, dtype=np.float64), send.shape)
    db = np.maximum(np.floor(send + slo - t0_s).astype(np.int64), sb)
    tail = float(cap.max() if tail_capacity is None else tail_capacity)
    return _edf_served(sb, db, cap, tail, mask)


def _edf_served(sb: npt.NDArray[np.int64], db: npt.NDArray[np.int64], cap: F64, tail: float,
                counted: npt.NDArray[np.bool_] | None) -> float:
    """The fluid EDF schedule of :func:`fluid_goodput_bound` (requests served; with ``counted``, the
    counted requests' proportional share of each take, as :func:`fluid_bound_share`).

    Requests are grouped by (send bin, deadline bin); pending work is kept per deadline bin in a heap of
    the bins that hold any, so a bin costs O(log) per deadline it touches, not one step per bin of the
    longest SLO (an SLO of 1e9 s once asked for a 37 GiB array). Each bin serves its capacity from the
    earliest deadline on, visiting each deadline at most once (the dense schedule's order, so the same
    sums); work whose deadline bin has passed expires; after the last bin, ``tail`` per bin until nothing
    is pending."""
    # one int64 key per request, ordered by send bin, then deadline bin, then class (< 2**63: db - sb is
    # at most ~1e9 s of SLO and sb below the bins' count)
    width = int((db - sb).max()) + 1
    key = (sb * width + (db - sb)) * 2
    if counted is not None:
        key += counted.astype(np.int64)
    groups, counts = np.unique(key, return_counts=True)
    send_bin = (groups // (2 * width)).tolist()
    due_bin = (groups // (2 * width) + (groups // 2) % width).tolist()
    klass = (groups % 2).tolist()
    n_groups, nb = len(send_bin), cap.shape[0]
    # deadline bin -> pending work [not counted, counted]; an entry outlives its place in the heap while
    # it holds a rounding residual (p[0] = -p[1] != 0), as the dense schedule's array did, so later work
    # due in that bin adds to the same sums
    pend: dict[int, list[float]] = {}
    heap: list[int] = []  # the deadline bins with work to serve
    queued: set[int] = set()
    served, gi, t = 0.0, 0, 0
    while t < nb or (heap and tail > 0.0):
        while gi < n_groups and send_bin[gi] == t:
            d = due_bin[gi]
            pend.setdefault(d, [0.0, 0.0])[klass[gi]] += float(counts[gi])
            if d not in queued:
                queued.add(d)
                heapq.heappush(heap, d)
            gi += 1
        while heap and heap[0] < t:  # expired: its deadline bin has passed
            d = heapq.heappop(heap)
            queued.discard(d)
            pend.pop(d, None)
        c = float(cap[t]) if t < nb else tail
        left: list[int] = []
        while c > 0.0 and heap:
            d = heapq.heappop(heap)
            p = pend[d]
            total = p[0] + p[1]
            if total > 0.0:
                take = min(c, total)
                if counted is None:
                    p[0] -= take
                    served += take
                else:
                    share = take * p[1] / total
                    served += share
                    p[1] -= share
                    p[0] -= take - share
                c -= take
            if p[0] + p[1] > 0.0:
                left.append(d)
            else:
                queued.discard(d)
        for d in left:
            heapq.heappush(heap, d)
        t += 1
    return served
