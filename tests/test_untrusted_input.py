"""Untrusted configuration and arguments (issue 13, Found 6): each hostile input is a PardError naming
the field, raised quickly and before any large allocation, never a hang, a crash or a silent loss.

Every case here reproduces a report from the issue's trial; the limits quoted are the C++ core's
(pard::Profile::kMaxTable = 2^20 batch sizes, times within the int64-ns range used by the bindings).
"""

from __future__ import annotations

import copy
import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pard
from pard import _core
from pard import workloads as wl


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail the test (instead of hanging the suite) if the block runs past ``seconds``."""
    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def tm() -> dict[str, Any]:
    return copy.deepcopy(pard.config.builtin("tm").to_dict())


# ---------------------------------------------------------------------------------------- YAML


def _bomb() -> str:
    """About 400 bytes of YAML that expand to 10^9 list items (nine levels of nine aliases)."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\nname: tm\nslo: 0.4\nstages: *a8\n"


def test_yaml_alias_bomb_is_refused_fast() -> None:
    """A ~400-byte YAML alias bomb is a ConfigError about aliases, raised well within a 10 s deadline."""
    text = _bomb()
    assert len(text) < 600
    with deadline(10.0), pytest.raises(pard.ConfigError, match="alias"):
        pard.config.loads(text, format="yaml")


def test_yaml_shared_anchor_within_budget_still_loads() -> None:
    """A spec that reuses one profile through an anchor and aliases (a legitimate use) loads."""
    text = """
name: two
slo: 0.5
stages:
  - {name: a, profile: &p {1: 0.01, 4: 0.03}, max_batch: 4, workers: 1, successors: [b]}
  - {name: b, profile: *p, max_batch: 4, workers: 1, successors: []}
"""
    spec = pard.config.loads(text, format="yaml")
    assert spec.stage("b").profile == {1: 0.01, 4: 0.03}


def test_yaml_recursive_alias_is_refused() -> None:
    """A YAML alias to its own enclosing node is a ConfigError, not a RecursionError."""
    with deadline(10.0), pytest.raises(pard.ConfigError):
        pard.config.loads("&a [*a]", format="yaml")


@pytest.mark.parametrize("text,key", [
    ("name: tm\nname: tm2\nslo: 0.4\nstages: []\n", "'name'"),
    ("name: tm\nslo: 0.4\nstages:\n- name: a\n  profile: {1: 0.01, 1: 0.5}\n  max_batch: 1\n", "1"),
])
def test_duplicate_yaml_keys_are_refused(text: str, key: str) -> None:
    """A YAML mapping with a key twice is a ConfigError quoting the key and its line, not last-wins."""
    with pytest.raises(pard.ConfigError, match=f"line [0-9]+: duplicate key {key}"):
        pard.config.loads(text, format="yaml")


def test_duplicate_json_and_toml_keys_are_refused() -> None:
    """A JSON object or a TOML table with a key twice is a ConfigError."""
    doc = json.dumps(tm())
    with pytest.raises(pard.ConfigError, match="duplicate key 'slo'"):
        pard.config.loads(doc[:-1] + ', "slo": 9.0}', format="json")
    with pytest.raises(pard.ConfigError):
        pard.config.loads('name = "tm"\nname = "x"\n', format="toml")


def test_yaml_merge_keys_may_be_overridden() -> None:
    """A YAML merge ('<<') followed by explicit keys is an override by the YAML spec, not a duplicate."""
    text = """
name: two
slo: 0.5
stages:
  - &a {name: a, profile: {1: 0.01}, max_batch: 1, workers: 1, successors: [b]}
  - {<<: *a, name: b, successors: [], workers: 2}
"""
    spec = pard.config.loads(text, format="yaml")
    assert (spec.stage("b").workers, spec.stage("b").successors, spec.stage("b").profile) == (2, [], {1: 0.01})


@pytest.mark.parametrize("fmt,text", [
    ("yaml", "stages: " + "[" * 5000),
    ("json", "[" * 100_000),
    ("json", "{\"a\": " * 50_000),
    ("toml", "x = " + "[" * 5000),
    ("toml", "x = {x = " * 3000),
])
def test_deep_nesting_is_a_config_error(fmt: str, text: str) -> None:
    """Brackets nested thousands deep are a ConfigError within the deadline, not a RecursionError."""
    with deadline(10.0), pytest.raises(pard.ConfigError, match="nest"):
        pard.config.loads(text, format=fmt)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt,text", [("json", "1" * 5000), ("yaml", "slo: " + "1" * 5000), ("toml", "slo = " + "1" * 5000)])
def test_integer_past_pythons_digit_limit_is_a_config_error(fmt: str, text: str) -> None:
    """A 5000-digit integer literal (past Python's int-parsing limit) is a ConfigError, not a bare ValueError."""
    with pytest.raises(pard.ConfigError, match="not valid"):
        pard.config.loads(text, format=fmt)  # type: ignore[arg-type]


@pytest.mark.parametrize("where", ["top", "stage"])
def test_non_string_keys_are_a_config_error(where: str) -> None:
    """A mapping key that is not a string (YAML allows 1: or null:) is a ConfigError naming it."""
    d: dict[Any, Any] = tm()
    (d if where == "top" else d["stages"][0])[7] = "x"
    with pytest.raises(pard.ConfigError, match="7"):
        pard.PipelineSpec.from_dict(d)


# ---------------------------------------------------------------------------------------- bounds


def test_max_batch_past_the_cores_limit_names_the_stage() -> None:
    """max_batch = 10**30 is refused in the spec with the stage's name and the C++ limit 2**20."""
    d = tm()
    d["stages"][1]["max_batch"] = 10**30
    with pytest.raises(pard.ConfigError, match=r"max_batch.*1048576.*stage 'vehicle_classify'"):
        pard.PipelineSpec.from_dict(d)


def test_profile_batch_size_past_the_cores_limit_names_the_stage() -> None:
    """A profile batch size 10**30 is refused in the spec with the stage's name and the C++ limit."""
    d = tm()
    d["stages"][2]["profile"][10**30] = 1.0
    with pytest.raises(pard.ConfigError, match=r"profile.*1048576.*stage 'plate_ocr'"):
        pard.PipelineSpec.from_dict(d)


def test_spec_limits_agree_with_the_core() -> None:
    """The largest max_batch and profile duration the spec accepts are exactly what _core accepts."""
    d = tm()
    big = 2**20
    d["stages"][0].update(profile={1: 0.01, big: 1e9}, max_batch=big)
    spec = pard.PipelineSpec.from_dict(d)
    st = spec.stages[0]
    prof = _core.Profile(sorted(st.profile), [st.profile[b] for b in sorted(st.profile)])
    assert prof.max_batch == big
    with pytest.raises(ValueError):
        _core.Profile([1, big + 1], [0.01, 0.02])
    d["stages"][0]["profile"][big] = 1.01e9
    with pytest.raises(pard.ConfigError, match=r"1e\+?0?9.*stage 'vehicle_detect'"):
        pard.PipelineSpec.from_dict(d)


def test_slo_past_the_cores_time_range_says_the_limit() -> None:
    """slo = 1e10 (finite) is refused saying the real limit (1e9 s), not that it is not finite."""
    d = tm()
    d["slo"] = 1e10
    with pytest.raises(pard.ConfigError, match=r"slo.*1e\+?0?9") as info:
        pard.PipelineSpec.from_dict(d)
    assert "finite number" not in str(info.value) or "<=" in str(info.value)
    d["slo"] = 1e9
    assert pard.PipelineSpec.from_dict(d).slo == 1e9


def test_ring_capacity_too_large_is_a_pard_error() -> None:
    """Runtime(ring_capacity=2**40) is a PardError naming ring_capacity, not std::bad_alloc."""
    spec = pard.config.builtin("tm")
    execs = {s.name: pard.CallableExecutor(lambda b: b) for s in spec.stages}
    for bad in (2**40, 3, 0, -8, 2.0):
        with pytest.raises(pard.PardError, match="ring_capacity"):
            pard.Runtime(spec, execs, ring_capacity=bad, start=False)


def test_submit_with_an_integer_past_floats_range_is_a_pard_error() -> None:
    """submit(slo=10**400) is a PardError naming slo, not an OverflowError."""
    spec = pard.config.builtin("tm")
    rt = pard.Runtime(spec, {s.name: pard.CallableExecutor(lambda b: b) for s in spec.stages})
    try:
        with pytest.raises(pard.PardError, match="slo"):
            rt.submit(0, slo=10**400)
    finally:
        rt.close(timeout_s=30.0)
    assert rt.counts()["submitted"] == 0


@pytest.mark.parametrize("kwargs,field", [
    ({"planner": {"sync_interval_s": 1.3e9}}, "sync_interval_s"),   # a 14.8 GiB MemoryError otherwise
    ({"planner": {"sync_interval_s": 3.5e16}}, "sync_interval_s"),  # the C++ core's bare ValueError otherwise
    ({"cold_start_s": 2.0**40}, "cold_start_s"),        # likewise
    ({"slo": 10**400}, "slo"),                          # was an OverflowError
    ({"arrivals": [3.4e38]}, "arrivals"),               # one finite arrival past the core's time range
])
def test_simulate_arguments_past_the_cores_range_are_pard_errors(kwargs: dict[str, Any], field: str) -> None:
    """simulate() refuses times past the C++ core's range with a PardError naming the argument, before allocating."""
    arrivals = kwargs.pop("arrivals", [0.0, 0.1])
    with deadline(30.0), pytest.raises(pard.PardError, match=field):
        pard.simulate("tm", arrivals, **kwargs)


# ---------------------------------------------------------------------------------------- graphs


def _chain(n: int) -> dict[str, Any]:
    return {"name": "long", "slo": 1000.0, "stages": [
        {"name": f"s{i}", "profile": {1: 0.001}, "max_batch": 1, "workers": 1,
         "successors": [f"s{i + 1}"] if i + 1 < n else []} for i in range(n)]}


def test_thousand_stage_chain_walks_without_recursion() -> None:
    """A 1 000-stage chain validates and its graph walks answer (no RecursionError)."""
    spec = pard.PipelineSpec.from_dict(_chain(1000))
    assert spec.topological_order()[-1] == "s999"
    assert spec.downstream_paths("s0") == [[f"s{i}" for i in range(1, 1000)]]
    assert spec.longest_path_duration() == pytest.approx(1000 * 0.001)


def test_thousand_stage_cycle_is_found_without_recursion() -> None:
    """A 1 000-stage ring is refused as a cycle (the cycle check is iterative too)."""
    d = _chain(1000)
    d["stages"][-1]["successors"] = ["s0"]
    with pytest.raises(pard.ConfigError, match="cycle"):
        pard.PipelineSpec.from_dict(d)


def test_thousand_stage_chain_simulates() -> None:
    """A 1 000-stage chain simulates a few requests end to end; every one is accounted for."""
    r = pard.simulate(pard.PipelineSpec.from_dict(_chain(1000)), np.array([0.0, 0.5]), jitter_cv=0.0)
    assert r.submitted == 2 and r.on_time == 2


def test_path_explosion_is_refused() -> None:
    """A DAG of 40 stacked diamonds (2**20 entry-to-exit paths) is a ConfigError naming the path count."""
    stages = []
    for i in range(40):
        stages += [
            {"name": f"a{i}", "profile": {1: 0.001}, "max_batch": 1, "successors": [f"l{i}", f"r{i}"]},
            {"name": f"l{i}", "profile": {1: 0.001}, "max_batch": 1, "successors": [f"a{i + 1}"]},
            {"name": f"r{i}", "profile": {1: 0.001}, "max_batch": 1, "successors": [f"a{i + 1}"]},
        ]
    stages.append({"name": "a40", "profile": {1: 0.001}, "max_batch": 1, "successors": []})
    with deadline(20.0), pytest.raises(pard.ConfigError, match="paths"):
        pard.PipelineSpec.from_dict({"name": "diamonds", "slo": 10.0, "stages": stages})


# ---------------------------------------------------------------------------------------- traces


def test_headerless_csv_keeps_its_first_row(tmp_path: Path) -> None:
    """csv_timestamps(path, column=0) on a header-less file of numbers returns every row, the first included."""
    p = tmp_path / "t.csv"
    p.write_text("0.5\n1.0\n2.5\n")
    np.testing.assert_allclose(wl.csv_timestamps(p, column=0), [0.0, 0.5, 2.0])


def test_csv_with_a_header_still_skips_it(tmp_path: Path) -> None:
    """A file whose first line is a header (not all numbers) keeps treating it as the header."""
    p = tmp_path / "t.csv"
    p.write_text("time,x\n0.5,a\n1.0,b\n")
    np.testing.assert_allclose(wl.csv_timestamps(p, column=0), [0.0, 0.5])
    np.testing.assert_allclose(wl.csv_timestamps(p, column="time"), [0.0, 0.5])


def test_csv_row_longer_than_the_header_is_a_trace_error(tmp_path: Path) -> None:
    """A row with more fields than the header is a TraceError naming the file, not a pandas index surprise."""
    p = tmp_path / "t.csv"
    p.write_text("t\n0.5,9,9\n1.0\n")
    with pytest.raises(pard.TraceError, match="t.csv"):
        wl.csv_timestamps(p, column="t")


# ---------------------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("scale", ["1000", "1e9"])
def test_pard_run_huge_scale_is_a_clear_error(scale: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`pard run --scale 1000` / `1e9` exits 2 with one line naming scale and the memory limit, before allocating."""
    from pard import cli

    with deadline(60.0):
        assert cli.main(["run", "--scale", scale]) == 2
    err = capsys.readouterr().err
    assert "scale" in err and "MAX_MODEL_BYTES" in err and "Traceback" not in err


@pytest.mark.parametrize("path", [("slo",), ("stages", 0, "max_batch"), ("stages", 0, "workers"),
                                  ("stages", 0, "profile", 1)])
def test_booleans_are_not_numbers(path: tuple[Any, ...]) -> None:
    """YAML's `yes`/`true` in a numeric field is a ConfigError naming the field, not silently 1."""
    d = tm()
    node: Any = d
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = True
    with pytest.raises(pard.ConfigError, match=str(path[-1] if path[-1] != 1 else "profile")):
        pard.PipelineSpec.from_dict(d)
    text = json.dumps({"name": "x", "slo_ms": True, "modules": [
        {"name": "a", "id": 0, "subs": [-1], "profile_ms": {"1": 5.0}}]})
    with pytest.raises(pard.ConfigError, match="slo_ms"):
        pard.config.loads(text, format="json")


@pytest.mark.parametrize("slo_ms", [0, -5, 2**40, 10**400, "x"])
def test_module_json_slo_ms_out_of_range_names_slo_ms(slo_ms: Any) -> None:
    """The module format's slo_ms out of range (or 10**400) is a ConfigError naming slo_ms, not OverflowError."""
    mod = {"name": "x", "slo_ms": 0, "modules": [{"name": "a", "id": 0, "subs": [-1], "profile_ms": {"1": 5.0}}]}
    text = json.dumps(mod).replace('"slo_ms": 0', f'"slo_ms": {json.dumps(slo_ms)}')
    with pytest.raises(pard.ConfigError, match="slo_ms"):
        pard.config.loads(text, format="json")


def test_module_json_huge_duration_is_a_config_error() -> None:
    """A profile_ms duration of 10**400 is a ConfigError naming the module's field, not OverflowError."""
    text = '{"name": "x", "slo_ms": 100, "modules": [{"name": "a", "id": 0, "subs": [-1], "profile_ms": {"1": 1' \
        + "0" * 400 + "}}]}"
    with pytest.raises(pard.ConfigError, match="profile_ms"):
        pard.config.loads(text, format="json")


@pytest.mark.parametrize("make", [
    lambda p: wl.per_second_counts(p, spread="poisson", seed=-1),  # found by bench/fuzz.py (traces, seed 2027)
    lambda p: wl.poisson(10.0, 1.0, seed=-1),
    lambda p: wl.bursty(10.0, 1.0, 1.0, seed=-5),
])
def test_negative_seed_is_a_pard_error_naming_seed(tmp_path: Path, make: Any) -> None:
    """A negative seed for a workload generator is a PardValueError naming seed, not NumPy's bare ValueError."""
    p = tmp_path / "t0.csv"
    p.write_text("326\n689\n131072\n")
    with pytest.raises(pard.PardError, match="seed must be an int >= 0"):
        make(p)


@pytest.mark.parametrize("kw, field", [
    ({"slo": 2147483648}, "slo"),         # past the core's 1e9 s (found by bench/fuzz.py, target simulate)
    ({"slo": 5.7e16}, "slo"),
    ({"slo": 2.93e-38}, "slo"),           # rounds to 0 ns in the core
    ({"planner": {"window_s": 3.6e-97}}, r"planner\.window_s"),  # now - window == now in floating point
])
def test_simulate_out_of_range_arguments_are_pard_errors(kw: dict[str, Any], field: str) -> None:
    """pard.simulate with an SLO outside the core's [1 ns, 1e9 s] or a window below 1 ms is a PardValueError naming the field, not a bare ValueError/IndexError (found by bench/fuzz.py)."""
    with pytest.raises(pard.PardError, match=rf"^{field}\b"):
        pard.simulate("tm", np.array([0.0, 0.1, 0.2]), "pard", **kw)


# ------------------------------------------------------------ the sixteenth round's fresh-user pass


def test_counts_files_past_the_arrival_limit_are_refused_before_allocating(tmp_path: Path) -> None:
    """A counts file with one huge count (10^12, or 10^23, past int64) is a TraceError naming the file and
    the limit, raised before one time per arrival is allocated (it raised numpy's 7 TiB MemoryError)."""
    counts = tmp_path / "counts.txt"
    for huge in ("1000000000000", "100000000000000000000000"):
        counts.write_text(f"5\n{huge}\n")
        with deadline(10.0), pytest.raises(pard.errors.TraceError, match=r"counts\.txt: the counts sum to 1e\+"):
            wl.per_second_counts(counts)
    counts.write_text("5\n20\n")
    with pytest.raises(pard.errors.TraceError, match="max_arrivals=10"):
        wl.per_second_counts(counts, max_arrivals=10)
    assert wl.per_second_counts(counts, max_arrivals=25).size == 25
    azf = tmp_path / "azf.csv"
    azf.write_text("HashOwner,HashApp,HashFunction,Trigger," + ",".join(map(str, range(1, 1441))) + "\n"
                   + "o,a,f,http," + ",".join(["1000000000000"] + ["3"] * 1439) + "\n")
    with deadline(10.0), pytest.raises(pard.errors.TraceError, match=r"azf\.csv: the counts sum to 1e\+12"):
        wl.azure_functions(azf)


def test_quoted_csv_header_is_read_as_pandas_reads_it(tmp_path: Path) -> None:
    """A header of quoted names (pandas' QUOTE_ALL) is found by the CLI's reader: the time column is
    guessed, and --column names it unquoted."""
    p = tmp_path / "q.csv"
    p.write_text('"ts","tier"\n"0.5","gold"\n"1.5","free"\n"2.5","gold"\n')
    base = dict(trace_format=None, scaling="amplify", rate=None, start_s=0.0, duration_s=None, seed=0)
    for column in (None, "ts"):
        arr, label = wl.load_trace(str(p), column=column, **base)
        assert arr.tolist() == [0.5, 1.5, 2.5]
        assert "column 'ts'" in label


@pytest.mark.parametrize("kw, field", [
    (dict(start_s=float("nan")), "start"), (dict(start_s=-1.0), "start"), (dict(duration_s=-5.0), "duration"),
    (dict(duration_s=0.0), "duration"), (dict(duration_s=float("inf")), "duration"),
    (dict(scaling="zz", rate=50.0), "scaling"), (dict(scaling="Amplify", rate=50.0), "scaling"),
])
def test_load_trace_window_and_scaling_are_checked(tmp_path: Path, kw: dict[str, Any], field: str) -> None:
    """A NaN or negative window selected nothing and an unknown scaling acted as 'compress', silently."""
    p = tmp_path / "t.csv"
    p.write_text("ts\n" + "".join(f"{0.01 * i:.2f}\n" for i in range(2000)))
    base = dict(trace_format=None, scaling="amplify", rate=None, start_s=0.0, duration_s=None, seed=0)
    with pytest.raises(pard.errors.TraceError, match=field):
        wl.load_trace(str(p), **{**base, **kw})
    if "scaling" not in kw:
        with pytest.raises(pard.errors.TraceError, match=field):
            wl.load_requests(str(p), **kw)


def _two_stage(tiers: dict[str, float] | None = None) -> pard.PipelineSpec:
    return pard.PipelineSpec(name="p", slo=0.3, tiers=tiers or {}, stages=[
        pard.StageSpec(name="a", profile={1: 0.01, 8: 0.03}, max_batch=8, workers=1, successors=["b"]),
        pard.StageSpec(name="b", profile={1: 0.004}, max_batch=8, workers=1)])


@pytest.mark.parametrize("change, field", [
    (lambda s: s.stages[0].successors.append("zz"), "unknown successor 'zz'"),
    (lambda s: s.stages[0].profile.__setitem__(1, -5.0), r"d\(1\) = -5.0"),
    (lambda s: s.tiers.__setitem__("gold", -3.0), "tier 'gold' weight"),
])
def test_spec_changed_in_place_is_revalidated(change: Any, field: str) -> None:
    """The spec is frozen but its lists and dicts are not: a change made in place after validation is a
    ConfigError naming the field when the spec is used, not a KeyError or the core's ValueError."""
    spec = _two_stage({"gold": 1.0})
    change(spec)
    with pytest.raises(pard.ConfigError, match=f"changed in place.*{field}"):
        pard.simulate(spec, np.linspace(0.0, 1.0, 50))


def test_spec_changed_in_place_validly_runs_as_changed() -> None:
    """A valid in-place change is taken, and re-validated: stage b made 1 s per batch, the SLO-can-never-be-met
    warning comes again, and every request is late."""
    spec = _two_stage()
    assert pard.simulate(spec, np.linspace(0.0, 1.0, 50), policy="naive").on_time == 50
    spec.stages[1].profile[1] = 1.0
    with pytest.warns(pard.PardWarning, match="can never be met"):
        assert pard.simulate(spec, np.linspace(0.0, 1.0, 50), policy="naive").on_time == 0


@pytest.mark.parametrize("rows, ok", [
    (["2024-01-01T00:00:00+02:00", "2024-01-01T00:00:01"], False),
    (["2024-01-01T00:00:00", "2024-01-01T00:00:01Z"], False),
    (["2024-01-01T00:00:00Z", "2024-01-01T00:00:01+00:00"], True),
    (["2024-01-01T00:00:00", "2024-01-01 00:00:01.5"], True),
    (["2024-01-01", "2024-01-02"], True),
])
def test_timestamps_mixing_utc_offsets_and_none_are_refused(tmp_path: Path, rows: list[str], ok: bool) -> None:
    """Naive timestamps beside zoned ones were read as UTC: one +02:00 row moved the replay by two hours."""
    p = tmp_path / "m.csv"
    p.write_text("timestamp\n" + "\n".join(rows) + "\n")
    if ok:
        assert wl.csv_timestamps(str(p), column="timestamp")[-1] in (1.0, 1.5, 86400.0)
    else:
        with pytest.raises(pard.errors.TraceError, match="line 3.*UTC offset, unlike line 2"):
            wl.csv_timestamps(str(p), column="timestamp")


def test_slo_column_of_plain_numbers_that_look_like_ms_warns(tmp_path: Path) -> None:
    """A plain ``slo`` column of 250-300 is read as seconds, with a warning naming the column and the fix;
    a column whose name states the unit (slo_ms, slo_s) does not warn."""
    p = tmp_path / "r.csv"
    p.write_text("ts,slo,slo_ms,slo_s\n0.1,300,300,300\n0.2,250,250,250\n")
    with pytest.warns(pard.PardWarning, match="column 'slo': every SLO is 250 s or more.*slo_ms"):
        w = wl.csv_requests(p, column="ts", slo_column="slo")
    assert w.slo_s.tolist() == [300.0, 250.0]
    assert wl.csv_requests(p, column="ts", slo_column="slo_ms").slo_s.tolist() == [0.3, 0.25]
    assert wl.csv_requests(p, column="ts", slo_column="slo_s").slo_s.tolist() == [300.0, 250.0]
    with pytest.warns(pard.PardWarning, match="column 'slo'"):
        wl.load_requests(str(p), column="ts", slo_column="slo")


def test_profile_with_a_point_per_batch_size_builds_without_a_quadratic_scan() -> None:
    """A profile with a point at each of 2^19 batch sizes (allowed: up to 2^20) builds its d(b) table in one
    pass; a linear segment search per table entry made it quadratic (10^6 points never finished)."""
    n = 1 << 19
    sizes = np.arange(1, n + 1)
    with deadline(60.0):
        core = _core.Profile(sizes.tolist(), (0.01 + sizes * 1e-7).tolist())
    assert core.duration(n) == pytest.approx(0.01 + n * 1e-7, abs=1e-9)


@pytest.mark.parametrize("timeout", [float("nan"), "1", b"1", [1], object()])
def test_a_future_wait_with_a_bad_timeout_is_a_pard_error_naming_it(timeout: Any) -> None:
    """RequestFuture.result/exception(timeout=...) with NaN or a non-number: a PardValueError naming
    ``timeout`` and the value (a new user's report: NaN raised a bare, empty TimeoutError at once), both
    before and after the request ends. A huge timeout (1e300, past int64 nanoseconds) and inf wait as None,
    a negative one as 0 (as concurrent.futures.Future)."""
    spec = pard.PipelineSpec(name="p", slo=5.0, stages=[
        pard.StageSpec(name="a", profile={1: 0.001, 2: 0.0015}, max_batch=2)])
    with pard.Runtime(spec, {"a": lambda xs: xs}, policy="naive") as rt:
        fut = rt.submit(np.arange(4.0))
        for _ in range(2):  # pending (most likely), then done
            for call in (fut.result, fut.exception):
                with pytest.raises(pard.errors.PardValueError, match=r"timeout=.* must be a number of seconds or None"):
                    call(timeout=timeout)
            assert fut.result(timeout=1e300).tolist() == [0.0, 1.0, 2.0, 3.0]
        assert fut.exception(timeout=float("inf")) is None and fut.result(timeout=-1.0) is not None
