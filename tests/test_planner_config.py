"""pard.PlannerConfig: one set of planner settings taken alike by simulate, Runtime, ray.deploy and the
serve file, with field-named errors."""

from __future__ import annotations

import numpy as np
import pytest

import pard
from pard.planner_config import MAX_SAMPLES, PlannerConfig
from pard.serve.config import ServeConfigError, parse_serve_config


def test_defaults_are_the_papers() -> None:
    """1 s syncs, lambda from the policy, a 5 s window that adapts, 10 000 Monte Carlo samples."""
    cfg = PlannerConfig()
    assert (cfg.sync_interval_s, cfg.lam, cfg.window_s, cfg.adapt_window, cfg.samples) == (1.0, None, 5.0, True, 10_000)
    assert PlannerConfig.of(None) == cfg and PlannerConfig.of(cfg) is cfg
    assert PlannerConfig.of({"lam": 0.5}) == PlannerConfig(lam=0.5)


@pytest.mark.parametrize("fields, exc, match", [
    ({"lam": 1.5}, pard.errors.PardValueError, r"planner\.lam must be .*got 1\.5"),
    ({"sync_interval_s": 0}, pard.errors.PardValueError, r"planner\.sync_interval_s .*got 0"),
    ({"samples": MAX_SAMPLES + 1}, pard.errors.PardValueError, r"planner\.samples must be an int in 1\.\.1000000"),
    ({"samples": 2.5}, pard.errors.PardTypeError, r"planner\.samples must be an int, got float"),
    ({"adapt_window": "yes"}, pard.errors.PardTypeError, r"planner\.adapt_window must be True or False"),
    ({"window_s": float("nan")}, pard.errors.PardValueError, r"planner\.window_s"),
    ({"seed": -1}, pard.errors.PardValueError, r"planner\.seed"),
    ({"speed": 1}, pard.errors.PardTypeError, r"unknown field\(s\) \['speed'\]; allowed: sync_interval_s, lam"),
])
def test_a_bad_field_is_named_with_its_value(fields: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        PlannerConfig.of(fields)


def test_simulate_takes_the_config_or_a_mapping_and_the_same_settings_give_the_same_run() -> None:
    """The same settings as an object or a mapping give bit-identical reports; the planner's default seed is
    simulate's seed + 1 (so an explicit planner seed of seed + 1 changes nothing), and another lambda
    changes the run (the setting reaches the planner)."""
    n = int(20 * 1.5 * pard.config.builtin("lv").capacity().pipeline)  # 1.5x overload: the planner's terms matter
    arr = np.sort(np.random.default_rng(0).uniform(0, 20, n))
    a = pard.simulate("lv", arr, "pard-paper", seed=3, planner=PlannerConfig(lam=0.5, window_s=3.0))
    b = pard.simulate("lv", arr, "pard-paper", seed=3, planner={"lam": 0.5, "window_s": 3.0, "seed": 4})
    c = pard.simulate("lv", arr, "pard-paper", seed=3, planner={"lam": 1.0})
    assert a.to_json(detail=True) == b.to_json(detail=True)
    assert a.to_json(detail=True) != c.to_json(detail=True)


def test_runtime_takes_the_config() -> None:
    """A Runtime with planner={"sync_interval_s": 0.05} syncs every 50 ms: within 0.5 s the planner ran several times."""
    import time

    spec = pard.config.builtin("tm")
    with pard.Runtime(spec, {s.name: pard.CallableExecutor(lambda b: b) for s in spec.stages},
                      planner=PlannerConfig(sync_interval_s=0.05)) as rt:
        deadline = time.monotonic() + 10.0
        while rt._loop.calls < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rt._loop.calls >= 3


def test_serve_file_sets_the_planner_in_one_section() -> None:
    """planner: {sync_interval_s, lam} is accepted; a top-level sync_interval_s says where it belongs; a bad
    planner field is named with the file."""
    ok = parse_serve_config({"pipeline": "tm", "policy": "pard-paper", "planner": {"sync_interval_s": 0.5, "lam": 0.2}},
                            source="s.yaml")
    assert PlannerConfig.of(ok.planner) == PlannerConfig(sync_interval_s=0.5, lam=0.2)
    with pytest.raises(ServeConfigError, match=r"s\.yaml: sync_interval_s: set it inside planner"):
        parse_serve_config({"pipeline": "tm", "sync_interval_s": 0.5}, source="s.yaml")
    with pytest.raises(ServeConfigError, match=r"s\.yaml: planner\.window_s"):
        parse_serve_config({"pipeline": "tm", "planner": {"window_s": -1}}, source="s.yaml")


def test_serve_file_names_the_right_field_for_old_spellings_a_null_planner_and_a_bad_policy() -> None:
    """A planner field at the top level says where it belongs; ``planner: null`` (a section whose lines are
    all commented out) is the defaults; an unknown policy is named as ``policy``, not ``planner``."""
    for name, value in (("lam", 0.3), ("samples", 10), ("window_s", 2.0)):
        with pytest.raises(ServeConfigError, match=rf"s\.yaml: {name}: set it inside planner"):
            parse_serve_config({"pipeline": "tm", name: value}, source="s.yaml")
    with pytest.raises(ServeConfigError, match=r"s\.yaml: planner_options: the planner's settings are the planner"):
        parse_serve_config({"pipeline": "tm", "planner_options": {}}, source="s.yaml")
    assert PlannerConfig.of(parse_serve_config({"pipeline": "tm", "planner": None}, source="s.yaml").planner) \
        == PlannerConfig()
    with pytest.raises(ServeConfigError, match=r"^s\.yaml: policy: unknown policy 'pardd'"):
        parse_serve_config({"pipeline": "tm", "policy": "pardd"}, source="s.yaml")


def test_a_lambda_the_policy_does_not_read_is_said() -> None:
    """lam under pard (downstream="busy": no quantile is drawn) warns that it has no effect, naming the policy;
    under pard-paper (the paper's Monte Carlo) it is taken silently."""
    arr = np.linspace(0.0, 2.0, 200)
    with pytest.warns(pard.PardWarning, match=r"lam=0\.5 has no effect under policy 'pard'.*downstream='busy'"):
        pard.simulate("tm", arr, "pard", planner={"lam": 0.5})
    pard.simulate("tm", arr, "pard-paper", planner={"lam": 0.5})

