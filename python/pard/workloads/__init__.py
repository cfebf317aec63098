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
- :mod:`~pard.workloads.files` — :func:`load_trace` (a trace name or file, cut and scaled),
  :func:`resolve_file_format` (sniffing a trace file's format), :func:`read_csv_trace`.
- :mod:`~pard.workloads.requests` — :class:`Workload` (arrivals plus per-request SLO and tier
  arrays), :func:`assign_tiers`, and :func:`csv_requests` for files that carry them.
- :mod:`~pard.workloads.token_columns` — :func:`file_tokens`: a trace file's per-request token counts
  (``in_tokens`` / ``out_tokens`` / ``max_tokens``, or the Azure names) for an LLM stage.

Typical use::

    from pard import workloads as wl
    arrivals = wl.scale(wl.azure_llm_conv(), rate=400.0)     # amplify, 10 s bins, seed 0
    burst = wl.bursty(400.0, 600.0, cv=1.5, seed=1)
"""

from __future__ import annotations

from . import files, requests, synthetic, token_columns, traces, transforms
from ..errors import TooManyArrivalsError
from ._common import MAX_ARRIVALS
from .files import *  # noqa: F403 - each submodule's __all__ is its public part
from .requests import *  # noqa: F403
from .synthetic import *  # noqa: F403
from .token_columns import *  # noqa: F403
from .traces import *  # noqa: F403
from .transforms import *  # noqa: F403

__all__ = [*traces.__all__, *synthetic.__all__, *transforms.__all__, *requests.__all__, *files.__all__,
           *token_columns.__all__,
           "MAX_ARRIVALS", "TooManyArrivalsError"]
