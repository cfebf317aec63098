"""`pard simulate` on an llm pipeline with a user's trace file: the file's token columns give the requests'
token counts (exact replay: each row its own; rescaled: pairs drawn from the rows), bad counts are named by
column and line, and the LLM stage's calibration and drops by reason are printed and written as the
Reports hold them."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pard
from pard.cli.llm_table import llm_rows
from pard.config import builtin
from pard.workloads import file_tokens

from _cli import run_main


def _write(path, rows, header="time,in_tokens,out_tokens,max_tokens"):
    path.write_text(header + "\n" + "\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    return path


def _trace(tmp_path, n=120, seed=3):
    g = np.random.default_rng(seed)
    t = np.sort(g.uniform(0, 20, n)).round(4)
    ins = g.integers(50, 3000, n)
    outs = g.integers(1, 600, n)
    hints = np.where(g.random(n) < 0.5, 0, 400)
    return _write(tmp_path / "t.csv", zip(t, ins, outs, hints)), t, ins, outs, hints


def test_exact_replay_takes_each_rows_token_counts(tmp_path, capsys):
    """An exact replay runs every request with its own row's in/out tokens and hint, the same run as
    pard.compare given those arrays."""
    path, t, ins, outs, hints = _trace(tmp_path)
    out = tmp_path / "r.json"
    code, _, err = run_main(capsys, "simulate", "--pipeline", "rag", "--trace", str(path), "--policies", "pard,vllm",
                            "--json", str(out))
    assert code == 0, err
    assert "columns in_tokens, out_tokens, max_tokens" in err and "an exact replay" in err
    assert "bundled Azure LLM" not in err
    data = json.loads(out.read_text())
    assert data["settings"]["tokens"].startswith("file columns in_tokens, out_tokens, max_tokens")
    direct = pard.compare(builtin("rag"), t, ["pard", "vllm"], in_tokens=ins, out_tokens=outs,
                          max_tokens=hints, jitter_cv=0.1, seed=0)
    for name, r in direct.items():
        got = data["policies"][name]
        assert (got["on_time"], got["dropped"], got["rejected"]) == (r.on_time, r.dropped, r.rejected)
        assert got["llm_calibration"]["generate"]["n"] == r.llm_calibration["generate"]["n"]


def test_a_rescaled_trace_draws_pairs_from_the_files_rows(tmp_path, capsys):
    """With --load the requests are new, so each gets a row's (in, out, hint) drawn by --seed, not a
    bundled pair."""
    path, *_ = _trace(tmp_path)
    out = tmp_path / "r.json"
    code, _, err = run_main(capsys, "simulate", "--pipeline", "rag", "--trace", str(path), "--load", "0.5",
                            "--duration", "10", "--policies", "pard", "--seed", "4", "--json", str(out))
    assert code == 0, err
    assert "pairs drawn from the file's rows" in err
    data = json.loads(out.read_text())
    assert "drawn from the rows" in data["settings"]["tokens"]
    tok = file_tokens(path, "csv")
    assert tok is not None
    drawn = tok.draw(5, 4)
    rows = set(zip(tok.in_tokens.tolist(), tok.out_tokens.tolist()))
    assert all(p in rows for p in zip(drawn["in_tokens"].tolist(), drawn["out_tokens"].tolist()))


def test_azure_names_are_read_from_an_azure_llm_file(tmp_path, capsys):
    """An Azure LLM trace file's ContextTokens / GeneratedTokens are its requests' counts."""
    stamps = [f"2023-11-16 18:15:{s:02d}.000" for s in range(40)]
    path = _write(tmp_path / "az.csv", [(s, 200 + i, 1 + i) for i, s in enumerate(stamps)],
                  header="TIMESTAMP,ContextTokens,GeneratedTokens")
    code, _, err = run_main(capsys, "simulate", "--pipeline", "rag", "--trace", str(path), "--load", "0.5",
                            "--duration", "30", "--policies", "pard")
    assert code == 0, err
    assert "columns ContextTokens, GeneratedTokens" in err


@pytest.mark.parametrize("bad, what", [("-3", "'-3' is not a whole number"), ("2.5", "'2.5' is not a whole number"),
                                       ("", "missing value")])
def test_bad_token_counts_name_the_column_and_line(tmp_path, capsys, bad, what):
    """A negative, fractional or missing count is a PardError naming the column and the file line."""
    rows = [(0.1 * i, 100, 10, 0) for i in range(6)]
    rows[3] = (0.3, 100, bad, 0)
    path = _write(tmp_path / "b.csv", rows)
    with pytest.raises(pard.PardError, match=rf"line 5, column 'out_tokens': {what}"):
        file_tokens(path, "csv")
    code, _, err = run_main(capsys, "simulate", "--pipeline", "rag", "--trace", str(path), "--policies", "pard")
    assert code == 2 and "line 5, column 'out_tokens'" in err and "Traceback" not in err


def test_an_input_column_without_an_output_column_is_named(tmp_path):
    """Token counts come in pairs: in_tokens alone says which column is missing."""
    path = _write(tmp_path / "h.csv", [(0.1 * i, 100) for i in range(4)], header="time,in_tokens")
    with pytest.raises(pard.PardError, match=r"'in_tokens' gives token counts.*no out_tokens \(or GeneratedTokens\)"):
        file_tokens(path, "csv")


def test_a_file_without_token_columns_keeps_the_bundled_pairs(tmp_path):
    """A plain arrival-time csv has no token columns: None, and the run draws bundled pairs."""
    path = _write(tmp_path / "p.csv", [(0.1 * i,) for i in range(4)], header="time")
    assert file_tokens(path, "csv") is None


def test_the_llm_table_and_json_carry_the_reports_calibration_and_drops(tmp_path, capsys):
    """`pard simulate --pipeline rag` prints each policy's calibration and the LLM stage's drops by reason,
    and --json carries them, equal to what the Reports of the same runs hold."""
    out = tmp_path / "r.json"
    args = ["simulate", "--pipeline", "rag", "--duration", "40", "--load", "1.5", "--policies", "pard,vllm,scorpio",
            "--json", str(out)]
    code, stdout, err = run_main(capsys, *args)
    assert code == 0, err
    assert "LLM stages: output-length calibration" in stdout
    data = json.loads(out.read_text())
    # the same runs, made directly (the CLI's arrivals and tokens for these options)
    from pard import workloads as wl
    from pard.sim_llm import bound_spec

    spec = builtin("rag")
    ins, outs = wl.draw_tokens(100_000, seed=0)
    cap = bound_spec(spec, {"in_tokens": ins, "out_tokens": outs}).capacity().pipeline
    arr, _ = wl.load_trace("azure-conv", trace_format=None, scaling="amplify", rate=1.5 * cap, start_s=0.0,
                           duration_s=40.0, seed=0, capacity=cap)
    i2, o2 = wl.draw_tokens(arr.size, seed=0)
    reports = pard.compare(spec, arr, ["pard", "vllm", "scorpio"], in_tokens=i2, out_tokens=o2, jitter_cv=0.1, seed=0)
    dropped_somewhere = False
    for name, r in reports.items():
        rows = llm_rows(r)
        assert data["policies"][name]["llm_stages"] == json.loads(json.dumps(rows))
        row = rows["generate"]
        assert row["n"] == r.on_time + r.late  # every finished request passed the llm stage last
        assert f"{row['under_share']:.1%} of {row['n']}" in stdout
        for reason, count in row["dropped_by_reason"].items():
            assert f"dropped {reason} {count}" in stdout
            dropped_somewhere = dropped_somewhere or count > 0
        for reason, count in row["rejected_by_reason"].items():
            assert f"refused {reason} {count}" in stdout
        assert sum(row["rejected_by_reason"].values()) == r.stages[3].rejected
    assert dropped_somewhere  # at 1.5x the llm stage drops under some policy
    assert reports["vllm"].stages[3].rejected > 0  # vllm's queue cap refuses at 1.5x
