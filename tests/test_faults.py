"""The fault run (bench/faults.py), short: executors that raise, hang, return garbage or raise SystemExit,
through a flash crowd of 10x; the full run's figures are in bench/RESULTS.md."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import faults  # noqa: E402
import soak  # noqa: E402


def test_short_fault_run_through_a_flash_crowd() -> None:
    """Eight seconds with 5 % of batches per fault kind and a 10x crowd: every request ends in exactly one
    state, every future resolves, queues stay within their bound and the stages keep serving."""
    res = faults.run(before_s=2.0, crowd_s=3.0, after_s=3.0, fault=0.05, seed=3)
    assert res["conservation_exact"] and res["all_resolved"]
    assert all(res["batches"][k] > 0 for k in faults.KINDS)  # every kind of fault was injected
    assert res["counts"]["failed"] > 0  # raised, garbage and SystemExit batches fail their requests
    assert res["max_queued"] <= res["queue_bound"] + 4 * soak.MAX_B
    assert res["runtime_alive"]  # both stages still executed batches after faults (no dead worker)
    assert res["counts"]["on_time"] > 0 and res["phases"]["after"]["goodput_req_s"] > 0
