"""Tests of the pard command line: parsing, errors (exit 2 naming the option), and end-to-end runs with --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pard
from pard import __version__
from pard.cli import build_parser

from _cli import run_main



def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version and exits 0."""
    code, out, _ = run_main(capsys, "--version")
    assert code == 0 and __version__ in out


def test_defaults() -> None:
    """The simulate defaults are the bundled trace, lv, amplify and the headline policies (pard and the five
    baselines users run today or the paper compares, issue 9)."""
    args = build_parser().parse_args(["simulate"])
    assert (args.pipeline, args.trace, args.scaling, args.load) == ("lv", "azure-conv", "amplify", None)
    assert args.policies == ["pard", "nexus", "clipper++", "triton", "ray-serve", "naive"]
    assert args.autoscale is False and args.jitter == 0.1 and args.seed == 0


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--policies", "pard,fifo"], "fifo"),
        (["--load", "-1"], "--load"),
        (["--load", "abc"], "--load"),
        (["--jitter", "-0.5"], "--jitter"),
        (["--slo", "1e300"], "--slo must be a finite number in (0, 1e+09] seconds, got '1e300'"),  # before the run
        (["--seed", "x"], "--seed"),
        (["--seed", str(2**70)], "--seed must be an integer in 0..2**64-1"),
        (["--scaling", "stretch"], "stretch"),
        (["--trace-format", "parquet"], "parquet"),
        (["--pipeline", "nope"], "nope"),
        (["--trace", "/no/such/file.csv", "--load", "1"], "/no/such/file.csv"),
    ],
)
def test_bad_input_exits_2_naming_option(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    """Bad options exit with code 2 and a message that names the offending value."""
    code, _, err = run_main(capsys, "simulate", *argv)
    assert code == 2
    assert needle in err


def test_unknown_policy_lists_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown policy's message lists the valid names."""
    code, _, err = run_main(capsys, "simulate", "--policies", "pard,fifo")
    assert code == 2 and "clipper++" in err and "pard-upper" in err


def test_simulate_end_to_end_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pard simulate on the bundled trace prints one row per policy and writes the schema's JSON."""
    out_json = tmp_path / "cmp.json"
    out_png = tmp_path / "cmp.png"
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--duration", "30", "--load", "1.2",
                              "--policies", "pard,nexus,naive", "--json", str(out_json), "--plot", str(out_png))
    assert code == 0, err
    for name in ["pard", "nexus", "naive"]:
        assert name in out
    doc = json.loads(out_json.read_text())
    assert doc["pipeline"] == "tm" and doc["load"] == 1.2 and "azure-conv" in doc["trace"]
    assert list(doc["policies"]) == ["pard", "nexus", "naive"]
    keys = {"submitted", "on_time", "late", "dropped", "rejected", "failed", "goodput", "drop_rate",
            "invalid_rate", "drop_share_by_stage", "p99_latency", "goodput_bound", "weighted_goodput", "tiers",
            "wasted_compute_share", "drops_before_compute", "compute_by_stage"}
    for name, p in doc["policies"].items():
        assert set(p) == keys
        assert p["submitted"] == p["on_time"] + p["late"] + p["dropped"] + p["rejected"] + p["failed"]
        assert set(p["drop_share_by_stage"]) == {"vehicle_detect", "vehicle_classify", "plate_ocr"}
    # mean rate = load * capacity (tm: 774 req/s) over 30 s, within Poisson noise and the trace's envelope
    assert doc["policies"]["naive"]["submitted"] == pytest.approx(1.2 * 774.19 * 30, rel=0.1)
    assert doc["policies"]["naive"]["dropped"] == 0
    assert out_png.stat().st_size > 1000
    # where each file went, on stderr (stdout holds the table)
    assert f"wrote {out_json}" in err and f"wrote {out_png}" in err and "wrote" not in out


def test_exact_csv_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--trace FILE --trace-format csv without --load replays exactly those arrivals; the JSON's load is the actual
    one the header states (arrivals over their span over the capacity), not null."""
    times = np.sort(np.random.default_rng(0).uniform(0, 5, 300))
    f = tmp_path / "t.csv"
    f.write_text("\n".join(f"{t:.9f}" for t in times))
    out_json = tmp_path / "r.json"
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--trace-format", "csv",
                            "--policies", "naive", "--jitter", "0", "--json", str(out_json))
    assert code == 0, err
    doc = json.loads(out_json.read_text())
    capacity = pard.config.builtin("tm").capacity().pipeline
    assert doc["load"] == pytest.approx(300 / (times[-1] - times[0]) / capacity, rel=1e-6)
    assert f"load {doc['load']:.3g})" in " ".join(err.split())
    assert doc["policies"]["naive"]["submitted"] == 300
    assert doc["policies"]["naive"]["on_time"] == 300  # 60 req/s on a 774 req/s pipeline
    # every second of compute was useful, split by stage; nothing shed, so no share of drops to give
    naive = doc["policies"]["naive"]
    assert naive["wasted_compute_share"] == 0.0 and naive["drops_before_compute"] is None
    assert set(naive["compute_by_stage"]) == {st.name for st in pard.config.builtin("tm").stages}
    assert all(v["useful_s"] > 0 and v["wasted_s"] == v["unresolved_s"] == 0 for v in naive["compute_by_stage"].values())


def test_generators_and_subprocess(tmp_path: Path) -> None:
    """`python -m pard simulate` runs the bursty generator in a subprocess and exits 0."""
    out_json = tmp_path / "b.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pard", "simulate", "--pipeline", "lv", "--trace", "bursty", "--load", "0.9",
         "--duration", "20", "--policies", "pard,clipper++", "--json", str(out_json)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out_json.read_text())
    assert set(doc["policies"]) == {"pard", "clipper++"}
    # how the runs were made travels with them
    assert doc["settings"] == {"requests": doc["policies"]["pard"]["submitted"], "span_s": 20.0, "seed": 0,
                               "jitter_cv": 0.1, "autoscale": False, "slo_s": None, "duration_s": 20.0}


def test_slo_option_overrides_pipeline_slo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--slo below the pipeline's lone-request latency makes no request finish on time."""
    out_json = tmp_path / "s.json"
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", "poisson", "--load", "0.2",
                            "--duration", "5", "--policies", "naive", "--slo", "0.001", "--json", str(out_json))
    assert code == 0, err
    p = json.loads(out_json.read_text())["policies"]["naive"]
    assert p["on_time"] == 0 and p["late"] == p["submitted"] > 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--pipeline", "HUGE", "--duration", "10"],
        ["--trace", "poisson", "--duration", "1e7"],
        ["--trace", "bursty", "--duration", "1e7"],
    ],
)
def test_oversized_runs_exit_2_before_allocating(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 argv: list[str]) -> None:
    """Runs whose expected arrivals exceed the limit exit 2 with one line suggesting lower --duration/--load."""
    spec = tmp_path / "huge.yaml"
    spec.write_text("name: huge\nslo: 1.0\nstages:\n  - name: a\n    profile: {1: 1.0e-6, 1024: 3.0e-6}\n"
                    "    max_batch: 1024\n")  # 1 µs is the shortest duration a profile may have
    argv = [str(spec) if a == "HUGE" else a for a in argv]
    code, out, err = run_main(capsys, "simulate", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "arrivals expected" in err and "lower --duration or --load" in err


def _replay(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *argv: str) -> tuple[int, str, dict]:
    f = tmp_path / "trace.csv"
    f.write_text(text)
    out_json = tmp_path / "r.json"
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--policies", "naive",
                            "--jitter", "0", "--json", str(out_json), *argv)
    doc = json.loads(out_json.read_text()) if code == 0 else {}
    return code, err, doc


def test_counts_file_without_format_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file of whole numbers only is ambiguous (counts or timestamps): exit 2 listing the --trace-format choices."""
    code, err, _ = _replay(tmp_path, capsys, "5\n7\n3\n9\n")
    assert code == 2 and "--trace-format {azure-llm,azure-functions,counts,csv}" in err
    code, err, doc = _replay(tmp_path, capsys, "5\n7\n3\n9\n", "--trace-format", "counts", "--load", "0.01")
    assert code == 0, err


def test_csv_column_picked_by_name_and_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A header id,arrival uses the 'arrival' column (said in the header line); --column selects another one."""
    text = "id,arrival,other\n100,0.5,1\n200,0.7,2\n300,1.9,3\n"
    code, err, doc = _replay(tmp_path, capsys, text)
    assert code == 0, err
    assert "column 'arrival'" in err and "guessed" in err and "3 requests over 1.4 s" in err
    assert doc["policies"]["naive"]["submitted"] == 3
    code, err, _ = _replay(tmp_path, capsys, "id,x\n1,0.5\n2,0.7\n")
    assert code == 2 and "--column NAME|INDEX" in err
    code, err, doc = _replay(tmp_path, capsys, "id,x\n1,0.5\n2,0.7\n", "--column", "x", "--unit", "ms")
    assert code == 0 and "column 'x', ms" in err


def test_csv_iso_datetimes_and_timestamp_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ISO date-times are detected (with or without header); a lone 'timestamp' header is csv, not Azure LLM."""
    code, err, doc = _replay(tmp_path, capsys, "timestamp\n2024-01-01T00:00:00\n2024-01-01T00:00:00.5\n"
                                               "2024-01-01T00:00:02\n")
    assert code == 0, err
    assert "ISO date-times" in err and "2 s" in err and doc["policies"]["naive"]["submitted"] == 3
    code, err, doc = _replay(tmp_path, capsys, "2024-01-01 00:00:00\n2024-01-01 00:00:01.5\n")
    assert code == 0, err and doc["policies"]["naive"]["submitted"] == 2
    code, err, doc = _replay(tmp_path, capsys, "timestamp\n0.1\n0.4\n1.2\n")
    assert code == 0 and "column 'timestamp', s" in err


def test_outputs_validated_before_simulating(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json in a missing folder and --plot with an unknown suffix exit 2 naming the option, before any run."""
    code, out, err = run_main(capsys, "simulate", "--json", str(tmp_path / "no" / "o.json"))
    assert code == 2 and "--json" in err and "does not exist" in err and out == ""
    code, out, err = run_main(capsys, "simulate", "--plot", str(tmp_path / "o.xyz"))
    assert code == 2 and "--plot" in err and ".png" in err and out == ""


def test_empty_csv_clear_error_without_numpy_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty csv gives pard's one-line error and no numpy UserWarning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, err, _ = _replay(tmp_path, capsys, "", "--trace-format", "csv")
    assert code == 2 and "empty" in err and "UserWarning" not in err and err.count("\n") == 1


def test_cli_warning_is_one_clean_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The unsorted-csv PardWarning is printed as one 'pard simulate: warning:' line, without a source line."""
    code, err, _ = _replay(tmp_path, capsys, "0.5\n0.2\n1.0\n1.5\n")
    assert code == 0, err
    lines = [ln for ln in err.splitlines() if "warning:" in ln or "Warning" in ln]
    assert len(lines) == 1 and lines[0].startswith("pard simulate: warning: ") and "were sorted" in lines[0]
    assert "cli.py" not in err and "warnings.warn" not in err


def test_header_reports_actual_rate_and_load(capsys: pytest.CaptureFixture[str]) -> None:
    """The header line prints the requested load and the actual offered rate and load (arrivals / duration / capacity)."""
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", "poisson", "--load", "0.5",
                            "--duration", "4", "--policies", "naive")
    assert code == 0
    head = " ".join(err.split())
    assert "requested load 0.5 = 387 req/s" in head
    n = int(head.split(" requests over ")[0].split()[-1])
    assert f"actual {n / 4:.0f} req/s = load {n / 4 / 774.19:.3g}" in head


def test_table_not_cut_when_not_a_terminal() -> None:
    """Piped output (not a terminal) keeps the table's rows on one line each (no 80-column wrapping)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pard", "simulate", "--pipeline", "lv", "--trace", "poisson", "--load", "3",
         "--duration", "5", "--policies", "nexus,naive"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("│ nexus") or ln.startswith("│ naive")]
    assert len(rows) == 2
    assert "…" not in proc.stdout
    assert "actual" in proc.stderr.splitlines()[0]


def test_run_and_profile_outputs_checked_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pard run's --out/--plot and pard profile's --out are refused (exit 2, option named) before measuring."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for argv, needle in [(["run", "--out", str(blocker / "sub")], "--out"),
                         (["run", "--out", str(tmp_path / "out"), "--plot", str(tmp_path / "live.xyz")], "--plot"),
                         (["profile", "--out", str(tmp_path / "missing" / "p.yaml")], "does not exist"),
                         (["profile", "--out", str(tmp_path / "p.txt")], "YAML, JSON or TOML")]:
        code, out, err = run_main(capsys, *argv)
        assert code == 2 and needle in err and out == "", argv
    assert not (tmp_path / "missing").exists()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux's /proc")
def test_an_unwritable_json_target_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json in a folder where no file can be created (/proc, even for root) exits 2 naming --json; a new
    target in a writable folder is left absent by the check, and an existing one keeps its content."""
    from pard.cli.parsers import check_output

    for argv in (["run", "--json", "/proc/pard-x.json"], ["simulate", "--json", "/proc/pard-x.json"]):
        code, out, err = run_main(capsys, *argv)
        assert code == 2 and "--json" in err and "/proc/pard-x.json" in err and out == "", argv
    check_output("--json", tmp_path / "new.json")
    assert not (tmp_path / "new.json").exists()
    old = tmp_path / "old.json"
    old.write_text("keep")
    check_output("--json", old)
    assert old.read_text() == "keep"


def test_run_refuses_a_bad_trace_before_the_profile_and_takes_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """pard run: a missing or unreadable --trace exits 2 naming --trace without measuring a profile; --column
    names the time column of a csv whose header pard cannot guess, as in pard simulate."""
    import pard.cli.run as run_cmd
    from pard.cli import build_parser

    def no_profile(*_: Any) -> Any:
        raise AssertionError("the profile was measured before the trace was checked")

    monkeypatch.setattr(run_cmd, "run_profile", no_profile)
    odd = tmp_path / "odd.csv"
    odd.write_text("when,x\n0.1,1\n0.5,2\n1.2,3\n")
    for trace, needle in [(str(tmp_path / "missing.csv"), "neither one of"), (str(odd), "--column")]:
        code, out, err = run_main(capsys, "run", "--trace", trace, "--out", str(tmp_path / "o"))
        assert code == 2 and "--trace" in err and needle in err and out == "", trace
    code, _, err = run_main(capsys, "run", "--trace", "bursty", "--column", "1", "--out", str(tmp_path / "o"))
    assert code == 2 and "--column/--unit apply to a csv trace FILE" in err
    args = build_parser().parse_args(["run", "--trace", str(odd), "--column", "when", "--start", "0", "--duration", "2"])
    run_cmd.check_trace(args)  # readable with the column named: no error


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A KeyboardInterrupt during a command prints 'interrupted' (no traceback) and returns 130."""
    import pard.cli.simulate as simulate_cmd

    def interrupted(_: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate_cmd, "run", interrupted)
    code, out, err = run_main(capsys, "simulate")
    assert code == 130 and err.strip() == "pard simulate: interrupted" and out == ""


def test_send_lag_is_measured_against_the_arrival_times() -> None:
    """send_lag: per-request lateness of the sends (never negative), None when sends and arrivals differ in count."""
    from pard.cli.replay import send_lag

    arrivals = np.arange(100) * 0.01
    send = arrivals.copy()
    send[50:60] = 0.6  # a stall: ten requests sent together, up to 0.1 s late
    lag = send_lag(send, arrivals)
    assert lag is not None and lag["max"] == pytest.approx(0.6 - 0.50) and lag["p50"] == 0.0
    assert send_lag(send[:-1], arrivals) is None
    assert send_lag(arrivals - 0.001, arrivals)["max"] == 0.0


def test_run_refuses_a_profile_of_another_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pard run --pipeline lv --profile <tm's spec> exits 2 naming both pipelines and their stages (it used to
    run tm silently); --pipeline tm with tm's profile passes the check; without --pipeline the profile's
    pipeline is taken and args.pipeline_given is False."""
    from pard import config
    from pard.cli import build_parser
    from pard.cli.measure import check_same_pipeline

    prof = tmp_path / "tm-profile.yaml"
    config.builtin("tm").save(prof)
    code, out, err = run_main(capsys, "run", "--pipeline", "lv", "--profile", str(prof), "--out", str(tmp_path / "o"))
    assert code == 2 and out == ""
    assert "--profile" in err and "'tm'" in err and "--pipeline 'lv'" in err and "vehicle_detect" in err
    args = build_parser().parse_args(["run", "--pipeline", "tm", "--profile", str(prof)])
    assert args.pipeline_given
    check_same_pipeline(config.builtin("tm"), config.load(prof), args)  # same stages: no error
    assert not build_parser().parse_args(["run", "--profile", str(prof)]).pipeline_given


def test_simulate_a_one_request_trace_states_no_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A csv trace of one request spans 0 s: the header says so instead of "nan req/s = load nan"."""
    one = tmp_path / "one.csv"
    one.write_text("t\n0.5\n")
    code, _, err = run_main(capsys, "simulate", "--trace", str(one), "--policies", "naive")
    assert code == 0, err
    assert "1 request over 0 s" in err and "all at one instant: no rate" in err and "nan" not in err


def test_profile_says_it_times_pards_stand_in_models_not_the_users() -> None:
    """A new user took `pard profile --pipeline mine.yaml`'s output for their own executors' profile: the
    command now says what it times, and for a custom spec how to profile one's own executors."""
    from pard import PipelineSpec, StageSpec
    from pard.cli.profile import _stand_in_note
    from pard.config import builtin

    mine = PipelineSpec(name="mine", slo=0.5, stages=[StageSpec(name="det", profile={1: 0.01}, max_batch=4)])
    note = _stand_in_note(mine, "numpy")
    assert "not your executors" in note and "measure_profile" in note
    assert "not your executors" in _stand_in_note(builtin("tm"), "onnx")
    assert "measure_profile" not in _stand_in_note(builtin("tm"), "onnx")


@pytest.mark.parametrize("column", [None, "ts"])
def test_a_csv_saved_with_a_utf8_bom_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              column: str | None) -> None:
    """Excel's "CSV UTF-8" starts the file with a byte-order mark: the header is still ``ts``, guessed or
    named, and the three requests replay (both failed until 2026-12-03, quoting a header with an invisible
    BOM; the Python loader read the file fine)."""
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfts\n0.0\n0.1\n0.2\n")
    args = ["simulate", "--pipeline", "tm", "--trace", str(path), "--policies", "naive", "--json", "-"]
    code, out, err = run_main(capsys, *args, *(["--column", column] if column else []))
    assert code == 0, err
    assert json.loads(out)["policies"]["naive"]["submitted"] == 3


def test_an_epoch_seconds_csv_names_the_file_and_the_start_that_replays_it(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Unix-epoch seconds (1.7e9) replayed exactly are past the simulator's 1e9 s: one line naming --trace, the
    file and the --start that replays it (until 2026-12-03 only "arrivals must be <= 1e+09 s ... arrivals[4]
    = 1704067210.1", naming no file); that --start replays all five, with the file's tiers too."""
    path = tmp_path / "epoch.csv"
    times = [1704067200.25 + 0.1 * i for i in range(5)]
    path.write_text("timestamp,tier\n" + "".join(f"{t:.9f},gold\n" for t in times))
    spec = tmp_path / "t.yaml"
    spec.write_text("name: t\nslo: 0.2\ntiers: {gold: 3.0, free: 1.0}\nstages:\n"
                    "  - {name: a, profile: {1: 0.01, 8: 0.04}, max_batch: 8}\n")
    code, _, err = run_main(capsys, "simulate", "--pipeline", str(spec), "--trace", str(path), "--policies", "naive")
    assert code == 2 and str(path) in err and "--start 1704067200.250000" in err, err
    for extra in ([], ["--tier-column", "tier"]):
        code, out, err = run_main(capsys, "simulate", "--pipeline", str(spec), "--trace", str(path), "--policies",
                                  "naive", "--start", "1704067200.250000", "--json", "-", *extra)
        assert code == 0, err
        assert json.loads(out)["policies"]["naive"]["submitted"] == 5


def test_a_duration_past_the_end_of_a_trace_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled conversation trace spans 3502 s: --duration 5000 replayed 3502 s while the header stated
    5000 s, a rate over 5000 s and load 0.70 (a new user's report). Now one line naming --duration, the span
    and what fits; 200 s from --start 3300 fits."""
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--policies", "naive", "--duration", "5000")
    assert code == 2 and "--duration 5000 from --start 0 runs past the end" in err and "spans 3502 s" in err, err
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--policies", "naive", "--start", "3300",
                            "--duration", "300")
    assert code == 2 and "pass --duration 202 or less" in err, err
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--policies", "naive", "--start", "1e12",
                            "--duration", "5")  # no duration > 0 fits: the fix is --start (a new user's report)
    assert code == 2 and "--start must be under 3502 s" in err and "--duration 0" not in err, err
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--policies", "naive", "--start", "3300",
                              "--duration", "200", "--json", "-")
    assert code == 0, err


def test_a_trace_shorter_than_a_second_states_its_span(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Four requests over 0.3 s rescaled to a load and --duration 5: the refusal states the span as 0.3 s and the duration that
    fits (it said "spans 0 s: --start must be under 0 s")."""
    trace = tmp_path / "short.csv"
    trace.write_text("timestamp\n0.0\n0.1\n0.2\n0.3\n")
    code, _, err = run_main(capsys, "simulate", "--pipeline", "tm", "--policies", "naive", "--trace", str(trace),
                            "--load", "0.5", "--duration", "5")  # rescaled, as pard run replays a trace
    assert code == 2 and "spans 0.3 s" in err and "pass --duration 0.3 or less" in err, err
