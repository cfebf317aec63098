"""Replaying arrival times in wall-clock time through a submit function (``pard run``'s driver)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import PardValueError

__all__ = ["replay"]


def replay(submit: Callable[..., Any], arrivals_s: Any, payloads: Sequence[Any], *,
           slo: float | None = None, progress: Callable[[float], None] | None = None) -> list[Any]:
    """Call ``submit(payload, slo=slo)`` once per arrival time, in wall-clock time, from this thread.

    Args:
        arrivals_s: arrival offsets (s, sorted, >= 0) from the moment of this call, or a
            :class:`pard.workloads.Workload`: its arrivals, and its tokens for the LLM stages
            (``submit(..., in_tokens=, max_tokens=, max_new=out_tokens)``: the trace's true output
            length is what the engine produces).
        payloads: request ``i`` gets ``payloads[i % len(payloads)]``.
        slo: passed to ``submit``.
        progress: called with the elapsed replay time (s) about every 0.1 s.

    Returns:
        what ``submit`` returned (the futures), in arrival order.  A request is sent when its time has
        come (the thread sleeps in between); when the caller falls behind, the late ones go at once.

    Raises:
        PardValueError: unsorted, negative or non-finite arrivals, or no payloads.
    """
    tokens = _token_columns(arrivals_s)
    arr = np.asarray(getattr(arrivals_s, "arrivals_s", arrivals_s), dtype=np.float64)
    if arr.ndim != 1 or (arr.size and (not np.isfinite(arr).all() or arr[0] < 0 or (np.diff(arr) < 0).any())):
        raise PardValueError("arrivals_s must be a sorted 1-D array of finite seconds >= 0")
    if len(payloads) == 0:
        raise PardValueError("payloads must hold at least one payload")
    futures: list[Any] = []
    start = time.perf_counter()
    last_tick = 0.0
    n_pay = len(payloads)
    for i, t in enumerate(arr.tolist()):
        now = time.perf_counter() - start
        if t > now:
            time.sleep(t - now)
            now = t
        if tokens is None:
            futures.append(submit(payloads[i % n_pay], slo=slo))
        else:
            futures.append(submit(payloads[i % n_pay], slo=slo, in_tokens=int(tokens[0][i]),
                                  max_tokens=int(tokens[1][i]), max_new=int(tokens[2][i])))
        if progress is not None and now - last_tick >= 0.1:
            last_tick = now
            progress(now)
    if progress is not None:
        progress(time.perf_counter() - start)
    return futures


def _token_columns(w: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A Workload's (in_tokens, max_tokens, out_tokens) columns, zeros where absent; None without any."""
    cols = [getattr(w, name, None) for name in ("in_tokens", "max_tokens", "out_tokens")]
    if all(c is None for c in cols):
        return None
    n = len(w.arrivals_s)
    zeros = np.zeros(n, dtype=np.int64)
    a, b, c = (zeros if x is None else np.asarray(x, dtype=np.int64) for x in cols)
    return a, b, c
