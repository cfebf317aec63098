"""A stage's measured utilisation, and why it sizes the downstream batch-wait budget (``downstream="busy"``).

The planner (:mod:`pard.planner`) budgets, for ``pard``, the batch wait a request will meet at each
downstream stage ``i`` as ``rho_i * d_i(b_i)``, ``rho_i`` the stage's busy fraction computed here.  The
argument is M/G/1's (Kleinrock, *Queueing Systems* vol. 1, 1975, §5.2; PASTA: Wolff, "Poisson arrivals
see time averages", Oper. Res. 30(2), 1982): an arriving request finds the stage busy with probability
``rho_i``, and its batch then cannot start before the running batch ends.  The drop rule budgets the upper
end of that residual, the whole running batch ``d_i(b_i)`` (the wait of a request collected as that batch
starts, DESIGN §3.1), not its mean ``E[D^2] / 2 E[D]``: at ``rho_i = 1`` the budget is ``pard-upper``'s
``w = sum d_i``, which wins under overload, and at ``rho_i = 0`` it is ``w = 0`` (an idle stage starts a
batch at once).

The residual is budgeted once (:func:`busy_wait`, since 2026-12-03): the measured queueing delay ``q_i``
already holds it wherever the stage is not backlogged. A stage
that runs back to back but finds its queue empty whenever a batch starts never collects a batch while
another runs (DESIGN §3.1), so a request that arrives during a batch waits in the queue for its end and is
collected then: its whole wait is the residual, which ``q_i`` measures and ``rho_i d_i`` bounds.  Only a
stage that held a queue as its batches started (some request in the window waited, after its
collection, for another batch to end) adds a whole batch on top of its queue: ``q_i + rho_i d_i``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["utilisation", "busy_wait", "waited_requests", "PRECOLLECTED_WAIT"]

F64 = npt.NDArray[np.float64]


def utilisation(busy: F64, wt: F64, dts: F64, workers: F64) -> F64:
    """Each stage's busy fraction ``rho`` in [0, 1] over the planner's window.

    ``rho`` is the larger of the windowed ``sum_c wt_c busy_c / (workers * sum_c wt_c dt_c)`` and the last
    interval's ``busy / (workers * dt)``, so a burst raises it within one sync while a quiet interval does
    not hide a busy window.

    Args:
        busy: (n, T) measured batch-execution seconds per stage and interval of the window.
        wt, dts: (T,) the intervals' weights (the window's linear weights) and lengths (s).
        workers: (n,) serving workers now; a stage with none counts as busy (``rho = 1``).

    Returns:
        (n,) float64, clipped to [0, 1].
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        win = (wt * busy).sum(axis=-1) / (workers * (wt * dts).sum())
        last = busy[:, -1] / (workers * dts[-1])
        rho = np.where(workers > 0, np.maximum(win, last), 1.0)
    return np.clip(np.nan_to_num(rho, nan=1.0), 0.0, 1.0)


#: A batch waited for another batch to end when its batch wait (collection to start) exceeds this share of
#: its own duration.  A batch collected while another ran waits about that batch's whole duration; one
#: formed when its worker freed waits only the formation (0 in the simulator, microseconds live), so any
#: share well inside (0, 1) separates the two.
PRECOLLECTED_WAIT = 0.1


def busy_wait(q: F64, rho_d: F64, backlog: npt.NDArray[np.bool_]) -> F64:
    """Each downstream stage's budgeted wait for ``downstream="busy"`` (s): ``q + rho_d`` where the stage is
    backlogged (a request in the window waited, once collected, for another batch to end: a whole batch on
    top of its queue), else ``max(q, rho_d)`` (the measured queueing delay already holds the residual of
    the batch a request found running, whose upper end ``rho_d`` bounds).  A sweep row that showed it: a
    2-stage chain, the second stage (46.7–82.4 ms batches, one worker) busy back to back at batches of 2.4
    with every batch wait 0; ``q + rho_d`` budgeted it 28 + 54 ms on top of its 54 ms batch where requests
    met 82 ms at the mean and 108 at most, and ``pard`` served 44 req/s where ``pard-paper`` served 74
    (bench/RESULTS.md, issue 9, fourteenth round).

    Args:
        q, rho_d: (m,) the stages' queueing delays and ``rho_i d_i(b_i)`` (s).
        backlog: (m,) whether each stage was backlogged over the planner's window.

    Returns:
        (m,) float64.
    """
    return np.where(backlog, q + rho_d, np.maximum(q, rho_d))


def waited_requests(size: F64, wait_s: Any, duration_s: F64) -> float:
    """Requests in an interval's batches that waited, once collected, for another batch to end: the
    sizes of the batches whose batch wait (collection to start, s) exceeds ``PRECOLLECTED_WAIT`` of their
    own duration (s), summed; 0 when the waits are missing or do not match the batches.

    Args:
        size, wait_s, duration_s: (B,) per batch: its size, its batch wait and its measured duration.
    """
    bw = np.asarray(wait_s, dtype=np.float64)
    return float(size[bw > PRECOLLECTED_WAIT * duration_s].sum()) if bw.size == size.size else 0.0
