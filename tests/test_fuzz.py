"""Fuzzing pard's untrusted inputs with a small budget (the full run is bench/fuzz.py, issue 13).

Each target (config loaders in YAML/JSON/TOML and the module format, trace readers, simulate and
submit arguments) runs hypothesis-generated cases in-process, each under a deadline: no case may
crash (any exception other than a pard.PardError) or hang, and a single-field mutation's error
must name the field.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import fuzz  # noqa: E402

CASES = {"yaml": 150, "json": 100, "toml": 100, "module_json": 100, "traces": 120, "simulate": 60, "submit": 100}


@pytest.mark.parametrize("target", sorted(fuzz.TARGETS))
def test_fuzz_target_has_no_crash_or_hang(target: str) -> None:
    """Every fuzzed input to this target returns or raises a PardError naming the field, within the deadline."""
    tally = fuzz.run_target(target, CASES[target], deadline_s=20.0, seed=1)
    assert tally.cases >= CASES[target] // 2  # hypothesis may stop early only on an exhausted space
    assert (tally.crash, tally.hang, tally.unnamed) == (0, 0, 0), tally.examples


def test_deadline_interrupts_a_runaway_case() -> None:
    """A case that runs past its deadline is counted as a hang, not waited for."""
    tally = fuzz.Tally()

    def spin() -> None:
        while True:
            pass

    fuzz.run_case(fuzz.Case(spin, "spin"), tally, deadline_s=0.2)
    assert (tally.cases, tally.hang, tally.crash) == (1, 1, 0)


def test_non_pard_error_counts_as_crash() -> None:
    """An exception that is not a PardError is a crash; a PardError is the expected outcome."""
    import pard

    tally = fuzz.Tally()
    fuzz.run_case(fuzz.Case(lambda: int("x"), "int"), tally, deadline_s=5.0)
    fuzz.run_case(fuzz.Case(lambda: pard.config.loads("slo: [", format="yaml"), "bad yaml"), tally, deadline_s=5.0)
    assert (tally.crash, tally.error) == (1, 1)
