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
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["utilisation"]

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
