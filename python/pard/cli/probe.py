"""``pard run``: a machine-speed probe timed before and after each live run.

The live runs replay one policy after another on a shared machine.  When other processes start or
stop using the cores between two runs, the two policies see different machines, and the goodput
difference mixes the policy with the machine (measured: a run whose bottleneck batches took 1.37x
their profile beside one at 1.19x).  The per-second tie band (:func:`pard.cli.verdict.tie_band`) does
not see this: it pairs seconds within two runs, not the machine between them.

The probe times one fixed batch of the bottleneck stage's model, on its own (no pard worker runs
then), the same way every time: the median of a few calls.  The ratio of two runs' probe times is
how much faster the machine was for one than for the other; :func:`pard.cli.verdict.compare_pair` widens
its band by it.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import numpy as np

from .._extras import available, require
from ..models import stage_set

__all__ = ["MachineProbe", "PROBE_BUDGET_S", "speed_change"]

#: About how long one probe times its batch (s): long enough for a stable median, short beside a run.
PROBE_BUDGET_S = 0.3


class MachineProbe:
    """Times the bottleneck dnn stage's model on its largest profiled batch (one session, one thread).

    Args:
        spec: the pipeline (its capacity picks the bottleneck stage and its profile the batch size).
        models: the model kind (as :func:`pard.models.stage_set`).
        scale: the models' work per request (as ``pard run --scale``).
        seed: the payload's seed.
    """

    def __init__(self, spec: Any, models: str, *, scale: float = 1.0, seed: int = 0) -> None:
        caps = spec.capacity().stages  # the slowest dnn stage: an llm stage steps an engine, not a batch
        self.stage = min((st.name for st in spec.stages if st.kind != "llm"), key=caps.__getitem__,
                         default=spec.capacity().bottleneck)
        st = spec.stage(self.stage)
        built = stage_set(spec, models, scale=scale)
        self._ex = built.executors[self.stage]
        bind = getattr(self._ex, "bind", None)
        if callable(bind):
            bind(st, workers=1, threads=1)
        self.batch = int(max(st.profile))
        shape = built.input_shapes[self.stage]
        rng = np.random.default_rng(seed)
        self._payload = list(rng.random((self.batch, *shape), dtype=np.float32))
        # enough calls for ~PROBE_BUDGET_S at the profiled speed, at least 3 (a median), at most 15
        self.repeats = int(min(15, max(3, math.ceil(PROBE_BUDGET_S / max(st.profile[self.batch], 1e-6)))))
        self._ex(self._payload)  # first call: session warm-up, not timed

    def __call__(self) -> float:
        """The median seconds of one call on the probe batch now."""
        limit: Any = contextlib.nullcontext()
        if available("threadpoolctl"):  # BLAS at one thread, as a runtime worker runs it
            limit = require("threadpoolctl", "cli", "the pard command").threadpool_limits(limits=1, user_api="blas")
        timed = []
        with limit:
            for _ in range(self.repeats):
                t0 = time.perf_counter()
                self._ex(self._payload)
                timed.append(time.perf_counter() - t0)
        return float(np.median(timed))


def speed_change(a: list[float] | None, b: list[float] | None) -> float | None:
    """How much slower the machine was for run ``a`` than for run ``b``: mean probe time of ``a`` over
    that of ``b``, minus 1 (0.1: ``a``'s machine took 10 % longer per batch; negative: faster).

    ``a`` and ``b`` are the probe times (s) taken before and after each run; None when either is
    missing or not positive."""
    if not a or not b:
        return None
    ma, mb = float(np.mean(a)), float(np.mean(b))
    if not (ma > 0 and mb > 0 and math.isfinite(ma) and math.isfinite(mb)):
        return None
    return ma / mb - 1.0
