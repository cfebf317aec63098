"""An LLM stage's queue bounds count tokens of work, not requests (issue 38, item 4; the vllm baseline's
token cap): a burst of long prompts trips them where the same number of short prompts does not.
The rules alone are tested in C++ (cpp/tests/test_rules.cpp); here, through the simulator."""

from __future__ import annotations

import numpy as np

import pard
from pard.config import PipelineSpec

WARM = 60  # short requests that finish before the burst: the length model and the running means learn


def _spec(slo: float) -> PipelineSpec:
    return PipelineSpec(name="one-llm", slo=slo, stages=[
        dict(name="generate", kind="llm", prefill={"base": 0.01, "per_token": 0.0001},
             decode={1: 0.01, 2: 0.01067}, max_seqs=2, kv_tokens=200_000, max_output_tokens=64)])


def _burst(policy: str, prompt: int, n: int, slo: float) -> pard.Report:
    """WARM spaced short requests, then n requests of `prompt` input tokens at once (5 output tokens each)."""
    arrivals = np.concatenate([np.arange(WARM) * 0.25, np.full(n, 20.0)])
    ins = np.concatenate([np.full(WARM, 100), np.full(n, prompt)])
    return pard.simulate(_spec(slo), arrivals, policy, in_tokens=ins, out_tokens=np.full(arrivals.size, 5),
                         jitter_cv=0.0, seed=0)


def test_a_burst_of_long_prompts_is_over_pards_bound_where_short_ones_are_not():
    """Ten prompts of 8 000 tokens (0.81 s of prefill each) each fit a 2 s SLO alone but not queued behind one
    another: pard sheds what cannot finish after the rest (reason `shed`) before any compute; ten prompts of
    100 tokens, the same count, are served."""
    short = _burst("pard", 100, 10, 2.0)
    assert short.stages[0].dropped_by_reason.get("shed", 0) == 0
    assert short.on_time == short.submitted
    long = _burst("pard", 8000, 10, 2.0)
    shed = long.stages[0].dropped_by_reason.get("shed", 0)
    assert shed >= 5
    assert long.on_time + long.late + shed + long.stages[0].dropped_by_reason.get("infeasible", 0) == long.submitted
    assert long.late == 0  # what was kept finished in time


def test_vllm_caps_waiting_tokens_as_well_as_requests():
    """vllm's request cap (max_seqs x ceil(slo / mean request time) = 30 here) takes 30 short prompts at once; the
    same 30 arrivals with prompts 80 times the running mean fill the token cap (the request cap at the mean
    prompt) after one, and the rest are rejected at the LLM stage's admission."""
    short = _burst("vllm", 100, 30, 1.0)
    assert short.rejected == 0
    long = _burst("vllm", 8000, 30, 1.0)
    assert long.stages[0].rejected == long.rejected >= 20
    assert long.on_time + long.late + long.rejected == long.submitted


def test_the_live_runtime_holds_the_same_bound():
    """The live runtime runs the same join (LlmJoin) on a profiled engine: the long burst is shed at the LLM
    stage, the short one served, and every request ends once."""
    import time

    from pard.executors import ProfiledLlmEngine

    spec = PipelineSpec(name="one-llm", slo=1.0, stages=[
        dict(name="generate", kind="llm", prefill={"base": 0.002, "per_token": 0.00005},
             decode={1: 0.004, 2: 0.00433}, max_seqs=2, kv_tokens=200_000, max_output_tokens=16)])
    shed = {}
    for prompt in (100, 8000):
        with pard.Runtime(spec, {"generate": ProfiledLlmEngine(spec.stage("generate"))}, policy="pard") as rt:
            futs = []
            for i in range(WARM):  # spaced: each finishes, and the planner measures the stage
                futs.append(rt.submit(i, in_tokens=100, max_new=5))
                time.sleep(0.05)
            time.sleep(1.5)
            futs += [rt.submit(WARM + i, in_tokens=prompt, max_new=5) for i in range(10)]
            for f in futs:
                try:
                    f.result(timeout=30)
                except pard.Dropped:
                    pass
            rt.close(timeout_s=20)
            counts = rt.counts()
            assert counts["pending"] == 0 and counts["submitted"] == WARM + 10
            shed[prompt] = rt.report().stages[0].dropped_by_reason.get("shed", 0)
    assert shed[100] == 0 and shed[8000] >= 5
