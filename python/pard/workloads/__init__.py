"""Arrival workloads for pard's simulator and runtime: real traces, generators and transforms.

Everything here produces or takes arrival times as a 1-D NumPy ``float64`` array of seconds,
sorted (DESIGN §5):

- :mod:`~pard.workloads.traces` — file loaders: :func:`azure_llm` (Azure LLM inference trace
  2023), :func:`azure_functions` (Azure Functions 2019 per-minute counts),
  :func:`per_second_counts` (Wikipedia / Twitter form), :func:`csv_timestamps` (any CSV), and the
  bundled :func:`azure_llm_conv` (CC-BY 4.0; Patel et al., "Splitwise", ISCA 2024).  Loaders
  return seconds from the trace's first arrival.
- :mod:`~pard.workloads.synthetic` — seeded generators :func:`poisson`, :func:`bursty` (MMPP with
  a requested CV of per-second counts), :func:`flash_crowd`, :func:`diurnal`; seconds from the
  start of the window.
- :mod:`~pard.workloads.transforms` — :func:`scale` (``"amplify"`` / ``"compress"``),
  :func:`window`, :func:`cv`.
- :mod:`~pard.workloads.requests` — :class:`Workload` (arrivals plus per-request SLO and tier
  arrays), :func:`assign_tiers`, and :func:`csv_requests` for files that carry them.

Typical use::

    from pard import workloads as wl
    arrivals = wl.scale(wl.azure_llm_conv(), rate=400.0)     # amplify, 10 s bins, seed 0
    burst = wl.bursty(400.0, 600.0, cv=1.5, seed=1)
"""

from __future__ import annotations

from ._common import MAX_ARRIVALS, TooManyArrivalsError
from .requests import Workload, assign_tiers
from .synthetic import MMPP, bursty, diurnal, flash_crowd, mmpp_parameters, poisson
from .traces import (
    AZURE_FUNCTIONS_KEYS,
    AZURE_LLM_COLUMNS,
    BUNDLED_TRACES,
    azure_functions,
    azure_llm,
    azure_llm_conv,
    csv_requests,
    csv_timestamps,
    per_second_counts,
)
from .transforms import bin_counts, cv, mean_rate, scale, window

__all__ = [
    "azure_llm",
    "azure_llm_conv",
    "azure_functions",
    "per_second_counts",
    "csv_timestamps",
    "csv_requests",
    "poisson",
    "bursty",
    "flash_crowd",
    "diurnal",
    "mmpp_parameters",
    "MMPP",
    "scale",
    "window",
    "cv",
    "bin_counts",
    "mean_rate",
    "Workload",
    "assign_tiers",
    "AZURE_LLM_COLUMNS",
    "AZURE_FUNCTIONS_KEYS",
    "BUNDLED_TRACES",
    "MAX_ARRIVALS",
    "TooManyArrivalsError",
]
