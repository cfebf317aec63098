"""``pard run`` steps 4-5: compare the live runs -- with each other (the metrics table; the verdict is
:mod:`pard.cli.verdict`), with the simulator on the same arrivals, and with the profile they used
(drift) -- in tables and lines."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ..outcomes import REASONS
from ..profiling import DRIFT_LIMIT, mark_stale, profile_drift
from .measure import age

__all__ = ["drop_reasons", "reasons_line", "bound_line", "check_profile", "agreement_table", "probe_line",
           "PROBE_SPREAD_WARN", "refit_note", "REFIT_NOTE_LIMIT"]


#: probe_line notes a machine whose probe times spread by more than this share across the runs.
PROBE_SPREAD_WARN = 0.1
#: refit_note names a policy whose live goodput is more than this share off its refit simulation
#: (docs/live.md states +/-15 % for the dropping policies; the timeout-only ones can differ by far more).
REFIT_NOTE_LIMIT = 0.25


def probe_line(live_info: dict[str, Any], probe: dict[str, Any]) -> str:
    """One line with each run's machine-probe times (ms, before / after) and their spread over all runs."""
    times = {n: i["machine_probe_s"] for n, i in live_info.items() if i.get("machine_probe_s")}
    if not times:
        return ""
    parts = ", ".join(f"{n} {t[0] * 1e3:.1f} / {t[1] * 1e3:.1f}" for n, t in times.items())
    every = [x for t in times.values() for x in t]
    spread = max(every) / min(every) - 1.0 if min(every) > 0 else math.nan
    line = (f"machine probe ({probe.get('stage')} on a batch of {probe.get('batch')}, median of {probe.get('repeats')} "
            f"calls, before / after each run): {parts} ms")
    if spread > PROBE_SPREAD_WARN:
        line += (f"; the machine's speed changed by up to {spread:.0%} across these runs (other processes used the "
                 f"cores): each verdict line's band includes the change between pard's run and that group's "
                 f"best baseline's")
    return line


def drop_reasons(by_reason: dict[str, int]) -> list[str]:
    """Every drop reason code of the core (so ``cancelled`` always shows), then any other seen."""
    names = list(REASONS)
    return names + sorted(r for r in by_reason if r not in names)


def reasons_line(live_info: dict[str, Any], drain_limit_s: float) -> str:
    """One line with each run's drops by reason, saying what ``cancelled`` means in a live run."""
    parts = []
    for name, info in live_info.items():
        seen = ", ".join(f"{r} {c}" for r, c in info["dropped_by_reason"].items() if c) or "none"
        parts.append(f"{name}: {seen}")
    return (f"drops by reason: {'; '.join(parts)}. (\"cancelled\": still in flight {drain_limit_s:g} s after the "
            f"last arrival, when the run stopped draining -- end-of-run cancellations, not policy drops; "
            f"\"rejected\": a full queue (max_queue_size) or ingress ring: back-pressure.)")


def bound_line(live_info: dict[str, Any]) -> str:
    """One line saying which capacity each run's goodput bound ("of bound") used."""
    parts = []
    profile_req_s = None
    for name, info in live_info.items():
        b = info["bound_capacity"]
        profile_req_s = b["profile_req_s"]
        up = b["req_s"] / b["profile_req_s"] if b["profile_req_s"] > 0 else 1.0
        parts.append(f"{name} {b['req_s']:.0f}" + (f" (x{up:.2f})" if up > 1.0005 else ""))
    return (f"goodput bound (\"of bound\"): the measured profile's capacity ({profile_req_s or 0:.0f} req/s at the "
            f"best batch sizes), scaled up where a run's batches ran faster than profiled: {', '.join(parts)} req/s")


def check_profile(spec: Any, batches: dict[str, np.ndarray], used: dict[str, Any], *,
                   cache_path: Path | None, profile_arg: Path | None) -> dict[str, Any]:
    """Compare the run's batches with the profile used; warn, and mark a cached profile stale, on drift.

    The bottleneck stage's drift (:func:`pard.profiling.profile_drift`, median of batch duration
    over profiled ``d(b)``) beyond :data:`pard.profiling.DRIFT_LIMIT` either way means the machine
    runs faster or slower than when it was profiled: the returned ``warning`` says so and what to
    do; a profile from the cache (``cache_path``) is marked stale so the next ``pard run`` measures
    it again.  Returns the JSON block ``live.profile_check``.
    """
    drift = profile_drift(spec, batches)
    bottleneck = spec.capacity().bottleneck
    ratio = drift.get(bottleneck)
    drifted = ratio is not None and abs(ratio - 1.0) > DRIFT_LIMIT
    marked = False
    warning = ""
    if drifted and ratio is not None:
        how = f"{(ratio - 1.0) * 100:.0f} % slower" if ratio > 1 else f"{(1.0 - ratio) * 100:.0f} % faster"
        warning = (f"warning: the bottleneck stage {bottleneck} ran {how} than its profile during these runs "
                   f"(median batch duration / profiled d(b) = {ratio:.2f}; limit +/-{DRIFT_LIMIT * 100:g} %): "
                   f"the profile ({used['source']}, measured {age(used.get('age_s'))} ago) no longer matches "
                   f"this machine's load, so live and simulated figures disagree. ")
        if cache_path is not None:
            try:
                mark_stale(cache_path, f"a live run's {bottleneck} batches took {ratio:.2f}x the profiled durations")
                marked = True
                warning += ("The cached profile is now marked stale: the next `pard run` measures it again "
                            "(or rerun now with `pard run --refresh-profile`).")
            except OSError as exc:
                warning += f"Rerun with `pard run --refresh-profile` (could not mark the cache stale: {exc})."
        else:
            warning += (f"Measure it again with `pard profile --out {profile_arg}`, or leave --profile out and "
                        f"run `pard run --refresh-profile`.")
    return {"drift_by_stage": drift, "bottleneck": bottleneck, "drift": ratio, "limit": DRIFT_LIMIT,
            "drifted": drifted, "marked_stale": marked, "warning": warning or None}


def agreement_table(reports: dict[str, Any], simulated: dict[str, Any], refit: dict[str, Any],
                    live_info: dict[str, Any]) -> Any:
    """The live-vs-simulated table (same arrivals, measured profile); records the figures in ``live_info``."""
    agree = require("rich.table", "cli", "the pard command").Table(
        title="live vs simulated (same arrivals, measured profile)")
    for col in ("policy", "live goodput/s", "simulated", "difference", "simulated, profile refit to run",
                "difference", "scheduler share of latency"):
        agree.add_column(col, justify="left" if col == "policy" else "right")
    for name, rep in reports.items():
        sim_g = simulated[name].goodput
        ref_g = refit[name].goodput
        diff = (rep.goodput - sim_g) / sim_g if sim_g > 0 else math.nan
        diff2 = (rep.goodput - ref_g) / ref_g if ref_g > 0 else math.nan
        share = live_info[name]["scheduler_share_of_latency"]
        agree.add_row(name, f"{rep.goodput:.1f}", f"{sim_g:.1f}", f"{diff:+.1%}", f"{ref_g:.1f}", f"{diff2:+.1%}",
                      "-" if share is None else f"{share:.3%}")
        live_info[name]["simulated_goodput"] = sim_g
        live_info[name]["goodput_difference"] = None if math.isnan(diff) else diff
        live_info[name]["simulated_refit_goodput"] = ref_g
        live_info[name]["goodput_difference_refit"] = None if math.isnan(diff2) else diff2
    return agree


def refit_note(live_info: dict[str, Any]) -> str | None:
    """A note for under the agreement table, naming each policy whose live goodput is more than
    :data:`REFIT_NOTE_LIMIT` off its refit simulation (``goodput_difference_refit``, recorded by
    :func:`agreement_table`), with why that happens; None when there is none (docs/live.md)."""
    far = [(name, d) for name, info in live_info.items()
           if (d := info.get("goodput_difference_refit")) is not None and abs(d) > REFIT_NOTE_LIMIT]
    if not far:
        return None
    names = ", ".join(f"{name} {d:+.0%}" for name, d in far)
    return (f"note: live goodput more than {REFIT_NOTE_LIMIT:.0%} off the refit simulation: {names}. The refit runs each "
            f"stage at one speed for the whole run. Near overload a policy that drops only at a timeout, or never "
            f"(triton, ray-serve, naive), sits on a goodput cliff: a few % of one stage's speed decide between most "
            f"requests on time and almost none, so one constant speed cannot tell which side of the cliff the live "
            f"run was on (docs/live.md, 'Why the refit column can be far off')")
