"""`pard simulate` on a pipeline with an llm stage: the built-in ``rag`` gets real token pairs and a capacity
read at their mean lengths."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest
import yaml

import pard
from pard import workloads as wl
from pard.config import PipelineSpec, builtin
from pard.sim_llm import bound_spec

from _cli import run_main


def test_rag_simulates_with_drawn_token_pairs(tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err = run_main(capsys, "simulate", "--pipeline", "rag", "--duration", "30", "--policies", "pard,vllm",
                            "--json", str(out))
    assert code == 0, err
    assert "token pairs drawn from the bundled Azure LLM" in err
    data = json.loads(out.read_text())
    spec = builtin("rag")
    ins, outs = wl.draw_tokens(100_000, seed=0)
    capacity = bound_spec(spec, {"in_tokens": ins, "out_tokens": outs}).capacity().pipeline
    # the llm stage read at the trace's mean lengths, not at its output cap (which gives a third of it)
    assert capacity > 2 * spec.capacity().pipeline
    assert f"capacity {capacity:.0f} req/s" in err
    for name in ("pard", "vllm"):
        r = data["policies"][name]
        assert r["submitted"] == data["settings"]["requests"] > 0
        assert r["submitted"] == r["on_time"] + r["late"] + r["dropped"] + r["rejected"] + r["failed"]
        assert set(r["compute_by_stage"]) == {"embed", "retrieve", "rerank", "generate"}
        assert r["compute_by_stage"]["generate"]["useful_s"] > 0
    cal = data["policies"]["pard"]["llm_calibration"]["generate"]
    assert cal["token_aware"] and cal["n"] == data["policies"]["pard"]["on_time"] + data["policies"]["pard"]["late"]


def test_pard_run_and_profile_name_the_llm_extra_when_llama_cpp_is_missing(capsys, monkeypatch):
    """Without llama-cpp-python, `pard run` and `pard profile` on an llm pipeline stop with a usage error that
    names the llm stage and the install command, before measuring anything."""
    import pard._extras as extras

    real = extras.available
    monkeypatch.setattr(extras, "available", lambda m: False if m == "llama_cpp" else real(m))
    for cmd in ("run", "profile"):
        code, _, err = run_main(capsys, cmd, "--pipeline", "rag")
        assert code == 2
        assert "llm stage 'generate'" in err and 'pip install ".[llm]"' in err
        assert "Traceback" not in err


def test_pard_run_and_profile_refuse_a_dnn_stage_below_an_llm_stage(capsys, tmp_path):
    """`pard run` once failed every request of such a pipeline and exited 0 (its stage models cannot take the
    llm stage's token ids); it and `pard profile` now stop with a usage error naming the stage."""
    spec = {"name": "mid", "slo": 5.0, "stages": [
        {"name": "asr", "profile": {1: 0.01}, "max_batch": 1, "successors": ["llm"]},
        {"name": "llm", "kind": "llm", "prefill": {"base": 0.01, "per_token": 1e-5}, "decode": {1: 0.01},
         "max_seqs": 4, "kv_tokens": 4000, "max_output_tokens": 64, "successors": ["tts"]},
        {"name": "tts", "profile": {1: 0.01}, "max_batch": 1}]}
    path = tmp_path / "mid.yaml"
    path.write_text(yaml.safe_dump(spec))
    for cmd in ("run", "profile"):
        code, _, err = run_main(capsys, cmd, "--pipeline", str(path))
        assert code == 2
        assert "['tts'] run below an llm stage" in err and "pard simulate" in err
        assert "Traceback" not in err


def test_a_request_that_can_never_fit_the_kv_budget_is_named_not_left_waiting():
    with pytest.raises(pard.PardError, match=r"in_tokens\[1\] = 500000 .* kv_tokens = 400000"):
        pard.simulate("rag", [0.0, 0.1, 0.2], "vllm", in_tokens=[100, 500000, 100], out_tokens=[10, 10, 10])
    # a hint shrinks the reservation: the same prompt fits when its answer is capped low enough
    spec = builtin("rag")
    kv = spec.stage("generate").kv_tokens
    r = pard.simulate(spec, [0.0], "pard", in_tokens=[kv - 5], out_tokens=[3], max_tokens=[5])
    assert r.submitted == 1


def test_capacity_reads_the_kv_budget():
    raw = yaml.safe_load((resources.files("pard") / "pipelines" / "rag.yaml").read_text())
    caps = []
    for kv in (20_000, 400_000):
        raw["stages"][3]["kv_tokens"] = kv
        caps.append(PipelineSpec.model_validate(raw).capacity().stages["generate"])
    # 20 000 KV tokens hold 19 hintless sequences of the 1 024-token cap: no more than the 16 max_seqs, so the
    # spec-level capacity is the same; at 8 192 tokens only 8 fit
    assert caps[0] == pytest.approx(caps[1])
    raw["stages"][3]["kv_tokens"] = 8192
    small = PipelineSpec.model_validate(raw)
    assert small.capacity().stages["generate"] < 0.8 * caps[1]


def test_scale_names_a_workload_passed_for_arrivals():
    with pytest.raises(pard.PardError, match="got a Workload: pass its arrivals_s"):
        wl.scale(wl.azure_llm_conv(tokens=True), 5.0)


def test_an_llm_stage_whose_best_batch_is_below_max_seqs_simulates():
    """A decode table that grows faster than the running count (a measured CPU engine's) makes the stage's best
    request batch smaller than max_seqs; the planner's step table still spans every running count."""
    raw = builtin("rag").to_dict()
    raw["stages"][3]["decode"] = {1: 0.0061, 2: 0.0092, 4: 0.0174, 8: 0.0356, 16: 0.125}
    spec = PipelineSpec.from_dict(raw)
    assert spec.stage("generate").batch_limit < spec.stage("generate").max_seqs
    arrivals = np.sort(np.random.default_rng(0).uniform(0.0, 3.0, 30))
    ins, outs = wl.draw_tokens(30, seed=0)
    r = pard.simulate(spec, arrivals, "pard", in_tokens=ins, out_tokens=outs)
    assert r.submitted == 30 == r.on_time + r.late + r.dropped + r.rejected + r.failed
