"""Tests for pard.config: validation, profiles, graph helpers, capacity, files and built-ins."""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pard
from pard import config
from pard.config import PipelineSpec, StageSpec
from pard.errors import ConfigError


def stage(name: str, successors: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": name,
        "profile": {1: 0.01, 4: 0.02, 16: 0.05},
        "max_batch": 16,
        "workers": 1,
        "successors": successors or [],
    }
    base.update(kw)
    return base


def chain(**kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "p",
        "slo": 0.3,
        "stages": [stage("a", ["b"]), stage("b", ["c"]), stage("c")],
    }
    data.update(kw)
    return data


# ---- validation: the bad-input table ------------------------------------------------------

BAD_SPECS = [
    # (description, mutation of a valid chain, text the message must contain)
    ("unknown successor", lambda d: d["stages"][0].update(successors=["zz"]), "unknown successor 'zz'"),
    ("cycle", lambda d: d["stages"][2].update(successors=["b"]), "cycle: b -> c -> b"),
    ("no entry stage", lambda d: d["stages"][2].update(successors=["a"]), "no entry stage"),
    ("duplicate names", lambda d: d["stages"][1].update(name="a"), "duplicate stage name 'a'"),
    ("self loop", lambda d: d["stages"][1].update(successors=["b"]), "lists itself"),
    ("slo zero", lambda d: d.update(slo=0.0), "slo must be"),
    ("slo negative", lambda d: d.update(slo=-1.0), "-1.0"),
    ("slo nan", lambda d: d.update(slo=float("nan")), "nan"),
    ("max_batch < 1", lambda d: d["stages"][1].update(max_batch=0), "stages[1].max_batch"),
    ("profile batch < 1", lambda d: d["stages"][0].update(profile={0: 0.01, 2: 0.02}), "batch size must be >= 1, got 0"),
    ("workers < 1", lambda d: d["stages"][2].update(workers=0), "stages[2].workers: workers must be >= 1, got 0"),
    ("profile nan", lambda d: d["stages"][0].update(profile={1: float("nan")}), "d(1) = nan is not finite"),
    ("profile inf", lambda d: d["stages"][0].update(profile={1: 0.1, 2: float("inf")}), "d(2) = inf is not finite"),
    ("profile decreasing", lambda d: d["stages"][0].update(profile={1: 0.02, 2: 0.01}), "d(2) = 0.01 s < d(1) = 0.02 s"),
    ("profile zero", lambda d: d["stages"][0].update(profile={1: 0.0}), "must be > 0"),
    ("profile empty", lambda d: d["stages"][0].update(profile={}), "at least one"),
    ("no stages", lambda d: d.update(stages=[]), "at least one stage"),
    ("bad tier weight", lambda d: d.update(tiers={"gold": -2.0}), "tier 'gold' weight"),
    ("bad stage name", lambda d: d["stages"][0].update(name=""), "stage name ''"),
    ("non-numeric workers", lambda d: d["stages"][0].update(workers="many"), "stages[0].workers"),
    ("unknown field", lambda d: d["stages"][0].update(gpus=2), "gpus"),
]


@pytest.mark.parametrize("desc,mutate,needle", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_bad_spec_raises_config_error_naming_the_problem(desc: str, mutate: Any, needle: str) -> None:
    """Each invalid spec raises ConfigError (a ValueError) whose message names the field/value."""
    data = chain()
    mutate(data)
    with pytest.raises(ConfigError) as info:
        PipelineSpec.from_dict(data, source="spec.yaml")
    assert needle in str(info.value)
    assert str(info.value).startswith("spec.yaml: ")
    assert isinstance(info.value, ValueError)


def test_direct_construction_raises_config_error() -> None:
    """Building StageSpec directly with a bad field raises ConfigError, not pydantic's error."""
    with pytest.raises(ConfigError, match=r"workers must be >= 1, got -3"):
        StageSpec(name="x", profile={1: 0.1}, max_batch=1, workers=-3)


def test_valid_chain_and_dag_are_accepted() -> None:
    """A chain and a diamond DAG validate; profile keys given as strings become ints."""
    spec = PipelineSpec.from_dict(chain())
    assert spec.stage_names == ["a", "b", "c"]
    diamond = PipelineSpec(
        name="d",
        slo=1.0,
        stages=[
            stage("src", ["l", "r"]),
            stage("l", ["join"]),
            stage("r", ["join"]),
            {**stage("join"), "profile": {"1": 0.01, "2": 0.015}},
        ],
    )
    assert diamond.stage("join").profile == {1: 0.01, 2: 0.015}


# ---- profiles -----------------------------------------------------------------------------


def test_duration_is_piecewise_linear_with_documented_ends() -> None:
    """d(b) interpolates between points, is flat below the first and extends the last slope
    (a single point is constant), as the C++ core's Profile does."""
    s = StageSpec(name="s", profile={2: 0.010, 4: 0.014, 8: 0.030}, max_batch=8)
    assert s.duration(2) == pytest.approx(0.010)
    assert s.duration(3) == pytest.approx(0.012)
    assert s.duration(6) == pytest.approx(0.022)
    assert s.duration(1) == pytest.approx(0.010)
    assert s.duration(10) == pytest.approx(0.030 + 2 * 0.004)
    single = StageSpec(name="s", profile={4: 0.02}, max_batch=8)
    assert single.duration(8) == pytest.approx(0.02)
    assert single.duration(2) == pytest.approx(0.02)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_duration_rejects_bad_batch(bad: Any) -> None:
    """d(b) raises ValueError for a batch size that is not an int >= 1."""
    s = StageSpec(name="s", profile={1: 0.01}, max_batch=1)
    with pytest.raises(ValueError, match="batch size"):
        s.duration(bad)


# ---- graph helpers ------------------------------------------------------------------------


def diamond_spec() -> PipelineSpec:
    return PipelineSpec(
        name="d",
        slo=1.0,
        stages=[
            stage("join"),
            stage("r", ["join"]),
            stage("src", ["l", "r"]),
            stage("l", ["mid"]),
            stage("mid", ["join"]),
        ],
    )


def test_topological_order_respects_every_edge() -> None:
    """Every stage comes after all of its predecessors, ties broken by declaration order."""
    spec = diamond_spec()
    order = spec.topological_order()
    assert sorted(order) == sorted(spec.stage_names)
    pos = {n: i for i, n in enumerate(order)}
    for s in spec.stages:
        for t in s.successors:
            assert pos[s.name] < pos[t]
    assert order == ["src", "r", "l", "mid", "join"]


def test_paths_predecessors_entries_exits() -> None:
    """Downstream paths, predecessors, entry and exit stages of a DAG match a hand listing."""
    spec = diamond_spec()
    assert spec.downstream_paths("src") == [["l", "mid", "join"], ["r", "join"]]
    assert spec.downstream_paths("join") == [[]]
    assert spec.downstream_paths("l") == [["mid", "join"]]
    assert spec.predecessors("join") == ["r", "mid"]
    assert spec.predecessors("src") == []
    assert spec.entry_stages() == ["src"]
    assert spec.exit_stages() == ["join"]
    with pytest.raises(KeyError):
        spec.downstream_paths("nope")


def test_with_workers_revalidates() -> None:
    """with_workers / replace_stage return validated copies and reject bad values."""
    spec = PipelineSpec.from_dict(chain())
    more = spec.with_workers({"b": 5})
    assert more.stage("b").workers == 5 and spec.stage("b").workers == 1
    assert spec.replace_stage("c", max_batch=4).stage("c").max_batch == 4
    with pytest.raises(ConfigError, match="workers must be >= 1"):
        spec.with_workers({"b": 0})
    with pytest.raises(KeyError):
        spec.with_workers({"zz": 2})
    with pytest.raises(pard.PardError, match=r"has no stage 'zz' \(stages: \['a', 'b', 'c'\]\)"):
        spec.with_workers({"zz": 2})  # a PardError too, naming the value and the stages


# ---- capacity and built-ins ---------------------------------------------------------------


def test_capacity_of_tm_matches_hand_computation() -> None:
    """tm's stage bounds are workers*max_batch/d(max_batch) from its file; pipeline = min."""
    cap = config.builtin("tm").capacity()
    assert cap.stages["vehicle_detect"] == pytest.approx(3 * 16 / 0.062)
    assert cap.stages["vehicle_classify"] == pytest.approx(1 * 32 / 0.036)
    assert cap.stages["plate_ocr"] == pytest.approx(3 * 16 / 0.050)
    assert cap.pipeline == pytest.approx(774.19, abs=0.01)
    assert cap.bottleneck == "vehicle_detect"


EXPECTED_BUILTINS = {"tm": (3, 0.4), "lv": (5, 0.5), "ga": (5, 0.6), "da": (5, 0.42)}


@pytest.mark.parametrize("name", sorted(EXPECTED_BUILTINS))
def test_builtins_are_sane(name: str) -> None:
    """Each built-in loads by name, has the paper's stage count and SLO, balanced capacities,
    measured points with sublinear growth, and stage execution a sizeable share of the SLO."""
    spec = config.load(name)
    n, slo = EXPECTED_BUILTINS[name]
    assert len(spec.stages) == n and spec.slo == slo
    cap = spec.capacity()
    assert max(cap.stages.values()) / cap.pipeline <= 1.3
    for s in spec.stages:
        assert len(s.profile) >= 5 and max(s.profile) == s.max_batch
        per_item = [d / b for b, d in sorted(s.profile.items())]
        assert all(x > y for x, y in zip(per_item, per_item[1:]))  # batching pays off
        assert "GPU" in s.description
    assert 0.3 <= spec.longest_path_duration() / spec.slo <= 0.5


def test_da_is_the_dag_variant_of_lv() -> None:
    """da: person detection fans out to pose and face, joined at expression."""
    da, lv = config.builtin("da"), config.builtin("lv")
    assert set(da.stage_names) == set(lv.stage_names)
    assert da.stage("person_detect").successors == ["pose", "face_detect"]
    assert da.predecessors("expression") == ["pose", "face_landmark"]
    assert da.longest_path_duration() == pytest.approx(0.064 + 0.048 + 0.032)


def test_unknown_builtin_and_missing_file() -> None:
    """An unknown built-in name or missing file raises ConfigError naming it."""
    with pytest.raises(ConfigError, match="'xx'"):
        config.builtin("xx")
    with pytest.raises(ConfigError, match="nowhere.yaml"):
        config.load("nowhere.yaml")


def test_lazy_public_names() -> None:
    """pard exposes config, PipelineSpec and StageSpec lazily."""
    assert pard.PipelineSpec is PipelineSpec and pard.config.builtin is config.builtin


# ---- files --------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json", ".toml"])
def test_save_load_builtin_every_format(tmp_path: Path, suffix: str) -> None:
    """Saving a built-in and loading it back gives an equal spec, in every format."""
    spec = config.builtin("da")
    path = spec.save(tmp_path / f"da{suffix}")
    assert config.load(path) == spec


def test_unparseable_and_empty_files(tmp_path: Path) -> None:
    """Broken YAML/JSON/TOML, an empty file and an unknown suffix raise ConfigError naming the file."""
    cases = {
        "a.yaml": "name: [unclosed\n",
        "b.json": '{"name": "x",\n "slo": }',
        "c.toml": "name = \n",
        "d.yaml": "",
        "e.txt": "name: x",
    }
    for fname, text in cases.items():
        p = tmp_path / fname
        p.write_text(text)
        with pytest.raises(ConfigError, match=fname):
            config.load(p)


def test_invalid_field_in_file_names_file_and_field(tmp_path: Path) -> None:
    """A file with workers: 0 fails with the file name, the field path and the value."""
    data = chain()
    data["stages"][1]["workers"] = 0
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"bad.json: .*stages\[1\]\.workers.*got 0"):
        config.load(p)


# ---- the paper's JSON module format -------------------------------------------------------


def test_module_json_format(tmp_path: Path) -> None:
    """A module-format file (name/id/pres/subs, durations in ms) becomes the same DAG."""
    doc = {
        "name": "paper",
        "slo_ms": 420,
        "modules": [
            {"name": "det", "id": 0, "pres": [-1], "subs": [1, 2], "durations_ms": [10, 14, 17, 20]},
            {"name": "pose", "id": 1, "pres": [0], "subs": [3], "profile_ms": {"1": 5, "8": 12}, "workers": 2},
            {"name": "face", "id": 2, "pres": [0], "subs": [3], "profile": {"1": 0.004}, "max_batch": 4},
            {"name": "expr", "id": 3, "pres": [1, 2], "subs": [-1], "durations_ms": [3, 4]},
        ],
    }
    p = tmp_path / "modules.json"
    p.write_text(json.dumps(doc))
    spec = config.load(p)
    assert spec.slo == pytest.approx(0.42)
    assert spec.stage("det").profile == {1: 0.010, 2: 0.014, 3: 0.017, 4: 0.020}
    assert spec.stage("det").max_batch == 4 and spec.stage("det").successors == ["pose", "face"]
    assert spec.stage("pose").profile == {1: 0.005, 8: 0.012} and spec.stage("pose").workers == 2
    assert spec.stage("face").max_batch == 4
    assert spec.predecessors("expr") == ["pose", "face"]


def test_module_json_inconsistent_pres_subs() -> None:
    """pres that disagree with subs, unknown ids, and missing profiles raise ConfigError."""
    mods = [
        {"name": "a", "id": 0, "pres": [], "subs": [1], "durations_ms": [1]},
        {"name": "b", "id": 1, "pres": [], "subs": [], "durations_ms": [1]},
    ]
    with pytest.raises(ConfigError, match="'pres' \\[\\] disagrees"):
        config.from_module_json(mods, name="x", slo=1.0)
    mods[1]["pres"] = [0]
    mods[0]["subs"] = [7]
    with pytest.raises(ConfigError, match="unknown module id 7"):
        config.from_module_json(mods, name="x", slo=1.0)
    mods[0]["subs"] = [1]
    del mods[0]["durations_ms"]
    with pytest.raises(ConfigError, match="exactly one of"):
        config.from_module_json(mods, name="x", slo=1.0)
    with pytest.raises(ConfigError, match="needs a pipeline name and an SLO: wrap it as"):
        config.from_module_json(mods)


# ---- hypothesis round trips ---------------------------------------------------------------

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,11}", fullmatch=True)
durations = st.floats(min_value=1e-6, max_value=10.0, allow_nan=False, allow_infinity=False)
texts = st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "Zs"]), max_size=30)


@st.composite
def specs(draw: st.DrawFn) -> PipelineSpec:
    stage_names = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    stages = []
    for i, n in enumerate(stage_names):
        later = stage_names[i + 1:]
        succ = draw(st.lists(st.sampled_from(later), unique=True, max_size=3)) if later else []
        sizes = sorted(draw(st.sets(st.integers(1, 128), min_size=1, max_size=6)))
        base = draw(durations)
        steps = draw(st.lists(st.floats(0.0, 1.0), min_size=len(sizes), max_size=len(sizes)))
        profile, d = {}, base
        for b, step in zip(sizes, steps):
            d = d + step
            profile[b] = d
        stages.append(
            {
                "name": n,
                "profile": profile,
                "max_batch": draw(st.integers(1, 256)),
                "workers": draw(st.integers(1, 64)),
                "successors": succ,
                "description": draw(texts),
            }
        )
    tiers = draw(st.dictionaries(names, st.floats(1e-3, 1e3), max_size=3))
    # an SLO a lone request can meet (>= every stage's d(1) summed) and no stage's full batch exceeds, so no
    # unreachable-SLO warning
    floor = sum(min(st_["profile"].values()) for st_ in stages)
    full = [StageSpec(**st_) for st_ in stages]
    floor = max(floor, *(x.duration(x.batch_limit) for x in full))
    return PipelineSpec(
        name=draw(names), slo=draw(durations) + floor, stages=stages, tiers=tiers, description=draw(texts)
    )


@settings(max_examples=60, deadline=None)
@given(spec=specs(), fmt=st.sampled_from(["yaml", "json", "toml"]))
def test_round_trip_text(spec: PipelineSpec, fmt: str) -> None:
    """dumps -> loads gives back an equal spec in YAML, JSON and TOML."""
    assert config.loads(config.dumps(spec, format=fmt), format=fmt) == spec  # type: ignore[arg-type]


@settings(max_examples=20, deadline=None)
@given(spec=specs())
def test_round_trip_files(spec: PipelineSpec) -> None:
    """save -> load through real files gives back an equal spec for all three suffixes."""
    with tempfile.TemporaryDirectory() as d:
        for suffix in (".yaml", ".json", ".toml"):
            assert config.load(spec.save(Path(d) / f"s{suffix}")) == spec


@settings(max_examples=40, deadline=None)
@given(spec=specs())
def test_capacity_is_min_over_stages(spec: PipelineSpec) -> None:
    """The pipeline bound equals the smallest over stages of the best workers*b/d(b), by brute force over
    every batch size 1..max_batch; each stage's batch_limit is the largest b reaching that best."""
    best = [max(s.workers * b / s.duration(b) for b in range(1, s.max_batch + 1)) for s in spec.stages]
    cap = spec.capacity()
    assert cap.pipeline == pytest.approx(min(best))
    assert math.isclose(cap.stages[cap.bottleneck], cap.pipeline)
    for s, top in zip(spec.stages, best):
        at = [b for b in range(1, s.max_batch + 1) if math.isclose(s.workers * b / s.duration(b), top, rel_tol=1e-12)]
        assert s.batch_limit == max(at)


def test_batch_limit_stops_where_a_bigger_batch_is_slower_per_request() -> None:
    """A CPU profile measured here: d(8) = 7.1 ms, d(16) = 24.1 ms, so a batch of 16 finishes 663 req/s
    and one of 8 1127: the stage forms batches of at most 8, and its capacity is 8 / 7.1 ms. A profile
    whose throughput grows with the batch keeps max_batch (every built-in one does)."""
    cpu = StageSpec(name="detect", profile={1: 0.00176, 2: 0.00215, 4: 0.00362, 8: 0.0071, 16: 0.0241},
                    max_batch=16)
    assert cpu.batch_limit == 8
    assert cpu.throughput() == pytest.approx(8 / 0.0071)
    gpu = StageSpec(name="detect", profile={1: 0.004, 8: 0.012, 16: 0.02}, max_batch=16)
    assert gpu.batch_limit == 16
    for name in ("tm", "lv", "ga", "da"):
        assert all(st.batch_limit == st.max_batch for st in config.builtin(name).stages)


@settings(max_examples=60, deadline=None)
@given(spec=specs(), probes=st.lists(st.integers(1, 300), min_size=1, max_size=10))
def test_duration_agrees_with_core_profile(spec: PipelineSpec, probes: list[int]) -> None:
    """StageSpec.duration matches the C++ core's Profile (an independent implementation) to about
    1 ns, given the same points (the core keeps them in whole nanoseconds, so quantise first)."""
    from pard import _core

    for s in spec.stages:
        bs = sorted(s.profile)
        ns_points = {b: round(s.profile[b] * 1e9) / 1e9 for b in bs}
        quantised = StageSpec(name=s.name, profile=ns_points, max_batch=s.max_batch)
        core = _core.Profile(bs, [s.profile[b] for b in bs])
        for b in probes:
            assert quantised.duration(b) == pytest.approx(core.duration(b), rel=1e-12, abs=1.5e-9)


def test_absurd_worker_counts_rejected() -> None:
    """StageSpec refuses workers above MAX_WORKERS (1 024, one thread each) and accepts the limit itself."""
    assert StageSpec(name="a", profile={1: 0.01}, max_batch=1, workers=config.MAX_WORKERS).workers == 1024
    with pytest.raises(ConfigError, match=r"workers must be <= 1024.*100000000"):
        StageSpec(name="a", profile={1: 0.01}, max_batch=1, workers=100_000_000)


def test_pipeline_file_with_100000_workers_is_refused_at_load(tmp_path: Path) -> None:
    """A spec file with `workers: 100000` for a stage is refused at load, naming the stage's field and the value."""
    f = tmp_path / "p.yaml"
    f.write_text("name: p\nslo: 0.5\nstages:\n  - {name: a, profile: {1: 0.01}, max_batch: 1, workers: 100000}\n")
    with pytest.raises(ConfigError, match=r"stages\[0\]\.workers: workers must be <= 1024 .*100000 \(stage 'a'\)"):
        config.load(f)


def test_pipeline_workers_sum_is_bounded() -> None:
    """A pipeline whose stages' workers sum past MAX_TOTAL_WORKERS (4 096) is refused with the sum; the bound itself loads."""
    ok = chain(stages=[stage("a", ["b"], workers=1024), stage("b", ["c"], workers=1024), stage("c", ["d"], workers=1024),
                       stage("d", workers=1024)])
    assert sum(s.workers for s in PipelineSpec.from_dict(ok).stages) == config.MAX_TOTAL_WORKERS == 4096
    over = chain(stages=[*ok["stages"][:3], stage("d", ["e"], workers=1024), stage("e", workers=1)])
    with pytest.raises(ConfigError, match=r"workers sum to 4097 over 5 stages, more than MAX_TOTAL_WORKERS = 4096"):
        PipelineSpec.from_dict(over)


def test_profile_duration_below_a_microsecond_is_refused() -> None:
    """A profile duration below MIN_DURATION_S (1 µs) is a ConfigError naming stages[i].profile and the value."""
    with pytest.raises(ConfigError, match=r"stages\[1\]\.profile: profile duration d\(1\) = 1e-300 s must be >= 1e-06 s"):
        PipelineSpec.from_dict(chain(stages=[stage("a", ["b"]), stage("b", profile={1: 1e-300}, max_batch=1)]))
    assert PipelineSpec.from_dict(chain(stages=[stage("a", profile={1: 1e-6}, max_batch=1)])).stages[0].duration(1) == 1e-6


@pytest.mark.parametrize(("text", "field", "advice"), [
    ("max_batch: 1e1", r"stages\[0\]\.max_batch", "write 1.0e+1 or 10"),
    ("max_batch: 5e5", r"stages\[0\]\.max_batch", "write 5.0e+5 or 500000"),
    ("max_batch: 1.0e1", r"stages\[0\]\.max_batch", "write 1.0e+1 or 10"),
])
def test_yaml_exponent_without_dot_is_explained(tmp_path: Path, text: str, field: str, advice: str) -> None:
    """A YAML number such as 1e1 or 5e5, which YAML 1.1 reads as a string, is refused saying so and how to write it."""
    f = tmp_path / "p.yaml"
    f.write_text(f"name: p\nslo: 0.5\nstages:\n  - name: a\n    profile: {{1: 0.01}}\n    {text}\n")
    with pytest.raises(ConfigError) as info:
        config.load(f)
    msg = str(info.value)
    assert re.search(field, msg) and "YAML 1.1 (PyYAML) reads" in msg and "as the string" in msg and advice in msg, msg
    fixed = tmp_path / "q.yaml"
    fixed.write_text(f.read_text().replace(text.split(": ")[-1], advice.split()[1]))
    assert config.load(fixed).stages[0].max_batch >= 1


def test_unreachable_slo_warns_naming_path_latency() -> None:
    """A pipeline whose path needs more than its SLO even for a lone request warns with that latency; built-ins do not."""
    import warnings

    from pard.errors import PardWarning

    stages = [StageSpec(name="a", profile={1: 0.05, 4: 0.1}, max_batch=4, successors=["b"]),
              StageSpec(name="b", profile={1: 0.2}, max_batch=1)]
    with pytest.warns(PardWarning, match=r"SLO 0.1 s can never be met.*0.25 s .*a -> b"):
        PipelineSpec(name="p", slo=0.1, stages=stages)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PipelineSpec(name="p", slo=0.25, stages=stages)
        for name in config.BUILTIN_NAMES:
            config.builtin(name)
    assert config.min_latency_path(PipelineSpec(name="p", slo=1.0, stages=stages)) == (pytest.approx(0.25), ["a", "b"])


def test_a_full_batch_over_the_slo_warns_naming_the_stage() -> None:
    """A lone request can make the SLO, but the stage's full batch alone takes longer (d(256) = 0.74 s at SLO
    0.3 s): no batch that full can be on time, and capacity() is taken there. Found by a new user, whose
    nexus run then collapsed (its window looks for a run of full-batch size)."""
    from pard.errors import PardWarning

    stages = [StageSpec(name="det", profile={1: 0.010, 8: 0.030}, max_batch=256)]
    assert stages[0].duration(256) == pytest.approx(0.010 + 255 * 0.020 / 7)  # the last segment, extended
    with pytest.warns(PardWarning, match=r"full batch alone takes longer than the SLO 0.3 s at det \(d\(256\) = 0.7386 s\)"):
        PipelineSpec(name="p", slo=0.3, stages=stages)


@pytest.mark.parametrize("text, line, column", [
    ("name: x\nslo: 0.4\n  bad: indent\n", 3, 6),         # a mapping value where none may be
    ("name: x\nstages: [1, 2\n", 3, 1),                  # an unclosed flow sequence
    ('name: "x\x01"\n', 1, 9),                           # an unprintable character (the reader's error)
])
def test_bad_yaml_file_error_is_one_line_with_path_line_and_column(tmp_path: Path, text: str, line: int,
                                                                     column: int) -> None:
    """A YAML syntax error from pard.config.load(path) is one line naming the path, line and column (not PyYAML's '<unicode string>')."""
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        pard.config.load(p)
    msg = str(info.value)
    assert "\n" not in msg and "<unicode string>" not in msg
    assert msg.startswith(f"{p}: line {line}, column {column}: not valid YAML: ")


def test_module_json_refuses_both_slo_and_slo_ms(tmp_path: Path) -> None:
    """A module file with both "slo" and "slo_ms" is a ConfigError naming both fields and values; either alone works."""
    mods = [{"name": "a", "id": 0, "pres": [-1], "subs": [-1], "durations_ms": [10]}]
    p = tmp_path / "both.json"
    p.write_text(json.dumps({"name": "p", "slo_ms": 300, "slo": 5.0, "modules": mods}))
    with pytest.raises(ConfigError) as info:
        config.load(p)
    message = str(info.value)
    assert "both.json" in message and "slo=5.0" in message and "slo_ms=300" in message
    p.write_text(json.dumps({"name": "p", "slo_ms": 300, "modules": mods}))
    assert config.load(p).slo == pytest.approx(0.3)
    p.write_text(json.dumps({"name": "p", "slo": 5.0, "modules": mods}))
    assert config.load(p).slo == pytest.approx(5.0)
