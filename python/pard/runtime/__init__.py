"""The live runtime: worker threads around the C++ stage schedulers, on a real monotonic clock.

:class:`Runtime` serves one pipeline (:class:`pard.config.PipelineSpec`).  Each stage has one
``pard._core.StageScheduler`` and ``workers`` worker threads that form batches from it and run them
through the stage's executor (:mod:`pard.executors`); a planner thread runs
:class:`pard.planner.Planner` every sync interval, unchanged from the simulator, publishes its terms
to the schedulers (DESIGN §3.5) and feeds the :class:`pard.recorder.RunRecorder` the reports come
from, as the simulator does.

Request life cycle.  ``submit(payload)`` validates its arguments and hands the request to the
runtime's C++ hot path (``pard._core.LivePipeline``, ``cpp/include/pard/live_pipeline.hpp``), which
assigns the next request id, checks the queue bound, pushes it into the entry stage's ring and
returns its :class:`RequestFuture` (a ``concurrent.futures.Future`` resolved in C++).  A worker enters Python once per batch: the C++
pipeline forms the batch (the scheduler drops what its policy drops, with a reason) and hands the
worker the payloads; the worker runs the executor and hands the outputs back, and the C++ pipeline
routes each one to the next stage (arrival time = the batch's end) or, at the exit, resolves the
future with it.  Every request ends in exactly one terminal state (:mod:`pard.outcomes`):

=========  ==================================================================================
on_time    finished at or before its deadline (``send + slo``); the future holds the output
late       finished after its deadline; the future still holds the output
dropped    a stage's policy dropped it (``pard.Dropped(request_id, stage, reason)``), or it was
           cancelled: by ``future.cancel()`` (the future is then *cancelled*) or by
           ``close()`` (``Dropped`` with reason ``"cancelled"``); reason code ``cancelled``
rejected   the entry ring was full (back-pressure): ``pard.Rejected``
failed     the stage's executor raised on its batch -- any exception, ``SystemExit`` and
           ``KeyboardInterrupt`` included; the worker carries on -- or a worker of a stage it
           was queued at or would reach died: ``pard.ExecutorError`` (``__cause__`` is the
           original exception)
=========  ==================================================================================

so ``submitted = on_time + late + dropped + rejected + failed`` holds exactly once every request
has ended (``close()`` ensures that).  Cancellations count as drops with reason ``cancelled`` -- the
code the C++ schedulers use for discarded sibling branches -- so the identity of DESIGN §4 needs
no sixth term.  Bad ``submit`` arguments raise at once and are counted nowhere.

The package, one concept per module: :mod:`~pard.runtime.live` (the C++ hot path's Python side: the
futures' exceptions, asyncio), :mod:`~pard.runtime.workers` (stages, worker threads),
:mod:`~pard.runtime.planner_loop`
(planner thread and recorder), :mod:`~pard.runtime.clock` (clock and scheduler-time accounting),
:mod:`~pard.runtime.setup` (building from arguments), :mod:`~pard.runtime.replay` and the façade
:mod:`~pard.runtime.facade`.
"""

from __future__ import annotations

from ..outcomes import STATES
from .facade import Runtime
from .future import RequestFuture

__all__ = ["Runtime", "RequestFuture", "STATES"]
