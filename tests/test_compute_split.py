"""Where the compute went (DESIGN §4, pard/compute_split.hpp): useful, wasted and unresolved seconds per stage
and the share of drops made before any compute, in the simulator, the live runtime and the C++ rule's
binding for pard.ray, against hand-computed timelines and an oracle written here from the rule's words."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import pard
from pard import _core
from pard.compute_split import ComputeSplit
from pard.config import PipelineSpec, StageSpec
from pard.errors import PardValueError
from pard.outcomes import DROPPED, LATE, ON_TIME, PENDING, REJECTED
from pard.runtime import Runtime

SHED = (DROPPED, REJECTED)


def _two(profile_a: dict[int, float], profile_b: dict[int, float], max_batch: int = 1) -> PipelineSpec:
    return PipelineSpec(name="two", slo=0.07, stages=[
        StageSpec(name="a", profile=profile_a, max_batch=max_batch, workers=1, successors=["b"]),
        StageSpec(name="b", profile=profile_b, max_batch=max_batch, workers=1)])


def _split(r: pard.Report) -> tuple[list[float], list[float], list[float]]:
    return ([s.useful_compute_s for s in r.stages], [s.wasted_compute_s for s in r.stages],
            [s.unresolved_compute_s for s in r.stages])


# ---------------------------------------------------------------- the simulator, by hand
def test_dropped_at_the_second_stage_after_the_first_ran_it() -> None:
    """a: 10 ms, b: 50 ms, SLO 70 ms, sends at 0, 1 and 2 ms, no jitter, pard-paper: request 0 runs a 0-10, b
    10-60 (on time); 1 and 2 run a 10-20 and 20-30 and are dropped at b (busy until 60, 60 + 50 past their
    deadlines 71 and 72).  Useful a 10 ms, b 50 ms; wasted a 20 ms; no drop before compute."""
    r = pard.simulate(_two({1: 0.010}, {1: 0.050}), np.array([0.0, 0.001, 0.002]), "pard-paper", jitter_cv=0.0)
    assert r.state.tolist() == [ON_TIME, DROPPED, DROPPED] and r.drop_stage.tolist() == [-1, 1, 1]
    useful, wasted, unresolved = _split(r)
    assert useful == pytest.approx([0.010, 0.050], abs=1e-12)
    assert wasted == pytest.approx([0.020, 0.0], abs=1e-12)
    assert unresolved == [0.0, 0.0]
    assert r.drops_before_compute == 0.0
    assert r.wasted_compute_share == pytest.approx(0.020 / 0.080)


def test_late_requests_waste_every_stage_and_drops_at_the_entry_waste_nothing() -> None:
    """The same sends: naive runs all three (request 1 ends at 110 ms, 2 at 160 ms, both late), so the
    wasted compute is 20 ms at a and 100 ms at b; pard drops 1 and 2 at a before they run (all before
    compute, nothing wasted)."""
    arr = np.array([0.0, 0.001, 0.002])
    naive = pard.simulate(_two({1: 0.010}, {1: 0.050}), arr, "naive", jitter_cv=0.0)
    assert naive.state.tolist() == [ON_TIME, LATE, LATE]
    assert _split(naive)[1] == pytest.approx([0.020, 0.100], abs=1e-12)
    assert np.isnan(naive.drops_before_compute)  # nothing shed: no share to give
    p = pard.simulate(_two({1: 0.010}, {1: 0.050}), arr, "pard", jitter_cv=0.0)
    assert p.state.tolist() == [ON_TIME, DROPPED, DROPPED] and p.drop_stage.tolist() == [-1, 0, 0]
    assert _split(p)[1] == [0.0, 0.0] and p.drops_before_compute == 1.0


def test_a_batch_is_shared_equally_among_its_requests() -> None:
    """Two requests sent together ride one batch at a (16 ms for two: 8 ms each); at b the one with a 30 ms SLO
    is dropped (16 + 60 ms is past it) and the other runs alone (50 ms): useful a 8, b 50 ms; wasted a 8 ms."""
    spec = _two({1: 0.010, 2: 0.016}, {1: 0.050, 2: 0.060}, max_batch=2)
    r = pard.simulate(spec, np.array([0.0, 0.0]), "pard-paper", slo=np.array([0.1, 0.03]), jitter_cv=0.0)
    assert r.state.tolist() == [ON_TIME, DROPPED] and r.drop_stage.tolist() == [-1, 1]
    useful, wasted, _ = _split(r)
    assert useful == pytest.approx([0.008, 0.050], abs=1e-12)
    assert wasted == pytest.approx([0.008, 0.0], abs=1e-12)


# ---------------------------------------------------------------- the simulator, at random
def _check_conservation(r: pard.Report) -> None:
    """Requests and compute are conserved; the split agrees with the per-request compute of the outcomes."""
    assert r.submitted == r.on_time + r.late + r.dropped + r.rejected + r.failed
    useful, wasted, unresolved = (np.array(x) for x in _split(r))
    total = np.array([s.compute_s for s in r.stages])
    np.testing.assert_allclose(useful + wasted + unresolved, total, rtol=1e-9, atol=1e-12)
    assert (unresolved == 0).all()  # a simulation ends with nothing in flight
    on = r.state == ON_TIME
    ns = 1e-9 * r.submitted  # the split's shares are whole nanoseconds, the outcomes' exact quotients
    assert useful.sum() == pytest.approx(r.compute_s[on].sum(), rel=1e-12, abs=ns)
    assert wasted.sum() == pytest.approx(r.compute_s[~on].sum(), rel=1e-12, abs=ns)
    shed = np.isin(r.state, SHED)
    if shed.any():  # in a chain no copy runs after its request ended, so compute at the end = at the drop
        assert r.drops_before_compute == pytest.approx(np.mean(r.compute_s[shed] == 0))
    else:
        assert np.isnan(r.drops_before_compute)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=hs.integers(1, 4), seed=hs.integers(0, 2**16), load=hs.floats(0.5, 2.5),
       policy=hs.sampled_from(["pard", "pard-paper", "nexus", "clipper++", "naive"]),
       jitter=hs.sampled_from([0.0, 0.3]))
def test_compute_is_conserved_on_random_chains(n: int, seed: int, load: float, policy: str, jitter: float) -> None:
    """On random chains, loads and policies: per stage useful + wasted + unresolved = the stage's compute, and
    submitted = on_time + late + dropped + rejected + failed."""
    rng = np.random.default_rng(seed)
    names = [f"s{i}" for i in range(n)]
    d1 = rng.uniform(0.002, 0.02, n)
    d8 = d1 * rng.uniform(2, 6, n)
    spec = PipelineSpec(name="chain", slo=float(d8.sum() * rng.uniform(1.2, 4)), stages=[
        StageSpec(name=names[i], profile={1: float(d1[i]), 8: float(d8[i])}, max_batch=8,
                  workers=int(rng.integers(1, 3)), successors=names[i + 1:i + 2]) for i in range(n)])
    rate = load * spec.capacity().pipeline
    arr = np.sort(rng.uniform(0, 8.0, int(rate * 8.0)))
    _check_conservation(pard.simulate(spec, arr, policy, jitter_cv=jitter, seed=seed))


@pytest.mark.parametrize("pipeline", ["da", "ga"])
def test_compute_is_conserved_on_dags(pipeline: str) -> None:
    """On the built-in DAGs, where a dropped request's copy may still run on a sibling branch, compute is
    conserved and the copies that ran after their request ended count as wasted."""
    spec = pard.config.builtin(pipeline)
    arr = pard.workloads.bursty(1.5 * spec.capacity().pipeline, 10.0, 1.5, seed=3)
    r = pard.simulate(spec, arr, "pard", seed=3)
    useful, wasted, unresolved = (np.array(x) for x in _split(r))
    np.testing.assert_allclose(useful + wasted + unresolved, [s.compute_s for s in r.stages], rtol=1e-9)
    assert useful.sum() == pytest.approx(r.compute_s[r.state == ON_TIME].sum(), rel=1e-12, abs=1e-9 * r.submitted)


# ---------------------------------------------------------------- the rule's binding against an oracle
class Oracle:
    """The rule of pard/compute_split.hpp, from its words: a batch's nanoseconds shared equally (the remainder
    one each to the first requests), held per request while it is pending, then useful if it ended on time
    and wasted otherwise; a share for an ended request counts by its outcome at once."""

    def __init__(self, n_stages: int) -> None:
        self.useful = [0] * n_stages
        self.wasted = [0] * n_stages
        self.tally: dict[int, list[int]] = {}
        self.shed = self.before = 0

    def charge(self, k: int, ids: list[int], ns: int, states: list[int]) -> None:
        q, rem = divmod(ns, len(ids))
        for i, rid in enumerate(ids):
            share = q + (1 if i < rem else 0)
            if rid in self.tally:
                self.tally[rid][k] += share
            elif states[i] == ON_TIME:
                self.useful[k] += share
            else:
                self.wasted[k] += share

    def settle(self, rid: int, state: int) -> None:
        if rid not in self.tally:
            return
        spent = self.tally.pop(rid)
        into = self.useful if state == ON_TIME else self.wasted
        for k, ns in enumerate(spent):
            into[k] += ns
        if state in SHED:
            self.shed += 1
            self.before += sum(spent) == 0


@settings(max_examples=60, deadline=None)
@given(data=hs.data())
def test_the_cpp_rule_agrees_with_the_oracle(data: Any) -> None:
    """Random opens, batches (of pending and ended requests) and ends: pard._core.ComputeBook, which pard.ray's
    driver uses, gives the oracle's nanoseconds exactly, and useful + wasted + unresolved = the compute charged."""
    ns = data.draw(hs.integers(1, 4))
    book, oracle = _core.ComputeBook(ns), Oracle(ns)
    ended: dict[int, int] = {}
    charged = [0] * ns
    for step in range(data.draw(hs.integers(1, 40))):
        what = data.draw(hs.sampled_from(["open", "batch", "end"]))
        if what == "open":
            book.open(step)
            oracle.tally[step] = [0] * ns
        elif what == "batch":
            known = sorted(oracle.tally) + sorted(ended)
            if not known:
                continue
            ids = data.draw(hs.lists(hs.sampled_from(known), min_size=1, max_size=6, unique=True))
            k, dur = data.draw(hs.integers(0, ns - 1)), data.draw(hs.integers(0, 10**9))
            states = [ended.get(i, PENDING) for i in ids]
            book.charge_batch(k, ids, dur * 1e-9, states)
            oracle.charge(k, ids, dur, states)
            charged[k] += dur
        elif oracle.tally:
            rid = data.draw(hs.sampled_from(sorted(oracle.tally)))
            state = data.draw(hs.integers(1, 5))
            book.settle(rid, state)
            oracle.settle(rid, state)
            ended[rid] = state
    got = book.split()
    assert book.pending == len(oracle.tally)
    assert [round(x * 1e9) for x in got["useful_s"]] == oracle.useful
    assert [round(x * 1e9) for x in got["wasted_s"]] == oracle.wasted
    held = [sum(t[k] for t in oracle.tally.values()) for k in range(ns)]
    assert [round(x * 1e9) for x in got["unresolved_s"]] == held
    assert [u + w + h for u, w, h in zip(oracle.useful, oracle.wasted, held)] == charged
    assert (got["shed"], got["shed_before_compute"]) == (oracle.shed, oracle.before)


def test_bad_input_is_refused_naming_the_field() -> None:
    """A malformed split or a bad call to the binding raises an error that names what was wrong."""
    with pytest.raises(PardValueError, match="wasted_s"):
        ComputeSplit.from_mapping({"useful_s": [0.0], "wasted_s": [0.0, 1.0], "unresolved_s": [0.0], "shed": 0,
                                   "shed_before_compute": 0}, 1)
    with pytest.raises(PardValueError, match="exceeds"):
        ComputeSplit.from_mapping({"useful_s": [0.0], "wasted_s": [0.0], "unresolved_s": [0.0], "shed": 1,
                                   "shed_before_compute": 2}, 1)
    book = _core.ComputeBook(2)
    with pytest.raises(ValueError, match="pending"):
        book.settle(0, PENDING)
    with pytest.raises(ValueError, match="states"):
        book.charge_batch(0, [1, 2], 0.01, [PENDING])
    with pytest.raises(ValueError, match="n_stages"):
        _core.ComputeBook(0)


# ---------------------------------------------------------------- the live runtime
def _sleeper(d: float) -> Any:
    def run(xs: list[Any]) -> list[Any]:
        time.sleep(d)
        return list(xs)
    return run


def test_live_runtime_applies_the_same_rule() -> None:
    """A live two-stage chain overloaded past its SLO: after close, per stage useful + wasted = the batch
    durations recorded, nothing unresolved; useful is the compute of the on-time requests' rows and the share
    of drops before compute is that of the shed rows with no compute."""
    spec = PipelineSpec(name="chain", slo=0.03, stages=[
        StageSpec(name="a", profile={1: 0.002, 4: 0.004}, max_batch=4, workers=1, successors=["b"]),
        StageSpec(name="b", profile={1: 0.004, 4: 0.010}, max_batch=4, workers=1)])
    rt = Runtime(spec, {"a": _sleeper(0.002), "b": _sleeper(0.008)}, policy="pard-paper", planner={"sync_interval_s": 0.2})
    rt.start()
    for i in range(400):
        rt.submit(i)
        time.sleep(0.0015)
    rt.close()
    r = rt.report()
    assert r.window is None and r.dropped > 0 and r.on_time > 0
    useful, wasted, unresolved = (np.array(x) for x in _split(r))
    batches = rt.batches()
    durations = [batches["duration_s"][batches["stage"] == k].sum() for k in range(2)]
    np.testing.assert_allclose(useful + wasted, durations, rtol=1e-9)
    assert (unresolved == 0).all()
    on = r.state == ON_TIME
    assert useful.sum() == pytest.approx(r.compute_s[on].sum(), rel=1e-12, abs=1e-9 * r.submitted)
    shed = np.isin(r.state, SHED)
    assert r.drops_before_compute == pytest.approx(np.mean(r.compute_s[shed] == 0))
    assert r.to_dict()["compute_by_stage"]["b"]["useful_s"] == pytest.approx(useful[1])


def test_live_compute_is_unresolved_while_its_request_is_in_flight() -> None:
    """A request that has run at a and waits in b's running batch holds a's compute as unresolved; once it
    finishes on time, that compute is useful."""
    gate = threading.Event()

    def b(xs: list[Any]) -> list[Any]:
        assert gate.wait(10.0)
        return list(xs)

    spec = PipelineSpec(name="chain", slo=10.0, stages=[
        StageSpec(name="a", profile={1: 0.001}, max_batch=1, workers=1, successors=["b"]),
        StageSpec(name="b", profile={1: 0.001}, max_batch=1, workers=1)])
    rt = Runtime(spec, {"a": _sleeper(0.005), "b": b}, policy="pard", planner={"sync_interval_s": 0.2})
    rt.start()
    f = rt.submit(1)
    for _ in range(1000):
        held = rt.compute_split()
        if held.unresolved_s[0] > 0:
            break
        time.sleep(0.005)
    assert held.unresolved_s[0] >= 0.004 and held.useful_s.sum() == held.wasted_s.sum() == 0
    gate.set()
    assert f.result(timeout=10.0) == 1
    rt.close()
    done = rt.compute_split()
    assert (done.unresolved_s == 0).all() and done.wasted_s.sum() == 0
    assert done.useful_s[0] == pytest.approx(held.unresolved_s[0], abs=1e-12)
