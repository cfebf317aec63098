# Hand-written stubs for the compiled module pard._core (private; users import `pard`).
# This file is the contract between the C++ bindings in src/ and the Python package:
# keep it in sync with src/register_*.cpp.  Times are float seconds on this side.
import asyncio
from collections.abc import Callable
from concurrent.futures import Future
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

# ---- register_scheduler.cpp: profile, policy value, per-stage scheduler ----------------
# Drop reason codes: REASONS[code] is the name used in reports and in pard.Dropped.
REASONS: list[str]   # ["infeasible", "expired", "stage-budget", "window", "overload", "cancelled", "rejected",
                     #  "timeout", "shed"]
# The clip of a stage's own measured / profiled d(b) ratio (= pard.duration_scale.SCALE_MIN, SCALE_MAX).
DURATION_SCALE_BOUNDS: tuple[float, float]
MAX_JITTER_CV: float

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
                 max_queue: int = 0, max_queue_entry_only: bool = False, shed: bool = True,
                 pace: bool = False, overload_below: str = "none", coherent_rank: bool = False,
                 live_queues: bool = False, virtual_queue: bool = False, llm_tokens: bool = False,
                 llm_quantile: float = 0.5, llm_stop: bool = False, llm_lbf: bool = False) -> None: ...
    # order: "fcfs" | "lbf" | "hbf" | "adaptive"
    # drop: "none" | "pard" | "clipper" | "nexus" | "dagor" | "triton" | "ray-serve" | "vllm" | "scorpio"
    # llm_tokens: at LLM stages, each request's own predicted length (llm_quantile in (0, 1)), else the means;
    # llm_stop: the pard rule stops a running sequence that can no longer finish by its deadline
    # llm_lbf: the pard rule's joins at an LLM stage pop the lowest budget first whatever the order
    # tiered: one heap per tier (served / shed by weight); reactive: the hot-path overload test;
    # max_queue: reject at that many queued (0 = none), at entry stages only with max_queue_entry_only
    # overload_below: "none" | "overloaded" (what a stage reads of the stages below it)
    # coherent_rank: on a parallel DAG branch, in overload, serve / shed by a rank of the request id
    # live_queues: the pop rule also reads the queues below now, beyond their published queue delays (worst path)
    # virtual_queue: an entry stage sheds what the slowest stage below would drop behind what it has forwarded
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
    def pace(self) -> bool: ...
    @property
    def overload_below(self) -> str: ...
    @property
    def coherent_rank(self) -> bool: ...
    @property
    def live_queues(self) -> bool: ...
    @property
    def virtual_queue(self) -> bool: ...
    @property
    def max_queue(self) -> int: ...
    @property
    def max_queue_entry_only(self) -> bool: ...
    @property
    def llm_tokens(self) -> bool: ...
    @property
    def llm_quantile(self) -> float: ...
    @property
    def llm_stop(self) -> bool: ...
    @property
    def llm_lbf(self) -> bool: ...
    def __eq__(self, other: object) -> bool: ...

class StageScheduler:
    # Semantics (order of steps, each drop rule, the nexus window rule): cpp/include/pard/stage_scheduler.hpp.
    # Admission at drain: every rule but "none" admits the published admit_fraction share (reason
    # "rejected"); "dagor" also admits only (1 - alpha) while queue_delay_s > dagor_threshold_s ("overload").
    def __init__(self, *, stage: int, profile: Profile, max_batch: int, policy: Policy,
                 budget_fraction: float, ring_capacity: int = 65536, tier_weights: list[float] = ...,
                 entry: bool = True, llm: dict[str, Any] | None = None) -> None: ...
    def submit(self, id: int, send_s: float, deadline_s: float, arrival_s: float, tier: int = 0) -> bool: ...
    # service_rate: req/s at full batches (0 = unknown; the reactive test is off); duration_scale:
    # measured / profiled d(b) in [0, 1000], 0 = none measured yet (the stage then corrects the profile-based
    # terms by its own ratio, own_duration_scale, and does not shed before its first batch); path_rate: req/s the slowest stage below finishes (0 = none;
    # Policy.pace holds an overloaded stage to it); overload_downstream_s: the pop rule's downstream term
    # when the reactive overload test holds, if larger (0 = none).  All terms validated by
    # PublishedTerms::from_seconds.
    def publish(self, *, downstream_s: float, mu: float, eps: float, queue_delay_s: float,
                admit_fraction: float = 1.0, service_rate: float = 0.0, duration_scale: float = 1.0,
                path_rate: float = 0.0, overload_downstream_s: float = 0.0, floor_downstream_s: float = 0.0,
                outrank_downstream_s: float = 0.0) -> None: ...
    # a batch of `size` ran measured_s seconds (live workers and the simulator call it after every batch)
    def observe_batch(self, size: int, measured_s: float) -> None: ...  # ValueError for size < 1
    def llm_calibration(self) -> dict[str, Any] | None: ...  # an LLM stage's {quantile, token_aware, n, under}
    @property
    def own_duration_scale(self) -> float: ...  # sum measured / sum profiled, clipped; 1 before any batch
    def expected_duration(self, b: int) -> float: ...  # d(b) in s times the duration_scale in force
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
    def set_below(self, below: list[StageScheduler]) -> None: ...  # Policy.overload_below reads them
    @property
    def overloaded_now(self) -> bool: ...        # the reactive overload test held at the last batch
    @property
    def queue_lag_s(self) -> float: ...          # max(0, queued / service_rate - queue_delay_s) (s); 0 unmeasured
    # queue_lag_s less transit_s, counting only the tiers weighing >= min_weight while they are served first
    def queue_lag(self, transit_s: float = 0.0, min_weight: float = 0.0) -> float: ...
    @property
    def parallel(self) -> bool: ...              # on a parallel DAG branch (Policy.coherent_rank applies)
    @parallel.setter
    def parallel(self, value: bool) -> None: ...


def stages_below(successors: list[list[int]]) -> list[list[int]]: ...  # every stage reachable, ascending
def parallel_branches(successors: list[list[int]]) -> list[bool]: ...  # some other stage neither above nor below


# ---- register_sim.cpp: discrete-event simulator over the same StageSchedulers -----------
# Semantics (batching, fan-out/join, cancel, autoscaling, jitter, event order): cpp/include/pard/simulator.hpp.
# Outcome state codes (outcomes()["state"]): 0 pending, 1 on_time, 2 late, 3 dropped, 4 rejected, 5 failed
# A drop with reason "rejected" (admission share) ends in state 4; every other drop reason in state 3.
class Simulator:
    def __init__(self, *, stages: list[dict[str, Any]], policy: Policy, arrivals_s: F64, slo_s: F64,
                 tier: I32, jitter_cv: float = 0.1, seed: int = 0, cold_start_s: float = 10.0,
                 ring_capacity: int = 1024, tier_weights: list[float] = ..., in_tokens: I32 | None = None,
                 out_tokens: I32 | None = None, max_tokens: I32 | None = None) -> None: ...
    # ring_capacity: each stage's ingress ring (a power of two); a full ring is drained into the queue,
    # never rejected, so it is small by default (construction cost); see simulator.hpp.
    # stage dict keys: name (str, optional), profile (Profile), max_batch (int), workers (int),
    #                  successors (list[int], default []), budget_fraction (float in (0, 1], default 1.0)
    #   kind "llm" (cpp/include/pard/sim/llm_worker.hpp): prefill_base_s, prefill_per_token_s, decode (Profile),
    #                  max_seqs, kv_tokens, max_output_tokens instead of profile and max_batch; then in_tokens
    #                  and out_tokens (int32 (n,)) are required, max_tokens optional (0 = no hint)
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
                admit_fraction: float = 1.0, service_rate: float = 0.0, duration_scale: float = 1.0,
                path_rate: float = 0.0, overload_downstream_s: float = 0.0, floor_downstream_s: float = 0.0,
                outrank_downstream_s: float = 0.0) -> None: ...
    # publish() for every stage: one row (downstream_s, mu, eps, queue_delay_s, admit_fraction, service_rate,
    # duration_scale, path_rate, overload_downstream_s, floor_downstream_s, outrank_downstream_s) per stage,
    # in stage order; ValueError for a wrong row count or a bad value
    def publish_all(self, terms: list[tuple[float, ...]]) -> None: ...
    def set_workers(self, stage: int, n: int) -> None: ...   # target (>= 1, else ValueError); new workers serve after cold_start_s
    def workers(self, stage: int) -> int: ...                # serving now (idle or busy, not cold, not retiring)
    def serving(self) -> list[int]: ...                      # workers(stage) of every stage, in stage order
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
    # One sync interval in one call (GIL released): run_until(t_s), every stage's statistics into
    # recorder (interval (t_prev_s, t_s], workers serving at t_s), then planner.update and publish() of
    # every stage; returns run_until's value.  The statistics do not reach take_stats.
    def sync(self, t_prev_s: float, t_s: float, recorder: SimRecorder, planner: SyncPlanner | None = None) -> bool: ...
    # Per request (index = request id): state I8, finish_s F64 (leaving the last stage; the drop or
    # rejection time for states 3/4; NaN while pending), drop_stage I32 (-1), reason I32 (-1),
    # compute_s F64 (compute charged to the request, its equal share of every batch it was in)
    def outcomes(self) -> dict[str, Any]: ...
    # Where the compute went (cpp/include/pard/compute_split.hpp): useful_s, wasted_s, unresolved_s F64
    # (ns,), shed, shed_before_compute int
    def compute_split(self) -> dict[str, Any]: ...
    # One row per executed batch: stage I32, start_s F64, duration_s F64, size I64
    def batches(self) -> dict[str, Any]: ...
    def llm_calibration(self) -> dict[int, dict[str, Any]]: ...  # per LLM stage: quantile, token_aware, n, under


# ---- register_live.cpp: the live runtime's per-request hot path ---------------------------
# Semantics (slots, stripes, the terminal transition, routing, joins): cpp/include/pard/live_pipeline.hpp.
class LiveFuture(Future[Any]):  # Future is added to its bases by pard.runtime.future
    _sync: Any
    @property
    def request_id(self) -> int: ...
    @property
    def outcome_state(self) -> int: ...  # pard.outcomes.STATES index once done; 0 (pending) before
    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def running(self) -> bool: ...
    def result(self, timeout: float | None = None) -> Any: ...
    def exception(self, timeout: float | None = None) -> BaseException | None: ...
    def cancel(self) -> bool: ...
    def add_done_callback(self, fn: Callable[[LiveFuture], Any]) -> None: ...  # type: ignore[override]
    def set_result(self, result: Any) -> None: ...  # raises RuntimeError
    def set_exception(self, exception: BaseException | None) -> None: ...  # raises RuntimeError
    def set_running_or_notify_cancel(self) -> bool: ...  # raises RuntimeError


# ---- live_loop_sink.hpp: ended requests reach the event loops awaiting them, one wake-up per batch ----
# An asyncio future of the running loop, settled on the loop as the request of `future` ends (cancelling it
# does not cancel the request).  RuntimeError without a running loop, or when `future` is pending and
# already watched; TypeError for what is not a LiveFuture.
def watch(future: LiveFuture) -> asyncio.Future[Any]: ...
def loop_sink(loop: asyncio.AbstractEventLoop) -> LoopSink: ...  # the loop's sink, made on first use
def loop_sink_count() -> int: ...  # event loops with a sink now (an entry leaves with its loop)


class LoopSink:
    @property
    def waiting(self) -> int: ...  # ended requests waiting for the loop's next drain


class SinkWake:  # what call_soon_threadsafe runs: drains its sink; dropped unrun, it empties it
    def __call__(self) -> None: ...


class LiveWorker:
    @property
    def stage(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def next_size(self) -> int: ...                 # the batch collected next (0: none)
    @property
    def max_deadline_s(self) -> float: ...
    @property
    def delays(self) -> list[float]: ...


class LiveLlmWorker:
    # an LLM stage worker's running sequences (pard/live/llm_steps.hpp)
    @property
    def stage(self) -> int: ...
    @property
    def running(self) -> list[int]: ...            # keys of the sequences running after the last boundary
    @property
    def kv_used(self) -> int: ...                  # KV tokens they reserve
    @property
    def delays(self) -> list[float]: ...           # queueing delays (s) of the last boundary's joiners


class LivePipeline:
    def __init__(self, *, schedulers: list[StageScheduler], successors: list[list[int]], preds: list[list[int]],
                 max_queue: list[int], capacity_req_s: list[float], entries: list[int], exits: list[int],
                 history: int, join: Callable[[list[Any]], Any], exit_names: list[str],
                 error_factory: Callable[..., BaseException]) -> None: ...
    def set_origin(self, perf_counter_s: float) -> None: ...
    def now(self) -> float: ...
    def open_admission(self) -> None: ...
    def close_admission(self) -> None: ...
    def submit(self, payload: Any, slo_s: float, tier: int, deadline_s: float | None = None, in_tokens: int = 0,
               max_tokens: int = 0, max_new: int = 0) -> LiveFuture: ...
    def llm_worker(self, stage: int, workers: int) -> LiveLlmWorker: ...  # ValueError unless an llm stage
    # (mu, service_rate, path_rate) with the LLM stages' token-based load terms (unchanged without one)
    def llm_terms(self, stage: int, workers: list[int], mu: float, service_rate: float,
                  path_rate: float) -> tuple[float, float, float]: ...
    # a step boundary: (stops, [(key, payload, in_tokens, max_new)]), or None to stop; waits while idle;
    # `refused`: (key, exception) of the step's joiners the engine refused (each ends failed with it)
    def llm_step(self, worker: LiveLlmWorker, finished: Any, error: BaseException | None, start_s: float,
                 end_s: float, refused: Any = ()) -> tuple[list[int], list[tuple[int, Any, int, int]]] | None: ...
    def worker(self, stage: int) -> LiveWorker: ...
    def next_batch(self, worker: LiveWorker) -> list[Any] | None: ...
    def complete(self, worker: LiveWorker, outputs: Any, error: BaseException | None, start_s: float,
                 end_s: float) -> None: ...
    # StageScheduler.purge of `stage` for a batch expected at expected_start_s; ends what it dropped
    def purge(self, stage: int, now_s: float, expected_start_s: float) -> int: ...
    def cancel_all(self) -> None: ...
    def stop(self) -> None: ...
    def wait_idle(self, until_s: float | None = None) -> bool: ...
    def mark_dead(self, stage: int, info: Any) -> None: ...
    def held_at(self, stage: int, worker: LiveWorker | None = None) -> list[int]: ...
    def fail_dead(self, key: int, stage: int, info: Any) -> None: ...
    # (submitted, pending, on_time, late, dropped, rejected, failed) at one moment
    def counts(self) -> tuple[int, int, int, int, int, int, int]: ...
    def drop_counts(self) -> list[int]: ...          # [stage * len(REASONS) + reason]
    def in_flight(self) -> int: ...
    def outcomes(self) -> dict[str, npt.NDArray[Any]]: ...
    def compute_split(self) -> dict[str, Any]: ...  # every request ever; as Simulator.compute_split
    def queued(self, stage: int) -> int: ...
    def retry_after_s(self, stage: int) -> float: ...
    def door_finish_s(self, tier: int = 0, in_front: int = 0) -> float: ...
    def take_stats(self, stage: int) -> dict[str, npt.NDArray[Any]]: ...
    def log_batch(self, stage: int, start_s: float, duration_s: float, size: int, wait_s: float) -> None: ...
    def recent_batches(self, stage: int) -> list[tuple[float, float, float, float]]: ...
    def recent_delays(self, stage: int) -> F64: ...
    def scheduler_s(self) -> float: ...
    def outcome_rows(self) -> int: ...
    def set_push_hook(self, stage: int, fn: Callable[[int], None] | None) -> None: ...
    def set_form_hook(self, stage: int, fn: Callable[[int], None] | None) -> None: ...


# Statistics in the int64 ns form of the simulator: keys arrival, qdelay_t, qdelay, batch_start, batch_size,
# batch_wait, batch_duration (I64 arrays), dropped, late (ints); in the float-seconds form of the live
# runtime and Ray: arrival_s, qdelay_t_s, qdelay_s, batch_start_s, batch_duration_s, batch_wait_s (F64),
# batch_size (I64).
def window_for_cv(cv: float) -> float: ...

# The planner (sync_planner.hpp); pard.planner.Planner builds and wraps it.
class SyncPlanner:
    def __init__(self, *, paths: list[list[list[int]]], parallel: list[list[int]], below: list[list[int]],
                 entry: list[bool], max_batch: list[float], full_d: list[float], d_table: list[list[float]],
                 pts_b: list[list[float]], pts_d: list[list[float]], drawn: list[int], mode: str, instant: bool,
                 correct_durations: bool, mu_at_capacity: bool, adapt_window: bool, lam: float,
                 window_s: float, samples: int, cv_history_s: float, min_cv_intervals: int,
                 constants: list[float], generator: Any, idle_batch: bool, half_life_s: float,
                 prior_batches: float, pace_below: list[list[int]], overload_upper: bool,
                 mu_at_capacity_entry: bool, live_queue: list[bool] = ...,
                 demand_below: list[list[int]] = ...) -> None: ...
    # mode: none, sf, lower, upper, full or busy (PolicySpec.downstream)
    # demand_below: per stage, the stages whose demand_rate is at least min(its in_rate, its service_rate)
    # (pace, PolicySpec.shed_demand); [] as a whole: pace_below
    # live_queue: per stage, publish its queueing delay as 0 (PolicySpec.llm_live_queue at an LLM stage); [] none
    # constants: (scale_min, scale_max, precollected_wait)
    # per stage: (downstream_s, mu, eps, queue_delay_s, admit_fraction, service_rate, duration_scale, in_rate,
    # path_rate, demand_rate, overload_downstream_s, floor_downstream_s, outrank_downstream_s, batch_size,
    # wait_quantile_s)
    def update_ns(self, now_s: float, stats: list[dict[str, Any]], workers: list[int]) -> list[tuple[float, ...]]: ...
    def update_s(self, now_s: float, stats: list[dict[str, Any]], workers: list[int]) -> list[tuple[float, ...]]: ...
    def copy(self, generator: Any) -> SyncPlanner: ...
    def terms(self) -> list[tuple[float, ...]]: ...   # the last update's, [] before the first
    def batch_counts(self) -> list[int]: ...   # the duration correction's batches seen per stage
    def start(self, now_s: float) -> None: ...   # Planner.start
    @property
    def lam(self) -> float: ...
    @property
    def window_s(self) -> float: ...

class SimRecorder:
    def __init__(self, origin_s: float, d_table: list[list[float]], keep_s: int = 0) -> None: ...
    def record_ns(self, stats: list[dict[str, Any]], serving: list[int], t_prev: float, t: float) -> None: ...
    def record_s(self, stats: list[dict[str, Any]], serving: list[float], t_prev: float, t: float) -> None: ...
    @property
    def bins(self) -> int: ...
    @property
    def base(self) -> int: ...
    # submitted, executed I64 (ns,); compute_s, nominal_s F64 (ns,); qsum, qcnt, wsum F64 (ns, bins); wdt F64 (bins,);
    # base, used (int); carry F64 (ns,) or None
    def totals(self) -> dict[str, Any]: ...


# ---- register_compute_split.cpp: where the compute went, for pard.ray's driver -------------
class ComputeBook:
    def __init__(self, n_stages: int) -> None: ...
    def open(self, request_id: int) -> None: ...
    def forget(self, request_id: int) -> None: ...
    # stage ran the batch request_ids (batch order) for duration_s: each one's equal share; states[i], the
    # outcome code of request_ids[i], is read only where that request is not open (it ended first)
    def charge_batch(self, stage: int, request_ids: list[int], duration_s: float, states: list[int]) -> None: ...
    def settle(self, request_id: int, state: int) -> None: ...   # state: a terminal pard.outcomes code
    @property
    def pending(self) -> int: ...
    def split(self) -> dict[str, Any]: ...   # as Simulator.compute_split

# ---- register_output_length.cpp: online output-length quantiles of an LLM stage -----------------
# Token counts are int (int32); ValueError names the field and value of a bad argument.
class OutputLengthPredictor:
    def __init__(self, *, max_output_tokens: int = 1024, half_life: float = 2000.0, min_samples: int = 32,
                 tiers: int = 1) -> None: ...
    def observe(self, in_tokens: int, tier: int, out_tokens: int) -> None: ...
    # in [generated + 1, min(hint, max_output_tokens)] (hint 0 = none); ValueError if generated >= that cap
    def quantile(self, in_tokens: int, tier: int, hint: int, p: float, generated: int = 0) -> int: ...
    def record_calibration(self, predicted: int, actual: int) -> None: ...
    def calibration(self) -> tuple[int, int]: ...   # (n, under): under counts actual <= predicted
    def cell_mass(self, in_tokens: int, tier: int) -> float: ...
    @property
    def observed(self) -> int: ...
    @property
    def bin_edges(self) -> list[int]: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def half_life(self) -> float: ...
    @property
    def min_samples(self) -> int: ...
    @property
    def tiers(self) -> int: ...
    @staticmethod
    def input_bucket(in_tokens: int) -> int: ...   # 0 for 0 (unknown), else its bit width, at most 15
