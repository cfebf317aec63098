"""LlamaCppEngine: a real llama.cpp model stepped by pard, one batched decode per step.

Every test runs the tiny random-weight llama of pard.models.tiny_llama (2 layers, width 64, byte
vocabulary), written into the test's temporary directory, so each step takes about a millisecond.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("PARD_REQUIRE_LLAMA_CPP"):  # CI installs pard[llm]: a missing llama.cpp must fail, not skip
    import gguf  # noqa: F401
    import llama_cpp
else:
    pytest.importorskip("gguf", reason="the gguf package is not installed (pip install 'pard[llm]')")
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'pard[llm]')")

from pard.errors import (  # noqa: E402
    ConfigError, ExecutorError, MissingExtraError, PardError, PardTypeError, PardValueError, PromptRefused,
    RuntimeStateError)
from pard.executors.llama_cpp import LlamaCppEngine, StepResult  # noqa: E402
from pard.models.tiny_llama import write_tiny_llama  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("llm") / "tiny.gguf", context=512)


@pytest.fixture
def engine(model: Path) -> Any:
    with LlamaCppEngine(model, max_seqs=4, context=256) as eng:
        yield eng


def test_tiny_model_is_deterministic_per_seed(tmp_path: Path) -> None:
    """The same seed writes the same bytes; another seed writes other weights; a bad size is a ConfigError."""
    a = write_tiny_llama(tmp_path / "a.gguf", seed=3).read_bytes()
    b = write_tiny_llama(tmp_path / "b.gguf", seed=3).read_bytes()
    c = write_tiny_llama(tmp_path / "c.gguf", seed=4).read_bytes()
    assert a == b and a != c and len(a) == len(c)
    with pytest.raises(ConfigError, match="width 66"):
        write_tiny_llama(tmp_path / "d.gguf", width=66, heads=4)
    with pytest.raises(ConfigError, match="layers"):
        write_tiny_llama(tmp_path / "d.gguf", layers=0)


def test_tiny_model_loads_with_its_shape(model: Path) -> None:
    """llama.cpp reads the written model back with the layers, width and vocabulary it was given."""
    gguf_reader = pytest.importorskip("gguf").GGUFReader(str(model))
    names = {t.name for t in gguf_reader.tensors}
    assert {"token_embd.weight", "output.weight", "blk.1.ffn_down.weight"} <= names
    with LlamaCppEngine(model, max_seqs=1, context=64) as eng:
        assert eng.n_vocab == 256
        assert llama_cpp.llama_model_n_layer(eng._model) == 2
        assert llama_cpp.llama_model_n_embd(eng._model) == 64


def test_single_sequence_makes_exactly_max_new_tokens(engine: LlamaCppEngine) -> None:
    """One sequence yields one token per step, the first from its prefill step, and leaves at the max_new-th."""
    out = engine.step([(7, 5, 4)])
    assert [(r.request_id, r.tokens_generated, r.done) for r in out] == [(7, 1, False)]
    assert engine.running() == [7] and engine.kv_tokens_used() == 5
    seen = [out[0]]
    for k in (2, 3, 4):
        (r,) = engine.step()
        seen.append(r)
        assert (r.request_id, r.tokens_generated, r.done) == (7, k, k == 4)
    assert all(isinstance(r, StepResult) and 0 <= r.token < 256 for r in seen)
    assert engine.running() == [] and engine.kv_tokens_used() == 0 and engine.kv_tokens_reserved() == 0
    assert engine.step() == [] and engine.decode_calls == 4


def test_max_new_one_ends_in_the_prefill_step(engine: LlamaCppEngine) -> None:
    """A sequence asked for one token is done in the step that prefilled it, its KV already free."""
    (r,) = engine.step([(1, [65, 66, 67], 1)])
    assert r.done and r.tokens_generated == 1
    assert engine.running() == [] and engine.kv_tokens_used() == 0


def test_staggered_joins_each_finish_after_their_own_max_new(engine: LlamaCppEngine) -> None:
    """Sequences joining at different steps each leave at the step of their own max_new-th token."""
    plan = {0: [(10, 6, 5)], 1: [(11, [1, 2, 3], 2)], 2: [(12, 9, 4), (13, 2, 1)], 4: [(14, 4, 3)]}
    joined_at = {rid: step for step, js in plan.items() for rid, _, _ in js}
    max_new = {rid: m for js in plan.values() for rid, _, m in js}
    finished: dict[int, int] = {}
    counts: dict[int, int] = {}
    for step in range(10):
        for r in engine.step(plan.get(step, [])):
            assert r.request_id not in finished, "a finished sequence came back"
            assert r.tokens_generated == counts.get(r.request_id, 0) + 1
            counts[r.request_id] = r.tokens_generated
            if r.done:
                finished[r.request_id] = step
    assert finished == {rid: joined_at[rid] + max_new[rid] - 1 for rid in max_new}
    assert counts == max_new and engine.running() == [] and engine.kv_tokens_used() == 0


def test_stop_frees_the_kv_at_once_and_the_sequence_never_returns(engine: LlamaCppEngine) -> None:
    """Stopping a sequence takes its cells out of llama.cpp's cache before the step's decode; its slot is reused."""
    engine.step([(1, 20, 50), (2, 8, 50)])
    engine.step()
    engine.step()
    # prompt + tokens fed back so far: 20 + 2 and 8 + 2 (the third sampled token is not in the cache yet)
    assert engine.kv_tokens_used() == 22 + 10
    out = engine.step(stops=[1])
    assert [r.request_id for r in out] == [2]
    assert engine.kv_tokens_used() == 11 and engine.running() == [2]
    assert engine.kv_tokens_reserved() == 8 + 50
    for _ in range(3):
        assert all(r.request_id != 1 for r in engine.step())
    with pytest.raises(PardValueError, match="request 1, which is not running"):
        engine.step(stops=[1])
    # the freed llama.cpp sequence is taken by the next joiner at position 0: llama.cpp refuses a batch
    # whose positions do not continue a sequence's cache, so this decodes only if the cells are gone
    out = engine.step([(3, 5, 2)])
    assert {r.request_id for r in out} == {2, 3}
    assert engine.kv_tokens_used() == 15 + 5


def test_running_sequences_share_one_decode_per_step(engine: LlamaCppEngine,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step is one llama_decode holding each running sequence's next token and each joiner's prompt."""
    calls: list[int] = []
    real = llama_cpp.llama_decode

    def counting(ctx: Any, batch: Any) -> int:
        calls.append(int(batch.n_tokens))
        return int(real(ctx, batch))

    monkeypatch.setattr(llama_cpp, "llama_decode", counting)
    engine.step([(1, 10, 6), (2, 4, 6)])          # two prefills: 14 tokens
    engine.step([(3, 7, 6)])                      # two decodes + one prefill
    engine.step([(4, 3, 6)])                      # three decodes + one prefill
    engine.step()                                 # four decodes
    engine.step(stops=[2])                        # three decodes
    assert calls == [14, 2 + 7, 3 + 3, 4, 3]
    assert engine.decode_calls == 5


def test_greedy_decoding_is_reproducible(model: Path) -> None:
    """Two engines with the same seed produce the same tokens for the same synthetic prompt."""
    runs = []
    for _ in range(2):
        with LlamaCppEngine(model, max_seqs=2, context=128, seed=5) as eng:
            tokens = [eng.step([(9, 12, 6)])[0].token] + [eng.step()[0].token for _ in range(5)]
            runs.append(tokens)
    assert runs[0] == runs[1]


def test_sampling_with_a_temperature_is_seeded(model: Path) -> None:
    """temperature > 0 samples from the softmax with the engine's seed: the same seed, the same tokens."""
    runs = []
    for seed in (1, 1):
        with LlamaCppEngine(model, max_seqs=1, context=128, seed=seed, temperature=1.0) as eng:
            runs.append([eng.step([(0, 4, 8)])[0].token] + [eng.step()[0].token for _ in range(7)])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("joins, stops, error, match", [
    ([], [99], PardValueError, "stops names request 99"),
    ([(5, 4, 2), (5, 4, 2)], [], PardValueError, "request 5 joins twice"),
    ([(1, 4, 2)], [], PardValueError, "request 1 joins twice"),
    ([(5, 4)], [], PardTypeError, "must be \\(request_id, prompt, max_new\\)"),
    ([("a", 4, 2)], [], PardTypeError, "request id must be an int, got str"),
    ([], [1, 1], PardValueError, "lists request 1 twice"),
])
def test_bad_input_is_refused_before_anything_changes(engine: LlamaCppEngine, joins: list[Any], stops: list[Any],
                                                      error: type[PardError], match: str) -> None:
    """A step the caller got wrong (stops, duplicate or unnamed joiners) raises a PardError naming the field and
    value, and the engine is as it was."""
    engine.step([(1, 20, 10), (2, 10, 10)])
    before = (engine.running(), engine.kv_tokens_used(), engine.decode_calls)
    with pytest.raises(error, match=match):
        engine.step(joins, stops)
    assert (engine.running(), engine.kv_tokens_used(), engine.decode_calls) == before
    assert {r.request_id for r in engine.step()} == {1, 2}


@pytest.mark.parametrize("bad, match", [
    ([(7, 250, 10)], "250 tokens \\+ max_new 10 exceeds the context of 256"),
    ([(7, 200, 20)], "the request reserves 220 KV tokens \\(prompt \\+ max_new\\) beside 55 reserved"),
    ([(7, [], 2)], "prompt is empty"),
    ([(7, [3, 256], 2)], "token id 256, outside the vocabulary \\[0, 256\\)"),
    ([(7, [3, -1], 2)], "token id -1"),
    ([(7, 4, 0)], "max_new must be >= 1, got 0"),
    ([(7, [1.5, 2.0], 2)], "flat list of int token ids"),
    ([(6, 4, 2), (7, 4, 2)], "the request would be sequence 5 running together, more than max_seqs 4"),
])
def test_a_bad_joiner_is_refused_alone(engine: LlamaCppEngine, bad: list[Any], match: str) -> None:
    """A joiner the engine cannot take comes back refused, with a PromptRefused naming the field and value; it
    holds no KV and never runs, while the running sequences and the good joiners of the same step decode as usual."""
    engine.step([(1, 20, 10), (2, 10, 10)])
    calls = engine.decode_calls
    out = engine.step([(5, 3, 2), *bad])
    refused = [r for r in out if r.error is not None]
    assert [r.request_id for r in refused] == [7] and isinstance(refused[0].error, PromptRefused)
    assert refused[0] == StepResult(7, 0, True, -1, refused[0].error)
    assert re.search(match, str(refused[0].error)), refused[0].error
    ran = [r.request_id for r in out if r.error is None]
    assert ran == [1, 2] + [rid for rid, _, _ in [(5, 3, 2), *bad] if rid != 7]
    assert engine.decode_calls == calls + 1 and 7 not in engine.running()
    assert engine.kv_tokens_reserved() == sum(p + n for rid, p, n in [(1, 20, 10), (2, 10, 10), (5, 3, 2), *bad]
                                              if rid != 7)
    assert all(r.error is None for r in engine.step())


def test_only_refused_joiners_make_no_decode(engine: LlamaCppEngine) -> None:
    """A step whose only joiner is refused and where nothing runs returns the refusal and makes no decode."""
    out = engine.step([(3, [999], 2)])
    assert [(r.request_id, r.done, type(r.error)) for r in out] == [(3, True, PromptRefused)]
    assert engine.decode_calls == 0 and engine.running() == []


def test_a_stop_makes_room_for_a_joiner_in_the_same_step(engine: LlamaCppEngine) -> None:
    """Stops are applied before joins: a full engine takes a joiner in the step that stops another."""
    engine.step([(1, 4, 9), (2, 4, 9), (3, 4, 9), (4, 4, 9)])
    out = engine.step([(5, 4, 9)], stops=[2])
    assert [r.request_id for r in out] == [1, 3, 4, 5]
    assert engine.running() == [1, 3, 4, 5]


def test_bad_options_missing_model_and_closed_engine(model: Path, tmp_path: Path) -> None:
    """Constructor options, a missing or unreadable file and a closed engine each give a clear PardError."""
    with pytest.raises(ConfigError, match="does not exist"):
        LlamaCppEngine(tmp_path / "none.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match="could not load"):
        LlamaCppEngine(junk)
    with pytest.raises(PardValueError, match="max_seqs must be in \\[1, "):
        LlamaCppEngine(model, max_seqs=0)
    with pytest.raises(PardValueError, match="temperature"):
        LlamaCppEngine(model, temperature=-1.0)
    with pytest.raises(PardTypeError, match="threads must be an int"):
        LlamaCppEngine(model, threads=1.5)  # type: ignore[arg-type]
    eng = LlamaCppEngine(model, max_seqs=1, context=64)
    assert "running=0/1" in repr(eng)
    eng.close()
    eng.close()
    assert "closed" in repr(eng)
    with pytest.raises(RuntimeStateError, match="closed"):
        eng.step([(1, 2, 2)])


def test_missing_llama_cpp_names_the_extra() -> None:
    """Without llama-cpp-python the engine fails in one line that says pip install 'pard[llm]'."""
    code = ("import sys; sys.modules['llama_cpp'] = None\n"
            "from pard.executors.llama_cpp import LlamaCppEngine, llama_cpp_available\n"
            "from pard.errors import MissingExtraError\n"
            "assert not llama_cpp_available()\n"
            f"try:\n    LlamaCppEngine({str(ROOT / 'pyproject.toml')!r})\n"
            "except MissingExtraError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'pard[llm]'" in out.stdout and out.stdout.count("\n") == 1
    assert issubclass(MissingExtraError, ImportError)


def test_cost_model_bench_prints_a_stage_profile(tmp_path: Path) -> None:
    """bench/llm_engine.py measures prefill and decode and prints them in a stage spec's form, and as JSON."""
    cmd = [sys.executable, str(ROOT / "bench" / "llm_engine.py"), "--max-seqs", "4", "--steps", "4",
           "--repeats", "1", "--prompts", "8,32", "--context", "512"]
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=True).stdout
    assert "prefill: {base: " in text and "decode: {1: " in text
    doc = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=240,
                                    check=True).stdout)
    decode = {int(k): v for k, v in doc["decode"].items()}
    assert sorted(decode) == [1, 2, 4]
    assert all(decode[a] <= decode[b] for a, b in ((1, 2), (2, 4))) and decode[1] > 0
    assert doc["prefill"]["per_token"] >= 0 and doc["prefill"]["base"] >= 0
    assert set(doc["measured"]["prefill_s"]) == {"8", "32"}


def test_llama_cpp_log_goes_to_pard_logger(model: Path, caplog: pytest.LogCaptureFixture) -> None:
    """verbose=True passes llama.cpp's load log to the "pard.llama_cpp" logger; the default passes errors only."""
    with caplog.at_level("DEBUG", logger="pard.llama_cpp"):
        LlamaCppEngine(model, max_seqs=1, context=64).close()
        quiet = [r for r in caplog.records if r.name == "pard.llama_cpp"]
        caplog.clear()
        LlamaCppEngine(model, max_seqs=1, context=64, verbose=True).close()
        loud = [r for r in caplog.records if r.name == "pard.llama_cpp"]
    assert all(r.levelname == "ERROR" for r in quiet)
    assert any("llama" in r.getMessage() for r in loud) and len(loud) > 10
    LlamaCppEngine(model, max_seqs=1, context=64).close()  # back to errors only for the other tests


def test_a_failed_decode_admits_no_joiner(engine: LlamaCppEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """When llama_decode fails the step raises ExecutorError; the joiners are not running and hold no KV."""
    engine.step([(1, 6, 10)])
    real = llama_cpp.llama_decode
    monkeypatch.setattr(llama_cpp, "llama_decode", lambda ctx, batch: 1)
    with pytest.raises(ExecutorError, match="llama_decode returned 1 for a step of 5 tokens"):
        engine.step([(2, 4, 3)])
    monkeypatch.setattr(llama_cpp, "llama_decode", real)
    assert engine.running() == [1] and engine.kv_tokens_reserved() == 16
    out = engine.step([(2, 4, 3)])                  # the joiner's llama.cpp sequence was left clean
    assert [(r.request_id, r.tokens_generated) for r in out] == [(1, 2), (2, 1)]
