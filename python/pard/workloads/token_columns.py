"""Token counts carried by a user's trace file, for pipelines with an LLM stage (DESIGN §3.8).

A csv trace may carry, beside its arrival times, each request's input tokens (``in_tokens``, or the Azure
LLM trace's ``ContextTokens``), its true output length (``out_tokens`` / ``GeneratedTokens``) and the
client's output-length hint (``max_tokens``); an Azure LLM trace file always carries the first two.
:func:`trace_tokens` reads them, row by row in arrival order, and :class:`TraceTokens` hands them to a run:
aligned with the arrivals of an exact replay (:func:`pard.workloads.load_trace` with no rate), or, for a
trace rescaled to a rate (whose arrivals are new requests), as pairs drawn from the file's own rows, as
:func:`pard.workloads.draw_tokens` draws from the bundled trace.  Needs pandas (the ``pard[cli]`` extra).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import TraceError
from ._common import F64, rng, sort_order

__all__ = ["TraceTokens", "trace_tokens", "file_tokens", "TOKEN_COLUMNS"]

I32 = npt.NDArray[np.int32]

#: Each token field and the column names it is read from, first match wins (the Azure LLM trace's names last).
TOKEN_COLUMNS: dict[str, tuple[str, ...]] = {
    "in_tokens": ("in_tokens", "ContextTokens"),
    "out_tokens": ("out_tokens", "GeneratedTokens"),
    "max_tokens": ("max_tokens",),
}
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class TraceTokens:
    """A trace file's token counts, one entry per row in arrival order.

    Attributes:
        times_s: shape (n,), float64, the rows' arrival times as an exact replay reads them (sorted).
        in_tokens, out_tokens: shape (n,), int32 (``out_tokens`` >= 1: a request that generated nothing
            still ends with one step, its end-of-sequence token).
        max_tokens: shape (n,), int32 >= 0 (0 = no hint), or None when the file has no such column.
        columns: the columns read, for the run's note (``"in_tokens, out_tokens"``).
    """

    times_s: F64
    in_tokens: I32
    out_tokens: I32
    max_tokens: I32 | None
    columns: str

    def for_replay(self, start_s: float, duration_s: float | None) -> dict[str, Any]:
        """The token keywords of :func:`pard.simulate` for the exact replay of ``[start_s, start_s +
        duration_s)`` (the rows :func:`pard.workloads.load_trace` keeps, in its order)."""
        if duration_s is None and start_s == 0:
            keep = np.ones(self.times_s.shape, dtype=bool)
        else:
            end = np.inf if duration_s is None else start_s + duration_s
            keep = (self.times_s >= start_s) & (self.times_s < end)
        return {"in_tokens": self.in_tokens[keep], "out_tokens": self.out_tokens[keep],
                "max_tokens": None if self.max_tokens is None else self.max_tokens[keep]}

    def draw(self, n: int, seed: int | np.random.Generator) -> dict[str, Any]:
        """The token keywords of :func:`pard.simulate` for ``n`` new requests: rows drawn with replacement
        (seeded), each row's counts kept together."""
        pick = rng(seed).integers(0, self.in_tokens.size, size=int(n))
        return {"in_tokens": self.in_tokens[pick], "out_tokens": self.out_tokens[pick],
                "max_tokens": None if self.max_tokens is None else self.max_tokens[pick]}


def _counts(path: Path, df: Any, name: str, offset: int, low: int) -> npt.NDArray[np.int64]:
    """Column ``name`` of ``df`` (strings) as whole numbers >= low, or TraceError naming the file, the line
    (row index + offset), the column and the value."""
    import pandas as pd

    text = df[name].astype(str).str.strip()
    vals = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(vals) | (vals < low) | (vals > _INT32_MAX) | (vals != np.round(vals))
    if bad.any():
        i = int(np.argmax(bad))
        raw = text.iloc[i]
        what = "missing value" if raw == "" or raw.lower() == "nan" else f"{raw!r} is not a whole number of tokens"
        raise TraceError(f"{path}, line {int(df.index[i]) + offset}, column {name!r}: {what} (expected an integer "
                         f"in {low}..{_INT32_MAX})")
    return vals.astype(np.int64)


def trace_tokens(path: Path, times_s: F64, df: Any, offset: int) -> TraceTokens | None:
    """The token columns of a trace file read as a csv table, or None when it has none.

    Args:
        path: the file (for messages).
        times_s: shape (n,), the rows' arrival times in file order (seconds).
        df: the file's rows as strings (one per arrival, blank lines removed; a pandas DataFrame whose index
            is the row's position in the file).
        offset: file line = row index + offset.

    Raises:
        TraceError: a file with one of ``in_tokens`` / ``out_tokens`` and not the other, or a count that is
            missing, negative or not a whole number (naming the file, line and column).
    """
    found = {field: next((c for c in names if c in df.columns), None) for field, names in TOKEN_COLUMNS.items()}
    if all(c is None for c in found.values()):
        return None
    if found["in_tokens"] is None or found["out_tokens"] is None:
        has = next(c for c in found.values() if c is not None)
        need = "in_tokens (or ContextTokens)" if found["in_tokens"] is None else "out_tokens (or GeneratedTokens)"
        raise TraceError(f"{path}: column {has!r} gives token counts, but the file has no {need} column: an llm "
                         f"stage needs each request's input and output tokens together")
    ins = _counts(path, df, found["in_tokens"], offset, 0)
    outs = np.maximum(_counts(path, df, found["out_tokens"], offset, 0), 1)
    hint = None if found["max_tokens"] is None else _counts(path, df, found["max_tokens"], offset, 0)
    with warnings.catch_warnings():  # the arrivals' own reading already said whether they were out of order
        warnings.simplefilter("ignore")
        order = sort_order(np.asarray(times_s, dtype=np.float64), str(path))
    if order is not None:
        times_s, ins, outs = times_s[order], ins[order], outs[order]
        hint = None if hint is None else hint[order]
    cols = ", ".join(c for c in found.values() if c is not None)
    return TraceTokens(times_s=np.asarray(times_s, dtype=np.float64), in_tokens=ins.astype(np.int32),
                       out_tokens=outs.astype(np.int32), max_tokens=None if hint is None else hint.astype(np.int32),
                       columns=cols)


def file_tokens(path: Path, fmt: str, *, column: str | None = None, unit: str | None = None,
                spell: Callable[[str], str] = str) -> TraceTokens | None:
    """:func:`trace_tokens` of trace file ``path`` in format ``fmt`` (``csv``: its arrival times read with
    ``column`` and ``unit`` as :func:`pard.workloads.load_trace` reads them; ``azure-llm``: ``TIMESTAMP``,
    ``ContextTokens``, ``GeneratedTokens``); None for another format, or a csv without token columns.

    Raises:
        TraceError: as :func:`trace_tokens`, and as :func:`pard.workloads.load_trace` for the file.
    """
    if fmt == "csv":
        from .files import _read_csv

        c = _read_csv(path, column, unit, spell)
        return trace_tokens(path, c.times_s, c.df, c.offset) if c.header else None
    if fmt == "azure-llm":
        from .traces import azure_llm

        with warnings.catch_warnings():  # load_trace's own reading warns about the file once
            warnings.simplefilter("ignore")
            w = azure_llm(path, tokens=True)
        assert w.in_tokens is not None and w.out_tokens is not None
        return TraceTokens(times_s=w.arrivals_s, in_tokens=w.in_tokens, out_tokens=w.out_tokens, max_tokens=None,
                           columns="ContextTokens, GeneratedTokens")
    return None
