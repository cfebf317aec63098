"""The downstream batch wait ``w`` of paper Eq. 3b by Monte Carlo (DESIGN §3.2): the ``lambda``-quantile of
the sum, over a downstream path, of one observed batch wait per stage.

:class:`pard.planner.Planner` draws ``M`` recent waits per stage once per sync (shared by every path through
the stage), sums them along each path with :func:`path_total` (suffix sums shared) and takes one O(M)
selection per path with :func:`quantile`; :func:`downstream_wait_quantile` is the same computation for one
path, on its own.  The C++ sync planner (``cpp/include/pard/sync_planner.hpp``) transcribes these
operation for operation.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["downstream_wait_quantile", "quantile", "path_total"]

F64 = npt.NDArray[np.float64]


def downstream_wait_quantile(
    waits: Sequence[F64], lam: float, rng: np.random.Generator, samples: int = 10_000
) -> float:
    """``w``: the ``lam``-quantile of the sum of one batch wait per downstream stage (DESIGN §3.2).

    Args:
        waits: per downstream stage, its observed batch waits (s), shape ``(n_i,)``, ``n_i >= 1``.
        lam: the quantile in ``[0, 1]``; 0 gives the sum of minima, 1 the sum of maxima.
        rng: the seeded generator the draws come from.
        samples: Monte Carlo sample count ``M``.

    Returns:
        ``w`` in seconds (0 when ``waits`` is empty).
    """
    if not waits:
        return 0.0
    total = np.zeros(samples, dtype=np.float64)
    for w in waits:
        total += w[rng.integers(0, w.size, size=samples)]
    return quantile(total, lam)


def quantile(x: F64, lam: float) -> float:
    """The ``lam``-quantile of ``x`` by nearest rank: the ``round(lam * (M - 1))``-th smallest, O(M).

    ``np.partition`` slows down by about ten times when one value fills much of ``x`` (batch waits are
    often exactly 0, so their sums often are), so the minimum is split off first: if it fills the first
    ``k + 1`` ranks it is the answer; if it fills a large share, the rest is partitioned alone.  The
    value returned is the same k-th smallest in every case.
    """
    k = int(round(lam * (x.size - 1)))
    low = x.min()
    ties = int(np.count_nonzero(x == low))
    if k < ties:
        return float(low)
    if 4 * ties >= x.size:
        rest = x[x != low]
        return float(np.partition(rest, k - ties)[k - ties])
    return float(np.partition(x, k)[k])


def path_total(path: tuple[int, ...], draws: dict[int, F64], memo: dict[tuple[int, ...], F64]) -> F64:
    """Monte Carlo samples of the summed batch waits along ``path`` (suffix sums shared via ``memo``).

    Iterative, from the longest suffix already in ``memo`` back to the path's start: a path may be
    a thousand stages long (issue 13), past Python's recursion limit.
    """
    start = 0
    while start < len(path) and path[start:] not in memo:
        start += 1
    acc = memo[path[start:]] if start < len(path) else None
    for j in range(start - 1, -1, -1):
        acc = draws[path[j]] if acc is None else draws[path[j]] + acc
        memo[path[j:]] = acc
    assert acc is not None, "paths are never empty"
    return acc
