"""Live runtime vs simulator: the same arrivals and profile give goodput within a loose bound.

The stages sleep for exactly their profiled duration, so the comparison tests the runtime's
scheduling (same StageSchedulers, same batching rule, same planner) rather than this machine's
CPU speed; docs/live.md states the tolerance measured with the real reference models.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from pard import workloads as wl
from pard.config import PipelineSpec, StageSpec
from pard.runtime import Runtime
from pard.sim import simulate

D0, D1 = 0.004, 0.002  # first stage: d(b) = D0 + D1 * b seconds; the second runs SECOND x that
SECOND = 0.75  # not 1: two stages of equal duration run in lock-step in the simulator, a knife edge
MAX_B = 8


def _sleeper(factor: float) -> Any:
    def run(xs: list[Any]) -> list[Any]:
        time.sleep(factor * (D0 + D1 * len(xs)))
        return list(xs)
    return run


def _spec() -> PipelineSpec:
    return PipelineSpec(name="sleepy", slo=0.12, stages=[
        StageSpec(name="first", profile={b: D0 + D1 * b for b in (1, 2, 4, 8)}, max_batch=MAX_B,
                  successors=["second"]),
        StageSpec(name="second", profile={b: SECOND * (D0 + D1 * b) for b in (1, 2, 4, 8)}, max_batch=MAX_B),
    ])


@pytest.mark.parametrize("policy", ["pard", "nexus", "clipper++", "naive"])
def test_live_goodput_matches_simulation(policy: str) -> None:
    """On a bursty overload, live goodput is within 25 % (plus 10 req/s) of the simulated goodput."""
    spec = _spec()
    capacity = spec.capacity().pipeline  # 8 / 0.02 = 400 req/s
    arrivals = wl.bursty(1.2 * capacity, 4.0, 1.0, seed=3)
    rt = Runtime(spec, {"first": _sleeper(1.0), "second": _sleeper(SECOND)}, policy=policy, sync_interval_s=1.0)
    t_rep = rt.now()
    rt.replay(arrivals, [0])
    rt.close(drain=True, timeout_s=3.0)
    live = rt.report(t0_s=t_rep, duration_s=4.0)
    send = np.clip(rt.outcomes()["send_s"] - t_rep, 0.0, np.nextafter(4.0, 0.0))
    sim = simulate(spec, send, policy, jitter_cv=0.0, seed=0)
    assert live.submitted == sim.submitted == arrivals.size
    assert abs(live.goodput - sim.goodput) <= 0.25 * sim.goodput + 10.0, (live, sim)


def test_cli_profile_then_run_and_simulate(tmp_path: Any) -> None:
    """`pard profile --out` writes a spec that `pard simulate` and `pard run --profile` accept; run writes JSON and PNG."""
    import json

    from pard.cli import main

    prof = tmp_path / "tm-profile.yaml"
    assert main(["profile", "--pipeline", "tm", "--out", str(prof), "--scale", "0.02", "--repeats", "1"]) == 0
    from pard.config import load

    spec = load(prof)
    assert [st.name for st in spec.stages] == ["vehicle_detect", "vehicle_classify", "plate_ocr"]
    sim_json = tmp_path / "sim.json"
    assert main(["simulate", "--pipeline", str(prof), "--duration", "5", "--policies", "pard,naive",
                 "--json", str(sim_json)]) == 0
    out = tmp_path / "out"
    assert main(["run", "--profile", str(prof), "--duration", "2", "--policies", "pard,naive", "--scale", "0.02",
                 "--out", str(out)]) == 0
    doc = json.loads((out / "live.json").read_text())
    sim_doc = json.loads(sim_json.read_text())
    assert set(sim_doc) <= set(doc) and doc["mode"] == "live"
    assert list(doc["policies"]) == ["pard", "naive"]
    for name, entry in doc["policies"].items():
        assert set(entry) == set(sim_doc["policies"]["pard"])
        assert entry["submitted"] == entry["on_time"] + entry["late"] + entry["dropped"] + entry["rejected"] + \
            entry["failed"]
        assert doc["simulated"][name]["submitted"] == entry["submitted"]
    assert (out / "live.png").stat().st_size > 0
    assert main(["run", "--profile", str(tmp_path / "missing.yaml")]) == 2
