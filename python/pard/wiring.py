"""Wiring shared by the simulator and the live runtime: a spec turned into what the C++ stage
schedulers and the planner take (DESIGN §3.5-§3.6, §6).

Both :mod:`pard.sim` and :mod:`pard.runtime` import these; neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import _core
from .planner import PlannerStage

if TYPE_CHECKING:  # pragma: no cover
    from .config import PipelineSpec, StageSpec
    from .policies import PolicySpec

__all__ = ["budget_fractions", "planner_stages", "core_profile", "llm_arg", "core_stages", "stage_scheduler"]


def budget_fractions(spec: PipelineSpec) -> list[float]:
    """Each stage's share of the SLO for clipper++ / nexus: ``d_k(B_k) / longest path duration``, ``B_k``
    the largest batch the stage forms (``StageSpec.batch_limit``).

    The longest entry-to-exit path at those batch sizes is the denominator, so along that path the
    shares sum to 1 (DESIGN §3.6, ``slo_k = slo * d_k / sum d``).
    """
    total = spec.longest_path_duration()
    return [st.duration(st.batch_limit) / total for st in spec.stages]


def planner_stages(spec: PipelineSpec) -> list[PlannerStage]:
    """The planner's view of ``spec``: profiles, the largest batch each stage forms (``batch_limit``),
    downstream paths as stage indices.  An llm stage is its decode step's profile over ``max_seqs`` running
    sequences, as its statistics' batch rows are (one per step)."""
    index = {st.name: k for k, st in enumerate(spec.stages)}
    entries = set(spec.entry_stages())
    return [
        PlannerStage.from_profile(  # an llm step runs up to max_seqs sequences, past its best request batch
            st.name, st.batch_profile, int(st.max_seqs or 1) if st.kind == "llm" else st.batch_limit,
            paths=[[index[n] for n in path] for path in spec.downstream_paths(st.name)],
            entry=st.name in entries, llm=st.kind == "llm",
        )
        for st in spec.stages
    ]


def core_profile(st: StageSpec) -> Any:
    """Stage ``st``'s profile as the C++ core's ``Profile`` (the scheduler's ``d(b)``)."""
    pts = sorted(st.profile.items())
    return _core.Profile([int(b) for b, _ in pts], [float(d) for _, d in pts])


def llm_arg(st: StageSpec) -> dict[str, Any] | None:
    """An llm stage's cost model as the C++ core takes it (``Simulator`` stage dicts, ``StageScheduler(llm=)``):
    prefill base and per-token seconds, the decode step's profile, max_seqs, kv_tokens, max_output_tokens;
    None for a dnn stage."""
    if st.kind != "llm":
        return None
    assert st.prefill is not None and st.decode is not None  # a validated llm stage has them
    pts = sorted(st.decode.items())
    return dict(prefill_base_s=float(st.prefill["base"]), prefill_per_token_s=float(st.prefill["per_token"]),
                decode=_core.Profile([int(b) for b, _ in pts], [float(x) for _, x in pts]),
                max_seqs=int(st.max_seqs or 1), kv_tokens=int(st.kv_tokens or 1),
                max_output_tokens=int(st.max_output_tokens or 1))


def core_stages(spec: PipelineSpec, workers: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """The stage dicts ``pard._core.Simulator`` takes, in ``spec.stages`` order (DESIGN §6)."""
    index = {st.name: k for k, st in enumerate(spec.stages)}
    fractions = budget_fractions(spec)
    out: list[dict[str, Any]] = []
    for k, st in enumerate(spec.stages):
        d: dict[str, Any] = {"name": st.name}
        llm = llm_arg(st)
        if llm is not None:
            d.update(kind="llm", **llm)
        else:
            d.update(profile=core_profile(st), max_batch=int(st.batch_limit))  # the largest batch it forms
        d.update(workers=int(st.workers if workers is None else workers[k]), successors=[index[s] for s in st.successors],
                 budget_fraction=float(fractions[k]))
        out.append(d)
    return out


def stage_scheduler(spec: PipelineSpec, k: int, policy: PolicySpec, ring_capacity: int,
                    fractions: Sequence[float] | None = None) -> Any:
    """Stage ``k``'s C++ ``StageScheduler`` (profile, max batch, policy, SLO share, ring, tier weights,
    entry flag) for pard.ray's stage actors: the arguments ``runtime.setup.build_stages`` passes
    (which still builds its own inline; keep the two in step, or make it call this)."""
    st = spec.stages[k]
    shares = budget_fractions(spec) if fractions is None else fractions
    sched = _core.StageScheduler(stage=k, profile=core_profile(st), max_batch=int(st.batch_limit),
                                 policy=policy.core(), budget_fraction=float(shares[k]),
                                 ring_capacity=int(ring_capacity),
                                 tier_weights=[float(w) for w in spec.tiers.values()],
                                 entry=not spec.predecessors(st.name), llm=llm_arg(st))
    index = {s.name: j for j, s in enumerate(spec.stages)}  # a stage actor has no pipeline to set it
    sched.parallel = bool(_core.parallel_branches([[index[n] for n in s.successors] for s in spec.stages])[k])
    return sched
