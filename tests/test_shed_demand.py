"""PolicySpec.shed_demand: the demand an autoscaler reads for an llm stage counts what the stages above
would forward were they not dropping on its behalf (sync_planner.hpp, the demand loop).

Expectations: the planner's demand recomputed from its own published in_rate and service_rate by the
closed form ``max(in_rate_k, max over stages j above k of min(in_rate_j, service_rate_j))`` for an llm
stage k, its own input for every other stage; in the simulator, an LLM stage whose excess the entry sheds is
grown only when its demand counts that excess."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import pard
from pard import config
from pard import workloads as wl
from pard.planner import Planner
from pard.policies import POLICIES
from pard.wiring import planner_stages


def _above(spec: config.PipelineSpec) -> list[list[int]]:
    names = [st.name for st in spec.stages]
    below = [{names.index(x) for path in spec.downstream_paths(n) for x in path} - {j} for j, n in enumerate(names)]
    return [[j for j in range(len(names)) if k in below[j]] for k in range(len(names))]


@pytest.mark.parametrize("pipeline", ["tm", "da", "rag"])
def test_demand_counts_what_the_stages_above_would_forward(pipeline: str) -> None:
    """One interval: 3 000 arrivals at the entry, 600 at every stage below it (the rest dropped above).  With
    shed_demand an llm stage's demand is the closed form above; every other stage's, and every stage's without
    it (unpaced), is its own input."""
    spec = config.builtin(pipeline)
    workers = [st.workers for st in spec.stages]
    n = len(workers)
    rng = np.random.default_rng(7)
    entry = {spec.stages.index(st) for st in spec.stages if st.name in spec.entry_stages()}
    stats = [{"arrival_s": np.sort(rng.uniform(0.0, 1.0, 3000 if k in entry else 600))} for k in range(n)]
    above = _above(spec)
    assert any(above[k] for k in range(n))
    for shed in (True, False):
        pol = dataclasses.replace(POLICIES["pard"], name="p", pace="none", shed_demand=shed)
        terms = Planner(planner_stages(spec), policy=pol).update(1.0, stats, workers)
        for k in range(n):
            want = terms[k].in_rate
            if shed and spec.stages[k].kind == "llm":
                want = max([want] + [min(terms[j].in_rate, terms[j].service_rate) for j in above[k]])
            assert terms[k].demand_rate == pytest.approx(want, rel=1e-12), (pipeline, shed, k)
        raised = [k for k in range(n) if terms[k].demand_rate > terms[k].in_rate]
        # the entry forwards more than reached the stages below: only an llm stage's demand counts it
        assert raised == ([k for k in range(n) if spec.stages[k].kind == "llm"] if shed else [])


def test_shed_demand_is_for_the_pard_rule_only() -> None:
    """A policy whose stages do not drop on behalf of the stages below (nexus's rule) publishes its own input
    as demand even with the field set."""
    spec = config.builtin("tm")
    workers = [st.workers for st in spec.stages]
    stats = [{"arrival_s": np.linspace(0.0, 1.0, 3000 if k == 0 else 600)} for k in range(len(workers))]
    pol = dataclasses.replace(POLICIES["nexus"], name="p", shed_demand=True)
    terms = Planner(planner_stages(spec), policy=pol).update(1.0, stats, workers)
    assert all(t.demand_rate == t.in_rate for t in terms)


def _rag_bursty(duration: float, seed: int) -> tuple[config.PipelineSpec, np.ndarray, np.ndarray, np.ndarray]:
    spec = config.builtin("rag")
    arr = np.asarray(wl.bursty(13.0, duration, 1.5, seed=seed), dtype=np.float64)  # about 1.3x its capacity
    ins, outs = wl.draw_tokens(arr.size, seed=100 + seed)
    return spec, arr, ins, outs


def test_an_autoscaled_llm_stage_is_grown_for_the_demand_the_entry_sheds() -> None:
    """rag under bursty overload, autoscaled: pard's entry sheds what the LLM stage cannot finish, so the LLM
    stage receives less than the pipeline asks of it.  Sized on that input alone it is given fewer
    worker-seconds and the pipeline finishes fewer requests on time than when its demand counts the shed."""
    spec, arr, ins, outs = _rag_bursty(300.0, 0)
    llm = next(i for i, st in enumerate(spec.stages) if st.kind == "llm")
    out = {}
    for shed in (True, False):
        pol = dataclasses.replace(POLICIES["pard"], shed_demand=shed)
        r = pard.simulate(spec, arr, pol, in_tokens=ins, out_tokens=outs, seed=0, autoscale=True, cold_start_s=10.0,
                          jitter_cv=0.1)
        assert r.submitted == arr.size == r.on_time + r.late + r.dropped + r.rejected + r.failed
        out[shed] = (r.on_time, float(np.asarray(r.workers)[llm].sum()))
    assert out[True][1] > out[False][1]
    assert out[True][0] > out[False][0]


def test_shed_demand_changes_nothing_on_fixed_workers() -> None:
    """Only an autoscaler reads the demand: on fixed workers the outcomes are identical either way."""
    spec, arr, ins, outs = _rag_bursty(120.0, 1)
    runs = []
    for shed in (True, False):
        pol = dataclasses.replace(POLICIES["pard"], shed_demand=shed)
        r = pard.simulate(spec, arr, pol, in_tokens=ins, out_tokens=outs, seed=1, jitter_cv=0.3)
        runs.append((r.on_time, r.late, r.dropped, r.rejected))
    assert runs[0] == runs[1]
    assert runs[0][2] > 0  # the run does shed
