"""``pard run``'s verdict: pard's live goodput against the best of what serving systems do today, then
against the best of the research baselines, each with the noise band of that comparison.

Two groups, in this order, because a user first asks whether pard beats what they would deploy
otherwise, and only then how it stands against the literature:

* **today** (:data:`TODAY`): a per-stage queue timeout (``triton``), one end-to-end timeout
  (``ray-serve``), or no drop at all (``naive``, a server with no timeout set);
* **research** (every other policy run beside ``pard``): the dropping policies of the literature
  (``nexus``, ``clipper++``, ``dagor``), the paper's method as written (``pard-paper``) and its ablations.

Each comparison pairs ``pard`` with the group's best goodput.  Its band is what this run cannot tell from
noise: :func:`tie_band` (two standard errors of the paired per-second difference of on-time counts, the
variation the two runs show second by second on the same arrivals) plus the change in the machine's
speed between the two runs (:func:`pard.cli.probe.speed_change`, a probe timed before and after each
run).  The run replays one seed once per policy, so there is no across-seed spread to report; the
per-second pairing is the variation the run itself measures.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..outcomes import ON_TIME
from .probe import speed_change

__all__ = ["TODAY", "GROUPS", "TIE_BAND", "MIN_BAND_SECONDS", "tie_band", "compare_pair", "verdicts", "verdict_lines",
           "verdict"]

#: What serving systems do today: a queue timeout, an end-to-end timeout, no drop (DESIGN §3.6).
TODAY = ("triton", "ray-serve", "naive")
#: The verdict's groups, in the order it reports them: (key, title).
GROUPS = (("today", "what serving systems do today"), ("research", "the research baselines"))
#: The tie band used when a run is too short to measure its own (fewer than MIN_BAND_SECONDS seconds).
TIE_BAND = 0.02
MIN_BAND_SECONDS = 5


def tie_band(pard: Any, best: Any) -> tuple[float, bool]:
    """The relative goodput difference this run cannot tell from noise, measured from the run itself.

    Both runs replay the same arrivals, so each second ``t`` pairs pard's on-time count ``p_t`` (requests
    sent in that second) with the baseline's ``b_t``.  The band is two standard errors of the mean paired
    difference, ``2 * std(p_t - b_t) / sqrt(T)``, over the baseline's mean per-second count (a 95 % band
    under independent seconds; bursts correlate neighbouring seconds, so it is a lower estimate).

    Returns:
        ``(band, measured)``: ``measured`` False when a report lacks per-request outcomes or the run has
        fewer than :data:`MIN_BAND_SECONDS` seconds; ``band`` is then :data:`TIE_BAND`.
    """
    try:
        series = []
        for r in (pard, best):
            sec = np.floor(np.asarray(r.send_s) - r.t0_s).astype(np.int64)
            series.append(sec[np.asarray(r.state) == ON_TIME])
        nb = int(math.ceil(min(pard.duration_s, best.duration_s)))
    except AttributeError:
        return TIE_BAND, False
    if nb < MIN_BAND_SECONDS:
        return TIE_BAND, False
    p, b = (np.bincount(np.clip(s, 0, nb - 1), minlength=nb).astype(np.float64) for s in series)
    mean_b = float(b.mean())
    if mean_b <= 0:
        return TIE_BAND, False
    return float(2.0 * np.std(p - b, ddof=1) / math.sqrt(nb) / mean_b), True


def compare_pair(pard: Any, name: str, base: Any, live_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """pard against one baseline run: goodputs (req/s), drop rates, the relative gain and its band.

    Returns a dict with ``baseline``, ``goodput``, ``baseline_goodput``, ``gain`` (pard / baseline - 1;
    None when the baseline finished nothing on time), ``band`` (``noise`` + ``|machine_change|``),
    ``noise``, ``noise_measured`` (False: the fixed :data:`TIE_BAND`), ``machine_change`` (how much slower
    the machine ran for pard's run than for the baseline's; None without probes), ``drop_rate``,
    ``baseline_drop_rate`` and ``outcome``: ``"ahead"`` (gain above the band), ``"behind"`` (below minus
    the band) or ``"equal"``."""
    info = live_info or {}
    noise, measured = tie_band(pard, base)
    machine = speed_change(info.get("pard", {}).get("machine_probe_s"), info.get(name, {}).get("machine_probe_s"))
    band = noise + abs(machine or 0.0)
    gain = pard.goodput / base.goodput - 1.0 if base.goodput > 0 else None
    if gain is None:
        outcome = "ahead" if pard.goodput > 0 else "equal"
    else:
        outcome = "ahead" if gain > band else "behind" if gain < -band else "equal"
    return {"baseline": name, "goodput": float(pard.goodput), "baseline_goodput": float(base.goodput),
            "gain": gain, "band": band, "noise": noise, "noise_measured": measured, "machine_change": machine,
            "drop_rate": float(pard.drop_rate), "baseline_drop_rate": float(base.drop_rate), "outcome": outcome}


def verdicts(reports: dict[str, Any], live_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """The verdict as data (the ``live.verdict`` block of ``pard run --json``), groups in :data:`GROUPS` order.

    Each group present in ``reports`` maps to ``{"title", "baselines": [names run], "best": compare_pair of
    the best goodput, "each": [compare_pair per baseline, in run order]}``; a group with no policy run is
    None.  Empty when ``pard`` was not run."""
    if "pard" not in reports:
        return {}
    p = reports["pard"]
    out: dict[str, Any] = {}
    for key, title in GROUPS:
        names = [n for n in reports if n != "pard" and (n in TODAY) == (key == "today")]
        if not names:
            out[key] = None
            continue
        each = [compare_pair(p, n, reports[n], live_info) for n in names]
        best = max(each, key=lambda c: c["baseline_goodput"])
        out[key] = {"title": title, "baselines": names, "best": best, "each": each}
    return out


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def _band_why(c: dict[str, Any]) -> str:
    noise = (f"{_pct(c['noise'])} per-second noise (two standard errors of the paired per-second difference)"
             if c["noise_measured"] else f"a fixed {_pct(c['noise'])}: the run is too short to measure its own noise")
    m = c["machine_change"]
    if m is None:
        return noise
    how = "slower" if m > 0 else "faster"
    return (f"{noise} + {_pct(abs(m))}: the machine ran {_pct(abs(m))} {how} for pard's run than for "
            f"{c['baseline']}'s, by a probe timed before and after each")


def _group_line(g: dict[str, Any]) -> str:
    c = g["best"]
    head = f"pard vs {g['title']} (best of {', '.join(g['baselines'])}: {c['baseline']}): "
    if c["gain"] is None:
        return head + f"pard goodput {c['goodput']:.1f} req/s; {c['baseline']} finished no request on time."
    figures = (f"goodput {c['goodput']:.1f} vs {c['baseline_goodput']:.1f} req/s, {c['gain']:+.1%}, "
               f"band +/-{_pct(c['band'])} ({_band_why(c)}); drop rate {c['drop_rate']:.1%} vs "
               f"{c['baseline_drop_rate']:.1%}")
    said = {"ahead": "pard beat it", "behind": "pard did NOT beat it", "equal": "about equal"}[c["outcome"]]
    line = f"{head}{said}: {figures}"
    if len(g["each"]) > 1:
        line += "; each: " + ", ".join(
            f"{e['baseline']} " + ("-" if e["gain"] is None else f"{e['gain']:+.1%} +/-{_pct(e['band'])}")
            for e in g["each"])
    return line + ("; see docs/live.md for why this happens." if c["outcome"] == "behind" else ".")


def verdict_lines(v: dict[str, Any]) -> list[str]:
    """The human verdict: one line per group present in ``v`` (:func:`verdicts`), today's first."""
    return [_group_line(v[key]) for key, _ in GROUPS if v.get(key)]


def verdict(reports: dict[str, Any], live_info: dict[str, Any] | None = None) -> str:
    """The human verdict as one string (its lines joined); empty when pard or every baseline is missing."""
    return "\n".join(verdict_lines(verdicts(reports, live_info)))
