"""The smallest latency a pipeline allows, and the warnings when an SLO is out of its reach."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from ..errors import PardWarning
from .llm import lone_latency

if TYPE_CHECKING:  # pragma: no cover
    from .models import PipelineSpec

__all__ = ["min_latency_path", "warn_unreachable_slo"]


def min_latency_path(spec: "PipelineSpec") -> tuple[float, list[str]]:
    """The smallest end-to-end latency a request can have, and the path that sets it (s, stage names).

    A request visits every stage, so even alone (batch size 1, no queueing) it needs the longest
    entry-to-exit path's sum of ``d(1)`` (the shortest duration of each non-decreasing profile; at an llm
    stage a prefill and one decode step, :func:`pard.config.llm.lone_latency`).
    """
    best: tuple[float, list[str]] = (-1.0, [])
    for e in spec.entry_stages():
        for path in spec.downstream_paths(e):
            names = [e, *path]
            t = sum(lone_latency(spec.stage(n)) for n in names)
            if t > best[0]:
                best = (t, names)
    return best


def warn_unreachable_slo(spec: "PipelineSpec", slo: float) -> None:
    """Warn (:class:`pard.errors.PardWarning`) when no request can ever finish within ``slo`` seconds, or
    when a stage's largest batch (``batch_limit``, where ``capacity()`` and the goodput bound are taken)
    alone takes longer than ``slo``: no batch that full can be on time, so the capacity is out of reach."""
    t, path = min_latency_path(spec)
    if t > slo:
        warnings.warn(
            f"pipeline {spec.name!r}: SLO {slo:g} s can never be met: a lone request needs at least "
            f"{t:.4g} s (sum of d(1) along {' -> '.join(path)}); every request will be late or dropped",
            PardWarning, stacklevel=2)
        return
    slow = [(st.name, st.batch_limit, st.duration(st.batch_limit)) for st in spec.stages
            if st.kind == "dnn" and st.duration(st.batch_limit) > slo]  # an llm stage forms no whole batch
    if slow:
        names = ", ".join(f"{n} (d({b}) = {d:.4g} s)" for n, b, d in slow)
        warnings.warn(
            f"pipeline {spec.name!r}: a full batch alone takes longer than the SLO {slo:g} s at {names}: such a "
            f"batch can never be on time, and capacity() and the goodput bound, taken at that batch size, are out "
            f"of reach; lower max_batch there", PardWarning, stacklevel=2)
