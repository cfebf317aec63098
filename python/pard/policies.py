"""Drop-and-order policies by name (DESIGN §3.6).

A policy is a *value*: the order a stage serves its queue in, the drop rule it applies before a
request joins a batch, and the options the planner (:mod:`pard.planner`) uses when it computes the
downstream terms it publishes to the stage schedulers.  The C++ stage scheduler receives the order and
drop rule as a ``pard._core.Policy``; the planner reads the rest.  No policy is a branch elsewhere in
the code: the simulator, the planner and the live runtime all look the name up here.

Names: ``pard`` (the team's best policy and the default everywhere: the paper's method plus the levers
of DESIGN §3.7), ``pard-paper`` (the paper's method exactly as written; the reproduction in
``bench/paper/`` uses it), the baselines ``naive``, ``clipper++``, ``nexus``, ``dagor``, ``triton`` and
``ray-serve``, the LLM serving baselines ``vllm`` and ``scorpio`` (their rules act at LLM stages only), and the ablations of ``pard-paper``: ``pard-back``, ``pard-sf``, ``pard-lower``,
``pard-upper``, ``pard-fcfs``, ``pard-lbf``, ``pard-hbf``, ``pard-instant``.

What ``pard`` adds to ``pard-paper`` (each a field below, so each can be switched on or off alone):

* ``tiered`` -- the seed's priority score: one queue per service tier, served (in overload) and shed by
  tier weight, then by slack (remaining budget minus remaining compute cost);
* ``reactive`` (+ ``shed``) -- overload detected on the hot path at every batch (queued work against what
  the stage can finish within the queued requests' slack); the order switches to HBF and the requests
  it cannot reach in time are shed at once, instead of at the next sync;
* ``downstream="busy"`` -- the downstream batch wait budgeted from what the stages below really do:
  ``w = sum rho_i d_i``, ``rho_i`` stage ``i``'s measured utilisation (DESIGN §3.7; added to
  ``q_i`` where stage ``i`` was backlogged, else ``max(q_i, rho_i d_i)``: ``busy_wait``), instead of
  the 0.1-quantile of per-batch waits, which is 0 whenever workers idle between batches (requests admitted
  upstream then die downstream); a whole batch per stage (``pard-upper``'s ``w = sum d_i``) only where the
  stage is always busy, so a stage above a partly idle path is not over-budgeted. The planner also
  publishes the floor ``sum q_i + sum d_i``; a batch that the busy term would leave with no feasible request
  while nothing below holds a request takes the floor instead (stage_scheduler.hpp step 1b: a stage fed at
  its own pace by the one above is busy, yet a request reaching it starts at once);
* ``overload_upper`` -- while a stage's hot-path overload test holds, its pop rule budgets ``w = sum d_i``:
  an overloaded stage forwards at its full rate, so the stages below are about to be busy before the
  planner has measured it (``"busy"`` alone lags a burst that follows an idle gap by up to a sync); not
  where it would drop every queued request while nothing below holds one (with an SLO under ``2 sum d_i``
  it dropped a whole sustained overload);
* ``overload_below="overloaded"`` -- the same while a stage *below* found itself overloaded at its last
  batch, read on the hot path (a burst piling up at a downstream bottleneck reaches the stages above a
  sync late through the planner's averages);
* ``live_queues`` -- each stage below budgeted at the larger of the planner's mean queueing delay and what
  its queue holds now (less what it drains before the request gets there), read on the hot path per batch;
* ``correct_durations`` -- every ``d_k(b)`` scaled online by the measured / profiled batch duration ratio;
* ``coherent_branches`` -- parallel DAG branches switch order together (the most loaded one's load factor);
* ``coherent_rank`` -- in overload parallel DAG branches serve and shed by one rank that every branch
  computes alike from the request id, so that they keep the same requests rather than each its own newest;
* ``idle_batch`` -- a stage that ran no batch in the window is estimated at batch size 1 (an idle stage
  starts a request at once), not at the size of its last batch, which may be a drained backlog's;
* ``mu_at_capacity`` -- the load factor against full batches: a busy stage batches just enough to keep
  up, so the paper's load factor at the current batch size sits near 1 and flips the order on noise;
  ``mu_at_capacity_entry=False`` keeps the paper's load factor at the entry stages, where the oldest
  requests HBF starves have had no compute spent on them yet;
* ``coherent_paths`` -- a stage takes its downstream stages' largest load factor (the stages before an
  overloaded one serve HBF too);
* ``prior_terms`` -- before the first sync, the terms of an idle interval are published, so a run that
  opens with a burst has its overload test and downstream estimate from its first batch.
* ``shed_demand`` -- an llm stage's published demand (what an autoscaler sizes it on) counts what the stages
  above would forward were they not dropping on its behalf: an LLM stage whose excess the entry sheds before
  any compute otherwise looks to a per-stage autoscaler as if nobody wanted it, and is never grown.

``downstream="upper"`` (``w = sum d_i`` at every batch) is ``pard-upper``'s; ``pard`` does not take it
because it over-budgets the stages below an entry bottleneck, which are never full (bench/RESULTS.md).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, Mapping, Sequence, get_args

from .errors import PardValueError, PardTypeError

if TYPE_CHECKING:  # pragma: no cover
    from . import _core

__all__ = ["PolicySpec", "POLICIES", "get_policy", "policy_names", "paces"]

Order = Literal["fcfs", "lbf", "hbf", "adaptive"]
Drop = Literal["none", "pard", "clipper", "nexus", "dagor", "triton", "ray-serve", "vllm", "scorpio"]
Downstream = Literal["full", "none", "sf", "lower", "upper", "busy"]
#: Where ``pace`` holds an overloaded stage to the slowest stage below it: nowhere, or at a fork (a stage
#: whose downstream work splits into two or more paths, where sibling branches that overload on their own
#: drop different requests, each wasting the other's compute).
Pace = Literal["none", "forks"]
#: What a stage's pop rule reads of the stages below it on the hot path (``PolicySpec.overload_below``):
#: nothing, or whether one found itself overloaded at its last batch.
BelowSignal = Literal["none", "overloaded"]


def paces(mode: str, paths: Sequence[Sequence[int]]) -> bool:
    """True when a stage with these downstream ``paths`` (stage indices) is paced under ``mode``
    (:attr:`PolicySpec.pace`): ``"forks"`` one with two or more downstream paths, ``"none"`` never."""
    return mode == "forks" and len(paths) >= 2

#: What each downstream mode adds to a request's end-to-end estimate at stage k (DESIGN §3.2/§3.6),
#: evaluated along every downstream path and maximised over paths.
DOWNSTREAM_MODES: Mapping[str, str] = MappingProxyType(
    {
        "full": "sum q_i + sum d_i(b_i) + w_k (lambda-quantile of summed batch waits)",
        "none": "0 (no downstream terms; pard-back)",
        "sf": "sum d_i(b_i) (service time only; pard-sf)",
        "lower": "sum q_i + sum d_i(b_i) (w_k = 0; pard-lower)",
        "upper": "sum q_i + 2 * sum d_i(b_i) (w_k = sum d_i; pard-upper)",
        "busy": "sum d_i(b_i) + sum of each stage's wait: q_i + rho_i d_i(b_i) where it was backlogged (a request "
                "waited for another batch), else max(q_i, rho_i d_i(b_i)); rho_i its measured utilisation",
    }
)


@dataclass(frozen=True)
class PolicySpec:
    """One named policy: order x drop rule x planner options (DESIGN §3.6).

    Attributes:
        name: the policy's name, e.g. ``"pard"``.
        order: queue order, ``"fcfs" | "lbf" | "hbf" | "adaptive"`` (adaptive = §3.3 hysteresis).
        drop: drop rule in the stage scheduler, ``"none" | "pard" | "clipper" | "nexus" | "dagor"``.
        downstream: how the planner forms the downstream term, a key of ``DOWNSTREAM_MODES``.
        instant: publish ``eps = 0`` (no hysteresis band; ``pard-instant``).
        dagor_threshold_s: Dagor's queueing-delay threshold ``T`` (s).
        dagor_alpha: Dagor's throttle: admit ``1 - alpha`` of the input while overloaded.
        tiered: one queue per service tier, served and shed by tier weight (``pard``).
        reactive: hot-path overload test per batch: HBF and shedding at once (``pard``).
        shed: with ``reactive``, also shed the requests the stage cannot reach in time at once (else the
            overload test only switches the order).
        pace: with ``reactive``, an overloaded stage forwards no faster than the slowest stage below it
            finishes (the planner's ``path_rate``): smaller batches, so the excess is dropped at this stage
            rather than after a stage below has spent on it (stage_scheduler.hpp step 2c; DESIGN §3.7).
            Where: ``"none"`` or ``"forks"`` (:data:`Pace`, :func:`paces`). ``pard``: ``"forks"``. Not while
            an autoscaler sizes the stages (:meth:`for_autoscaling`).
        correct_durations: scale ``d_k(b)`` by the measured / profiled ratio, online (``pard``).
        coherent_branches: parallel DAG branches take the order of the most loaded one (``pard``).
        coherent_rank: a stage on a parallel DAG branch (``pard._core.parallel_branches``: some other stage is
            neither above nor below it), in overload (the published order is HBF, or its own hot-path
            overload test fired since the planner last published a calm order), serves the highest and sheds the lowest of
            a pseudo-random rank of the request id, the same on every branch, instead of the latest and
            earliest deadlines (``pard``). Overloaded sibling branches that each serve their own newest
            requests serve different ones, and each copy one branch serves that the other drops is wasted
            at the join; by one shared rank the slower branch's kept requests lie inside the faster's
            (stage_scheduler.hpp, ``sync_rank``; bench/RESULTS.md, issue 9, eighth round).
        mu_at_capacity: the load factor against the stage's throughput at full batches, not at its
            current batch size (the planner's module doc says why).
        mu_at_capacity_entry: with ``mu_at_capacity``, whether entry stages take it too (True) or keep the
            paper's load factor at their current batch size (False, ``pard``): an entry that is merely busy
            then serves HBF, and the oldest requests it starves have cost nothing yet, while a stage below
            would waste what the stages above spent on them (:mod:`pard.planner`'s module doc).
        coherent_paths: a stage takes the largest load factor of itself and its downstream stages.
        overload_upper: with ``reactive``, when a stage's hot-path overload test holds, the pop rule of the
            batch it forms budgets the downstream batch waits at ``pard-upper``'s ``w = sum d_i`` (the planner publishes
            ``sum q_i + 2 sum d_i``, maximised over paths, as ``overload_downstream_s``) when that exceeds the
            published term: an overloaded stage forwards at its full rate, so the stages below are about to
            be busy whatever utilisation the planner measured (``downstream="busy"`` lags a burst that
            follows an idle gap by up to one sync). The purge keeps the published term.
        overload_below: with ``overload_upper``, the pop rule also budgets ``overload_downstream_s`` while a
            stage below signals, now, that it is backed up: ``"overloaded"`` (its own hot-path overload test
            held at its last batch); ``"none"``: never. The
            planner's queueing and utilisation terms average over its window, so a burst piling up at a
            downstream bottleneck reaches the stages above a sync late; this signal is read per batch in C++
            (stage_scheduler.hpp, step 2b), from the stages of the same process: on Ray (:mod:`pard.ray`) each
            stage actor sees only its own test, as with ``"none"``.
        live_queues: the pop rule budgets each stage below at the larger of the planner's queueing delay
            ``q_i`` (its window mean) and what its queue holds now, ``n_i / R_i - transit`` (requests queued
            over its service rate at full batches, less what it drains before the request can reach it: the
            batch being formed's end, ``t_e + d - now``), summed along the worst path below; the pop rule takes
            the larger of that and the published (or overload) term (stage_scheduler.hpp, step 4;
            ``StageScheduler.queue_lag_s``). A backlog at a stage below is seen at the next batch, not a
            sync later (``pard``). Read per batch in C++ from the stages of the same process (on Ray, as off).
        virtual_queue: at an entry stage whose slowest stage below (the bottleneck: the least published service
            rate, at full batches) is slower than itself, keep a fluid backlog of that stage -- +1 per request
            forwarded, drained at its service rate, never below what the stages down to it hold now -- and shed
            (reason ``shed``), before any compute, a request whose deadline falls before the backlog ahead of
            it is served plus the bottleneck's batch and downstream term: the request it would drop
            (rules/virtual_queue.hpp; DESIGN §3.7). It sheds nothing while less than two of the bottleneck's
            full batches per worker lie between the entry and the bottleneck's batches, and the bottleneck pops
            lowest budget first while an entry counts against it. Stages tied within 5 % keep the one counted
            against before. On a tiered entry each tier counts only its own and the heavier tiers' backlog (the
            bottleneck serves those first), so the lightest tier is shed first. ``pard``: on a fixed pool of
            workers; not while an autoscaler sizes the stages (:meth:`for_autoscaling`). Read per batch in C++
            from the stages of the same process (on Ray, as off).
        prior_terms: before the planner's first interval, publish the terms of an idle interval (the
            profile's durations, no queueing, the stages' service rates), so that a run or a burst that
            starts before the first sync is not served without any downstream estimate or overload test.
        idle_batch: a stage with no batch in the window is estimated at ``b = 1`` (``pard``), not at its
            last batch size (the planner's module doc says why).
        shed_demand: with the pard rule, an llm stage's published ``demand_rate`` is at least ``min(in_rate,
            service_rate)`` of every stage above it (``pard``): the stages above read its queue live and drop
            what it could not finish in time, so it receives less than the pipeline asks of it, and an
            autoscaler sized on its input alone keeps it small (bench/RESULTS.md, ``rag``: bursty autoscaled
            rows). It changes only what an autoscaler reads (``simulate(autoscale=True)``). Not for DNN stages:
            there it sizes every stage on the entry's input, which grows each one a cold start sooner but
            provisions more workers than the baselines' autoscalers do, and each worker serves less.
        max_queue: queue bound (0 = none): a request finding this many queued is rejected
            (``triton``'s ``max_queue_size`` at every stage, ``ray-serve``'s ``max_queued_requests``).
        max_queue_entry_only: apply ``max_queue`` at entry stages only (``ray-serve``).
        llm_tokens: at an LLM stage and above it, price each request by its own predicted output length (the
            ``llm_quantile`` of the stage's learned length distribution, given its input length, tier and
            hint), at a token time that counts the share of the engine its joiners' prefills take (``pard``;
            DESIGN §3.8); otherwise every request is priced at the running means of finished requests and the
            profile's decode step.
        llm_quantile: the quantile of the output-length distribution ``llm_tokens`` uses, in (0, 1).
        llm_stop: with the pard rule, stop a running sequence at a step boundary once it can no longer finish
            by its deadline at the uncontended decode pace (reason ``infeasible``; DESIGN §3.8).  Off in
            ``pard``: on an engine whose joins' prefills dominate, the freed slot is refilled at once and the
            new prefill stalls every running sequence, which costs more goodput and LLM compute than the
            stopped sequence's last steps save (bench/llm_chain.py; bench/RESULTS.md).
        llm_lbf: with the pard rule, an LLM stage's joins pop the lowest budget first whatever the published
            order (``pard``). Each join is judged by the request's own cost, so the least slack that can still
            finish goes first; under HBF the requests a burst left queued wait behind newer ones until they
            expire, just before the workers ordered for the burst (or the slots long answers hold) free up
            (bench/RESULTS.md, ``rag``).
        llm_live_queue: the planner publishes an LLM stage's queueing delay as 0, so the stages above read
            its queue live only (``live_queues``: what it holds over its service rate, the workers still
            starting counted), not as the window's mean of past waits (``pard``). An LLM request waits
            seconds, and the waits of a queue that built while workers started describe a queue those workers
            are about to drain: read as a mean they make the entry refuse what the grown stage would serve.
        lam: the policy's own downstream quantile (None: the paper's 0.1); a ``lam`` passed to
            ``simulate`` / the planner overrides it.
        description: one line for tables and ``--help``.

    Raises:
        ValueError: a field outside its choices or range (the message names the field, the value and the
            valid choices); TypeError: a field of the wrong type.
    """

    name: str
    order: Order
    drop: Drop
    downstream: Downstream = "full"
    instant: bool = False
    dagor_threshold_s: float = 0.02
    dagor_alpha: float = 0.4
    tiered: bool = False
    reactive: bool = False
    shed: bool = True
    pace: Pace = "none"
    correct_durations: bool = False
    coherent_branches: bool = False
    mu_at_capacity: bool = False
    mu_at_capacity_entry: bool = True
    coherent_paths: bool = False
    idle_batch: bool = False
    prior_terms: bool = False
    shed_demand: bool = False
    overload_upper: bool = False
    overload_below: BelowSignal = "none"
    coherent_rank: bool = False
    live_queues: bool = False
    virtual_queue: bool = False
    max_queue: int = 0
    max_queue_entry_only: bool = False
    llm_tokens: bool = False
    llm_quantile: float = 0.5
    llm_stop: bool = False
    llm_lbf: bool = False
    llm_live_queue: bool = False
    lam: float | None = None
    description: str = ""

    def __post_init__(self) -> None:
        """Validate every field (ValueError / TypeError naming the field, its value and the valid choices)."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise PardValueError(f"PolicySpec.name must be a non-empty str, got {self.name!r}")
        for field, choices in (("order", get_args(Order)), ("drop", get_args(Drop)),
                               ("downstream", tuple(DOWNSTREAM_MODES)),
                               ("pace", get_args(Pace)), ("overload_below", get_args(BelowSignal))):
            value = getattr(self, field)
            if not isinstance(value, str) or value not in choices:
                raise PardValueError(f"PolicySpec.{field} must be one of {', '.join(map(repr, choices))}, "
                                 f"got {value!r}")
        for field in _BOOL_FIELDS:  # every field declared bool (a list written out missed live_queues)
            if not isinstance(getattr(self, field), bool):
                raise PardTypeError(f"PolicySpec.{field} must be True or False, got {getattr(self, field)!r}")
        if isinstance(self.max_queue, bool) or not isinstance(self.max_queue, int):
            raise PardTypeError(f"PolicySpec.max_queue must be an int, got {self.max_queue!r}")
        if not 0 <= self.max_queue <= 2**62:
            raise PardValueError(f"PolicySpec.max_queue must be >= 0 (0 = no bound), got {self.max_queue!r}")
        for field, low, high in (("dagor_threshold_s", 0.0, math.inf), ("dagor_alpha", 0.0, 1.0)):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PardTypeError(f"PolicySpec.{field} must be a real number, got {value!r}")
            if not (math.isfinite(value) and low <= value <= high):
                rng = "in [0, 1]" if field == "dagor_alpha" else f"finite, in [0, {high:g}] (seconds)"
                raise PardValueError(f"PolicySpec.{field} must be {rng}, got {value!r}")
        if isinstance(self.llm_quantile, bool) or not isinstance(self.llm_quantile, (int, float)) \
                or not 0.0 < self.llm_quantile < 1.0:
            raise PardValueError(f"PolicySpec.llm_quantile must be a number in (0, 1), got {self.llm_quantile!r}")
        if self.lam is not None and (isinstance(self.lam, bool) or not isinstance(self.lam, (int, float))
                                     or not 0.0 <= self.lam <= 1.0):
            raise PardValueError(f"PolicySpec.lam must be None or a number in [0, 1], got {self.lam!r}")
        if not isinstance(self.description, str):
            raise PardTypeError(f"PolicySpec.description must be a str, got {self.description!r}")

    def core(self) -> "_core.Policy":
        """The ``pard._core.Policy`` value the C++ stage schedulers take."""
        from . import _core

        return _core.Policy(
            order=self.order,
            drop=self.drop,
            dagor_threshold_s=self.dagor_threshold_s,
            dagor_alpha=self.dagor_alpha,
            tiered=self.tiered,
            reactive=self.reactive,
            shed=self.shed,
            pace=self.pace != "none",
            overload_below=self.overload_below,
            coherent_rank=self.coherent_rank,
            live_queues=self.live_queues,
            virtual_queue=self.virtual_queue,
            max_queue=self.max_queue,
            max_queue_entry_only=self.max_queue_entry_only,
            llm_tokens=self.llm_tokens,
            llm_quantile=float(self.llm_quantile),
            llm_stop=self.llm_stop,
            llm_lbf=self.llm_lbf,
        )

    def for_autoscaling(self) -> PolicySpec:
        """This policy as it runs while an autoscaler sizes the stages: without pacing, because the stages
        below a paced fork are sized on the demand before pacing and provision more workers than without
        it (pacing then buys goodput with capacity); on a fixed pool pacing cannot change the capacity, and
        what it saves, branch work on requests a sibling drops, is goodput. Without ``virtual_queue``: the
        entry sheds what the bottleneck finishes at its current size, so the bottleneck's input, which a
        per-stage autoscaler sizes it on, never exceeds that size and it grows late (bench/RESULTS.md,
        "Slow-last-stage chains"). The name is kept, so reports still name the policy."""
        if self.pace == "none" and not self.virtual_queue:
            return self
        return dataclasses.replace(self, pace="none", virtual_queue=False)

    @property
    def uses_planner_terms(self) -> bool:
        """True when the stage schedulers read any term the planner publishes: the downstream term
        (the PARD drop rule), ``mu``/``eps`` (the adaptive order) or the queueing delay (dagor).
        FCFS with the naive, clipper or nexus rule reads none, so the simulator may skip the planner."""
        return self.order == "adaptive" or self.drop in ("pard", "dagor")


#: PolicySpec's fields declared ``bool``, each checked to be True or False (annotations are strings here).
_BOOL_FIELDS = tuple(f.name for f in dataclasses.fields(PolicySpec) if f.type == "bool")


def _specs() -> dict[str, PolicySpec]:
    specs = [
        PolicySpec("pard", "adaptive", "pard", "busy", tiered=True, reactive=True, pace="forks", correct_durations=True,
                   coherent_branches=True, idle_batch=True, mu_at_capacity=True, mu_at_capacity_entry=False,
                   coherent_paths=True,
                   prior_terms=True, overload_upper=True, overload_below="overloaded", coherent_rank=True,
                   live_queues=True, virtual_queue=True, shed_demand=True, llm_tokens=True, llm_quantile=0.5,
                   llm_lbf=True,
                   llm_live_queue=True,
                   description="pard-paper + tier-aware priority, overload reaction within a batch, "
                               "utilisation-aware downstream estimate corrected online (DESIGN 3.7)"),
        PolicySpec("pard-paper", "adaptive", "pard", "full",
                   description="PARD as the paper writes it: lambda-quantile batch waits, adaptive order"),
        PolicySpec("naive", "fcfs", "none", "none", description="never drops; FCFS"),
        PolicySpec("clipper++", "fcfs", "clipper", "none",
                   description="FCFS; drop past the stage's proportional SLO share or the deadline"),
        PolicySpec("nexus", "fcfs", "nexus", "none",
                   description="FCFS; sliding batch window over the queue against stage budgets"),
        PolicySpec("dagor", "fcfs", "dagor", "none",
                   description="drop when the stage's queueing delay exceeds T; throttle admission"),
        PolicySpec("triton", "fcfs", "triton", "none",
                   description="Triton ensemble: every stage's queue timeout is the SLO from arrival there; "
                               "REJECT; optional max_queue_size"),
        PolicySpec("ray-serve", "fcfs", "ray-serve", "none", max_queue_entry_only=True,
                   description="Ray Serve: one end-to-end timeout, cancelled wherever it is; optional "
                               "max_queued_requests at the entry"),
        PolicySpec("vllm", "fcfs", "vllm", "none",
                   description="vLLM-style: FCFS; an LLM stage rejects an arrival past its queue cap "
                               "(max_seqs x ceil(slo / mean request time)); no other drops"),
        PolicySpec("scorpio", "lbf", "scorpio", "none",
                   description="SCORPIO-style: least deadline first; an LLM stage rejects a request whose first "
                               "token cannot come before its deadline; no other drops"),
        PolicySpec("pard-back", "adaptive", "pard", "none", description="pard-paper without downstream terms"),
        PolicySpec("pard-sf", "adaptive", "pard", "sf", description="pard-paper, downstream = sum of durations"),
        PolicySpec("pard-lower", "adaptive", "pard", "lower", description="pard-paper with w = 0"),
        PolicySpec("pard-upper", "adaptive", "pard", "upper", description="pard-paper with w = sum of durations"),
        PolicySpec("pard-fcfs", "fcfs", "pard", "full", description="pard-paper drop rule, FCFS order"),
        PolicySpec("pard-lbf", "lbf", "pard", "full", description="pard-paper drop rule, always LBF"),
        PolicySpec("pard-hbf", "hbf", "pard", "full", description="pard-paper drop rule, always HBF"),
        PolicySpec("pard-instant", "adaptive", "pard", "full", instant=True,
                   description="pard-paper with eps = 0 (switch order without hysteresis)"),
    ]
    return {s.name: s for s in specs}


#: Every policy by name (read-only).
POLICIES: Mapping[str, PolicySpec] = MappingProxyType(_specs())


def policy_names() -> list[str]:
    """The valid policy names, in a stable order (pard, pard-paper, then baselines, then ablations)."""
    return list(POLICIES)


def get_policy(policy: str | PolicySpec) -> PolicySpec:
    """Look a policy up by name (a :class:`PolicySpec` is returned unchanged).

    Raises:
        ValueError: unknown name; the message lists the valid ones.
        TypeError: neither a str nor a PolicySpec.
    """
    if isinstance(policy, PolicySpec):
        return policy
    if not isinstance(policy, str):
        raise PardTypeError(f"policy must be a name (str) or a PolicySpec, got {type(policy).__name__}: {policy!r}")
    spec = POLICIES.get(policy.strip().lower())
    if spec is None:
        raise PardValueError(f"unknown policy {policy!r}; valid policies: {', '.join(POLICIES)}")
    return spec
