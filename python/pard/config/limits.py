"""The bounds a pipeline spec's numbers must keep (workers, batch sizes, durations, SLOs), each with why:
one home for :mod:`pard.config.models`, the runtime and the simulator."""

from __future__ import annotations

__all__ = ["MAX_WORKERS", "MAX_TOTAL_WORKERS", "MAX_BATCH", "MAX_DURATION_S", "MIN_DURATION_S", "MAX_SLO_S",
           "MIN_SLO_S"]

#: Largest ``workers`` a stage may declare (1 024).  The live runtime runs one OS thread per worker,
#: each with its own stack and its executor's per-worker state (an ONNX Runtime session, a CUDA
#: stream), and starts them all at once: a count far past the cores and accelerators of one host
#: does not serve more, it exhausts the OS's threads (10^5 workers spent half a minute starting
#: ~21 700 threads before one was refused).  1 024 is 16x the paper's 64-GPU testbed on one stage;
#: a larger count is a typo, not a deployment.  The simulator and Ray read the same spec, so they
#: take the same bound.
MAX_WORKERS = 1024

#: Largest sum of ``workers`` over a pipeline's stages (4 096 threads in one runtime process), for
#: the same reason as :data:`MAX_WORKERS`.
MAX_TOTAL_WORKERS = 4096

#: Largest batch size (``max_batch`` and profile points): the C++ ``pard::Profile`` tabulates d(b)
#: for every b up to its largest point and refuses more than ``Profile::kMaxTable`` = 2^20.
MAX_BATCH = 1 << 20

#: Largest profile duration, seconds: what ``pard::Profile::from_seconds`` accepts.
MAX_DURATION_S = 1e9

#: Smallest profile duration, seconds (1 µs).  The C++ core counts whole int64 nanoseconds, so a
#: duration near 1 ns loses its value to rounding, and the capacity ``b / d(b)`` that the runtime's
#: default queue bound and the goodput bound multiply out grows without limit as ``d`` nears 0
#: (``1e-300`` s overflowed the queue bound).  No model runs a batch in under a microsecond.
MIN_DURATION_S = 1e-6

#: Largest SLO, seconds: deadlines are int64 nanoseconds in the C++ core and the bindings refuse
#: times past 9e9 s, so a request's ``send + slo`` must stay well inside that (1e9 s is 31 years).
MAX_SLO_S = 1e9

#: Smallest per-request SLO the simulator takes, seconds: one tick of the C++ core's nanosecond clock.
MIN_SLO_S = 1e-9
