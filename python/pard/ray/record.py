"""From a deployment's outcomes and its stages' logs to a :class:`pard.Report` (DESIGN §4).

The same fields and the same goodput bound as :meth:`pard.Runtime.report`: outcome arrays per
request (ids are indices), per-stage arrivals, executed requests and compute from the batch rows,
queueing delays binned per second, and the fluid bound at the capacity of
:func:`bound_capacity` (the profile's best batch size per stage, scaled up where the run's batches
ran faster than profiled).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import _core

__all__ = ["bound_capacity", "build_report"]


def bound_capacity(spec: Any, workers: Sequence[int], histories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The pipeline capacity (req/s) the goodput bound uses; the rule of ``pard.Runtime.bound_capacity``.

    Per stage: ``workers * max_b b / d(b)`` over the profile's batch sizes up to ``max_batch``, times
    ``max(1, profiled / measured duration of the batches run)``; the minimum over stages.
    """
    rates: list[float] = []
    plain: list[float] = []
    speedups: dict[str, float | None] = {}
    for st, n, hist in zip(spec.stages, workers, histories):
        cands = [b for b in st.profile if b <= st.max_batch] + [st.max_batch]
        peak = n * max(b / st.duration(b) for b in cands)
        rows = hist["batches"]
        actual = sum(r[1] for r in rows)
        nominal = sum(st.duration(max(1, int(r[2]))) for r in rows)
        speedup = nominal / actual if rows and actual > 0 else None
        speedups[st.name] = speedup
        plain.append(peak)
        rates.append(peak * max(1.0, speedup or 1.0))
    k = int(np.argmin(rates))
    return {"req_s": float(rates[k]), "profile_req_s": float(min(plain)), "bottleneck": spec.stages[k].name,
            "speedup_by_stage": speedups}


def build_report(*, policy: str, spec: Any, out: Mapping[str, np.ndarray], histories: Sequence[Mapping[str, Any]],
                 workers: Sequence[int], t0_s: float | None, duration_s: float | None,
                 capacity_req_s: float | None) -> Any:
    """The :class:`pard.Report` of a finished deployment (every request terminal)."""
    from ..report import Report

    send = out["send_s"]
    n = send.size
    ns = len(spec.stages)
    t0 = float(t0_s) if t0_s is not None else (float(math.floor(send[0])) if n else 0.0)
    if duration_s is not None:
        nb = max(1, int(math.ceil(float(duration_s) - 1e-9)))
    else:
        nb = int(math.floor((float(send[-1]) if n else t0) - t0)) + 1
    qsum = np.zeros((ns, nb))
    qcnt = np.zeros((ns, nb))
    submitted = np.zeros(ns, dtype=np.int64)
    executed = np.zeros(ns, dtype=np.int64)
    compute = np.zeros(ns)
    for k, hist in enumerate(histories):
        submitted[k] = len(hist["arrival_s"])
        executed[k] = sum(int(r[2]) for r in hist["batches"])
        compute[k] = sum(float(r[1]) for r in hist["batches"])
        if hist["qdelay_t_s"]:
            idx = np.floor(np.asarray(hist["qdelay_t_s"]) - t0).astype(np.int64)
            ok = (idx >= 0) & (idx < nb)
            q = np.asarray(hist["qdelay_s"])
            qsum[k] = np.bincount(idx[ok], weights=q[ok], minlength=nb)
            qcnt[k] = np.bincount(idx[ok], minlength=nb)
    w = np.array([[float(c)] * nb for c in workers]).reshape(ns, nb)
    cap = capacity_req_s if capacity_req_s is not None else bound_capacity(spec, workers, histories)["req_s"]
    return Report(
        policy=policy, pipeline=spec.name, stage_names=[st.name for st in spec.stages],
        send_s=send, state=out["state"], finish_s=out["finish_s"], drop_stage=out["drop_stage"],
        reason=out["reason"], compute_s=out["compute_s"], reasons=list(_core.REASONS),
        stage_submitted=submitted, stage_executed=executed, stage_compute_s=compute,
        t0_s=t0, qdelay_sum_s=qsum, qdelay_count=qcnt, workers=w, capacity=np.full(nb, float(cap)),
        slo_s=out["slo_s"],
    )
