"""Measure a pipeline's latency profiles on this machine, size the live workers, cache the result.

``pard profile`` and ``pard run`` call :func:`measure_profile`: for every stage it times the
stage's executor (by default the reference model of :mod:`pard.models`) at each batch size --
warm-up runs first, then the median of ``repeats`` timed runs -- and returns the
:class:`pard.config.PipelineSpec` with those measured profiles and the worker counts used.  The
result is an ordinary spec file (YAML, as :func:`pard.config.save` writes it), so ``pard run
--profile FILE`` and ``pard simulate --pipeline FILE`` both accept it.

Measuring under load.  The live runtime runs every worker of every stage at once, one thread
each, with BLAS limited to one thread (threadpoolctl).  On a machine with fewer cores than
workers, a stage's batches run slower while the other stages compute.  So each stage is timed
while the other stages' workers run background batches with the duty cycle they would have with
the pipeline at capacity (the bottleneck's workers always busy, the others the fraction of time
their share of the work needs).  The profile then holds for an overloaded live run, which is the
regime that matters; under light load batches run a little faster than profiled.

Sizing.  :func:`size_workers` fits the spec's worker counts to the cores: unchanged when they fit,
else scaled down in proportion (at least one per stage).  :func:`busy_cores` estimates how many
cores the workers keep busy when the pipeline runs at capacity.

Cache.  :func:`cached_profile` keys a profile by machine (host, CPU model, cores, GPU), pipeline
(the spec's content), worker counts, model scale and pard version, under ``$PARD_CACHE_DIR`` or
``$XDG_CACHE_HOME/pard`` or ``~/.cache/pard``.  A side file ``<entry>.meta.json`` records when the
entry was measured and whether it was marked stale.  A cached profile is measured afresh when it
was marked stale (:func:`mark_stale`: ``pard run`` does so when a live run's batches drift more
than :data:`DRIFT_LIMIT` from it on the bottleneck stage, see :func:`profile_drift`) or when it is
older than :data:`MAX_AGE_S` (the load a machine carries changes over hours).

LLM stages.  An llm stage has no batch profile: :func:`measure_profile` measures its prefill and decode
step on its engine (:mod:`~pard.profiling.llm`; for the built-in models the tiny llama on llama.cpp) and
writes them into the stage.

One concern per module: :mod:`~pard.profiling.measure` (timing, sizing), :mod:`~pard.profiling.llm` (an
llm stage's engine),
:mod:`~pard.profiling.cache` (the cache) and :mod:`~pard.profiling.fit` (profiles from a run's batches,
drift).
"""

from __future__ import annotations

from .cache import MAX_AGE_S, cache_dir, cached_profile, mark_stale
from .fit import DRIFT_LIMIT, profile_drift, profile_from_batches
from .llm import TINY_CONTEXT, measure_llm, tiny_llm_engine
from .measure import ProfileResult, busy_cores, default_batch_sizes, machine_id, measure_profile, size_workers

__all__ = [
    "measure_profile",
    "default_batch_sizes",
    "size_workers",
    "busy_cores",
    "machine_id",
    "cache_dir",
    "cached_profile",
    "ProfileResult",
    "profile_from_batches",
    "profile_drift",
    "mark_stale",
    "MAX_AGE_S",
    "DRIFT_LIMIT",
    "measure_llm",
    "tiny_llm_engine",
    "TINY_CONTEXT",
]
