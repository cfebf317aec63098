"""Prometheus metrics of a served pipeline, read from the runtime at scrape time.

Each app has its own :class:`prometheus_client.CollectorRegistry` holding one collector, so two
apps in one process (tests) never share a series.  The collector reads what the runtime records
anyway (``counts()``, ``outcomes()``, ``batches()``, ``stage_stats()``) when ``/metrics`` is
scraped, so the metrics agree with ``Runtime.report()`` by construction and the request path pays
nothing for them.  Names follow Prometheus' conventions (base units, ``_total``, ``_seconds``):

==================================  =========  ===================================================
pard_requests_total                 counter    {pipeline, outcome}: on_time, late, dropped,
                                               rejected, failed (the runtime's, plus the server's
                                               queue-limit rejections), invalid, unavailable
pard_drops_total                    counter    {pipeline, stage, reason}
pard_request_duration_seconds       histogram  {pipeline}: send to finish of served requests
pard_queue_duration_seconds         histogram  {pipeline, stage}: arrival at a stage to its batch
pard_batch_size                     histogram  {pipeline, stage}: executed batch sizes
pard_stage_load_factor              gauge      {pipeline, stage}: the planner's mu (DESIGN §3.3)
pard_stage_order                    gauge      {pipeline, stage, order}: 1 for the current order
pard_stage_queued                   gauge      {pipeline, stage}: requests waiting now
pard_goodput                        gauge      {pipeline}: on-time requests/s over the last 10 s
==================================  =========  ===================================================

Latency buckets sit around the SLO (:func:`slo_buckets`), so "within SLO" is one bucket boundary.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from .. import _core

if TYPE_CHECKING:  # pragma: no cover
    from .service import ServedPipeline

__all__ = ["GOODPUT_WINDOW_S", "slo_buckets", "batch_buckets", "PipelineCollector", "make_registry"]

#: The window of ``pard_goodput`` (s).
GOODPUT_WINDOW_S = 10.0
_REASONS = list(_core.REASONS)
_STATE = {name: i for i, name in enumerate(("pending", "on_time", "late", "dropped", "rejected", "failed"))}
_ORDERS = ("lbf", "hbf", "fcfs")


def slo_buckets(slo_s: float) -> list[float]:
    """Histogram upper bounds (s) around an SLO: 1 % .. 400 % of it, dense near 100 %."""
    fractions = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 4.0)
    return [round(f * slo_s, 9) for f in fractions]


def batch_buckets(max_batch: int) -> list[float]:
    """Histogram upper bounds for batch sizes: the powers of two up to ``max_batch``, and ``max_batch``."""
    out, b = [], 1
    while b < max_batch:
        out.append(float(b))
        b *= 2
    return out + [float(max_batch)]


def _histogram(name: str, doc: str, labels: Sequence[str], series: Sequence[tuple[Sequence[str], np.ndarray]],
               bounds: Sequence[float]) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(name, doc, labels=list(labels))
    for values, samples in series:
        counts = [int(np.count_nonzero(samples <= b)) for b in bounds]
        buckets = [(repr(float(b)), c) for b, c in zip(bounds, counts)] + [("+Inf", int(samples.size))]
        fam.add_metric(list(values), buckets, float(samples.sum()))
    return fam


class PipelineCollector(Collector):
    """Yields the metrics of one :class:`~pard.serve.service.ServedPipeline` (see the module docstring)."""

    def __init__(self, service: ServedPipeline) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        svc = self.service
        p = svc.model_name
        rep = svc.report()["outcomes"]
        req = CounterMetricFamily("pard_requests", "Requests answered, by outcome.", labels=["pipeline", "outcome"])
        for outcome in ("on_time", "late", "dropped", "rejected", "failed", "invalid", "unavailable"):
            req.add_metric([p, outcome], float(rep[outcome]))
        yield req
        rt = svc.runtime
        if rt is None:
            return
        yield from self._from_runtime(rt, p, svc.default_slo_s)

    def _from_runtime(self, rt: Any, p: str, slo_s: float) -> Iterator[Metric]:
        spec = rt.pipeline
        names = [st.name for st in spec.stages]
        out = rt.outcomes()
        state = out["state"]
        dropped = state == _STATE["dropped"]
        drops = CounterMetricFamily("pard_drops", "Requests dropped, by stage and reason.",
                                    labels=["pipeline", "stage", "reason"])
        pairs = np.stack([out["drop_stage"][dropped], out["reason"][dropped]], axis=1)
        if pairs.size:
            uniq, cnt = np.unique(pairs, axis=0, return_counts=True)
            for (k, r), c in zip(uniq.tolist(), cnt.tolist()):
                drops.add_metric([p, names[k], _REASONS[r]], float(c))
        yield drops
        served = (state == _STATE["on_time"]) | (state == _STATE["late"])
        latency = (out["finish_s"] - out["send_s"])[served]
        yield _histogram("pard_request_duration_seconds", "Send to finish of served requests (s).",
                         ["pipeline"], [([p], latency)], slo_buckets(slo_s))
        stats = rt.stage_stats()
        yield _histogram("pard_queue_duration_seconds", "Arrival at a stage to being taken into a batch (s).",
                         ["pipeline", "stage"], [([p, s["stage"]], s["queue_delay_s"]) for s in stats],
                         slo_buckets(slo_s))
        batches = rt.batches()
        sizes = [([p, name], batches["size"][batches["stage"] == k].astype(np.float64)) for k, name in enumerate(names)]
        yield _histogram("pard_batch_size", "Executed batch sizes.", ["pipeline", "stage"], sizes,
                         batch_buckets(max(int(st.max_batch) for st in spec.stages)))
        mu = GaugeMetricFamily("pard_stage_load_factor", "The planner's load factor mu (input rate / "
                               "throughput; NaN before its first update).", labels=["pipeline", "stage"])
        order = GaugeMetricFamily("pard_stage_order", "1 for the stage's current queue order.",
                                  labels=["pipeline", "stage", "order"])
        queued = GaugeMetricFamily("pard_stage_queued", "Requests waiting at the stage now.",
                                   labels=["pipeline", "stage"])
        for s in stats:
            mu.add_metric([p, s["stage"]], float(s["mu"]))
            queued.add_metric([p, s["stage"]], float(s["queued"]))
            for o in _ORDERS:
                order.add_metric([p, s["stage"], o], 1.0 if s["order"] == o else 0.0)
        yield from (mu, order, queued)
        now = rt.now()
        window = min(GOODPUT_WINDOW_S, max(now, 1e-9))
        recent = (state == _STATE["on_time"]) & (out["finish_s"] >= now - window)
        good = GaugeMetricFamily("pard_goodput", f"On-time requests per second over the last "
                                 f"{GOODPUT_WINDOW_S:g} s.", labels=["pipeline"])
        good.add_metric([p], float(np.count_nonzero(recent)) / window)
        yield good


def make_registry(service: ServedPipeline) -> CollectorRegistry:
    """A fresh registry with the pipeline's collector (one per app)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(PipelineCollector(service))
    return reg
