"""Prometheus metrics of a served pipeline: counters from monotonic sources, histograms observed once.

Each app has its own :class:`prometheus_client.CollectorRegistry`, so two apps in one process
(tests) never share a series.  Every counter and histogram covers every request and never goes
down, however long the server runs (the runtime keeps only its last ``history`` per-request
records, so nothing here is computed from ``Runtime.outcomes()``), and a scrape costs the same
after a day as after a minute:

* the counters are read at scrape time from the server's answers, counted as each leaves
  (``ServedPipeline.answered``, ``tier_counts``), and the runtime's monotonic ``drop_counts()``;
* the histograms are prometheus-client histograms observed once per event: a request's duration
  when the server has its answer (:meth:`Observed.request`), queueing delays and batch sizes by
  the runtime's worker threads as each batch forms and ends (``Runtime.observe_stages``);
* the gauges are read at scrape time (``stage_stats()``, ``snapshot()``).

Names follow Prometheus' conventions (base units, ``_total``, ``_seconds``):

==================================  =========  ===================================================
pard_requests_total                 counter    {pipeline, outcome}: on_time, late, dropped,
                                               rejected, failed, invalid, unavailable, output_error
                                               (a 500 the server itself answered): every answer,
                                               counted once when it leaves (a 200 by when it left; a
                                               504 at once, though its hung batch is still running)
pard_tier_requests_total            counter    {pipeline, tier, outcome}: the decoded requests of each tier
                                               (``"default"`` without tiers) by outcome
pard_drops_total                    counter    {pipeline, stage, reason}
pard_compute_seconds_total          counter    {pipeline, stage, use}: batch durations by use, useful
                                               (on requests that finished on time) or wasted (on
                                               requests that ended otherwise), every request ever
                                               (``Runtime.compute_split()``, pard.compute_split)
pard_compute_unresolved_seconds     gauge      {pipeline, stage}: the compute requests in flight hold
pard_shed_total                     counter    {pipeline}: requests the runtime dropped or rejected
pard_drops_before_compute_total     counter    {pipeline}: of those, the ones no stage had spent on
pard_request_duration_seconds       histogram  {pipeline}: submit to the answer, served requests
pard_queue_duration_seconds         histogram  {pipeline, stage}: arrival at a stage to its batch
pard_batch_size                     histogram  {pipeline, stage}: executed batch sizes
pard_stage_load_factor              gauge      {pipeline, stage}: the planner's mu (DESIGN §3.3)
pard_stage_order                    gauge      {pipeline, stage, order}: 1 for the current order
pard_stage_queued                   gauge      {pipeline, stage}: requests waiting now
pard_goodput                        gauge      {pipeline}: on-time requests/s among those sent
                                               in the last 10 s (``Runtime.snapshot()``)
process_* and python_gc_*           (standard) the server process's memory, CPU and file descriptors, and
                                               the garbage collector's passes (prometheus-client's)
==================================  =========  ===================================================

Latency buckets sit around the SLO (:func:`slo_buckets`), so "within SLO" is one bucket boundary.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, GCCollector, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:  # pragma: no cover
    from .service import ServedPipeline

__all__ = ["slo_buckets", "batch_buckets", "Observed", "PipelineCollector", "make_registry", "TIER_OUTCOMES"]

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


#: The per-tier outcomes of ``ServedPipeline.tier_report`` and ``pard_tier_requests_total``, in order.
TIER_OUTCOMES = ("on_time", "late", "dropped", "rejected", "failed", "unavailable", "client_closed", "output_error",
                 "invalid")

class Observed:
    """The histograms of one served pipeline, observed once per event (see the module docstring).

    Args:
        pipeline: the ``pipeline`` label.
        slo_s: the default SLO (s), for the latency buckets.
        stages: the stage names (their series exist from the start, at zero).
        max_batch: the largest ``max_batch`` of the stages, for the batch-size buckets.

    It is the runtime's stage observer (``Runtime.observe_stages(observed)``): ``queue_delays`` and
    ``batch`` run on the worker threads; prometheus-client's histograms are thread-safe.
    """

    def __init__(self, pipeline: str, slo_s: float, stages: Sequence[str], max_batch: int) -> None:
        self.pipeline = pipeline
        self.request_duration = Histogram(
            "pard_request_duration_seconds", "Submit to the answer, of served requests (s).", ["pipeline"],
            buckets=slo_buckets(slo_s), registry=None)
        self.queue_duration = Histogram(
            "pard_queue_duration_seconds", "Arrival at a stage to being taken into a batch (s).",
            ["pipeline", "stage"], buckets=slo_buckets(slo_s), registry=None)
        self.batch_size = Histogram("pard_batch_size", "Executed batch sizes.", ["pipeline", "stage"],
                                    buckets=batch_buckets(max_batch), registry=None)
        self._requests = self.request_duration.labels(pipeline)
        for stage in stages:
            self.queue_duration.labels(pipeline, stage)
            self.batch_size.labels(pipeline, stage)

    def request(self, duration_s: float) -> None:
        """One served request's duration (s), when the server has its answer."""
        self._requests.observe(duration_s)

    def queue_delays(self, stage: str, delays_s: list[float]) -> None:
        """The queueing delays (s) of the requests taken into one batch at ``stage``."""
        h = self.queue_duration.labels(self.pipeline, stage)
        for d in delays_s:
            h.observe(d)

    def batch(self, stage: str, size: int) -> None:
        """One executed batch of ``size`` requests at ``stage``."""
        self.batch_size.labels(self.pipeline, stage).observe(size)

    def metrics(self) -> list[Histogram]:
        """The three histograms, to register in the app's registry."""
        return [self.request_duration, self.queue_duration, self.batch_size]


class PipelineCollector(Collector):
    """Yields the metrics of one :class:`~pard.serve.service.ServedPipeline` (see the module docstring)."""

    def __init__(self, service: ServedPipeline) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        svc = self.service
        p = svc.model_name
        req = CounterMetricFamily("pard_requests", "Requests answered, by outcome.", labels=["pipeline", "outcome"])
        for outcome in ("on_time", "late", "dropped", "rejected", "failed", "invalid", "unavailable", "output_error"):
            req.add_metric([p, outcome], float(svc.answered.get(outcome, 0)))
        yield req
        tiers = CounterMetricFamily("pard_tier_requests", "Decoded requests answered, by tier and outcome.",
                                    labels=["pipeline", "tier", "outcome"])
        for tier, row in svc.tier_report().items():
            for outcome in TIER_OUTCOMES:
                tiers.add_metric([p, tier, outcome], float(row[outcome]))
        yield tiers
        rt = svc.runtime
        if rt is None:
            return
        yield from self._from_runtime(rt, p)

    def _from_runtime(self, rt: Any, p: str) -> Iterator[Metric]:
        drops = CounterMetricFamily("pard_drops", "Requests dropped, by stage and reason.",
                                    labels=["pipeline", "stage", "reason"])
        for (stage, reason), n in rt.drop_counts().items():
            drops.add_metric([p, stage, reason], float(n))
        yield drops
        stats = rt.stage_stats()
        yield from _compute(rt.compute_split(), [s["stage"] for s in stats], p)
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
        snap = rt.snapshot()
        good = GaugeMetricFamily("pard_goodput", f"On-time requests per second among those sent in the "
                                 f"last {snap['window_s']:g} s.", labels=["pipeline"])
        good.add_metric([p], float(snap["goodput_recent"]))
        yield good


def _compute(split: Any, names: Sequence[str], p: str) -> Iterator[Metric]:
    """The counters and gauge of a :class:`pard.compute_split.ComputeSplit` (see the module docstring)."""
    used = CounterMetricFamily("pard_compute_seconds", "Compute (batch durations, s) by stage and use: useful "
                               "(spent on requests that finished on time) or wasted (on requests that ended "
                               "otherwise).", labels=["pipeline", "stage", "use"])
    held = GaugeMetricFamily("pard_compute_unresolved_seconds", "Compute (s) held by requests still in flight.",
                             labels=["pipeline", "stage"])
    for k, name in enumerate(names):
        used.add_metric([p, name, "useful"], float(split.useful_s[k]))
        used.add_metric([p, name, "wasted"], float(split.wasted_s[k]))
        held.add_metric([p, name], float(split.unresolved_s[k]))
    shed = CounterMetricFamily("pard_shed", "Requests the runtime dropped or rejected.", labels=["pipeline"])
    shed.add_metric([p], float(split.shed))
    before = CounterMetricFamily("pard_drops_before_compute", "Requests dropped or rejected before any stage "
                                 "spent compute on them.", labels=["pipeline"])
    before.add_metric([p], float(split.shed_before_compute))
    yield from (used, held, shed, before)


def make_registry(service: ServedPipeline) -> CollectorRegistry:
    """A fresh registry with the pipeline's collector and its histograms (one per app), and the server process's
    own: resident memory, CPU seconds and open file descriptors (``process_*``), and the garbage collector's
    passes and what they found (``python_gc_*``: a pause of the event loop each, which grows with the cyclic
    garbage a request leaves)."""
    reg = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=reg)
    GCCollector(registry=reg)
    reg.register(PipelineCollector(service))
    for metric in service.observed.metrics():
        reg.register(metric)
    return reg
