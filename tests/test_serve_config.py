"""The served-pipeline file: loading, Triton's queue fields, factories, errors naming field and value."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import pytest

pytest.importorskip("starlette")

from pard.errors import ConfigError  # noqa: E402
from pard.serve.config import ServeConfigError, load_serve_config, parse_serve_config  # noqa: E402

from _serve import PIPELINE, config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_example_file_loads_and_builds_its_executors() -> None:
    """examples/tm.yaml serves its measured tm profile (tm-profile.yaml) with one reference-model executor per stage."""
    cfg = load_serve_config(ROOT / "examples" / "tm.yaml")
    spec = cfg.pipeline_spec()
    assert cfg.pipeline == "tm-profile.yaml" and spec.name == "tm" and spec.slo == 0.4
    assert "profile measured by pard" in spec.description
    executors = cfg.build_executors(spec)
    assert executors is not None and sorted(executors) == sorted(st.name for st in spec.stages)
    assert all(callable(e) for e in executors.values())


def test_example_profile_command_measures_the_models_served() -> None:
    """The `pard profile` command in examples/tm.yaml (and in the profile's header) times the models the file
    serves: numpy reference models at each stage's served scale, one worker per stage, written to the served profile."""
    import shlex

    text = (ROOT / "examples" / "tm.yaml").read_text()
    commands = [line.lstrip("# ").strip() for line in text.splitlines() if line.lstrip("# ").startswith("pard profile ")]
    assert len(commands) == 1, commands
    argv = shlex.split(commands[0])
    opts = dict(zip(argv[2::2], argv[3::2]))
    cfg = load_serve_config(ROOT / "examples" / "tm.yaml")
    assert cfg.stages is not None and {r.executor for r in cfg.stages.values()} == {"pard.serve.factories:reference_model"}
    assert opts["--models"] == "numpy" and opts["--pipeline"] == "tm"
    assert {float(r.kwargs["scale"]) for r in cfg.stages.values()} == {float(opts["--scale"])}
    assert opts["--out"] == "examples/" + cfg.pipeline
    spec = cfg.pipeline_spec()
    from pard.config import load
    from pard.profiling import size_workers

    served = [cfg.workers.get(st.name, st.workers) if cfg.workers else st.workers for st in spec.stages]
    assert size_workers(load("tm"), int(opts["--cores"])) == served == [st.workers for st in spec.stages]
    assert commands[0] in (ROOT / "examples" / "tm-profile.yaml").read_text()
    # the served networks are the ones `pard profile --pipeline tm` builds (shaped by the built-in tm's
    # profile), not networks reshaped by the measured profile they are served with
    from pard.models import reference_models

    timed = reference_models("tm", scale=float(opts["--scale"]))
    executors = cfg.build_executors(spec)
    assert executors is not None
    x = np.random.default_rng(0).random((2, 32, 32, 3), dtype=np.float32)
    for name in spec.stage_names:
        np.testing.assert_array_equal(np.asarray(executors[name].fn(x)), np.asarray(timed[name](x)))
        x = np.asarray(timed[name](x))


def test_triton_queue_fields_map_onto_slo_and_tiers() -> None:
    """default_timeout_microseconds is the default SLO; priority level p is the tier with the p-th largest
    weight (tiers declared by ascending weight here: codes 2, 1, 0); 0 is the default level."""
    tiered = dict(PIPELINE, tiers={"free": 1.0, "paid": 2.0, "premium": 4.0})
    cfg = parse_serve_config(config(pipeline=tiered, queue={"default_timeout_microseconds": 250_000,
                                                            "priority_levels": 3, "default_priority_level": 2}))
    spec = cfg.pipeline_spec()
    assert cfg.default_slo_s(spec) == pytest.approx(0.25)
    assert [cfg.tier_of(p, spec.tiers) for p in (1, 2, 3)] == [2, 1, 0]
    assert cfg.tier_of(0, spec.tiers) == cfg.tier_of(None, spec.tiers) == 1
    plain = parse_serve_config(config())
    assert plain.default_slo_s(spec) == 0.3 and plain.tier_of(5, spec.tiers) == 0


def test_triton_priority_reaches_the_heaviest_tier_whatever_the_declaration_order() -> None:
    """A new user's spec declares {gold: 3, free: 1}: gold is code 0.  Triton's highest priority (1) must
    reach gold, level 2 free; equal weights go by code; levels past the tiers take the lightest."""
    cfg = parse_serve_config(config(pipeline=dict(PIPELINE, tiers={"gold": 3.0, "free": 1.0}),
                                    queue={"priority_levels": 2}))
    assert [cfg.tier_of(p, {"gold": 3.0, "free": 1.0}) for p in (1, 2)] == [0, 1]
    assert [cfg.tier_of(p, {"a": 1.0, "b": 5.0, "c": 5.0}) for p in (1, 2, 3)] == [1, 2, 0]
    assert cfg.tier_of(7, {"gold": 3.0, "free": 1.0}) == 1


def test_relative_pipeline_paths_resolve_against_the_file(tmp_path: Path) -> None:
    """`pipeline: spec.yaml` is read from the served file's folder, not the working directory."""
    import yaml

    from _serve import PIPELINE

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(PIPELINE))
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(config(pipeline="spec.yaml")))
    assert load_serve_config(tmp_path / "serve.yaml").pipeline_spec().name == "duo"


@pytest.mark.parametrize(("changes", "field", "value"), [
    ({"server": {"port": 70000}}, "server.port", "70000"),
    ({"server": {"port": "18011"}}, "server.port", "18011"),      # a quoted number is not an int (strict)
    ({"workers": {"detect": True}}, "workers.detect", "True"),    # nor is a bool
    ({"model_options": {"scale": 0.5, "sede": 3}}, "model_options.sede", "3"),  # a typo of seed
    ({"model_options": {"scale": 0}}, "model_options.scale", "0"),
    ({"server": {"drain_timeout_s": -1}}, "server.drain_timeout_s", "-1"),
    ({"queue": {"max_queue_size": -3}}, "queue.max_queue_size", "-3"),
    ({"queue": {"priority_levels": 2, "default_priority_level": 5}}, "queue.default_priority_level", "5"),
    ({"queue": {"priority_levels": 2, "default_priority_level": 1}}, "queue.priority_levels", "2"),  # no tiers
    ({"polcy": "pard"}, "polcy", "pard"),
    ({"stages": {"detect": {"executor": "no colon"}}}, "stages.detect.executor", "no colon"),
    ({"stages": {"detect": {"executor": "pard.serve.factories:sleep_profile"}}}, "stages", "classify"),
    ({"stages": {"detect": {"executor": "pard.serve.factories:sleep_profile"},
                 "classify": {"executor": "pard.serve.factories:sleep_profile"},
                 "ocr": {"executor": "pard.serve.factories:sleep_profile"}}}, "stages", "ocr"),
    ({"workers": {"nope": 2}}, "workers", "nope"),
    ({"inputs": [{"name": "x", "datatype": "FP99"}]}, "inputs[0].datatype", "FP99"),
    ({"outputs": [{"name": "y", "stage": "detect"}]}, "outputs[0].stage", "detect"),
    ({"pipeline": "no-such-pipeline"}, "pipeline", "no-such-pipeline"),
    ({"pipeline": {"name": "x", "slo": -1, "stages": []}}, "pipeline", "slo"),
    ({"inputs": [{"name": "x", "shape": [-2]}]}, "inputs.0.shape", "-2"),
    ({"inputs": [{"name": "x", "shape": [100000, 100000, 100]}]}, "inputs[0].shape", "above server.max_body_bytes"),
    ({"inputs": [{"name": "x", "shape": [4], "stage": "detect"}]}, "inputs[0].stage", "detect"),
    ({"planner": {"lam": 5}}, "planner", "got 5"),
    ({"planner": {"nosuch": 1}}, "planner", "nosuch"),
])
def test_bad_fields_are_named_with_their_value(changes: dict, field: str, value: str) -> None:
    """Each bad field raises ServeConfigError (a ConfigError) whose message has the field and the value."""
    with pytest.raises(ServeConfigError) as info:
        parse_serve_config(config(**changes), source="test.yaml")
    msg = str(info.value)
    assert "test.yaml" in msg and field in msg and value in msg, msg
    assert "pipeline: pipeline:" not in msg and "planner: planner" not in msg  # each field named once
    assert isinstance(info.value, ConfigError) and isinstance(info.value, ValueError)


def test_a_variable_dimension_is_taken_as_tritons_minus_one() -> None:
    """shape [-1, 3] loads (no warm-up payload: its size is unknown) and matches any first dimension."""
    cfg = parse_serve_config(config(inputs=[{"name": "x", "shape": [-1, 3]}]), source="test.yaml")
    t = cfg.inputs[0]
    assert t.matches((5, 3)) and t.matches((1, 3)) and not t.matches((5, 4)) and not t.matches((3,))
    assert not t.fixed()


@pytest.mark.parametrize(("executor", "kwargs", "text"), [
    ("no_such_module_xyz:make", {}, "cannot import module 'no_such_module_xyz'"),
    ("pard.serve.factories:nothing_here", {}, "has no 'nothing_here'"),
    ("pard.serve.factories:sleep_profile", {"factor": -1}, "factor must be a finite number >= 0, got -1"),
    ("pard.serve.factories:sleep_profile", {"speed": 2}, "speed"),
    ("pard.serve.factories:GOODPUT", {}, "has no 'GOODPUT'"),
])
def test_bad_factories_are_named_when_built(executor: str, kwargs: dict, text: str) -> None:
    """An executor factory that cannot be imported, called or configured names stages.<stage> and the problem."""
    ref = {"executor": executor, "kwargs": kwargs}
    cfg = parse_serve_config(config(stages={"detect": ref, "classify": {"executor": "pard.serve.factories:sleep_profile"}}))
    with pytest.raises(ServeConfigError) as info:
        cfg.build_executors(cfg.pipeline_spec())
    assert "stages.detect" in str(info.value) and text in str(info.value)


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    """A missing file, a bad suffix and broken YAML/TOML each raise ServeConfigError naming the file."""
    with pytest.raises(ServeConfigError, match="no such served-pipeline file"):
        load_serve_config(tmp_path / "missing.yaml")
    (tmp_path / "a.ini").write_text("x")
    with pytest.raises(ServeConfigError, match="unknown suffix"):
        load_serve_config(tmp_path / "a.ini")
    (tmp_path / "b.yaml").write_text("pipeline: [unclosed")
    with pytest.raises(ServeConfigError, match=r"b.yaml: line 1, column \d+: not valid YAML"):
        load_serve_config(tmp_path / "b.yaml")
    (tmp_path / "c.toml").write_text('pipeline = "tm"\n[server]\nport = "eighty"\n')
    with pytest.raises(ServeConfigError, match="server.port"):
        load_serve_config(tmp_path / "c.toml")


def test_pard_serve_command_rejects_a_bad_file_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pard serve FILE` with a bad field exits 2 before listening, naming the field and the value."""
    import yaml

    from pard.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(config(server={"port": 70000})))
    assert main(["serve", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "server.port" in err and "70000" in err
    assert err.startswith("pard serve: error: ")  # one prefix for every usage error (a fresh user saw two)
    assert main(["serve", str(tmp_path / "missing.yaml")]) == 2
    assert "no such served-pipeline file" in capsys.readouterr().err


@pytest.mark.parametrize(("changes", "text"), [
    ({"policy": "bogus"}, "unknown policy 'bogus'"),
    ({"workers": {"detect": 0}}, "workers for stage 'detect' must be an int in 1..1024 (MAX_WORKERS"),
    ({"stages": {"detect": {"executor": "os:getcwd"}, "classify": {"executor": "pard.serve.factories:sleep_profile"}}},
     "stages.detect"),
    # the stages echo the FP32 [4] input: a declared output the warm-up breaks would make every answer a 500
    ({"outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [5]}]},
     "outputs[0]: the warm-up batch's output 'OUTPUT0' has shape [4], but outputs declares [5]"),
    ({"outputs": [{"name": "OUTPUT0", "datatype": "INT8", "shape": [4]}]}, "is FP32, but outputs declares datatype INT8"),
])
def test_pard_serve_refuses_a_bad_pipeline_before_binding_the_port(tmp_path: Path, changes: dict, text: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`pard serve FILE` with a bad policy, worker count, factory or declared output exits 2 with one line
    naming the file."""
    import yaml

    from pard.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config(**changes)))
    assert main(["serve", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and text in err, err
    assert err.startswith("pard serve: error: "), err


def test_an_unresolvable_host_is_refused_naming_the_file_and_field(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """server.host that resolves to no address: pard serve exits 2 naming the file, server.host and the value,
    before any port is bound (uvicorn alone logged only "[Errno -2] Name or service not known");
    --host gets the same check, named --host; 127.0.0.1 passes."""
    from pard.serve.cli import check_host, main

    text = (ROOT / "examples" / "tm.yaml").read_text()
    (tmp_path / "tm-profile.yaml").write_text((ROOT / "examples" / "tm-profile.yaml").read_text())  # its pipeline
    bad = tmp_path / "bad-host.yaml"
    bad.write_text(text.replace("host: 127.0.0.1", "host: no-such-host.invalid")
                   if "host: 127.0.0.1" in text else text + "\nserver: {host: no-such-host.invalid}\n")
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "server.host" in err and "'no-such-host.invalid'" in err
    assert main([str(ROOT / "examples" / "tm.yaml"), "--host", "no-such-host.invalid"]) == 2
    assert "--host 'no-such-host.invalid'" in capsys.readouterr().err
    check_host("127.0.0.1", "server.host")


def test_a_port_in_use_is_refused_naming_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A port another server listens on: pard serve exits 2 with one line naming --port (or the file's
    server.port) and the port, before building the pipeline (uvicorn alone logged "[Errno 98] address
    already in use" after the build and exited 1); the port freed again passes."""
    import socket

    import yaml

    from pard.serve.cli import check_port, main

    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        assert main([str(ROOT / "examples" / "tm.yaml"), "--host", "127.0.0.1", "--port", str(port)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("pard serve: error: --port ") and str(port) in err and err.count("\n") == 0, err
        path = tmp_path / "busy.yaml"
        (tmp_path / "tm-profile.yaml").write_text((ROOT / "examples" / "tm-profile.yaml").read_text())
        data = yaml.safe_load((ROOT / "examples" / "tm.yaml").read_text())
        data.setdefault("server", {}).update(host="127.0.0.1", port=port)
        path.write_text(yaml.safe_dump(data))
        assert main([str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{path}: server.port {port}" in err, err
    finally:
        holder.close()
    check_port("127.0.0.1", port, "--port")  # free again: no error
    check_port("127.0.0.1", 0, "--port")


def test_the_reference_models_input_is_checked_against_max_body_bytes() -> None:
    """No inputs declared: the reference models take a 32x32x3 FP32 image (12 288 bytes).  With
    server.max_body_bytes 100 every request would be refused 413, so preparing the server says so, naming
    the input, its size and the limit."""
    from pard.serve.service import ServedPipeline

    doc = {"pipeline": "tm", "server": {"max_body_bytes": 100}}
    with pytest.raises(ServeConfigError, match=r"INPUT0.*\[32, 32, 3\] of FP32 is 1.23e\+04 bytes.*max_body_bytes 100"):
        ServedPipeline(parse_serve_config(doc, source="tiny.yaml")).prepare()


def test_the_same_port_for_http_and_grpc_is_refused_before_starting(capsys: pytest.CaptureFixture[str]) -> None:
    """--port P --grpc-port P: pard serve exits 2 with one line naming both options and the port, before
    binding either (the gRPC front then failed to bind after HTTP started, and the server exited 0)."""
    import socket

    from pard.serve.cli import main

    free = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    assert main([str(ROOT / "examples" / "tm.yaml"), "--host", "127.0.0.1", "--port", str(port),
                 "--grpc-port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"pard serve: error: the gRPC port (--grpc-port {port}) must differ from the HTTP port "
                   f"(--port {port})"), err


def test_an_empty_serve_file_says_so(tmp_path: Path) -> None:
    """An empty YAML file is named as empty, with what it needs (it read "expected a mapping, got NoneType")."""
    from pard.serve.config import ServeConfigError, load_serve_config

    path = tmp_path / "s.yaml"
    path.write_text("# nothing yet\n")
    with pytest.raises(ServeConfigError, match=r"s\.yaml: the file is empty; it needs at least `pipeline:`"):
        load_serve_config(path)
