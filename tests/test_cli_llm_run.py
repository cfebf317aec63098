"""`pard profile` and `pard run` on pipelines with an llm stage, live on llama.cpp with the tiny random-weight
llama (extra pard[llm]; skipped without it, required where PARD_REQUIRE_LLAMA_CPP is set).

Every run writes into a temporary pard cache (models, profiles); no assertion reads a clock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

if os.environ.get("PARD_REQUIRE_LLAMA_CPP"):  # CI installs pard[llm]: a missing llama.cpp must fail, not skip
    import gguf  # noqa: F401
    import llama_cpp  # noqa: F401
else:
    pytest.importorskip("gguf", reason="the gguf package is not installed (pip install 'pard[llm]')")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'pard[llm]')")

from pard.config import load  # noqa: E402
from pard.profiling.llm import TINY_CONTEXT  # noqa: E402

from _cli import run_main  # noqa: E402

SMALL = {  # a user's pipeline: a DNN stage above a small llm stage (4 sequences, 4 096 KV tokens)
    "name": "chat", "slo": 5.0,
    "stages": [
        {"name": "embed", "profile": {1: 0.002, 4: 0.004}, "max_batch": 4, "workers": 1, "successors": ["generate"]},
        {"name": "generate", "kind": "llm", "prefill": {"base": 0.01, "per_token": 0.0001},
         "decode": {1: 0.005, 4: 0.008}, "max_seqs": 4, "kv_tokens": 4096, "max_output_tokens": 256,
         "workers": 1, "successors": []},
    ],
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("pard-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PARD_CACHE_DIR", str(root))
        yield root


def _check_llm_stage(st, kv_tokens: int, max_seqs: int) -> None:
    assert st.kind == "llm" and st.kv_tokens == kv_tokens and st.max_seqs == max_seqs
    assert st.prefill["base"] > 0 and st.prefill["per_token"] > 0
    steps = [st.decode[n] for n in sorted(st.decode)]
    assert sorted(st.decode) == [n for n in (1, 2, 4, 8, 16) if n <= max_seqs]
    assert steps[0] > 0 and all(a <= b for a, b in zip(steps, steps[1:]))


def test_profile_measures_a_users_llm_stage_on_the_tiny_llama(cache: Path, tmp_path: Path, capsys) -> None:
    """`pard profile` on a user's pipeline with an llm stage writes a spec that loads, whose llm stage has a
    positive prefill and a positive non-decreasing decode table measured on llama.cpp, and the DNN stage a profile."""
    spec_file = tmp_path / "chat.yaml"
    spec_file.write_text(yaml.safe_dump(SMALL))
    out = tmp_path / "measured.yaml"
    code, stdout, err = run_main(capsys, "profile", "--pipeline", str(spec_file), "--repeats", "1", "--models", "numpy",
                                 "--out", str(out))
    assert code == 0, err
    assert "tiny random-weight llama" in err and "linear fit - measured" in err
    spec = load(out)
    _check_llm_stage(spec.stage("generate"), kv_tokens=4096, max_seqs=4)
    assert "LlamaCppEngine" in spec.stage("generate").description
    assert spec.stage("embed").profile != SMALL["stages"][0]["profile"]  # measured, not copied


@pytest.fixture(scope="module")
def rag_profile(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pard.cli import main

    out = tmp_path_factory.mktemp("rag") / "rag.yaml"
    assert main(["profile", "--pipeline", "rag", "--repeats", "1", "--models", "numpy", "--out", str(out)]) == 0
    return out


def test_profile_rag_writes_the_generate_stage_as_measured(rag_profile: Path) -> None:
    """`pard profile --pipeline rag` replaces generate's published H100 figures with the tiny llama's, its KV
    budget with the engine's context, and keeps every other field of the stage."""
    spec = load(rag_profile)
    st = spec.stage("generate")
    _check_llm_stage(st, kv_tokens=TINY_CONTEXT, max_seqs=16)
    assert st.max_output_tokens == 1024 and st.successors == []
    assert st.prefill != {"base": 0.012, "per_token": 0.000033}


def test_run_rag_live_conserves_requests_and_stops_dropped_ones(rag_profile: Path, tmp_path: Path, capsys) -> None:
    """A short live `pard run --pipeline rag` on llama.cpp: every request ends in exactly one state under each
    policy, no dropped request decodes beyond the step boundary after its drop, and the JSON carries the tokens,
    the engines' steps and the predictor's calibration."""
    code, stdout, err = run_main(capsys, "run", "--pipeline", "rag", "--profile", str(rag_profile), "--duration", "3",
                                 "--policies", "pard,vllm", "--models", "numpy", "--out", str(tmp_path), "--json", "-")
    assert code == 0, err
    assert "token pairs drawn from the bundled Azure LLM" in err
    doc = json.loads(stdout)
    llm = doc["live"]["llm"]
    assert llm["stages"] == ["generate"] and llm["tokens"]["prompts_capped"] == 0
    for name in ("pard", "vllm"):
        r = doc["policies"][name]
        assert r["submitted"] == llm["tokens"]["requests"] > 0
        assert r["submitted"] == r["on_time"] + r["late"] + r["dropped"] + r["rejected"] + r["failed"]
        eng = llm["engine"][name]
        assert eng["steps"] > 0 and eng["tokens"] > 0
        assert eng["after_drop_steps_max"] <= 1
        cal = r["llm_calibration"]["generate"]  # the live predictor's record: one per request that finished there
        assert cal["n"] == r["on_time"] + r["late"] and cal["token_aware"] == (name == "pard")
        assert name in doc["simulated"] and name in llm["calibration_simulated"]
        if r["dropped"] + r["rejected"] + r["failed"] == 0:  # every request decoded its whole answer, once
            assert eng["tokens"] == round(llm["tokens"]["out_mean"] * llm["tokens"]["requests"])


def test_run_reads_a_trace_files_token_columns(rag_profile: Path, tmp_path: Path, capsys) -> None:
    """`pard run --trace FILE` on an llm pipeline gives each request a row of the file's in_tokens / out_tokens /
    max_tokens (drawn by --seed: the trace is rescaled), as `pard simulate` does, not a bundled pair: every row
    here is a 77-token prompt of a 5-token answer capped at 4, and the engine ends each answer at 4 tokens."""
    rows = [f"{0.05 * i:.2f},77,5,4" for i in range(400)]
    trace = tmp_path / "tokens.csv"
    trace.write_text("time,in_tokens,out_tokens,max_tokens\n" + "\n".join(rows) + "\n")
    code, stdout, err = run_main(capsys, "run", "--pipeline", "rag", "--profile", str(rag_profile), "--trace", str(trace),
                                 "--start", "0", "--duration", "2", "--load", "0.3", "--policies", "pard",
                                 "--models", "numpy", "--out", str(tmp_path), "--json", "-")
    assert code == 0, err
    assert "columns in_tokens, out_tokens, max_tokens: pairs drawn from the file's rows" in err
    assert "bundled Azure LLM" not in err
    assert "output mean 4 tokens as served" in err and "outputs end early" in err, err
    doc = json.loads(stdout)
    tokens = doc["live"]["llm"]["tokens"]
    assert tokens["source"] == "file columns in_tokens, out_tokens, max_tokens (drawn from the rows)"
    assert (tokens["in_mean"], tokens["in_max"], tokens["out_mean"]) == (77, 77, 5)
    r = doc["policies"]["pard"]
    assert r["submitted"] == tokens["requests"] > 0
    assert r["submitted"] == r["on_time"] + r["late"] + r["dropped"] + r["rejected"] + r["failed"]
    assert doc["live"]["llm"]["calibration_simulated"]["pard"]["generate"]["n"] > 0
    eng = doc["live"]["llm"]["engine"]["pard"]
    if r["dropped"] + r["rejected"] + r["failed"] == 0:  # every answer ran to the row's hint, not its length
        assert eng["tokens"] == 4 * r["submitted"]
