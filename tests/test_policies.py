"""Tests of the policy registry (DESIGN §3.6): every name maps to the documented order, drop rule and mode."""

from __future__ import annotations

import pytest

from pard.policies import DOWNSTREAM_MODES, POLICIES, PolicySpec, get_policy, policy_names

EXPECTED = {
    "pard": ("adaptive", "pard", "busy", False),
    "pard-paper": ("adaptive", "pard", "full", False),
    "triton": ("fcfs", "triton", "none", False),
    "ray-serve": ("fcfs", "ray-serve", "none", False),
    "naive": ("fcfs", "none", "none", False),
    "clipper++": ("fcfs", "clipper", "none", False),
    "nexus": ("fcfs", "nexus", "none", False),
    "dagor": ("fcfs", "dagor", "none", False),
    "vllm": ("fcfs", "vllm", "none", False),
    "scorpio": ("lbf", "scorpio", "none", False),
    "pard-back": ("adaptive", "pard", "none", False),
    "pard-sf": ("adaptive", "pard", "sf", False),
    "pard-lower": ("adaptive", "pard", "lower", False),
    "pard-upper": ("adaptive", "pard", "upper", False),
    "pard-fcfs": ("fcfs", "pard", "full", False),
    "pard-lbf": ("lbf", "pard", "full", False),
    "pard-hbf": ("hbf", "pard", "full", False),
    "pard-instant": ("adaptive", "pard", "full", True),
}


def test_every_name_maps_to_its_documented_value() -> None:
    """Each of the 18 names has the order, drop rule, downstream mode and eps handling of DESIGN §3.6 (vllm and
    scorpio: issue 38's LLM baselines)."""
    assert set(POLICIES) == set(EXPECTED)
    for name, (order, drop, mode, instant) in EXPECTED.items():
        p = get_policy(name)
        assert (p.order, p.drop, p.downstream, p.instant) == (order, drop, mode, instant), name
        assert p.name == name
        assert p.downstream in DOWNSTREAM_MODES


def test_dagor_parameters_default() -> None:
    """Dagor's defaults are T = 20 ms and alpha = 0.4."""
    p = get_policy("dagor")
    assert (p.dagor_threshold_s, p.dagor_alpha) == (0.02, 0.4)


def test_lookup_normalises_and_passes_specs_through() -> None:
    """Names are case- and space-insensitive; a PolicySpec is returned unchanged."""
    assert get_policy(" PARD ") is POLICIES["pard"]
    spec = PolicySpec("mine", "lbf", "pard")
    assert get_policy(spec) is spec
    assert policy_names()[0] == "pard"


def test_unknown_name_lists_valid_ones() -> None:
    """An unknown name raises ValueError whose message lists every valid name."""
    with pytest.raises(ValueError) as err:
        get_policy("clipper")
    for name in POLICIES:
        assert name in str(err.value)
    with pytest.raises(TypeError):
        get_policy(3)  # type: ignore[arg-type]


def test_specs_are_frozen() -> None:
    """A policy value cannot be mutated in place."""
    with pytest.raises(AttributeError):
        POLICIES["pard"].order = "fcfs"  # type: ignore[misc]
    with pytest.raises(TypeError):
        POLICIES["x"] = POLICIES["pard"]  # type: ignore[index]


@pytest.mark.parametrize("field, value, choices", [
    ("order", "lifo", "'fcfs', 'lbf', 'hbf', 'adaptive'"),
    ("drop", "random", "'none', 'pard', 'clipper', 'nexus', 'dagor', 'triton', 'ray-serve'"),
    ("downstream", "zz", "'full', 'none', 'sf', 'lower', 'upper', 'busy'"),
])
def test_spec_rejects_unknown_choices(field: str, value: str, choices: str) -> None:
    """An order, drop rule or downstream mode outside its choices raises ValueError naming field, value and choices."""
    kw = {"name": "x", "order": "fcfs", "drop": "pard", field: value}
    with pytest.raises(ValueError) as err:
        PolicySpec(**kw)  # type: ignore[arg-type]
    msg = str(err.value)
    assert f"PolicySpec.{field}" in msg and repr(value) in msg and choices in msg


def test_spec_rejects_bad_scalar_fields() -> None:
    """Bad name, instant, Dagor parameters or description raise errors naming the field."""
    for kw, exc, field in [
        ({"name": ""}, ValueError, "name"), ({"name": 3}, ValueError, "name"),
        ({"instant": "yes"}, TypeError, "instant"),
        ({"dagor_threshold_s": -0.1}, ValueError, "dagor_threshold_s"),
        ({"dagor_threshold_s": float("nan")}, ValueError, "dagor_threshold_s"),
        ({"dagor_threshold_s": "0.1"}, TypeError, "dagor_threshold_s"),
        ({"dagor_alpha": 1.5}, ValueError, "dagor_alpha"),
        ({"description": None}, TypeError, "description"),
    ]:
        args = {"name": "x", "order": "fcfs", "drop": "dagor", **kw}
        with pytest.raises(exc, match=f"PolicySpec.{field}"):
            PolicySpec(**args)  # type: ignore[arg-type]
    assert PolicySpec("x", "fcfs", "dagor", dagor_threshold_s=0.0, dagor_alpha=1.0).core().dagor_alpha == 1.0


def test_pard_levers_and_that_ablations_are_of_pard_paper() -> None:
    """pard = pard-paper + tiers, the hot-path overload reaction (with shedding), the tail batch-wait
    budget, online d(b) correction and coherent DAG branches; the paper's ablations switch none of pard's levers on; the
    baselines' queue bounds default to none, ray-serve's applies at the entry only."""
    p = get_policy("pard")
    assert (p.tiered, p.reactive, p.shed, p.correct_durations, p.coherent_branches) == (True,) * 5
    assert p.lam is None
    core = p.core()
    assert (core.tiered, core.reactive, core.shed) == (True, True, True)
    for name in ["pard-paper", "pard-back", "pard-sf", "pard-lower", "pard-upper", "pard-fcfs", "pard-lbf",
                 "pard-hbf", "pard-instant"]:
        a = get_policy(name)
        assert not (a.tiered or a.reactive or a.correct_durations or a.coherent_branches), name
    assert (get_policy("triton").max_queue, get_policy("triton").max_queue_entry_only) == (0, False)
    assert (get_policy("ray-serve").max_queue, get_policy("ray-serve").max_queue_entry_only) == (0, True)


def test_spec_rejects_bad_lever_fields() -> None:
    """Bad lever flags, queue bounds or lam raise errors naming the field and value."""
    for kw, exc, field in [
        ({"tiered": 1}, TypeError, "tiered"), ({"shed": None}, TypeError, "shed"),
        ({"max_queue": -1}, ValueError, "max_queue"), ({"max_queue": 2.5}, TypeError, "max_queue"),
        ({"lam": 1.5}, ValueError, "lam"),
    ]:
        with pytest.raises(exc, match=f"PolicySpec.{field}"):
            PolicySpec(**{"name": "x", "order": "fcfs", "drop": "pard", **kw})  # type: ignore[arg-type]
