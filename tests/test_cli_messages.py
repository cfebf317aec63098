"""What a user reads when the input is wrong: each message names the option or field and the value once, says
what the user can do from where they are (the command line or Python), and bad usage exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

import pard

from _cli import run_main



def _tm_text() -> str:
    return pard.config.dumps(pard.config.builtin("tm"), format="yaml")


def test_cli_spec_file_of_unknown_suffix_says_to_rename_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --pipeline file whose suffix names no format exits 2 telling a CLI user to rename it (the CLI has no format= to pass)."""
    f = tmp_path / "spec.txt"
    f.write_text(_tm_text())
    for command in ("simulate", "profile"):
        code, out, err = run_main(capsys, command, "--pipeline", str(f))
        assert code == 2 and out == ""
        assert f"--pipeline {str(f)!r}: cannot tell the spec file's format from its suffix '.txt'" in err
        assert "rename it to end in one of .yaml, .yml, .json, .toml" in err
        assert "format=" not in err


def test_python_spec_file_of_unknown_suffix_names_the_format_argument(tmp_path: Path) -> None:
    """In Python, the same file names the function whose format= argument reads it, and the values it takes."""
    f = tmp_path / "spec.txt"
    f.write_text(_tm_text())
    with pytest.raises(pard.ConfigError) as info:
        pard.config.load(f)
    assert str(info.value) == (f"{f}: cannot tell the file format from suffix '.txt': expected .yaml, .yml, .json or "
                               f".toml; or pass format='yaml', 'json' or 'toml' to pard.config.load()")
    assert pard.config.load(f, format="yaml") == pard.config.builtin("tm")  # and that advice works
    with pytest.raises(pard.ConfigError, match=r"to save\(\)$"):
        pard.config.builtin("tm").save(tmp_path / "out.txt")


def test_unknown_pipeline_name_is_quoted_once(capsys: pytest.CaptureFixture[str]) -> None:
    """`--pipeline bogus` says the value once (it read "--pipeline 'bogus': bogus: no such pipeline file")."""
    code, _, err = run_main(capsys, "simulate", "--pipeline", "bogus")
    assert code == 2
    assert err.strip() == ("pard simulate: error: --pipeline 'bogus': no such pipeline file, and not a built-in "
                           "pipeline name (built-ins: tm, lv, ga, da, rag)")


def test_invalid_spec_file_names_the_file_once_and_the_field_and_value(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A spec file with a bad field value names the option, the file once, the field and the value."""
    f = tmp_path / "bad.yaml"
    f.write_text(_tm_text().replace("workers: 3", "workers: many", 1))
    code, _, err = run_main(capsys, "simulate", "--pipeline", str(f))
    assert code == 2
    assert err.startswith(f"pard simulate: error: --pipeline {str(f)!r}: invalid pipeline: stages[0].workers: ")
    assert "'many'" in err and err.count(str(f)) == 1


def test_run_profile_file_errors_name_the_file_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pard run --profile FILE` with an invalid file names --profile and the file once, before any replay."""
    f = tmp_path / "prof.yaml"
    f.write_text(_tm_text().replace("slo: 0.4", "slo: soon"))
    code, out, err = run_main(capsys, "run", "--profile", str(f), "--out", str(tmp_path / "o"), "--models", "numpy")
    assert code == 2 and out == ""
    assert f"--profile {str(f)!r}: invalid pipeline: slo: " in err and "'soon'" in err and err.count(str(f)) == 1


@pytest.mark.parametrize(("text", "line", "fields", "first"), [
    ("t\n0.1\n0.2,3,4\n", 3, 3, 1),  # the user's file: a header of one column, a row of three
    ("0.1\n\n0.2\n0.3,4\n", 4, 2, 1),  # no header, a blank line before the long row
    ("t,x\n0.1,1\n0.2\n0.3,1,2\n", 4, 3, 2),  # a short row is not what is refused; the long one is
])
def test_ragged_csv_trace_names_the_file_line_and_field_counts(tmp_path: Path, text: str, line: int, fields: int,
                                                               first: int) -> None:
    """A CSV trace with a row longer than its first line is a TraceError naming the file, that line and both field
    counts, in pard's words (it surfaced pandas' "Error tokenizing data. C error: ...")."""
    f = tmp_path / "ragged.csv"
    f.write_text(text)
    with pytest.raises(pard.TraceError) as info:
        pard.workloads.read_csv_trace(f)
    assert str(info.value) == (f"{f}: line {line} has {fields} fields, but line 1 (the first) has {first}; every "
                               f"line of a CSV trace must have as many fields as the first")


def test_ragged_csv_trace_on_the_command_line_is_one_line_and_exit_2(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`pard simulate --trace ragged.csv` exits 2 with one error line naming the file and the line, no traceback."""
    f = tmp_path / "ragged.csv"
    f.write_text("t\n0.1\n0.2,3,4\n")
    code, out, err = run_main(capsys, "simulate", "--pipeline", "tm", "--trace", str(f), "--policies", "naive")
    assert code == 2 and out == ""
    assert err.splitlines() == [f"pard simulate: error: {f}: line 3 has 3 fields, but line 1 (the first) has 1; "
                                f"every line of a CSV trace must have as many fields as the first"]


def test_csv_trace_with_an_unclosed_quote_names_the_line(tmp_path: Path) -> None:
    """An unclosed quote is named by the line it opens on, not by pandas' tokenizer."""
    f = tmp_path / "quote.csv"
    f.write_text('t\n0.1\n"0.2\n0.3\n')
    with pytest.raises(pard.TraceError) as info:
        pard.workloads.read_csv_trace(f)
    assert str(info.value).startswith(f"{f}: line 3: not valid CSV: ") and "C error" not in str(info.value)


@pytest.mark.parametrize("command", ["simulate", "run", "profile", "serve"])
def test_unknown_option_reports_the_subcommands_usage(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """An option a subcommand does not know exits 2 with that subcommand's usage and names the option (it printed
    the top-level `usage: pard [-h] [--version] COMMAND ...`)."""
    argv = [command, "--bogus-opt"] + (["cfg.yaml"] if command == "serve" else [])
    code, out, err = run_main(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"usage: pard {command} [-h]")
    assert err.splitlines()[-1] == (f"pard {command}: error: unrecognized arguments: --bogus-opt; "
                                    f"see pard {command} --help")


def test_misspelt_option_names_the_closest_one(capsys: pytest.CaptureFixture[str]) -> None:
    """`pard simulate --policy bogus` names both words it did not take and suggests --policies."""
    code, _, err = run_main(capsys, "simulate", "--policy", "bogus")
    assert code == 2
    assert err.splitlines()[-1] == ("pard simulate: error: unrecognized arguments: --policy bogus (did you mean "
                                    "--policies for --policy?); see pard simulate --help")


def test_unknown_top_level_option_keeps_the_top_level_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown option before the subcommand is the top-level parser's: its usage, exit 2."""
    code, _, err = run_main(capsys, "--bogus-opt", "simulate")
    assert code == 2 and err.startswith("usage: pard [-h] [--version] COMMAND ...")
    assert err.splitlines()[-1] == "pard: error: unrecognized arguments: --bogus-opt"


def test_live_table_notes_a_policy_far_off_its_refit_simulation() -> None:
    """The figures of the +490 % run: ray-serve (149.4 live vs 25.3 refit) and triton (133.8 vs 273.7) are named under
    the table with their differences, pard (411.2 vs 420.3, -2 %) is not; a run within 25 % everywhere gets no note."""
    from types import SimpleNamespace as R

    from pard.cli.compare import agreement_table, refit_note

    live = {"pard": 411.2, "ray-serve": 149.4, "triton": 133.8}
    refit = {"pard": 420.3, "ray-serve": 25.3, "triton": 273.7}
    info: dict[str, dict[str, object]] = {n: {"scheduler_share_of_latency": None} for n in live}
    agreement_table({n: R(goodput=g) for n, g in live.items()}, {n: R(goodput=300.0) for n in live},
                    {n: R(goodput=g) for n, g in refit.items()}, info)
    note = refit_note(info)
    assert note is not None
    # (149.4 - 25.3) / 25.3 = +4.905, (133.8 - 273.7) / 273.7 = -0.511
    assert note.startswith("note: live goodput more than 25% off the refit simulation: ray-serve +491%, triton -51%. ")
    assert "pard" not in note.split(". ")[0] and "docs/live.md" in note
    assert refit_note({"pard": {"goodput_difference_refit": -0.02}, "naive": {"goodput_difference_refit": None},
                       "nexus": {"goodput_difference_refit": 0.25}}) is None


def test_served_pipeline_errors_quote_the_pipeline_once(tmp_path: Path) -> None:
    """A served-pipeline file's `pipeline:` that names no pipeline, or an invalid spec file, is quoted once
    (it read "pipeline: 'bogus': bogus: no such pipeline file")."""
    pytest.importorskip("starlette")  # as tests/test_serve_config.py: the pard[serve] extra
    from pard.serve.config import ServeConfigError, load_serve_config

    (tmp_path / "a.yaml").write_text("pipeline: bogus\n")
    with pytest.raises(ServeConfigError) as info:
        load_serve_config(tmp_path / "a.yaml").pipeline_spec()
    assert str(info.value).endswith("pipeline: 'bogus': no such pipeline file, and not a built-in pipeline name "
                                    "(built-ins: tm, lv, ga, da, rag)")
    (tmp_path / "spec.yaml").write_text(_tm_text().replace("slo: 0.4", "slo: soon"))
    (tmp_path / "b.yaml").write_text("pipeline: spec.yaml\n")
    with pytest.raises(ServeConfigError) as info:
        load_serve_config(tmp_path / "b.yaml").pipeline_spec()
    assert "pipeline: 'spec.yaml': invalid pipeline: slo: " in str(info.value) and "'soon'" in str(info.value)
    assert str(info.value).count("spec.yaml") == 1


@pytest.mark.parametrize(("args", "message"), [
    (("bogus",), "Workload arrivals_s must be a 1-D array of arrival times in seconds, got str: 'bogus'"),
    (({"t": 0.1},), "Workload arrivals_s must be a 1-D array of arrival times in seconds, got dict: {'t': 0.1}"),
    (([0.1, 0.2], [0.4, "soon"]), "Workload slo_s must be a 1-D array of SLOs in seconds, got list: [0.4, 'soon']"),
    (([0.1], None, [0.5], ("gold",)), "Workload tier must be a 1-D array of tier codes, got list: [0.5]"),
])
def test_workload_of_the_wrong_type_names_the_field_and_value(args: tuple[object, ...], message: str) -> None:
    """A Workload built from a string, a mapping or non-numbers is a PardTypeError naming the field and the value
    (it was AttributeError "'str' object has no attribute 'shape'")."""
    with pytest.raises(pard.errors.PardTypeError) as info:
        pard.Workload(*args)  # type: ignore[arg-type]
    assert str(info.value) == message


def test_workload_takes_a_list_as_an_array() -> None:
    """Plain lists are taken as arrays (float64 seconds, int32 tier codes)."""
    w = pard.Workload([0.0, 0.5], [0.2, 0.3], [1, 0], ("gold", "bronze"))  # type: ignore[arg-type]
    assert w.arrivals_s.dtype == "float64" and w.arrivals_s.tolist() == [0.0, 0.5]
    assert w.slo_s is not None and w.slo_s.tolist() == [0.2, 0.3]
    assert w.tier is not None and w.tier.dtype == "int32" and w.tier.tolist() == [1, 0] and len(w) == 2


@pytest.mark.parametrize("trace", ["poisson", "bursty"])
def test_start_on_a_generated_trace_is_refused_not_ignored(trace: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A generator has no timeline: `--start 1e12` used to run from 0 without a word (a fresh user's report)."""
    code, out, err = run_main(capsys, "simulate", "--trace", trace, "--start", "1e12", "--duration", "5")
    assert code == 2 and out == ""
    assert "--start 1e+12 applies to a real trace" in err and f"the {trace} generator always starts at 0" in err


def test_pard_run_on_a_generator_does_not_inherit_the_real_traces_start() -> None:
    """`pard run`'s default --start is a stretch of azure-conv; with --trace poisson it is 0, so that the
    refusal above does not hit a user who passed no --start."""
    from pard.cli import build_parser
    from pard.cli.run import LIVE_DEFAULTS, check_trace

    for trace, start in (("poisson", 0.0), ("azure-conv", LIVE_DEFAULTS["start"])):
        args = build_parser().parse_args(["run", "--trace", trace])
        check_trace(args)
        assert args.start == start
