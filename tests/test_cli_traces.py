"""The command line's trace files and outputs as a new user meets them: `--json -` on stdout, times in
milliseconds, binary files, per-request tiers and SLOs, and the header line's wording."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pard
from pard import workloads as wl

from _cli import run_main
from pard.cli.parsers import check_output

TIERED_SPEC = """name: mine
slo: 0.3
tiers: {gold: 3.0, free: 1.0}
stages:
  - {name: det, profile: {1: 0.010, 8: 0.030}, max_batch: 8, workers: 2, successors: [cls]}
  - {name: cls, profile: {1: 0.004, 16: 0.020}, max_batch: 16, workers: 1, successors: []}
"""



def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def one_line(err: str) -> str:
    """stderr joined into one line (rich may break a long line where stderr is a terminal)."""
    return " ".join(err.split())


# ---- --json - -------------------------------------------------------------------------------------------------


def test_simulate_json_dash_writes_the_document_alone_to_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`--json -` puts the JSON document, and nothing else, on stdout; the table goes to stderr; no file "-"."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", "poisson", "--load", "0.5",
                              "--duration", "4", "--policies", "pard,naive", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)  # the whole of stdout
    assert doc["pipeline"] == "tm" and doc["load"] == 0.5 and list(doc["policies"]) == ["pard", "naive"]
    assert "│ naive" in err and "wrote" not in err
    assert not (tmp_path / "-").exists()


def test_simulate_json_dash_in_a_subprocess_pipes_clean_json() -> None:
    """`python -m pard simulate --json -` as a shell pipe sees it: stdout parses as JSON as a whole."""
    proc = subprocess.run(
        [sys.executable, "-m", "pard", "simulate", "--pipeline", "lv", "--trace", "poisson", "--load", "1.5",
         "--duration", "3", "--policies", "nexus,naive", "--json", "-"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc["policies"]) == {"nexus", "naive"}
    assert all(p["submitted"] == p["on_time"] + p["late"] + p["dropped"] + p["rejected"] + p["failed"]
               for p in doc["policies"].values())
    assert "│ nexus" in proc.stderr


def test_json_dot_slash_dash_is_a_file_named_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`--json ./-` writes a file named "-" (the way to get one), and the table stays on stdout."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", "poisson", "--load", "0.5",
                              "--duration", "2", "--policies", "naive", "--json", "./-")
    assert code == 0, err
    assert "│ naive" in out and json.loads((tmp_path / "-").read_text())["pipeline"] == "tm"


def test_check_output_accepts_stdout_without_touching_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The before-the-run output check passes `-` and creates nothing."""
    monkeypatch.chdir(tmp_path)
    check_output("--json", "-")
    assert list(tmp_path.iterdir()) == []


def test_run_json_dash_writes_the_live_document_alone_to_stdout(tmp_path: Path) -> None:
    """`pard run --json -`: stdout is the live JSON alone (tables and lines on stderr), the PNG still goes to --out."""
    prof = tmp_path / "tm.yaml"
    pard.config.builtin("tm").save(prof)
    out_dir = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pard", "run", "--pipeline", "tm", "--profile", str(prof), "--models", "numpy",
         "--scale", "0.05", "--policies", "naive", "--trace", "poisson", "--load", "0.2", "--duration", "1",
         "--out", str(out_dir), "--json", "-"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["mode"] == "live" and list(doc["policies"]) == ["naive"] and "live" in doc
    assert "│ naive" in proc.stderr and f"wrote {out_dir / 'live.png'}" in proc.stderr
    assert (out_dir / "live.png").is_file() and not (out_dir / "live.json").exists()


# ---- times in milliseconds ---------------------------------------------------------------------------------------


def _ms_trace(tmp_path: Path, name: str = "timestamp") -> tuple[Path, np.ndarray]:
    """4000 arrivals over 20 s at 200 req/s, written as whole milliseconds."""
    ms = np.sort(np.random.default_rng(3).integers(0, 20_000, 4000))
    ms[0], ms[-1] = 0, 19_990
    return write(tmp_path / "ms.csv", f"{name}\n" + "\n".join(map(str, ms)) + "\n"), ms


def test_milliseconds_read_as_seconds_warn_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An exact replay whose rate is under 1 % of capacity over a long span warns once, on one stderr line, that the
    times may be ms and names --unit ms; the times are still read as seconds (the run is the same)."""
    f, ms = _ms_trace(tmp_path)
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--policies", "naive",
                              "--json", "-")
    assert code == 0, err
    warning = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(warning) == 1 and warning[0].startswith("pard simulate: warning: ")
    assert "milliseconds" in warning[0] and "--unit ms" in warning[0]
    rate = 4000 / 19_990
    assert f"{rate:.3g} req/s" in warning[0] and f"as ms they would span {19.99:g} s" in warning[0]
    assert "4000 requests over 19990 s" in one_line(err)  # parsing unchanged: read as seconds
    assert json.loads(out)["load"] == pytest.approx(rate / pard.config.builtin("tm").capacity().pipeline)


def test_no_milliseconds_hint_when_ms_would_not_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Times past the simulator's range even as ms (1e300 s) get the range error alone: the hint to pass
    --unit ms would lead nowhere (a fresh user's report)."""
    f = tmp_path / "huge.csv"
    f.write_text("ts\n1e300\n1e301\n")
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--policies", "naive")
    assert code == 2 and "arrivals must be <= 1e+09 s" in err
    assert "are the times in milliseconds" not in err and "--unit ms" not in err


def test_unit_ms_and_unit_s_silence_the_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--unit ms reads the same file as 20 s at 200 req/s, without a warning; --unit s confirms seconds, also quietly."""
    f, ms = _ms_trace(tmp_path)
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--policies", "naive",
                              "--unit", "ms", "--json", "-")
    assert code == 0 and "warning" not in err
    assert f"4000 requests over {19.99:g} s" in one_line(err)
    assert json.loads(out)["policies"]["naive"]["submitted"] == 4000
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--policies", "naive",
                            "--unit", "s")
    assert code == 0 and "warning" not in err


def test_a_plausible_rate_does_not_warn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A seconds trace at a real rate (60 req/s on tm) replays without the ms warning."""
    times = np.sort(np.random.default_rng(0).uniform(0, 5, 300))
    f = write(tmp_path / "s.csv", "t\n" + "\n".join(f"{t:.6f}" for t in times))
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--policies", "naive")
    assert code == 0 and "warning" not in err


@pytest.mark.parametrize("name", ["ts_ms", "time_ms", "timestamp (ms)", "timeMs", "TIME_MS"])
def test_a_column_named_in_ms_is_read_as_ms(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """A time column whose name ends in ms is picked and read in ms without --unit, and the header says why."""
    f, ms = _ms_trace(tmp_path, name)
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--policies", "naive")
    assert code == 0, err
    line = one_line(err)
    assert f"column {name!r}, ms (stated by the column's name)" in line and "warning" not in err
    assert f"4000 requests over {19.99:g} s" in line


def test_unit_in_the_name_only_when_it_stands_apart(tmp_path: Path) -> None:
    """Names that merely end in the letters (items, status, times) state no unit; --unit overrides a named one."""
    f = write(tmp_path / "a.csv", "items,status,times,latency_ms\n1500,2,3,4\n2500,2,3,4\n")
    for col in ("items", "status", "times"):
        arr, where = wl.read_csv_trace(f, column=col)
        assert where == f"column {col!r}, s", where
    arr, where = wl.read_csv_trace(f, column="items")
    np.testing.assert_array_equal(arr, [1500.0, 2500.0])
    g = write(tmp_path / "b.csv", "latency_ms,ts_us\n4,1500\n4,2500\n")  # latency_ms is no time column
    arr, where = wl.read_csv_trace(g)
    np.testing.assert_allclose(arr, [1.5e-3, 2.5e-3])
    assert where == "column 'ts_us', us (stated by the column's name)"
    arr, _ = wl.read_csv_trace(g, unit="s")
    np.testing.assert_array_equal(arr, [1500.0, 2500.0])


def test_load_trace_warns_only_with_a_capacity(tmp_path: Path) -> None:
    """In Python the ms warning is a PardWarning of load_trace(capacity=...) naming unit; without capacity, none."""
    f, _ = _ms_trace(tmp_path)
    kw = dict(trace_format=None, scaling="amplify", rate=None, start_s=0.0, duration_s=None, seed=0)
    with pytest.warns(pard.PardWarning, match=r"milliseconds.*Pass unit ms"):
        wl.load_trace(str(f), capacity=774.0, **kw)  # type: ignore[arg-type]
    arr, _ = wl.load_trace(str(f), **kw)  # type: ignore[arg-type]  # pytest turns a PardWarning into an error
    assert arr[-1] == 19_990.0


# ---- binary files --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "data", "needle"), [
    ("random.bin", np.random.default_rng(0).bytes(4096), "binary (NUL bytes or not UTF-8)"),
    ("x.parquet", b"PAR1" + np.random.default_rng(1).bytes(3000) + b"PAR1", "parquet, which pard does not read"),
    ("x.csv.gz", gzip.compress(b"t\n0.1\n0.2\n" * 50), "gzip-compressed"),
    ("nul.csv", b"t\n0.1\n\x000.2\n", "binary (NUL bytes or not UTF-8)"),
], ids=["random", "parquet", "gzip", "nul"])
def test_a_binary_trace_is_refused_in_one_short_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                     data: bytes, needle: str) -> None:
    """A binary --trace exits 2 with one line naming the file and saying it is not a text CSV, echoing none of it."""
    f = tmp_path / name
    f.write_bytes(data)
    for extra in ([], ["--trace-format", "csv"], ["--trace-format", "counts", "--load", "1"]):
        code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), *extra)
        assert code == 2 and out == "", extra
        assert err.count("\n") == 1 and f"--trace {str(f)!r}: not a text CSV file" in err and needle in err
        assert "\ufffd" not in err and len(err) < 300 + len(str(f))


def test_utf8_text_cut_at_the_sniffed_length_is_still_text(tmp_path: Path) -> None:
    """A two-byte character straddling the end of the sniffed 8 KiB is text, not binary."""
    head = "t,note\n" + "0.5,x\n" * 1363 + "0.5,xx"  # 7 + 6 * 1363 + 6 = 8191 bytes
    f = tmp_path / "utf8.csv"
    f.write_text(head + "é\n0.7,y\n", encoding="utf-8")
    assert f.read_bytes()[8191:8193] == "é".encode()  # its first byte is the last one sniffed
    arr, _ = wl.read_csv_trace(f, column="t")
    assert arr.size == 1365


def test_a_long_header_is_quoted_to_80_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A header pard cannot pick a column from is quoted to 80 characters and its length, not whole."""
    names = [f"column_number_{i}" for i in range(60)]
    f = write(tmp_path / "wide.csv", ",".join(names) + "\n" + ",".join("1" for _ in names) + "\n")
    code, _, err = run_main(capsys, "simulate", "--trace", str(f))
    header = ",".join(names)
    assert code == 2 and f"(header {header[:80]}... ({len(header)} characters))" in err and header[:81] not in err


# ---- tiers and per-request SLOs ------------------------------------------------------------------------------------


def _tiered(tmp_path: Path, slo: str = "slo", gold_slo: float = 0.3, free_slo: float = 0.5) -> tuple[Path, Path, np.ndarray]:
    """The tiered spec, and 6000 requests over 10 s (600 req/s, above its 533 req/s) with tier and SLO columns."""
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(0, 10, 6000))
    tiers = rng.choice(["gold", "free"], 6000, p=[0.3, 0.7])
    slos = np.where(tiers == "gold", gold_slo, free_slo)
    rows = "\n".join(f"{a:.6f},{b},{c:g}" for a, b, c in zip(t, tiers, slos))
    return write(tmp_path / "spec.yaml", TIERED_SPEC), write(tmp_path / "req.csv", f"time,tier,{slo}\n{rows}\n"), tiers


def test_tier_column_assigns_each_request_its_tier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--tier-column: each tier's submitted count is the file's, and weighted goodput is the weights over the per-tier
    on-time counts (not 3x goodput, as with every request in gold); the human output has the per-tier table."""
    spec, trace, tiers = _tiered(tmp_path)
    code, out, err = run_main(capsys, "simulate", "--pipeline", str(spec), "--trace", str(trace), "--policies",
                              "pard,naive", "--tier-column", "tier", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    for name, p in doc["policies"].items():
        t = p["tiers"]
        assert (t["gold"]["submitted"], t["free"]["submitted"]) == ((tiers == "gold").sum(), (tiers == "free").sum())
        on = t["gold"]["on_time"] + t["free"]["on_time"]
        assert on == p["on_time"] > 0
        assert p["weighted_goodput"] == pytest.approx(p["goodput"] * (3 * t["gold"]["on_time"] + t["free"]["on_time"]) / on)
        assert p["weighted_goodput"] < 3 * p["goodput"] * 0.99
        row = [ln for ln in err.splitlines() if ln.startswith(f"│ {name} ") and "/" in ln]
        assert len(row) == 1, err
        assert f"{t['gold']['on_time']} / {t['gold']['dropped']}" in row[0]
        assert f"{t['free']['on_time']} / {t['free']['dropped']}" in row[0]
        assert f"{p['weighted_goodput']:.1f}" in row[0]
    assert "per tier" in err
    ignored = [ln for ln in err.splitlines() if "ignored" in ln]  # only the column no option read is noted
    assert ignored == ["note: the trace's column 'slo' was ignored; pass --slo-column slo to use it (an exact "
                       "replay: no --load)"]


def test_without_tier_column_the_cli_says_what_it_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A csv with tier and slo columns but no options: one note naming both columns and the options that read them,
    one note that every request is in the first tier; every request is then gold."""
    spec, trace, _ = _tiered(tmp_path)
    code, out, err = run_main(capsys, "simulate", "--pipeline", str(spec), "--trace", str(trace), "--policies",
                              "naive", "--json", "-")
    assert code == 0, err
    ignored = [ln for ln in err.splitlines() if "ignored" in ln]
    assert ignored == ["note: the trace's columns 'tier' and 'slo' were ignored; pass --tier-column tier and "
                       "--slo-column slo to use them (an exact replay: no --load)"]
    assert any(ln.startswith("note: pipeline 'mine' declares tiers gold, free") and "'gold'" in ln
               for ln in err.splitlines())
    assert json.loads(out)["policies"]["naive"]["tiers"]["gold"]["submitted"] == 6000


def test_unknown_tier_value_names_it_and_the_specs_tiers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tier the spec lacks exits 2 naming the value and the spec's tiers (or saying it declares none)."""
    spec, _, _ = _tiered(tmp_path)
    trace = write(tmp_path / "bad.csv", "time,tier\n0.1,gold\n0.2,silver\n0.3,free\n")
    code, out, err = run_main(capsys, "simulate", "--pipeline", str(spec), "--trace", str(trace), "--tier-column", "tier")
    assert code == 2 and out == ""
    assert err.strip() == ("pard simulate: error: --tier-column 'tier': the trace's tier(s) 'silver' are not tiers "
                           "of pipeline 'mine' (its tiers: gold, free)")
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(trace), "--tier-column", "tier")
    assert code == 2 and "pipeline 'tm' (it declares none" in err
    code, _, err = run_main(capsys, "simulate", "--pipeline", str(spec), "--trace", str(trace), "--tier-column", "level")
    assert code == 2 and "--tier-column 'level'" in err and "its header is time,tier" in err


@pytest.mark.parametrize(("column", "gold", "free"), [("slo", 0.001, 10.0), ("slo_ms", 1.0, 10_000.0)])
def test_slo_column_gives_each_request_its_slo(tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str,
                                               gold: float, free: float) -> None:
    """--slo-column: gold's 1 ms SLO is never met and free's 10 s always is (in s, or in ms for a column named slo_ms)."""
    spec, trace, tiers = _tiered(tmp_path, column, gold, free)
    code, out, err = run_main(capsys, "simulate", "--pipeline", str(spec), "--trace", str(trace), "--policies",
                              "naive", "--tier-column", "tier", "--slo-column", column, "--jitter", "0", "--json", "-")
    assert code == 0, err
    t = json.loads(out)["policies"]["naive"]["tiers"]
    assert t["gold"]["on_time"] == 0 and t["gold"]["late"] == (tiers == "gold").sum()
    assert t["free"]["on_time"] == (tiers == "free").sum()
    assert "SLO per request 0.001-10 s" in one_line(err)


@pytest.mark.parametrize(("argv", "needle"), [
    (["--load", "1"], "leave out --load"),
    (["--slo", "0.5", "--slo-column", "slo"], "--slo and --slo-column both set the SLO: give one"),
])
def test_tier_and_slo_columns_need_an_exact_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   argv: list[str], needle: str) -> None:
    """The request columns describe the file's own requests: with --load (new requests) or --slo they are refused."""
    spec, trace, _ = _tiered(tmp_path)
    code, out, err = run_main(capsys, "simulate", "--pipeline", str(spec), "--trace", str(trace), "--tier-column",
                              "tier", *argv)
    assert code == 2 and out == "" and needle in err
    code, _, err = run_main(capsys, "simulate", "--trace", "poisson", "--tier-column", "tier")
    assert code == 2 and "apply to a csv trace FILE" in err


def test_load_requests_window_keeps_tiers_and_slos_aligned(tmp_path: Path) -> None:
    """load_requests cuts [start, start + duration) of the file's times, sorting first, with each row's tier and SLO."""
    rows = [(5.0, "b", 0.5), (1.0, "a", 0.1), (3.0, "b", 0.3), (2.0, "a", 0.2), (4.0, "a", 0.4)]
    f = write(tmp_path / "r.csv", "t,tier,slo\n" + "".join(f"{t},{k},{s}\n" for t, k, s in rows))
    with pytest.warns(pard.PardWarning, match="sorted"):
        w, label = wl.load_requests(str(f), start_s=2.0, duration_s=2.5, tier_column="tier", slo_column="slo")
    np.testing.assert_array_equal(w.arrivals_s, [0.0, 1.0, 2.0])  # 2, 3, 4 s from 2 s
    np.testing.assert_array_equal(w.slo_s, [0.2, 0.3, 0.4])  # type: ignore[arg-type]
    assert [w.tier_names[c] for c in w.tier] == ["a", "b", "a"]  # type: ignore[union-attr]
    assert "tiers from column 'tier'" in label and label.endswith("(exact window)")


def test_pard_run_notes_the_columns_it_does_not_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pard run's trace check says, in one line, that a csv's tier column is unused and which command reads it."""
    from pard.cli import build_parser
    from pard.cli.parsers import console
    from pard.cli.run import check_trace

    _, trace, _ = _tiered(tmp_path)
    args = build_parser().parse_args(["run", "--trace", str(trace), "--start", "0", "--duration", "5"])
    check_trace(args, console(stderr=True))
    err = capsys.readouterr().err
    assert err.splitlines() == ["note: the trace's columns 'tier' and 'slo' were ignored; pard run rescales the trace "
                                "and serves every request alike; pard simulate replays them exactly with "
                                "--tier-column tier and --slo-column slo"]


@pytest.mark.parametrize(("column", "value"), [("slo", "2e9"), ("slo_ms", "1e-7")])
def test_slo_outside_the_cores_range_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str,
                                                    value: str) -> None:
    """An SLO past 1e9 s, or under 1 ns once its column's unit is applied, exits 2 naming file, line and column
    (it reached the simulator before, which named only the request's index)."""
    trace = write(tmp_path / "r.csv", f"t,{column}\n0,0.1\n1,{value}\n2,0.2\n")
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(trace), "--slo-column", column)
    assert code == 2 and out == ""
    assert f"r.csv, line 3, column '{column}': SLO '{value}' is not a number of seconds in [1e-09, 1e+09]" in one_line(err)


def test_an_exact_replay_too_long_to_simulate_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A whole-file exact replay over the size limit names what was asked (no --load, no --duration were given)
    and how to cut it, instead of a --load and --duration the user never passed."""
    trace = write(tmp_path / "far.csv", "t\n0\n1\n999999999\n")
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(trace), "--unit", "s")
    assert code == 2 and out == ""
    line = one_line(err)
    assert "the exact replay of the whole trace is too large to simulate" in line
    assert "(--start, --duration) or rescale it with --load" in line and "--load replay" not in line
