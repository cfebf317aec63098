"""pard's order and queue reading at an LLM stage (DESIGN §3.8): its joins pop the lowest budget first
whatever the published order (Policy.llm_lbf, cpp/include/pard/llm/stage_join.hpp), a request that fits only on
another worker waits for it (StageLlm::set_elsewhere), and the planner publishes the stage's queueing delay as 0 so
that the stages above read its queue live only (PolicySpec.llm_live_queue)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pard.config import PipelineSpec
from pard.policies import get_policy
from pard.sim import simulate

LLM = dict(name="generate", kind="llm", prefill={"base": 0.01, "per_token": 0.0}, decode={1: 0.01},
           max_seqs=1, kv_tokens=100_000, max_output_tokens=1024)


def test_policy_pard_takes_both_llm_levers() -> None:
    """pard sets llm_lbf and llm_live_queue and hands llm_lbf to the C++ policy; pard-paper sets neither."""
    pard, paper = get_policy("pard"), get_policy("pard-paper")
    assert pard.llm_lbf and pard.llm_live_queue and pard.core().llm_lbf
    assert not (paper.llm_lbf or paper.llm_live_queue or paper.core().llm_lbf)


def _finish_order(llm_lbf: bool) -> list[int]:
    """Request 0 holds the one slot for 1 s; requests 1 (SLO 30 s) and 2 (SLO 20 s) queue behind it under a
    fixed HBF order. Returns the waiting requests in the order they finished."""
    spec = PipelineSpec(name="alone", slo=30.0, stages=[LLM])
    pol = dataclasses.replace(get_policy("pard"), order="hbf", llm_lbf=llm_lbf)
    r = simulate(spec, np.array([0.0, 0.1, 0.2]), pol, slo=np.array([30.0, 30.0, 20.0]),
                 in_tokens=np.array([10, 10, 10]), out_tokens=np.array([100, 5, 5]), jitter_cv=0.0)
    assert r.on_time == 3
    return sorted([1, 2], key=lambda i: float(r.finish_s[i]))


def test_llm_lbf_joins_the_lowest_budget_first() -> None:
    """With llm_lbf the request with the earlier deadline joins first even while the stage's order is HBF;
    without it the later deadline does."""
    assert _finish_order(True) == [2, 1]
    assert _finish_order(False) == [1, 2]


def test_llm_live_queue_publishes_no_queueing_delay_at_the_llm_stage() -> None:
    """Under an overload that queues at the LLM stage, pard publishes its queueing delay as 0 at every sync
    (the stages above read the queue live); without llm_live_queue the planner publishes the measured mean."""
    spec = PipelineSpec(name="chain", slo=10.0, stages=[
        dict(name="embed", profile={1: 0.002, 8: 0.005}, max_batch=8, successors=["generate"]),
        {**LLM, "max_seqs": 4, "decode": {1: 0.01, 4: 0.012}}])
    rng = np.random.default_rng(1)
    n = 400
    arr = np.cumsum(rng.exponential(1 / 20.0, n))
    ins, outs = rng.integers(10, 200, n), rng.integers(20, 200, n)
    seen: dict[bool, list[float]] = {}
    for live in (True, False):
        pol = dataclasses.replace(get_policy("pard"), llm_live_queue=live)
        q: list[float] = []
        simulate(spec, arr, pol, in_tokens=ins, out_tokens=outs, jitter_cv=0.1,
                 on_sync=lambda t, terms, q=q: q.append(terms[1].queue_delay_s))
        seen[live] = q
    assert seen[True] and max(seen[True]) == 0.0
    assert max(seen[False]) > 0.1


def test_a_request_waits_for_the_worker_it_fits() -> None:
    """pard leaves a queued request that cannot finish on the busy worker forming its joins (16 running), but can on
    the other (one sequence running, in a long prefill step), queued for that one: it finishes on time there, at
    5.85 s; judged by the busy worker's pace alone (the means-priced rule, which does not look elsewhere) it is
    dropped."""
    spec = PipelineSpec(name="two", slo=100.0, stages=[{
        **LLM, "prefill": {"base": 0.01, "per_token": 0.0001}, "decode": {1: 0.01, 16: 0.1}, "max_seqs": 16,
        "workers": 2}])
    warm = [0.05 * i for i in range(40)]                       # 40 short answers: the stage learns 20 tokens
    # 15 long answers fill worker 0; a big prompt starts a long step on worker 1; then the request under test;
    # a last arrival keeps the run's per-second bins past the long answers
    arr = np.array(warm + [4.0] * 15 + [5.0, 5.1, 200.0])
    ins = np.array([0] * 40 + [0] * 15 + [5000, 0, 0])
    outs = np.array([20] * 40 + [1000] * 15 + [1000, 20, 1])
    slo = np.array([100.0] * 56 + [1.5, 100.0])                 # 20 tokens within 1.5 s
    last = 56
    states = {}
    for tokens in (True, False):
        pol = dataclasses.replace(get_policy("pard"), llm_tokens=tokens)
        r = simulate(spec, arr, pol, slo=slo, in_tokens=ins, out_tokens=outs, jitter_cv=0.0)
        states[tokens] = (int(r.state[last]), float(r.finish_s[last]))
    # on time on worker 1: its prefill step ends at 5.0 + 0.51 + decode(1); then a prefill base and 20 steps at 2
    assert states[True][0] == 1 and states[True][1] == pytest.approx(5.0 + 0.52 + 0.01 + 20 * (0.01 + 0.09 / 15))
    assert states[False][0] == 3  # dropped at worker 0's boundary
