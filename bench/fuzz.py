"""Fuzz pard's untrusted-input surfaces with hypothesis (issue 13, "Fuzzing").

Targets (each a hypothesis strategy plus the public call it feeds):

- ``yaml`` / ``json`` / ``toml``: ``pard.config.loads`` on (a) a built-in spec with one to three
  structural mutations (a value replaced by a hostile one, a key deleted or added, a list element
  duplicated), serialised in that format, and (b) a valid text with byte-level edits and hostile
  snippets spliced in (alias bombs, deep nesting, duplicate keys, tags, huge numbers);
- ``module_json``: the same over the PARD artifact's module format (``loads(..., format="json")``
  recognises it);
- ``traces``: every reader in ``pard.workloads`` on generated CSV files (headers or none, junk
  cells, odd line endings, binary bytes) with fuzzed arguments (column, unit, spread, seed);
- ``simulate``: ``pard.simulate`` with fuzzed arrivals and keyword arguments;
- ``submit``: ``pard.Runtime.submit`` with fuzzed payload, ``slo`` and ``tier``.

Every case runs under a deadline (SIGALRM in the worker). Outcomes: ``ok`` (the call returned),
``error`` (a ``pard.PardError``: the contract), ``crash`` (any other exception, e.g. a bare
ValueError, RecursionError or MemoryError, or the worker dying), ``hang`` (the deadline passed).
For single-field mutations of a spec an error must also name the field (or quote the value);
those that do not are counted as ``unnamed``. Each target runs in its own subprocess with a 4 GiB
address-space limit, so a runaway allocation is a MemoryError (a crash), not a dead machine.

Usage::

    python bench/fuzz.py --cases 100000 --jobs 8   # split over the targets by their weights
    python bench/fuzz.py --cases 2000 --target yaml --deadline-s 5 --json out.json

Exit status 1 if any case crashed or hung. ``tests/test_fuzz.py`` runs the same targets in-process
with a small budget.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st

import pard
from pard import workloads as wl

__all__ = ["TARGETS", "Tally", "run_target", "main"]


class Hang(BaseException):
    """Raised by the SIGALRM handler when a case exceeds its deadline (BaseException: not caught by
    the code under test's ``except Exception``)."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the main thread if the block runs longer than ``seconds``."""
    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"case ran past its {seconds} s deadline")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Tally:
    """What one target's cases did; ``examples`` keeps a few failing inputs per kind."""

    cases: int = 0
    ok: int = 0
    error: int = 0
    crash: int = 0
    hang: int = 0
    unnamed: int = 0
    seconds: float = 0.0
    examples: dict[str, list[str]] = field(default_factory=dict)

    def note(self, kind: str, what: str) -> None:
        xs = self.examples.setdefault(kind, [])
        # one example per distinct error message (the text after "->"), five at most
        if len(xs) < 5 and all(x.rpartition(" -> ")[2] != what[:400].rpartition(" -> ")[2] for x in xs):
            xs.append(what[:400])

    def merge(self, other: Tally) -> None:
        for k in ("cases", "ok", "error", "crash", "hang", "unnamed", "seconds"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for kind, xs in other.examples.items():
            for x in xs:
                self.note(kind, x)


@dataclass
class Case:
    """One fuzz input: the call to make and, for single-field mutations, the field it must name."""

    call: Callable[[], Any]
    shown: str
    field: str | None = None
    value: Any = None


def run_case(case: Case, tally: Tally, deadline_s: float) -> None:
    """Run one case under the deadline and classify its outcome into ``tally``."""
    tally.cases += 1
    try:
        with deadline(deadline_s), warnings.catch_warnings():
            # a PardWarning (e.g. an SLO no request can meet) is a legitimate answer, not a failure
            warnings.simplefilter("ignore", pard.PardWarning)
            case.call()
    except Hang:
        tally.hang += 1
        tally.note("hang", case.shown)
    except pard.PardError as exc:
        tally.error += 1
        if case.field is not None and not _names(str(exc), case):
            tally.unnamed += 1
            tally.note("unnamed", f"{case.shown} -> {exc}")
    except BaseException as exc:  # noqa: BLE001 - every other exception is what we hunt
        tally.crash += 1
        tally.note("crash", f"{case.shown} -> {type(exc).__name__}: {exc}")
    else:
        tally.ok += 1


def _names(msg: str, case: Case) -> bool:
    low = msg.lower()
    assert case.field is not None
    if case.field.lower() in low:
        return True
    shown = repr(case.value)
    return len(shown) > 2 and shown[:40] in msg


# ---------------------------------------------------------------- hostile values and spec mutation

HUGE = [2**31, 2**40, 2**53 + 1, 2**63, 2**64, 10**30, -(10**30), 10**400]
ODD_FLOATS = [math.nan, math.inf, -math.inf, 1e10, 1e300, -0.0, 5e-324, 1e-300, 0.1]
ODD_TEXT = ["", " ", "a'b", "a''s", "x" * 300, "vehicle_detect", "\x00", "é", "1e9", "null"]

hostile = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 70), st.sampled_from(HUGE), st.floats(),
    st.sampled_from(ODD_FLOATS), st.text(max_size=8), st.sampled_from(ODD_TEXT),
    st.lists(st.integers(-2, 40), max_size=4),
    st.dictionaries(st.integers(-2, 70), st.floats(-1, 1), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(-2, 4), max_size=2),
)


def _base_docs() -> list[dict[str, Any]]:
    return [pard.config.builtin(n).to_dict() for n in ("tm", "da")]


def _module_docs() -> list[dict[str, Any]]:
    """The built-ins in the paper artifact's module format (ids, subs, pres, profile_ms)."""
    out = []
    for doc in _base_docs():
        ids = {s["name"]: i for i, s in enumerate(doc["stages"])}
        mods = []
        for s in doc["stages"]:
            mods.append({
                "name": s["name"], "id": ids[s["name"]], "subs": [ids[x] for x in s["successors"]] or [-1],
                "profile_ms": {str(b): d * 1000.0 for b, d in s["profile"].items()},
                "max_batch": s["max_batch"], "workers": s["workers"],
            })
        out.append({"name": doc["name"], "slo_ms": doc["slo"] * 1000.0, "modules": mods})
    return out


@st.composite
def mutated(draw: Any, docs: list[dict[str, Any]]) -> tuple[Any, str | None, Any]:
    """A deep copy of one of ``docs`` with 1-3 mutations; (doc, field, value) — field/value only
    when there was exactly one value replacement or addition (the error must then name it)."""
    doc = copy.deepcopy(draw(st.sampled_from(docs)))
    n = draw(st.integers(1, 3))
    named: tuple[str | None, Any] = (None, None)
    for _ in range(n):
        named = _mutate_once(draw, doc)
    return (doc, *named) if n == 1 else (doc, None, None)


def _mutate_once(draw: Any, doc: Any) -> tuple[str | None, Any]:
    node, key_name = doc, None
    while True:
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return None, None
        k = draw(st.sampled_from(keys))
        if isinstance(k, str):
            key_name = k
        child = node[k]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            node = child
            continue
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "dup"]))
        if op == "replace":
            node[k] = draw(hostile)
            return key_name, node[k]
        if op == "delete":
            del node[k]
            return None, None
        if op == "add" and isinstance(node, dict):
            new = draw(st.one_of(st.text(min_size=1, max_size=6), st.integers(-2, 10**6)))
            node[new] = draw(hostile)
            return None, None
        if isinstance(node, list):
            node.insert(int(k), copy.deepcopy(node[k]))
        return None, None


def _tomlable(x: Any) -> Any:
    """TOML has no null and only string keys: drop None values, stringify keys."""
    if isinstance(x, dict):
        return {str(k): _tomlable(v) for k, v in x.items() if v is not None}
    if isinstance(x, list):
        return [_tomlable(v) for v in x if v is not None]
    return x


def _dump(doc: Any, fmt: str) -> str:
    if fmt == "yaml":
        import yaml

        return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    if fmt == "json":
        return json.dumps(doc)
    import tomli_w

    d = _tomlable(doc)
    return tomli_w.dumps(d if isinstance(d, dict) else {"value": d})


def _bomb(levels: int, fan: int) -> str:
    """A YAML "billion laughs": level i is a list of ``fan`` aliases to level i-1."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * fan)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\nname: tm\nslo: 0.4\nstages: *a" + str(levels - 1) + "\n"


SNIPPETS = {
    "yaml": [lambda d: _bomb(d(st.integers(2, 9)), d(st.integers(2, 10))),
             lambda d: "stages: " + "[" * d(st.integers(10, 5000)),
             lambda d: "name: tm\nname: tm2\n", lambda d: "slo: !!python/object/apply:os.getpid []\n",
             lambda d: "slo: 1e999\n", lambda d: "<<: *undefined\n", lambda d: "\t- [\n",
             lambda d: "{1: 0.01, 1: 0.5}\n", lambda d: "slo: !!binary aGVsbG8=\n"],
    "json": [lambda d: "[" * d(st.integers(10, 200_000)), lambda d: '{"a": 1, "a": 2}',
             lambda d: "NaN", lambda d: "1" * d(st.integers(10, 5000)), lambda d: '"\\ud800"',
             lambda d: "{" * d(st.integers(10, 200_000))],
    "toml": [lambda d: "a = 1\na = 2\n", lambda d: "x = " + "[" * d(st.integers(10, 5000)),
             lambda d: "[stages]\n[stages]\n", lambda d: "slo = 1e999\n", lambda d: "slo = inf\n",
             lambda d: "x = {" * d(st.integers(10, 3000))],
}


@st.composite
def edited_text(draw: Any, texts: list[str], fmt: str) -> str:
    """A valid text with a few byte-level edits and maybe a hostile snippet spliced in."""
    s = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(s)))
        j = draw(st.integers(i, min(len(s), i + 20)))
        s = s[:i] + draw(st.text(max_size=6)) + s[j:]
    if draw(st.booleans()):
        snippet = draw(st.sampled_from(SNIPPETS[fmt]))(draw)
        s = snippet if draw(st.booleans()) else s + "\n" + snippet
    return s


def config_cases(fmt: str, module: bool = False) -> st.SearchStrategy[Case]:
    docs = _module_docs() if module else _base_docs()
    texts = [_dump(d, fmt) for d in docs]
    load_fmt = "json" if module else fmt

    def from_doc(t: tuple[Any, str | None, Any]) -> Case:
        doc, fld, value = t
        try:
            text = _dump(doc, fmt)
        except (TypeError, ValueError, OverflowError):
            text = texts[0]  # not expressible in this format (e.g. TOML and a nested null)
            fld = None
        return Case(lambda: pard.config.loads(text, format=load_fmt), f"{load_fmt}: {text[:300]!r}", fld, value)

    def from_text(text: str) -> Case:
        return Case(lambda: pard.config.loads(text, format=load_fmt), f"{load_fmt} text: {text[:300]!r}")

    return st.one_of(mutated(docs).map(from_doc), edited_text(texts, fmt).map(from_text))


# ---------------------------------------------------------------- trace readers

CELLS = st.one_of(
    st.integers(-5, 10**6).map(str), st.floats(allow_nan=True).map(repr), st.sampled_from(HUGE).map(str),
    st.sampled_from(["", "nan", "inf", "-1", "2026-12-01T08:00:00", "2026-13-45", "1e400", "0x10", '"', "a,b"]),
    st.text(max_size=6),
)
HEADERS = ["", "TIMESTAMP,ContextTokens,GeneratedTokens", "time", "t,slo,tier",
           "HashOwner,HashApp,HashFunction,Trigger,1,2,3", "count"]


@st.composite
def trace_cases(draw: Any, tmpdir: Path) -> Case:
    """A generated CSV file and one reader call with fuzzed arguments."""
    header = draw(st.sampled_from(HEADERS))
    width = draw(st.integers(1, 7))
    rows = draw(st.lists(st.lists(CELLS, min_size=1, max_size=width), max_size=12))
    nl = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = nl.join(([header] if header else []) + [",".join(r) for r in rows])
    raw = text.encode("utf-8", "surrogatepass") + (draw(st.binary(max_size=8)) if draw(st.booleans()) else b"")
    path = tmpdir / f"t{draw(st.integers(0, 3))}.csv"
    path.write_bytes(raw)
    target = draw(st.sampled_from([path, path, path, tmpdir, tmpdir / "missing.csv"]))
    column = draw(st.one_of(st.integers(-2, 8), st.sampled_from(["TIMESTAMP", "time", "t", "nope", 10**30]), hostile))
    unit = draw(st.sampled_from([None, "s", "ms", "us", "ns", "datetime", "h", 3]))
    seed = draw(st.one_of(st.integers(0, 10), st.sampled_from([-1, 2**64, 1.5, "x"])))
    spread = draw(st.sampled_from(["uniform", "poisson", "bogus"]))
    which = draw(st.sampled_from(["csv_timestamps", "csv_requests", "azure_llm", "per_second_counts",
                                  "azure_functions"]))
    calls: dict[str, Callable[[], Any]] = {
        "csv_timestamps": lambda: wl.csv_timestamps(target, column=column, unit=unit),
        "csv_requests": lambda: wl.csv_requests(target, column=column, unit=unit, slo_column="slo", tier_column="tier"),
        "azure_llm": lambda: wl.azure_llm(target),
        "per_second_counts": lambda: wl.per_second_counts(target, spread=spread, seed=seed),
        "azure_functions": lambda: wl.azure_functions(target, spread=spread, seed=seed),
    }
    shown = f"{which}({target.name}, column={column!r}, unit={unit!r}, spread={spread!r}, seed={seed!r}) on {raw[:200]!r}"
    return Case(calls[which], shown)


# ---------------------------------------------------------------- simulate and submit arguments

POLICIES = ["pard", "naive", "nexus", "clipper++", "dagor", "pard-paper", "PARD", "", "bogus"]
ARRIVALS = st.one_of(
    st.lists(st.floats(0, 5), max_size=40).map(sorted),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=6),
    st.lists(st.sampled_from([0.0, 1.0, -1.0, 1e9, 1e300, math.nan]), max_size=4),
    st.sampled_from([None, "abc", [[0.1, 0.2]], [True, False], 1.0, [], [2**70], {"a": 1}]),
)
SIM_KWARGS = {
    "slo": st.one_of(st.floats(0.05, 2), hostile), "jitter_cv": st.one_of(st.floats(0, 1), hostile),
    "autoscale": st.one_of(st.booleans(), hostile), "cold_start_s": st.one_of(st.floats(0, 5), hostile),
    "headroom": st.one_of(st.floats(1, 3), hostile), "workers": st.one_of(st.lists(st.integers(1, 4), max_size=4), hostile),
    "sync_interval_s": st.one_of(st.floats(0.1, 2), hostile), "lam": st.one_of(st.floats(0, 1), hostile),
    "window_s": st.one_of(st.floats(0.5, 10), hostile), "adapt_window": st.one_of(st.booleans(), hostile),
    "samples": st.one_of(st.integers(1, 500), hostile), "seed": st.one_of(st.integers(0, 10), hostile),
    "tiers": st.one_of(st.integers(0, 1), hostile),
}
#: The SIM_KWARGS that are the planner's settings: simulate takes them inside ``planner``.
PLANNER_FIELDS = frozenset({"sync_interval_s", "lam", "window_s", "adapt_window", "samples"})


def _sim_kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    """``kw`` as simulate's keywords: the planner's fields gathered into ``planner``."""
    out = {k: v for k, v in kw.items() if k not in PLANNER_FIELDS}
    planner = {k: v for k, v in kw.items() if k in PLANNER_FIELDS}
    return {**out, "planner": planner} if planner else out


@st.composite
def simulate_cases(draw: Any) -> Case:
    """``pard.simulate`` with fuzzed arguments: either one hostile keyword on an otherwise valid call
    (the error must name it), or everything fuzzed at once (pipeline, arrivals, policy, keywords)."""
    if draw(st.booleans()):
        name = draw(st.sampled_from(sorted(SIM_KWARGS)))
        kwargs = {name: draw(hostile)}
        arrivals: Any = sorted(draw(st.lists(st.floats(0, 5), max_size=30)))
        return Case(lambda: pard.simulate("tm", arrivals, "pard", **_sim_kwargs(kwargs)),
                    f"simulate('tm', <{len(arrivals)} arrivals>, 'pard', **{kwargs!r})", name, kwargs[name])
    pipeline = draw(st.sampled_from(["tm", "da", "nope"]))
    arrivals = draw(ARRIVALS)
    policy = draw(st.one_of(st.sampled_from(POLICIES), hostile))
    names = draw(st.lists(st.sampled_from(sorted(SIM_KWARGS)), max_size=4, unique=True))
    kw = _sim_kwargs({k: draw(SIM_KWARGS[k]) for k in names})
    return Case(lambda: pard.simulate(pipeline, arrivals, policy, **kw),
                f"simulate({pipeline!r}, {arrivals!r}, {policy!r}, **{kw!r})")


PAYLOADS = st.one_of(hostile, st.just(np.zeros(3)), st.just(np.zeros((2, 2))), st.just(object()))


def submit_cases(runtime: Any) -> st.SearchStrategy[Case]:
    """``Runtime.submit`` on one running runtime with fuzzed payload, ``slo`` and ``tier``."""
    def build(t: tuple[Any, dict[str, Any]]) -> Case:
        payload, kwargs = t
        fld = next(iter(kwargs)) if len(kwargs) == 1 else None
        return Case(lambda: runtime.submit(payload, **kwargs), f"submit({payload!r}, **{kwargs!r})", fld,
                    kwargs.get(fld or "", None))

    kw = st.fixed_dictionaries({}, optional={"slo": st.one_of(st.floats(0.01, 2), hostile),
                                             "tier": st.one_of(st.integers(0, 3), hostile)})
    return st.tuples(PAYLOADS, kw).map(build)


def _echo(payloads: list[Any]) -> list[Any]:
    return payloads


@contextmanager
def _runtime() -> Iterator[Any]:
    spec = pard.config.builtin("tm")
    rt = pard.Runtime(spec, {s.name: pard.CallableExecutor(_echo) for s in spec.stages}, ring_capacity=1024)
    try:
        yield rt
    finally:
        rt.close(timeout_s=30.0)
        counts = rt.counts()
        total = sum(v for k, v in counts.items() if k != "submitted")
        assert counts["submitted"] == total, f"conservation broken after submit fuzzing: {counts}"


# ---------------------------------------------------------------- running

# target -> share of the total case budget (the slower targets get fewer cases)
TARGETS: dict[str, float] = {"yaml": 0.22, "json": 0.16, "toml": 0.14, "module_json": 0.12,
                             "traces": 0.16, "simulate": 0.08, "submit": 0.12}


@contextmanager
def _strategy(target: str) -> Iterator[st.SearchStrategy[Case]]:
    if target in ("yaml", "json", "toml"):
        yield config_cases(target)
    elif target == "module_json":
        yield config_cases("json", module=True)
    elif target == "traces":
        with tempfile.TemporaryDirectory(prefix="pard-fuzz-") as d:
            yield trace_cases(Path(d))
    elif target == "simulate":
        yield simulate_cases()
    elif target == "submit":
        with _runtime() as rt:
            yield submit_cases(rt)
    else:
        raise ValueError(f"target must be one of {sorted(TARGETS)}, got {target!r}")


def run_target(target: str, cases: int, *, deadline_s: float = 10.0, seed: int = 0) -> Tally:
    """Run ``cases`` hypothesis-generated cases of ``target`` in this process; return the tally."""
    tally = Tally()
    t0 = time.perf_counter()
    with _strategy(target) as strategy:
        @hseed(seed)
        @settings(max_examples=cases, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @given(strategy)
        def one(case: Case) -> None:
            run_case(case, tally, deadline_s)

        one()
    tally.seconds = time.perf_counter() - t0
    return tally


def _worker(target: str, cases: int, deadline_s: float, seed: int, out: Path) -> None:
    import resource

    limit = 4 << 30  # a runaway allocation fails as MemoryError instead of taking the machine down
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    tally = run_target(target, cases, deadline_s=deadline_s, seed=seed)
    out.write_text(json.dumps(tally.__dict__))


def _spawn(target: str, cases: int, deadline_s: float, seed: int, tmp: Path) -> Tally:
    out = tmp / f"{target}-{seed}.json"
    cmd = [sys.executable, __file__, "--worker", target, "--cases", str(cases), "--deadline-s", str(deadline_s),
           "--seed", str(seed), "--json", str(out)]
    # Outer bound: every case at its full deadline plus start-up; past it the worker is hung in C.
    budget = 120.0 + cases * deadline_s
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget)
    except subprocess.TimeoutExpired:
        t = Tally(cases=1, hang=1, seconds=time.perf_counter() - t0)
        t.note("hang", f"{target}: worker exceeded {budget:.0f} s (hung outside Python?)")
        return t
    if proc.returncode != 0 or not out.exists():
        t = Tally(cases=1, crash=1, seconds=time.perf_counter() - t0)
        t.note("crash", f"{target}: worker exited {proc.returncode}: {proc.stderr[-1500:]}")
        return t
    data = json.loads(out.read_text())
    return Tally(**data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100_000, help="total cases over the chosen targets")
    ap.add_argument("--target", choices=sorted(TARGETS), action="append", help="only these targets (repeatable)")
    ap.add_argument("--deadline-s", type=float, default=10.0, help="per-case deadline (s)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first chunk of each target (then +1, ...)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes at a time")
    ap.add_argument("--chunk", type=int, default=5000, help="most cases per worker process")
    ap.add_argument("--json", type=Path, help="write the per-target tallies here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.cases, args.deadline_s, args.seed, args.json)
        return 0
    targets = args.target or list(TARGETS)
    weight = sum(TARGETS[t] for t in targets)
    total = Tally()
    results = {}
    wall0 = time.perf_counter()
    # each target's budget in chunks of at most --chunk cases (seeds seed, seed+1, ...), run --jobs at a time
    jobs: list[tuple[str, int, int]] = []
    for t in targets:
        n = max(1, round(args.cases * TARGETS[t] / weight))
        for i, start in enumerate(range(0, n, args.chunk)):
            jobs.append((t, min(args.chunk, n - start), args.seed + i))
    with tempfile.TemporaryDirectory(prefix="pard-fuzz-out-") as d, \
            concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        done = list(pool.map(lambda j: (j[0], _spawn(j[0], j[1], args.deadline_s, j[2], Path(d))), jobs))
        for t in targets:
            tally = Tally()
            for name, part in done:
                if name == t:
                    tally.merge(part)
            results[t] = tally.__dict__
            total.merge(tally)
            print(f"{t:12s} cases {tally.cases:7d}  ok {tally.ok:7d}  PardError {tally.error:7d}  "
                  f"crash {tally.crash:4d}  hang {tally.hang:3d}  unnamed {tally.unnamed:4d}  {tally.seconds:7.1f} s",
                  flush=True)
            for kind, xs in tally.examples.items():
                for x in xs:
                    print(f"    {kind}: {x}")
    print(f"{'total':12s} cases {total.cases:7d}  ok {total.ok:7d}  PardError {total.error:7d}  "
          f"crash {total.crash:4d}  hang {total.hang:3d}  unnamed {total.unnamed:4d}  {total.seconds:7.1f} s")
    wall = time.perf_counter() - wall0
    print(f"wall time {wall:.1f} s with --jobs {args.jobs} (the seconds above are summed over worker processes)")
    if args.json:
        args.json.write_text(json.dumps({"total": total.__dict__, "targets": results, "wall_s": wall,
                                         "jobs": args.jobs}, indent=2))
    return 1 if total.crash or total.hang else 0


if __name__ == "__main__":
    sys.exit(main())
