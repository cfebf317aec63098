"""PolicySpec.virtual_queue: an entry stage counts what it forwards against the slowest stage below it and
sheds, before any compute, what that stage would drop (rules/virtual_queue.hpp; the rule alone is tested in
cpp/tests/test_rules.cpp). Here, through the simulator, on issue 37's chain whose last stage is the steady
bottleneck: with the rule the drops move to the entry and the waste goes; without it (every policy but pard,
and pard while an autoscaler sizes the stages) nearly every drop happens at the last stage. On a tiered entry
only the lowest tier is shed by it: the others are served ahead of its backlog at the bottleneck."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import pard
from pard import _core
from pard import workloads as wl
from pard.config import PipelineSpec
from pard.errors import PardTypeError
from pard.policies import POLICIES, get_policy

CHAIN = PipelineSpec.model_validate({
    "name": "slowlast", "slo": 0.25, "tiers": {},
    "stages": [
        {"name": "decode", "profile": {1: 0.004, 8: 0.010}, "max_batch": 8, "workers": 1, "successors": ["detect"]},
        {"name": "detect", "profile": {1: 0.006, 8: 0.016}, "max_batch": 8, "workers": 1, "successors": ["embed"]},
        {"name": "embed", "profile": {1: 0.003, 8: 0.008}, "max_batch": 8, "workers": 1, "successors": ["rank"]},
        {"name": "rank", "profile": {1: 0.012, 8: 0.045}, "max_batch": 8, "workers": 1, "successors": []},
    ],
})


def _run(virtual_queue: bool) -> pard.Report:
    arrivals = wl.poisson(1.2 * CHAIN.capacity().pipeline, 30.0, seed=1)
    pol = dataclasses.replace(get_policy("pard"), virtual_queue=virtual_queue)
    return pard.simulate(CHAIN, arrivals, pol, jitter_cv=0.1)


def test_the_entry_sheds_what_the_last_stage_would_drop() -> None:
    off, on = _run(False), _run(True)
    drops_off = off.dropped + off.rejected
    drops_on = on.dropped + on.rejected
    assert off.stages[-1].dropped > 0.8 * drops_off  # without it the last stage drops, after three stages spent
    assert on.stages[0].dropped >= 0.8 * drops_on  # with it the entry does, before any compute
    assert on.stages[0].dropped_by_reason.get("shed", 0) > 0
    assert on.stages[1].dropped == 0 and on.stages[2].dropped == 0
    assert on.invalid_rate <= 0.02 < off.invalid_rate
    assert on.goodput_ratio >= 0.97


def test_the_paced_bottleneck_keeps_full_batches_and_drops_nothing() -> None:
    """Two stages, the last twice as slow, at 1.2x for 120 s: the entry keeps the last stage fed (the floor) and
    that stage, popping lowest budget first while paced, drops nothing, so the rule costs no goodput."""
    spec = PipelineSpec.model_validate({
        "name": "two", "slo": 0.29, "tiers": {},
        "stages": [
            {"name": "a", "profile": {1: 0.006, 8: 0.0225}, "max_batch": 8, "workers": 1, "successors": ["b"]},
            {"name": "b", "profile": {1: 0.012, 8: 0.045}, "max_batch": 8, "workers": 1, "successors": []},
        ],
    })
    arrivals = wl.poisson(1.2 * spec.capacity().pipeline, 120.0, seed=1)
    off = pard.simulate(spec, arrivals, dataclasses.replace(get_policy("pard"), virtual_queue=False), jitter_cv=0.1)
    on = pard.simulate(spec, arrivals, "pard", jitter_cv=0.1)
    assert on.stages[1].dropped == 0 < off.stages[1].dropped
    assert on.goodput_ratio >= off.goodput_ratio - 0.002
    assert on.invalid_rate <= 0.005 < off.invalid_rate


def test_on_in_pard_on_a_fixed_pool_only_and_passed_to_the_core() -> None:
    assert [name for name, spec in POLICIES.items() if spec.virtual_queue] == ["pard"]
    pard_spec = get_policy("pard")
    off = dataclasses.replace(pard_spec, virtual_queue=False)
    assert pard_spec.core().virtual_queue and not off.core().virtual_queue
    assert pard_spec.core() != off.core()
    assert "virtual_queue=True" in repr(pard_spec.core())
    # an autoscaler sizes a stage on its input: the entry's shedding would hide the bottleneck's demand
    scaled = pard_spec.for_autoscaling()
    assert not scaled.virtual_queue and scaled.name == "pard"
    assert off.for_autoscaling().virtual_queue is False
    with pytest.raises(PardTypeError, match="virtual_queue"):
        dataclasses.replace(pard_spec, virtual_queue=1)


def test_an_autoscaled_run_is_the_run_without_the_rule() -> None:
    arrivals = wl.poisson(1.2 * CHAIN.capacity().pipeline, 20.0, seed=3)
    on = pard.simulate(CHAIN, arrivals, "pard", autoscale=True, cold_start_s=1.0, jitter_cv=0.1)
    off = pard.simulate(CHAIN, arrivals, dataclasses.replace(get_policy("pard"), virtual_queue=False),
                        autoscale=True, cold_start_s=1.0, jitter_cv=0.1)
    assert (on.on_time, on.dropped, on.late) == (off.on_time, off.dropped, off.late)
    assert on.stages[0].dropped_by_reason.get("shed", 0) == off.stages[0].dropped_by_reason.get("shed", 0)


def test_an_llm_bottleneck_is_left_to_its_live_queue() -> None:
    """rag's slowest stage is its llm: the rule leaves it to llm_live_queue (a backlog drained at a batch
    rate misjudges a stage that runs in tokens), so pard runs exactly as without the rule."""
    from pard import config
    from pard.sim_llm import bound_spec

    spec = config.builtin("rag")
    ins, outs = wl.draw_tokens(20_000, seed=0)
    capacity = bound_spec(spec, {"in_tokens": ins, "out_tokens": outs}).capacity().pipeline  # at mean lengths
    arrivals = wl.poisson(2.0 * capacity, 60.0, seed=4)
    ins, outs = wl.draw_tokens(arrivals.size, seed=5)
    on = pard.simulate(spec, arrivals, "pard", in_tokens=ins, out_tokens=outs, jitter_cv=0.3)
    off = pard.simulate(spec, arrivals, dataclasses.replace(get_policy("pard"), virtual_queue=False),
                        in_tokens=ins, out_tokens=outs, jitter_cv=0.3)
    assert on.stages[-1].dropped > 0  # the llm stage is overloaded
    assert (on.on_time, on.dropped, on.late) == (off.on_time, off.dropped, off.late)


def test_a_stage_as_fast_as_the_entry_is_no_bottleneck() -> None:
    """Every stage at the entry's rate: the rule finds no stage below under 0.95 of it and changes nothing."""
    flat = CHAIN.model_copy(update={"stages": [
        s.model_copy(update={"profile": CHAIN.stages[0].profile}) for s in CHAIN.stages]})
    arrivals = wl.poisson(1.2 * flat.capacity().pipeline, 10.0, seed=2)
    base = pard.simulate(flat, arrivals, "pard", jitter_cv=0.0)
    vq = pard.simulate(flat, arrivals, dataclasses.replace(get_policy("pard"), virtual_queue=True), jitter_cv=0.0)
    assert (vq.on_time, vq.dropped, vq.late) == (base.on_time, base.dropped, base.late)
    assert vq.stages[0].dropped_by_reason == base.stages[0].dropped_by_reason
    assert _core.Policy(order="adaptive", drop="pard").virtual_queue is False


def test_a_tiered_entry_sheds_only_its_lowest_tier() -> None:
    """The chain at 2x with a gold tier (weight 4, a fifth of the requests): every request the rule sheds is of
    the lowest tier, and gold, served first at every stage, keeps at least what it keeps without the rule."""
    spec = CHAIN.model_copy(update={"tiers": {"free": 1.0, "gold": 4.0}})
    arrivals = wl.poisson(2.0 * spec.capacity().pipeline, 30.0, seed=6)
    tiers = (np.random.default_rng(7).random(arrivals.size) < 0.2).astype(np.int32)  # 1: gold
    on = pard.simulate(spec, arrivals, "pard", tiers=tiers, jitter_cv=0.1)
    off = pard.simulate(spec, arrivals, dataclasses.replace(get_policy("pard"), virtual_queue=False), tiers=tiers,
                        jitter_cv=0.1)
    assert on.submitted == on.on_time + on.late + on.dropped + on.rejected + on.failed
    shed = on.reason == on.reasons.index("shed")
    assert np.count_nonzero(shed) == on.stages[0].dropped_by_reason["shed"] > 0
    assert set(np.asarray(on.tier)[shed].tolist()) == {0}
    gold_on = next(t for t in on.tiers if t.name == "gold")
    gold_off = next(t for t in off.tiers if t.name == "gold")
    assert gold_on.on_time >= gold_off.on_time
