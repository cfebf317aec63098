# Hand-written stubs for the compiled module pard._core (private; users import `pard`).
# This file is the contract between the C++ bindings in src/ and the Python package:
# keep it in sync with src/register_*.cpp.  Times are float seconds on this side.
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]

def build_info() -> dict[str, str]: ...

# ---- register_depq.cpp: min-max heap keyed by (deadline, id) -------------------------
# Safe to share between threads (one internal mutex); batch calls release the GIL.
class DEPQ:
    def __init__(self) -> None: ...
    def push(self, deadline: float, id: int) -> None: ...    # ValueError if deadline is NaN
    def pop_min(self) -> tuple[float, int]: ...          # IndexError when empty
    def pop_max(self) -> tuple[float, int]: ...          # IndexError when empty
    def min(self) -> tuple[float, int]: ...              # IndexError when empty
    def max(self) -> tuple[float, int]: ...              # IndexError when empty
    def drain_min_while_below(self, threshold: float) -> tuple[F64, U64]: ...  # removes deadline < threshold, ascending
    # deadlines float64 (n,), ids uint64 (n,): TypeError on dtype/non-array, ValueError on shape,
    # unequal lengths or NaN (then nothing is pushed)
    def push_many(self, deadlines: F64, ids: U64) -> None: ...
    def pop_min_many(self, n: int) -> tuple[F64, U64]: ...   # up to n (k = min(n, len)), ascending; ValueError if n < 0
    def pop_max_many(self, n: int) -> tuple[F64, U64]: ...   # up to n, descending; ValueError if n < 0
    def clear(self) -> None: ...
    def empty(self) -> bool: ...
    def size(self) -> int: ...
    def __len__(self) -> int: ...

# ---- register_ring.cpp: bounded lock-free MPMC ring of uint64 -----------------------
class MpmcRing:
    def __init__(self, capacity: int) -> None: ...      # ValueError unless a power of two in [2, 2**40]
    @property
    def capacity(self) -> int: ...
    def try_push(self, item: int) -> bool: ...          # False when full (item not stored); TypeError outside uint64
    def try_pop(self) -> int | None: ...                # None when empty
    def size_approx(self) -> int: ...                   # best-effort under concurrency

# Producer p pushes (p << 40) | s, s < items_per_producer; keys of the result: expected, received,
# duplicates, missing, out_of_range, fifo_violations, seq_sum, producer_sum, full_retries,
# empty_polls (int) and seconds (float). GIL released while the C++ threads run.
def ring_stress(producers: int, consumers: int, items_per_producer: int, capacity: int) -> dict[str, Any]: ...

# ---- register_bench.cpp: C++-side timings (GIL released) ------------------------------
def bench_depq(n: int, ops: int, end: str) -> float: ...     # ns per push+pop pair, in C++; end "min" | "max"
def bench_depq_vs_std(n: int, ops: int, end: str, rounds: int) -> dict[str, list[float]]: ...  # interleaved rounds
def bench_ring(ops: int, capacity: int) -> float: ...        # ns per push+pop pair, in C++, one thread
def bench_drop_decision(n: int) -> float: ...    # ns per Eq. 3b decision, timed in C++
def bench_form_batch(queue: int, max_batch: int, policy: "Policy", rounds: int = 1) -> float: ...  # ns per request

# ---- register_scheduler.cpp: profile, policy value, per-stage scheduler ----------------
# Drop reason codes: REASONS[code] is the name used in reports and in pard.Dropped.
REASONS: list[str]   # ["infeasible", "expired", "stage-budget", "window", "overload", "cancelled", "rejected",
                     #  "timeout", "shed"]

class Profile:
    """Batch execution duration d(b), piecewise-linear through measured points (s)."""
    def __init__(self, batch_sizes: list[int], durations_s: list[float]) -> None: ...  # ValueError
    def duration(self, batch: int) -> float: ...   # ValueError for batch < 1; clamped below the first point, linear extrapolation past the last
    @property
    def max_batch(self) -> int: ...
    def points(self) -> tuple[list[int], list[float]]: ...

class Policy:
    """A policy value: order x drop rule x parameters (DESIGN 3.6)."""
    def __init__(self, *, order: str, drop: str, dagor_threshold_s: float = 0.02,
                 dagor_alpha: float = 0.4, tiered: bool = False, reactive: bool = False,
                 max_queue: int = 0, max_queue_entry_only: bool = False, shed: bool = True) -> None: ...
    # order: "fcfs" | "lbf" | "hbf" | "adaptive"
    # drop: "none" | "pard" | "clipper" | "nexus" | "dagor" | "triton" | "ray-serve"
    # tiered: one heap per tier (served / shed by weight); reactive: the hot-path overload test;
    # max_queue: reject at that many queued (0 = none), at entry stages only with max_queue_entry_only
    @property
    def order(self) -> str: ...
    @property
    def drop(self) -> str: ...
    @property
    def dagor_threshold_s(self) -> float: ...
    @property
    def dagor_alpha(self) -> float: ...
    @property
    def tiered(self) -> bool: ...
    @property
    def reactive(self) -> bool: ...
    @property
    def shed(self) -> bool: ...
    @property
    def max_queue(self) -> int: ...
    @property
    def max_queue_entry_only(self) -> bool: ...
    def __eq__(self, other: object) -> bool: ...

class StageScheduler:
    # Semantics (order of steps, each drop rule, the nexus window rule): cpp/include/pard/stage_scheduler.hpp.
    # Admission at drain: every rule but "none" admits the published admit_fraction share (reason
    # "rejected"); "dagor" also admits only (1 - alpha) while queue_delay_s > dagor_threshold_s ("overload").
    def __init__(self, *, stage: int, profile: Profile, max_batch: int, policy: Policy,
                 budget_fraction: float, ring_capacity: int = 65536, tier_weights: list[float] = ...,
                 entry: bool = True) -> None: ...
    def submit(self, id: int, send_s: float, deadline_s: float, arrival_s: float, tier: int = 0) -> bool: ...
    # service_rate: req/s at full batches (0 = unknown; the reactive test is off); duration_scale:
    # measured / profiled d(b) in (0, 1000].  All terms validated by PublishedTerms::from_seconds.
    def publish(self, *, downstream_s: float, mu: float, eps: float, queue_delay_s: float,
                admit_fraction: float = 1.0, service_rate: float = 0.0, duration_scale: float = 1.0) -> None: ...
    # -> (batch ids, dropped ids, drop reason codes); the batch is already in service order
    def form_batch(self, now_s: float, expected_start_s: float,
                   cancelled: npt.NDArray[np.uint8] | None = None) -> tuple[U64, U64, I32]: ...
    # Drain + pard's low-end purge for a batch expected at expected_start_s, no batch formed (other
    # rules: nothing) -> (dropped ids, drop reason codes)
    def purge(self, now_s: float, expected_start_s: float,
              cancelled: npt.NDArray[np.uint8] | None = None) -> tuple[U64, I32]: ...
    @property
    def current_order(self) -> str: ...          # "fcfs" | "lbf" | "hbf"
    @property
    def stage(self) -> int: ...
    @property
    def max_batch(self) -> int: ...
    def queued(self) -> int: ...                 # heap + ring, best effort under concurrency


# ---- register_sim.cpp: discrete-event simulator over the same StageSchedulers -----------
# Semantics (batching, fan-out/join, cancel, autoscaling, jitter, event order): cpp/include/pard/simulator.hpp.
# Outcome state codes (outcomes()["state"]): 0 pending, 1 on_time, 2 late, 3 dropped, 4 rejected, 5 failed
# A drop with reason "rejected" (admission share) ends in state 4; every other drop reason in state 3.
class Simulator:
    def __init__(self, *, stages: list[dict[str, Any]], policy: Policy, arrivals_s: F64, slo_s: F64,
                 tier: I32, jitter_cv: float = 0.1, seed: int = 0, cold_start_s: float = 10.0,
                 ring_capacity: int = 1024, tier_weights: list[float] = ...) -> None: ...
    # ring_capacity: each stage's ingress ring (a power of two); a full ring is drained into the queue,
    # never rejected, so it is small by default (construction cost); see simulator.hpp.
    # stage dict keys: name (str, optional), profile (Profile), max_batch (int), workers (int),
    #                  successors (list[int], default []), budget_fraction (float in (0, 1], default 1.0)
    # Unknown keys, cycles, bad indices, unsorted/non-finite arrivals, slo <= 0, length mismatches,
    # jitter_cv < 0: ValueError naming the field.  Request id = index into arrivals_s.
    def run_until(self, t_s: float) -> bool: ...     # events with time <= t_s, clock -> t_s; True while events remain
    @property
    def now_s(self) -> float: ...
    @property
    def num_stages(self) -> int: ...
    @property
    def num_requests(self) -> int: ...
    # stage out of range: IndexError (publish, set_workers, workers, queued, current_order)
    def publish(self, stage: int, *, downstream_s: float, mu: float, eps: float, queue_delay_s: float,
                admit_fraction: float = 1.0, service_rate: float = 0.0, duration_scale: float = 1.0) -> None: ...
    def set_workers(self, stage: int, n: int) -> None: ...   # target (>= 1, else ValueError); new workers serve after cold_start_s
    def workers(self, stage: int) -> int: ...                # serving now (idle or busy, not cold, not retiring)
    def queued(self, stage: int) -> int: ...                 # requests waiting at the stage now
    def current_order(self, stage: int) -> str: ...
    # Per stage, samples since the last call:
    #   arrival_s F64            times requests arrived at the stage
    #   qdelay_t_s, qdelay_s F64 time taken into a batch, queueing delay Q of that request
    #   batch_start_s F64, batch_size I64, batch_wait_s F64, batch_duration_s F64   one row per batch
    #   dropped I64 (scalar array of length 1: drops decided at this stage, cancelled sibling copies excluded)
    #   queued I64 (scalar array of length 1: requests waiting at the stage at the time of the call)
    #   late I64 (scalar array of length 1: requests that finished late at this sink stage)
    def take_stats(self) -> list[dict[str, Any]]: ...
    # Per request (index = request id): state I8, finish_s F64 (leaving the last stage; the drop or
    # rejection time for states 3/4; NaN while pending), drop_stage I32 (-1), reason I32 (-1),
    # compute_s F64 (compute charged to the request, its equal share of every batch it was in)
    def outcomes(self) -> dict[str, Any]: ...
    # One row per executed batch: stage I32, start_s F64, duration_s F64, size I64
    def batches(self) -> dict[str, Any]: ...
