"""LLM stages in the live runtime: real threads, a real llama.cpp engine on a tiny random-weight model
written into the test's directory (pard.models.tiny_llama), and ProfiledLlmEngine for live vs simulated.

Every run is bounded (futures waited with timeouts, close with a timeout); no assertion reads a clock.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if os.environ.get("PARD_REQUIRE_LLAMA_CPP"):  # CI installs pard[llm]: a missing llama.cpp must fail, not skip
    import gguf  # noqa: F401
    import llama_cpp  # noqa: F401
else:
    pytest.importorskip("gguf", reason="the gguf package is not installed (pip install 'pard[llm]')")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'pard[llm]')")

import pard  # noqa: E402
from pard.config import PipelineSpec  # noqa: E402
from pard.errors import ConfigError, Dropped, PardValueError, PromptRefused  # noqa: E402
from pard.executors import CallableExecutor, LlmEngine, ProfiledLlmEngine  # noqa: E402
from pard.executors.llama_cpp import LlamaCppEngine  # noqa: E402
from pard.models.tiny_llama import write_tiny_llama  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from llm_live import compare  # noqa: E402  - the bench's comparison, run small here

MAX_SEQS = 4
N_BURST = 200
CONTEXT = 512
# the tiny model's cost is about a millisecond a step; the spec says so, so the estimates are of its order
LLM = dict(name="generate", kind="llm", prefill={"base": 0.001, "per_token": 0.00001},
           decode={1: 0.001, 4: 0.0015}, max_seqs=MAX_SEQS, kv_tokens=CONTEXT, max_output_tokens=96)
EMBED = dict(name="embed", profile={1: 0.001, 8: 0.002}, max_batch=8, successors=["generate"])


def chain(slo: float, **llm: Any) -> PipelineSpec:
    return PipelineSpec(name="chain", slo=slo, stages=[EMBED, {**LLM, **llm}])


def _embed(xs: list[Any]) -> list[Any]:
    time.sleep(0.001)
    return list(xs)


class Recording:
    """An LlmEngine around another that records every step's stops and results (per request key)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lock = threading.Lock()
        self.steps: list[tuple[list[int], list[int]]] = []  # (stops, ids that ran)
        self.refused: list[list[int]] = []  # per step, the joiners the engine refused
        self.max_seqs = inner.max_seqs

    def step(self, joins: Any = (), stops: Any = ()) -> list[Any]:
        stops = list(stops)
        out = self.inner.step(joins, stops)
        with self.lock:
            self.steps.append((stops, [r.request_id for r in out if r.error is None]))
            self.refused.append([r.request_id for r in out if r.error is not None])
        return out

    def close(self) -> None:
        self.inner.close()

    def ran(self, key: int) -> list[int]:
        """Indices of the steps in which `key` decoded."""
        with self.lock:
            return [i for i, (_, ids) in enumerate(self.steps) if key in ids]

    def stopped_at(self, key: int) -> int | None:
        with self.lock:
            return next((i for i, (stops, _) in enumerate(self.steps) if key in stops), None)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("llm") / "tiny.gguf", context=CONTEXT)


def _settle(futs: list[Any], timeout_s: float = 30.0) -> None:
    for f in futs:
        try:
            f.result(timeout=timeout_s)
        except (pard.PardError, Exception):  # noqa: BLE001 - outcomes are read from the counts
            pass


def _key(fut: Any) -> int:
    """The key (request id << 22 | slot) the engine sees: the one running key whose id is this request's."""
    return int(fut.request_id)


def test_engines_satisfy_the_protocol(model: Path) -> None:
    """LlamaCppEngine and ProfiledLlmEngine are LlmEngines; a dnn stage is not a ProfiledLlmEngine's spec."""
    with LlamaCppEngine(model, max_seqs=2, context=128) as eng:
        assert isinstance(eng, LlmEngine)
    assert isinstance(ProfiledLlmEngine(chain(1.0).stage("generate")), LlmEngine)
    with pytest.raises(ConfigError, match="kind 'llm'"):
        ProfiledLlmEngine(chain(1.0).stage("embed"))


def test_burst_conserves_requests_with_llama_cpp(model: Path) -> None:
    """A burst that overloads the llama.cpp stage (N_BURST requests at once): every request ends once, counts conserve exactly, and
    steps hold several sequences (joiners enter running batches)."""
    spec = chain(slo=0.1)
    eng = Recording(LlamaCppEngine(model, max_seqs=MAX_SEQS, context=CONTEXT))
    with pard.Runtime(spec, {"embed": CallableExecutor(_embed), "generate": eng}, policy="pard") as rt:
        futs = [rt.submit(i, in_tokens=8 + i % 16, max_new=20 + (7 * i) % 60) for i in range(N_BURST)]
        _settle(futs)
        c = rt.counts()
    eng.close()
    assert c["submitted"] == N_BURST and c["pending"] == 0
    assert c["submitted"] == c["on_time"] + c["late"] + c["dropped"] + c["rejected"] + c["failed"]
    assert c["failed"] == 0 and c["on_time"] > 0, c
    assert c["dropped"] + c["late"] > 0, f"{N_BURST} requests of ~50 tokens, 4 at a time, are >= 2 500 steps of >= 0.1 ms: over a 0.1 s SLO {c}"
    assert max(len(ids) for _, ids in eng.steps) > 1
    # a sequence that finished produced exactly its max_new tokens
    done = [(i, f.result()) for i, f in enumerate(futs) if f.done() and f.exception() is None]
    assert done and all(len(out) == 20 + (7 * i) % 60 for i, out in done), [(i, len(out)) for i, out in done]


def test_cancelled_sequence_stops_at_the_next_boundary(model: Path) -> None:
    """A request cancelled while it decodes ends at once; the engine is told to stop it at the next step
    boundary and never decodes it after that step."""
    spec = chain(slo=60.0, max_output_tokens=400)
    eng = Recording(LlamaCppEngine(model, max_seqs=MAX_SEQS, context=CONTEXT))
    with pard.Runtime(spec, {"embed": CallableExecutor(_embed), "generate": eng}, policy="pard") as rt:
        fut = rt.submit([1, 2, 3, 4], in_tokens=4, max_new=400)
        other = rt.submit([5, 6, 7], in_tokens=3, max_new=30)
        deadline = time.monotonic() + 20
        key = None
        while key is None and time.monotonic() < deadline:  # wait until it decodes
            with eng.lock:
                seen = {k for _, ids in eng.steps for k in ids}
            key = next((k for k in seen if k >> 22 == fut.request_id), None)
            time.sleep(0.001)
        assert key is not None
        assert fut.cancel() is True
        assert len(other.result(timeout=20)) == 30
        rt.close(timeout_s=20)
    stop = eng.stopped_at(key)
    assert stop is not None, "the engine was told to stop the cancelled sequence"
    assert all(i < stop for i in eng.ran(key)), "no decode of the cancelled sequence after its stop"
    assert len(eng.ran(key)) < 400
    c = rt.counts()
    assert c["dropped"] == 1 and c["on_time"] == 1


def test_a_refused_joiner_fails_alone_and_its_step_goes_on(model: Path) -> None:
    """Three bad requests among good ones on llama.cpp: a token id outside the vocabulary, in_tokens contradicting
    the payload's token ids, a prompt longer than the engine's context (the stage's KV budget is larger). Each
    ends failed with an ExecutorError naming its reason; the good ones, joining the same steps, finish with their
    whole answer; every request ends once."""
    spec = chain(slo=60.0, kv_tokens=4000)  # the engine's context is CONTEXT = 512: a 600-token prompt passes submit
    eng = Recording(LlamaCppEngine(model, max_seqs=MAX_SEQS, context=CONTEXT))
    bad = {"vocab": ([1, 2, 999], 3), "contradicts": ([1, 2, 3], 5), "context": (0, 600)}
    why = {"vocab": "token id 999, outside the vocabulary", "contradicts": "in_tokens=5 contradicts the prompt's 3",
           "context": "prompt length must be in \\[1, 512\\], got 600"}
    with pard.Runtime(spec, {"embed": CallableExecutor(_embed), "generate": eng}, policy="pard") as rt:
        futs: dict[Any, Any] = {}
        for i in range(12):  # one embed batch: the generate stage's first steps mix good and bad joiners
            futs[i] = rt.submit([4 + i, 5, 6], in_tokens=3, max_new=10 + i)
            if i % 4 == 1:
                name = list(bad)[i // 4]
                payload, n_in = bad[name]
                futs[name] = rt.submit(payload, in_tokens=n_in)
        _settle(list(futs.values()))
        rt.close(timeout_s=20)
    eng.close()
    for name in bad:
        with pytest.raises(pard.ExecutorError, match=why[name]) as info:
            futs[name].result(timeout=0)
        assert info.value.stage == "generate" and isinstance(info.value.cause, PromptRefused)
    for i in range(12):
        assert len(futs[i].result(timeout=0)) == 10 + i
    c = rt.counts()
    assert (c["submitted"], c["on_time"], c["failed"], c["pending"]) == (15, 12, 3, 0), c
    assert c["submitted"] == c["on_time"] + c["late"] + c["dropped"] + c["rejected"] + c["failed"]
    # the engine refused two joiners (the contradiction never reached it) in steps where others ran
    with eng.lock:
        mixed = [(ran, ref) for (_, ran), ref in zip(eng.steps, eng.refused) if ref]
    assert sum(len(ref) for _, ref in mixed) == 2 and all(ran for ran, _ in mixed), mixed


def test_stage_above_drops_what_the_llm_stage_cannot_serve_in_time() -> None:
    """At the embed stage, pard drops a request whose prefill alone at the LLM stage below exceeds its SLO
    (in_tokens 20000 at 0.0005 s a token = 10 s against 1 s) and passes a short one."""
    spec = chain(slo=1.0, prefill={"base": 0.001, "per_token": 0.0005}, kv_tokens=40000)
    eng = ProfiledLlmEngine(spec.stage("generate"))
    with pard.Runtime(spec, {"embed": CallableExecutor(_embed), "generate": eng}, policy="pard") as rt:
        big = rt.submit(0, in_tokens=20000, max_new=5)
        small = rt.submit(1, in_tokens=10, max_new=5)
        with pytest.raises(Dropped) as info:
            big.result(timeout=20)
        assert len(small.result(timeout=20)) == 5
    assert info.value.stage == "embed"
    assert eng.steps > 0


def test_llm_stop_ends_a_sequence_that_can_no_longer_finish() -> None:
    """Under llm_stop, a sequence whose engine runs 20x slower than the spec says is stopped at a step
    boundary once its remaining tokens cannot finish by its deadline: dropped `infeasible` at the LLM
    stage, stopped in the engine, and never decoded after; without llm_stop it finishes late."""
    import dataclasses

    from pard.policies import get_policy

    fast = chain(slo=0.3, decode={1: 0.001, 4: 0.0015}, max_output_tokens=50)
    slow = chain(slo=0.3, decode={1: 0.02, 4: 0.03}, max_output_tokens=50).stage("generate")
    outcomes = {}
    for stop in (True, False):
        eng = Recording(ProfiledLlmEngine(slow))
        policy = dataclasses.replace(get_policy("pard"), llm_stop=stop)
        with pard.Runtime(fast, {"embed": CallableExecutor(_embed), "generate": eng}, policy=policy) as rt:
            fut = rt.submit(0, in_tokens=4, max_tokens=50, max_new=50)
            _settle([fut])
            rt.close(timeout_s=20)
        outcomes[stop] = (rt.counts(), fut, eng)
    counts, fut, eng = outcomes[True]
    assert counts["dropped"] == 1, counts
    with pytest.raises(Dropped) as info:
        fut.result(timeout=0)
    assert info.value.stage == "generate" and info.value.reason == "infeasible"
    key = next(k for _, ids in eng.steps for k in ids)
    stop = eng.stopped_at(key)
    assert stop is not None and all(i < stop for i in eng.ran(key)) and len(eng.ran(key)) < 50
    counts, fut, eng = outcomes[False]
    assert counts["late"] == 1 and len(fut.result(timeout=0)) == 50, counts


def test_a_request_too_slow_for_a_busy_worker_waits_for_a_less_busy_one() -> None:
    """Two workers of one llm stage; the spec prices a step at 3 s with 4 sequences running, 2 ms with 2. Worker
    B holds one long sequence, its engine blocked in a step; worker A runs three and steps every millisecond.
    A request with a 1 s SLO cannot finish on A (a 4th sequence there: 3 s a token) but can on B: under pard's
    token-aware rule A leaves it queued (B publishes its running count, llm::Elsewhere) and B, released, runs
    it on time; nothing is dropped.  The simulator's rule, now live."""
    spec = PipelineSpec(name="two", slo=100.0, stages=[dict(
        name="generate", kind="llm", prefill={"base": 0.0001, "per_token": 0.0}, decode={1: 0.001, 2: 0.002, 4: 3.0},
        max_seqs=4, kv_tokens=20000, max_output_tokens=5000, workers=2)])
    real = PipelineSpec(name="fast", slo=100.0, stages=[dict(
        name="generate", kind="llm", prefill={"base": 0.0001, "per_token": 0.0}, decode={1: 0.001, 4: 0.001},
        max_seqs=4, kv_tokens=20000, max_output_tokens=5000)]).stage("generate")
    release, blocked, lock = threading.Event(), threading.Event(), threading.Lock()
    engines: list[Any] = []

    class Engine(ProfiledLlmEngine):
        """The first engine to get work is B: its first step with a joiner blocks until released."""

        def step(self, joins: Any = (), stops: Any = ()) -> Any:
            joins = list(joins)
            with lock:
                first = bool(joins) and not blocked.is_set() and not any(e.role for e in engines if e is not self)
                if first:
                    self.role = "B"
            if first:
                blocked.set()
                release.wait(timeout=30)
            elif joins and self.role is None:
                self.role = "A"
            return super().step(joins, stops)

    def factory() -> Engine:
        e = Engine(real)
        e.role = None
        with lock:
            engines.append(e)
        return e

    with pard.Runtime(spec, {"generate": factory}, policy="pard") as rt:
        held = [rt.submit(0, in_tokens=4, max_new=5000, slo=100.0)]
        assert blocked.wait(timeout=20)
        held += [rt.submit(i, in_tokens=4, max_new=5000, slo=100.0) for i in (1, 2, 3)]
        a = None
        for _ in range(2000):  # A has joined all three (bounded wait, no clock read)
            a = next((e for e in engines if e.role == "A"), None)
            if a is not None and len(a.running) == 3:
                break
            time.sleep(0.005)
        assert a is not None and len(a.running) == 3
        r = rt.submit(9, in_tokens=4, max_tokens=3, max_new=3, slo=1.0)
        time.sleep(0.2)  # A reaches a hundred boundaries with r queued
        assert not r.done()
        release.set()
        assert len(r.result(timeout=20)) == 3
        rt.close(drain=False, timeout_s=20)
    assert rt.counts()["dropped"] == len(held), rt.counts()  # only the long ones, cancelled at close


def test_an_engine_smaller_than_its_stage_is_refused_when_the_runtime_is_built(model: Path) -> None:
    """An engine that runs fewer sequences than the stage's max_seqs, or whose KV cache (``context``) holds fewer
    tokens than the stage's kv_tokens, would be handed joiners it refuses: a ConfigError naming the stage, the
    engine's figure and the field, when the Runtime is built."""
    spec = chain(slo=10.0)  # max_seqs 4, kv_tokens 512
    two = chain(slo=10.0, max_seqs=2, decode={1: 0.001, 2: 0.0012}).stage("generate")
    with pytest.raises(ConfigError, match=r"stages\['generate'\].*at most 2 sequences.*max_seqs is 4"):
        pard.Runtime(spec, {"embed": CallableExecutor(_embed), "generate": ProfiledLlmEngine(two)})
    small = LlamaCppEngine(model, max_seqs=MAX_SEQS, context=256)
    try:
        with pytest.raises(ConfigError, match=r"holds 256 tokens.*kv_tokens is 512"):
            pard.Runtime(spec, {"embed": CallableExecutor(_embed), "generate": small})
    finally:
        small.close()


def test_a_dead_llm_worker_fails_its_running_sequences() -> None:
    """An LLM worker that dies outside its engine call (here the engine returns None, not results) fails
    the sequences it ran and marks the stage dead: nothing stays pending."""
    spec = chain(slo=10.0)

    class Broken(ProfiledLlmEngine):
        def step(self, joins: Any = (), stops: Any = ()) -> Any:
            out = super().step(joins, stops)
            return None if self.steps > 1 else out

    with pard.Runtime(spec, {"embed": CallableExecutor(_embed), "generate": Broken(spec.stage("generate"))},
                      policy="pard") as rt:
        fut = rt.submit(0, in_tokens=4, max_new=20)
        with pytest.raises(pard.ExecutorError):
            fut.result(timeout=20)
        rt.close(timeout_s=20)
    c = rt.counts()
    assert c["failed"] == 1 and c["pending"] == 0, c


def test_submit_checks_tokens() -> None:
    """Token counts are ints >= 0 and a prompt plus its cap must fit the LLM stage's KV budget."""
    spec = chain(slo=1.0)
    with pard.Runtime(spec, {"embed": CallableExecutor(_embed), "generate": ProfiledLlmEngine(spec.stage("generate"))},
                      policy="pard") as rt:
        with pytest.raises(PardValueError, match="in_tokens=-1"):
            rt.submit(0, in_tokens=-1)
        with pytest.raises(PardValueError, match="kv_tokens=512"):
            rt.submit(0, in_tokens=500)
        assert rt.counts()["submitted"] == 0


def test_live_goodput_matches_the_simulator() -> None:
    """ProfiledLlmEngine live vs pard.simulate on the same arrivals and tokens: goodput (share on time)
    within 0.2 (bench/llm_live.py measures the gap, about 0.05-0.08 on a loaded 2-core machine; an engine
    or step rule that never finishes a sequence, or runs one per step, misses by far more)."""
    live, sim = compare(n=120, rate=50.0, slo=0.5, seed=1)
    assert sim > 0.4
    assert abs(live - sim) <= 0.2, (live, sim)
