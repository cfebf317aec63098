"""``pard run`` step 3: replay the arrivals live through :class:`pard.Runtime`, once per policy, and
simulate the same arrivals with the measured profile (and with the profile refit to the run)."""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from .._extras import require
from ..models import sample_inputs, stage_set
from ..outcomes import LATE, ON_TIME
from ..profiling import profile_drift, profile_from_batches
from ..errors import RuntimeStateError
from ..runtime import Runtime
from ..sim import simulate
from .llm_run import StepLog
from .probe import MachineProbe

__all__ = ["LiveRuns", "replay_policies", "send_lag", "LAG_WARN_SLO_SHARE"]

#: Warn when the replay sent a request later than this share of the SLO after its arrival time.
LAG_WARN_SLO_SHARE = 0.1


class LiveRuns:
    """What the live replays produced, by policy: the runtimes with their replay start, the simulated
    and refit reports, the per-run figures for ``live.policies`` (with ``machine_probe_s``, the
    :class:`~pard.cli.probe.MachineProbe` times before and after the run), every run's batches, what
    the probe times (``probe``), and with an llm stage what its engines did (``llm_steps``,
    :meth:`~pard.cli.llm_run.StepLog.check`)."""

    def __init__(self) -> None:
        self.runs: dict[str, tuple[Runtime, float]] = {}
        self.simulated: dict[str, Any] = {}
        self.refit: dict[str, Any] = {}
        self.info: dict[str, Any] = {}
        self.batches: list[dict[str, np.ndarray]] = []
        self.probe: dict[str, Any] = {}
        self.llm_steps: dict[str, dict[str, Any]] = {}


def send_lag(send_s: np.ndarray, arrivals_s: np.ndarray) -> dict[str, float] | None:
    """How late the replay sent each request after its arrival time (s): ``p50``, ``p99``, ``max``;
    None unless there is one send per arrival (ids are in arrival order).  A busy machine can stall
    the sending thread, which then sends the late requests at once: a burst the trace does not have."""
    if send_s.size != arrivals_s.size or not send_s.size:
        return None
    lag = np.maximum(send_s - arrivals_s, 0.0)
    return {"p50": float(np.quantile(lag, 0.5)), "p99": float(np.quantile(lag, 0.99)), "max": float(lag.max())}


def _run_info(rt: Runtime, spec: Any, batches: dict[str, np.ndarray], drain_s: float) -> dict[str, Any]:
    """The figures of one live run: scheduler time and its share of latency, batches, drift."""
    out = rt.outcomes()
    done = (out["state"] == ON_TIME) | (out["state"] == LATE)
    lat = out["finish_s"][done] - out["send_s"][done]
    ov = rt.overhead()
    e2e = float(lat.sum()) if lat.size else math.nan
    sizes = {st.name: batches["size"][batches["stage"] == k] for k, st in enumerate(spec.stages)}
    return {
        "scheduler_s": ov["scheduler_s"], "planner_s": ov["planner_s"],
        "planner_calls": int(ov["planner_calls"]),
        "scheduler_share_of_latency": (ov["scheduler_s"] + ov["planner_s"]) / out["send_s"].size
        / (e2e / lat.size) if lat.size else None,
        "mean_latency_s": e2e / lat.size if lat.size else None,
        "drain_s": drain_s,
        "batches": int(batches["size"].size),
        "mean_batch": {n: float(np.mean(b)) if b.size else 0.0 for n, b in sizes.items()},
        "profile_drift": profile_drift(spec, batches),
    }


def replay_policies(args: argparse.Namespace, spec: Any, arrivals: np.ndarray, err: Any,
                    drain_limit_s: float, workload: Any = None) -> LiveRuns:
    """Replay ``arrivals`` live once per ``args.policies``, each followed by its two simulations.

    ``workload``: the arrivals with their token counts (a :class:`pard.workloads.Workload`) for a pipeline
    with an llm stage, replayed and simulated with them; its engines' steps are recorded.

    Raises:
        pard.errors.RuntimeStateError: a run whose requests do not all end in exactly one terminal state.
    """
    rp = require("rich.progress", "cli", "the pard command")
    workers = [st.workers for st in spec.stages]
    models = getattr(args, "models", "numpy")
    entry_shape = stage_set(spec, models, scale=float(args.scale)).entry_shape
    payloads = list(sample_inputs(64, seed=args.seed, shape=entry_shape))
    res = LiveRuns()
    probe = MachineProbe(spec, models, scale=float(args.scale), seed=args.seed)  # the machine, between runs
    res.probe = {"stage": probe.stage, "batch": probe.batch, "repeats": probe.repeats}
    total = float(args.duration) * len(args.policies)
    with rp.Progress(rp.TextColumn("{task.description}"), rp.BarColumn(), rp.TextColumn("{task.percentage:>3.0f}%"),
                     rp.TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("live", total=total)
        for i, name in enumerate(args.policies):
            bar.update(task, description=f"live {name}")
            offset = i * float(args.duration)
            # fresh executors per run: each runtime's workers bind their own engine sessions
            built = stage_set(spec, models, scale=float(args.scale))
            log = StepLog() if workload is not None else None
            if log is not None:  # record what the llm stages' engines decode, step by step
                for st in spec.stages:
                    if st.kind == "llm":
                        built.executors[st.name] = log.wrap(built.executors[st.name])
            before = probe()
            rt = Runtime(spec, built.executors, join=built.join, policy=name, workers=workers,
                         planner={"seed": args.seed + 1})
            t_rep = rt.now()
            try:
                def tick(t: float, o: float = offset) -> None:
                    bar.update(task, completed=min(o + t, total))

                rt.replay(arrivals if workload is None else workload, payloads, progress=tick)
                t_drain = time.perf_counter()
                # what is still queued this long after the last arrival cannot finish on time any
                # more; it is cancelled (counted as dropped, reason "cancelled") to bound the run
                rt.close(drain=True, timeout_s=drain_limit_s)
                drain_s = time.perf_counter() - t_drain
            finally:
                rt.close(drain=False)
            _check_conservation(rt, name)
            batches = rt.batches()
            res.runs[name] = (rt, t_rep)
            if log is not None:
                res.llm_steps[name] = log.check(rt.outcomes(), rt.now() - time.perf_counter())
            res.batches.append(batches)
            res.info[name] = _run_info(rt, spec, batches, drain_s)
            res.info[name]["machine_probe_s"] = [before, probe()]
            lag = send_lag(rt.outcomes()["send_s"] - t_rep, arrivals)
            res.info[name]["send_lag_s"] = lag
            if lag is not None and lag["max"] > LAG_WARN_SLO_SHARE * spec.slo:
                err.print(f"[yellow]warning: the replay of {name} fell behind its trace by up to {lag['max']:.3f} s "
                          f"(p99 {lag['p99']:.3f} s; SLO {spec.slo:g} s): the sender was starved (a busy "
                          f"machine) and sent the late requests at once, so {name} saw bursts the trace "
                          f"does not have[/]")
            # the live send times; the few the replay sent a little after the window's end (it lags
            # by milliseconds under load) are clamped into it, so both reports span the same seconds
            send = np.clip(rt.outcomes()["send_s"] - t_rep, 0.0, np.nextafter(float(args.duration), 0.0))
            tokens = {} if workload is None else {"in_tokens": workload.in_tokens, "out_tokens": workload.out_tokens,
                                                  "max_tokens": workload.max_tokens}
            res.simulated[name] = simulate(spec, send, name, workers=workers, seed=args.seed, **tokens)
            res.refit[name] = simulate(profile_from_batches(spec, batches), send, name, workers=workers,
                                       seed=args.seed, **tokens)
            bar.update(task, completed=offset + float(args.duration))
    return res


def _check_conservation(rt: Runtime, policy: str) -> None:
    """Every submitted request of a closed run ended in exactly one terminal state."""
    c = rt.counts()
    ended = sum(c[s] for s in ("on_time", "late", "dropped", "rejected", "failed"))
    if c["pending"] or ended != c["submitted"]:
        raise RuntimeStateError(f"pard run: the {policy} run does not conserve requests: submitted "
                                f"{c['submitted']}, ended {ended}, pending {c['pending']} ({c})")
