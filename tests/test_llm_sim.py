"""LLM stages in the simulator (DESIGN §3.8; cpp/include/pard/sim/llm_worker.hpp): the spec, the engine's
token-level batching against hand-worked schedules, the KV budget, conservation and the compute split,
the decode-time drop, and every named policy on a small embed -> generate chain."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pard import PardError
from pard.errors import ConfigError
from pard.config import PipelineSpec, loads
from pard.config.writers import dumps
from pard.outcomes import STATES
from pard.policies import get_policy, policy_names
from pard.sim import simulate

LLM = dict(name="generate", kind="llm", prefill={"base": 0.012, "per_token": 0.00008},
           decode={1: 0.011, 8: 0.012, 32: 0.015, 64: 0.019}, max_seqs=64, kv_tokens=120000, max_output_tokens=1024)
EMBED = dict(name="embed", profile={1: 0.002, 8: 0.005}, max_batch=8, successors=["generate"])


def chain(slo: float = 30.0, **llm: object) -> PipelineSpec:
    return PipelineSpec(name="chain", slo=slo, stages=[EMBED, {**LLM, **llm}])


def alone(slo: float = 30.0, **llm: object) -> PipelineSpec:
    return PipelineSpec(name="alone", slo=slo, stages=[{**LLM, **llm}])


def run(spec: PipelineSpec, arrivals: list[float], ins: list[int], outs: list[int], policy: object = "naive",
        **kw: object):  # type: ignore[no-untyped-def]
    return simulate(spec, np.asarray(arrivals, dtype=float), policy, in_tokens=np.asarray(ins),
                    out_tokens=np.asarray(outs), jitter_cv=kw.pop("jitter_cv", 0.0), **kw)  # type: ignore[arg-type]


def llm_rows(report_batches: dict, stage: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = report_batches["stage"] == stage
    return report_batches["start_s"][m], report_batches["duration_s"][m], report_batches["size"][m]


# ---------------------------------------------------------------- spec

def test_llm_spec_round_trips_through_yaml_json_and_toml() -> None:
    """An llm stage's fields survive every file format, and its request-level profile follows from them."""
    spec = chain()
    for fmt in ("yaml", "json", "toml"):
        assert loads(dumps(spec, format=fmt), format=fmt) == spec
    st = spec.stage("generate")
    assert st.max_batch == 64 and st.batch_profile == LLM["decode"]
    assert st.duration(1) == pytest.approx(0.012 + 1024 * 0.011)  # the cap as the answer length
    assert PipelineSpec(**spec.model_dump()) == spec


@pytest.mark.parametrize("stage, field", [
    ({**LLM, "profile": {1: 1.0}}, "profile"),
    ({**LLM, "decode": {1: 0.02, 8: 0.01}}, "decode"),
    ({**LLM, "prefill": {"base": -1, "per_token": 0.0}}, "prefill.base"),
    ({**LLM, "kv_tokens": 0}, "kv_tokens"),
    ({k: v for k, v in LLM.items() if k != "max_seqs"}, "max_seqs"),
    ({**EMBED, "successors": [], "max_seqs": 4}, "max_seqs"),
    ({**LLM, "kind": "gpt"}, "kind"),
])
def test_bad_llm_spec_names_the_field(stage: dict, field: str) -> None:
    """A bad or misplaced llm field is a ConfigError that names it."""
    with pytest.raises(PardError, match=field.split(".")[0]):
        PipelineSpec(name="p", slo=10.0, stages=[stage])


@pytest.mark.parametrize("change, match", [
    ({"kv_tokens": 1000}, r"kv_tokens must be >= max_output_tokens \+ 1 = 1025 .*got kv_tokens=1000"),
    ({"kv_tokens": 1024}, r"got kv_tokens=1024"),  # the whole cap and no prompt token
    ({"max_seqs": 16}, r"decode has a step time at 32 running sequences, past max_seqs=16"),
])
def test_impossible_llm_spec_is_refused_at_load(change: dict, match: str) -> None:
    """A KV budget that cannot hold one prompt token beside the output cap, or a decode point past max_seqs (a
    batch the stage never runs), is a ConfigError at load naming the field and value; the bound itself loads."""
    with pytest.raises(ConfigError, match=match):
        PipelineSpec(name="p", slo=10.0, stages=[{**LLM, **change}])
    ok = PipelineSpec(name="p", slo=10.0, stages=[{**LLM, "kv_tokens": 1025, "decode": {1: 0.011, 16: 0.013},
                                                   "max_seqs": 16}])
    assert ok.stage("generate").kv_tokens == 1025


def test_llm_pipeline_without_tokens_is_refused() -> None:
    """Simulating an llm stage with no token counts names what is missing; bad counts name index and value."""
    with pytest.raises(PardError, match="in_tokens"):
        simulate(chain(), np.array([0.0, 1.0]), "pard")
    with pytest.raises(PardError, match="out_tokens"):
        simulate(chain(), np.array([0.0, 1.0]), "pard", in_tokens=np.array([1, 2]))
    with pytest.raises(PardError, match=r"out_tokens\[1\] = 0"):
        simulate(chain(), np.array([0.0, 1.0]), "pard", in_tokens=np.array([1, 2]), out_tokens=np.array([3, 0]))
    with pytest.raises(PardError, match="one entry per arrival"):
        simulate(chain(), np.array([0.0, 1.0]), "pard", in_tokens=np.array([1]), out_tokens=np.array([3, 1]))


# ---------------------------------------------------------------- engine

def test_single_sequence_takes_prefill_and_one_step_per_token() -> None:
    """A lone sequence: its first step is decode(1) + prefill(in), then one decode(1) step per further token."""
    r = run(alone(), [1.0], [100], [5])
    prefill = 0.012 + 0.00008 * 100
    assert r.finish_s[0] == pytest.approx(1.0 + prefill + 5 * 0.011, abs=1e-9)
    assert r.on_time == 1


def test_sequences_join_and_leave_at_token_boundaries() -> None:
    """Hand-worked schedule: B arrives during A's first step, joins at its end, and each leaves after its last token."""
    spec = alone(prefill={"base": 0.012, "per_token": 0.0}, decode={1: 0.010, 2: 0.014})
    r = run(spec, [0.0, 0.005], [0, 0], [3, 3])
    # t=0: A joins, step = decode(1) + prefill = 0.022 (A: 1 token); t=0.022: B joins, step = decode(2) + prefill =
    # 0.026 -> 0.048 (A: 2, B: 1); step decode(2) -> 0.062 (A: 3, leaves); step decode(1) -> 0.072 (B: 3, leaves)
    assert r.finish_s[0] == pytest.approx(0.062, abs=1e-9)
    assert r.finish_s[1] == pytest.approx(0.072, abs=1e-9)


def test_kv_budget_bounds_the_running_batch() -> None:
    """Each sequence reserves in + cap tokens; the running batch never holds more than the KV budget allows."""
    from pard import _core
    from pard.wiring import core_stages
    spec = alone(max_output_tokens=200, kv_tokens=1000, max_seqs=16,  # 300 tokens each: at most 3 running
                 decode={1: 0.011, 8: 0.012, 16: 0.013})
    n = 60
    arr = np.linspace(0.0, 1.0, n)
    ins, outs = np.full(n, 100, dtype=np.int32), np.random.default_rng(1).integers(1, 250, n).astype(np.int32)
    sim = _core.Simulator(stages=core_stages(spec), policy=_core.Policy(order="fcfs", drop="none"), arrivals_s=arr,
                          slo_s=np.full(n, 100.0), tier=np.zeros(n, dtype=np.int32), jitter_cv=0.1, in_tokens=ins,
                          out_tokens=outs)
    while sim.run_until(sim.now_s + 10.0):
        pass
    sizes = sim.batches()["size"]
    assert sizes.max() * 300 <= 1000 and sizes.max() == 3
    assert (sim.outcomes()["state"] != 0).all()


def test_conservation_and_compute_split_on_an_overloaded_chain() -> None:
    """Every request ends once; the compute split's useful + wasted is the logged step time of each stage."""
    rng = np.random.default_rng(3)
    n = 600
    arr = np.cumsum(rng.exponential(1 / 8.0, n))
    ins, outs = rng.integers(50, 2000, n), rng.integers(1, 600, n)
    for pol in ("pard", "vllm", "naive"):
        r = run(chain(slo=10.0), arr.tolist(), ins.tolist(), outs.tolist(), pol, jitter_cv=0.1)
        assert r.submitted == n == r.on_time + r.late + r.dropped + r.rejected + r.failed
        split = r.compute_split
        assert split is not None
        total = split.useful_s + split.wasted_s + split.unresolved_s
        assert float(split.unresolved_s.sum()) == 0.0
        assert float(total.sum()) == pytest.approx(float(np.sum(r.compute_s)), rel=1e-9)


def test_decode_time_drop_stops_spending() -> None:
    """Under pard a sequence that can no longer finish by its deadline is stopped: dropped at the LLM stage,
    reason infeasible, and charged nothing after its stop (alone, its compute is its time running)."""
    spec = alone(slo=5.0, prefill={"base": 0.01, "per_token": 0.0}, decode={1: 0.01, 64: 0.02})
    k = 40  # short sequences first, so the stage has lengths to predict from
    arr = [0.1 * i for i in range(k)] + [10.0]
    outs = [3] * k + [1000]  # the last needs 10 s alone: past its 5 s SLO
    r = run(spec, arr, [0] * (k + 1), outs, dataclasses.replace(get_policy("pard"), llm_stop=True))
    last = k
    assert STATES[r.state[last]] == "dropped" and r.drop_stage[last] == 0  # at the LLM stage
    assert r.reasons[r.reason[last]] == "infeasible"
    stop = r.finish_s[last]
    assert 10.0 < stop <= 15.0 + 0.01 + 1e-9  # by its deadline at the latest (one step of 10 ms to judge)
    assert r.compute_s[last] == pytest.approx(stop - 10.0, abs=1e-9)  # ran alone from its arrival to its stop
    assert r.on_time == k


def test_every_named_policy_runs_the_llm_chain() -> None:
    """pard, the paper's method and every baseline run an embed -> generate chain to completion."""
    rng = np.random.default_rng(5)
    n = 300
    arr = np.cumsum(rng.exponential(1 / 6.0, n))
    ins, outs = rng.integers(10, 3000, n), rng.integers(1, 800, n)
    for pol in policy_names():
        r = run(chain(slo=10.0), arr.tolist(), ins.tolist(), outs.tolist(), pol, jitter_cv=0.1)
        assert r.submitted == n, pol
        assert r.llm_calibration is not None and r.llm_calibration["generate"]["n"] >= 0


def test_vllm_and_scorpio_drop_only_at_the_llm_stage() -> None:
    """The LLM baselines' rules act at the LLM stage alone, with rejections, and never drop elsewhere."""
    rng = np.random.default_rng(7)
    n = 800
    arr = np.cumsum(rng.exponential(1 / 12.0, n))
    ins, outs = rng.integers(10, 3000, n), rng.integers(1, 800, n)
    for pol in ("vllm", "scorpio"):
        r = run(chain(slo=10.0), arr.tolist(), ins.tolist(), outs.tolist(), pol, jitter_cv=0.1)
        assert r.dropped == 0 and r.rejected > 0, pol
        assert set(np.asarray(r.drop_stage)[np.asarray(r.drop_stage) >= 0].tolist()) == {1}, pol


def test_a_workload_with_tokens_drives_the_llm_stage() -> None:
    """simulate takes a Workload's token counts (real pairs from the bundled trace) for an llm stage."""
    from pard.workloads import Workload, draw_tokens, poisson
    arr = poisson(4.0, 30.0, seed=2)
    ins, outs = draw_tokens(arr.size, seed=2)
    w = Workload(arrivals_s=arr, in_tokens=ins, out_tokens=outs)
    r = simulate(chain(slo=10.0), w, "pard", jitter_cv=0.1)
    assert r.submitted == arr.size and r.on_time > 0
    with pytest.raises(PardError, match="in_tokens"):
        simulate(chain(slo=10.0), Workload(arrivals_s=arr), "pard")


def test_autoscaling_sizes_an_llm_stage_at_the_traffics_mean_lengths_not_its_output_cap() -> None:
    """20 req/s of 100-token prompts and 64-token answers on one llm stage: at those lengths a worker serves
    64 / (64 * (0.012 + 100 * 0.00008) + 64 * 0.019) = 25.6 req/s, so with headroom 1.2 one worker (two
    while a burst of the Poisson arrivals is counted); read at its 1 024-token cap, 3.2 req/s, eight."""
    from pard.workloads import poisson
    arr = poisson(20.0, 60.0, seed=1)
    r = run(alone(), arr, [100] * arr.size, [64] * arr.size, autoscale=True, cold_start_s=1.0)
    workers = np.asarray(r.workers)
    assert r.on_time == arr.size and 1 <= workers.min() and workers.max() <= 2


def test_llm_stage_in_a_dag_with_autoscaling() -> None:
    """An llm branch beside a DNN branch, joined, with autoscaled workers: every policy conserves requests, and
    pard finishes requests on time (nexus's SLO split reads the llm stage at its output cap, which leaves the
    short branch a few ms: it may finish none)."""
    from pard.workloads import draw_tokens, poisson
    spec = PipelineSpec(name="dag", slo=10.0, stages=[
        {**EMBED, "successors": ["generate", "rerank"]},
        dict(name="rerank", profile={1: 0.01, 8: 0.03}, max_batch=8, successors=["join"]),
        {**LLM, "successors": ["join"]},
        dict(name="join", profile={1: 0.001}, max_batch=1),
    ])
    arr = poisson(8.0, 40.0, seed=3)
    ins, outs = draw_tokens(arr.size, seed=3)
    for pol in ("pard", "pard-paper", "nexus", "vllm", "scorpio", "ray-serve"):
        r = simulate(spec, arr, pol, in_tokens=ins, out_tokens=outs, autoscale=True, cold_start_s=5.0, jitter_cv=0.1)
        assert r.submitted == arr.size == r.on_time + r.late + r.dropped + r.rejected + r.failed, pol
        assert pol != "pard" or r.on_time > arr.size // 2
