"""`pard simulate` on a pipeline with an llm stage: the built-in ``rag`` gets real token pairs and a capacity
read at their mean lengths."""

from __future__ import annotations

import json

from pard import workloads as wl
from pard.config import builtin
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
