"""Trace files and named workloads for the command line and scripts: which format a trace file is in
(sniffed conservatively from its first lines), reading a CSV of arrival times with the column and unit
chosen or guessed, and :func:`load_trace`, the arrivals for a trace name (``azure-conv``, ``poisson``,
``bursty`` or a file) cut to a window and scaled to a rate (DESIGN §5).

Messages name the options the way the caller spells them: ``spell("trace_format")`` is
``"trace_format"`` by default; the CLI passes one that gives ``"--trace-format"``.  Needs pandas
for CSV files (the ``pard[cli]`` extra).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import TraceError
from ._common import drop_blank_rows, first_missing, read_csv_text, sort_order
from .synthetic import bursty, poisson
from .traces import (BUNDLED_TRACES, _read_timestamp_csv, _times_from_column, azure_functions, azure_llm,
                     per_second_counts)
from .transforms import scale, window

__all__ = ["load_trace", "resolve_file_format", "read_csv_trace", "TRACE_FORMATS", "UNITS", "BUILTIN_TRACES",
           "BURSTY_CV"]

#: Formats of a trace file (``trace_format``).
TRACE_FORMATS = ("azure-llm", "azure-functions", "counts", "csv")
#: Names :func:`load_trace` takes besides a file: the bundled trace and two generators.
BUILTIN_TRACES = ("azure-conv", "bursty", "poisson")


def _keyword(name: str) -> str:
    """How an option is named in messages by default: as the keyword argument."""
    return name


BURSTY_CV = 1.5  #: CV of per-second counts of ``trace bursty`` (the issue's bursty case)


def load_trace(
    trace: str, *, trace_format: str | None, scaling: str, rate: float | None, start_s: float,
    duration_s: float | None, seed: int, column: str | None = None, unit: str | None = None,
    spell: Callable[[str], str] = _keyword,
) -> tuple[np.ndarray, str]:
    """Arrival times (s) and a label for ``trace`` and its options.

    Generators (``poisson``, ``bursty`` with CV 1.5) produce ``duration_s`` seconds at ``rate``.  A real
    trace (the bundled ``azure-conv`` or a file) is cut to ``[start_s, start_s + duration_s)`` of its own
    time and scaled to ``rate`` (``scaling`` amplify or compress; with compress the window is taken after
    scaling).  ``rate`` None replays a ``csv`` file of seconds exactly (window applied, times unchanged
    when ``start_s`` is 0).  ``duration_s`` None: 300 s, or the whole file for an exact replay.
    A file's format is ``trace_format`` or guessed by :func:`resolve_file_format`; a csv is read by
    :func:`read_csv_trace` (``column``, ``unit``).  The label says which format, column and unit
    were used and whether the format was guessed.

    Raises:
        TraceError: the message names the option and the value.
    """
    opt = spell
    if trace in ("bursty", "poisson"):
        if rate is None:
            raise TraceError(f"{opt('trace')} {trace} needs {opt('load')}")
        dur = 300.0 if duration_s is None else duration_s
        if trace == "poisson":
            arr = poisson(rate, dur, seed=seed)
        else:
            arr = bursty(rate, dur, BURSTY_CV, seed=seed)
        return np.asarray(arr, dtype=np.float64), f"{trace}" + (f" (cv {BURSTY_CV:g})" if trace == "bursty" else "")
    if trace in BUNDLED_TRACES:
        raw, label, fmt = BUNDLED_TRACES[trace](), trace, "azure-llm"
    else:
        path = Path(trace)
        if not path.is_file():
            raise TraceError(f"{opt('trace')}: {trace!r} is neither one of {', '.join(BUILTIN_TRACES)} nor an existing file")
        fmt, how = resolve_file_format(path, trace_format, column, spell=spell)
        if (column is not None or unit is not None) and fmt != "csv":
            raise TraceError(f"{opt('column')}/{opt('unit')} apply to {opt('trace_format')} csv, not {fmt}")
        note = fmt
        if fmt == "azure-llm":
            raw = azure_llm(path)
        elif fmt == "azure-functions":
            raw = azure_functions(path, seed=seed)
        elif fmt == "counts":
            raw = per_second_counts(path, seed=seed)
        else:
            raw, where = read_csv_trace(path, column=column, unit=unit, spell=spell)
            note = f"csv, {where}"
        label = f"{path} ({note}{'' if how == 'given' else '; format ' + how})"
    raw = np.asarray(raw, dtype=np.float64)
    if raw.size == 0:
        raise TraceError(f"{opt('trace')} {trace!r} holds no arrivals")
    if rate is None:  # exact replay of a csv of seconds
        if fmt != "csv":
            raise TraceError(f"{opt('load')} is required for {opt('trace_format')} {fmt} (only csv replays exactly)")
        if duration_s is None and start_s == 0:
            return raw, f"{label} (exact)"
        end = np.inf if duration_s is None else start_s + duration_s
        return raw[(raw >= start_s) & (raw < end)] - start_s, f"{label} (exact window)"
    dur = 300.0 if duration_s is None else duration_s
    raw = raw - raw[0]
    if scaling == "amplify":
        sel = window(raw, start_s, dur)
        if sel.size < 2:
            raise TraceError(f"{opt('start')} {start_s:g} {opt('duration')} {dur:g}: fewer than two arrivals of {opt('trace')} "
                             f"{trace!r} fall there (it spans {raw[-1]:.0f} s)")
        arr = scale(sel, rate, mode="amplify", seed=seed)
        arr = arr[arr < dur]
    else:
        sel = raw[raw >= start_s] - start_s
        if sel.size < 2:
            raise TraceError(f"{opt('start')} {start_s:g}: fewer than two arrivals of {opt('trace')} {trace!r} after it")
        arr = scale(sel, rate, mode="compress")
        arr = arr[arr < dur]
    return np.asarray(arr, dtype=np.float64), f"{label} ({scaling})"


_TIME_NAME = re.compile(r"^(t|ts|time|times|timestamp|timestamps|arrival|arrivals|arrival_?time|arrival_?s|"
                        r"send_?time|send_?s|date|datetime|time_?s|seconds|sec|secs)$", re.IGNORECASE)
_DATE_RE = re.compile(r"\s*\d{4}-\d{2}-\d{2}")
UNITS = ("s", "ms", "us", "ns", "datetime")


def _is_value(field: str) -> bool:
    """A data field (a number or an ISO date-time) rather than a header name."""
    f = field.strip()
    try:
        float(f)
        return True
    except ValueError:
        return bool(_DATE_RE.match(f))


def _head(path: Path, lines: int = 200) -> list[list[str]]:
    """The first ``lines`` non-blank lines of ``path``, split on commas."""
    rows: list[list[str]] = []
    with path.open("r", errors="replace") as fh:
        for line in fh:
            if line.strip():
                rows.append([f.strip() for f in line.rstrip("\r\n").split(",")])
            if len(rows) >= lines:
                break
    return rows


def resolve_file_format(path: Path, trace_format: str | None, column: str | None = None, *,
                        spell: Callable[[str], str] = _keyword) -> tuple[str, str]:
    """The format of trace file ``path`` and a note on how it was chosen, for the header.

    With ``trace_format`` given it is used as is.  Otherwise the guess is conservative: a header
    naming ``TIMESTAMP``, ``ContextTokens`` and ``GeneratedTokens`` is the Azure LLM trace; one with
    ``HashFunction``/``HashOwner`` is Azure Functions; any other header, or numbers / ISO date-times
    that are not all whole numbers, is ``csv``.  A file of whole numbers only (per-second counts or
    whole-second timestamps?) is refused.

    Raises:
        TraceError: an empty or ambiguous file; the message lists the ``trace_format`` choices.
    """
    opt = spell
    if trace_format is not None:
        return trace_format, "given"
    rows = _head(path)
    choices = f"pass {opt('trace_format')} {{{','.join(TRACE_FORMATS)}}}"
    if not rows:
        raise TraceError(f"{opt('trace')} {str(path)!r}: the file is empty")
    first = rows[0]
    if not all(_is_value(f) for f in first if f):  # a header
        upper = {f.upper() for f in first}
        if {"TIMESTAMP", "CONTEXTTOKENS", "GENERATEDTOKENS"} <= upper:
            return "azure-llm", "guessed from the header"
        if "HASHFUNCTION" in upper or "HASHOWNER" in upper:
            return "azure-functions", "guessed from the header"
        return "csv", "guessed from the header"
    values = [r[0] for r in rows if r and r[0]]
    whole = all(re.fullmatch(r"[+-]?\d+", v) for v in values) and all(len(r) == 1 for r in rows)
    if whole and column is None:
        raise TraceError(
            f"{opt('trace')} {str(path)!r}: one whole number per line could be per-second counts or whole-second "
            f"timestamps; {choices} (counts: requests per second; csv: arrival times)")
    return "csv", "guessed: numbers or date-times"


def _pick_column(path: Path, header: list[str], column: str | None, opt: Callable[[str], str]) -> str | int:
    """The timestamp column of a csv with a header: ``column`` or the one time-like name."""
    if column is not None:
        if column in header:
            return column
        if re.fullmatch(r"\d+", column):
            return int(column)
        raise TraceError(f"{opt('column')} {column!r}: {str(path)!r} has no such column; its header is {','.join(header)}")
    if len(header) == 1 and _TIME_NAME.match(header[0]):
        return header[0]
    timelike = [h for h in header if _TIME_NAME.match(h)]
    if len(timelike) == 1:
        return timelike[0]
    raise TraceError(
        f"{opt('trace')} {str(path)!r}: cannot tell which column holds the arrival times (header "
        f"{','.join(header)}); pass {opt('column')} NAME|INDEX (and {opt('unit')} {{{','.join(UNITS)}}}), or "
        f"{opt('trace_format')} {{{','.join(TRACE_FORMATS)}}} if this is not a csv of arrival times")


def read_csv_trace(path: Path, *, column: str | None = None, unit: str | None = None,
                   spell: Callable[[str], str] = _keyword) -> tuple[np.ndarray, str]:
    """Arrival times (s) of a csv trace and a note naming the column and unit used.

    A header line is detected (a first line that is not numbers / ISO date-times).  With a header
    the column is ``column`` (name or 0-based index) or the single time-like name (``timestamp``,
    ``arrival``, ``time``...); without one, ``column`` must be an index (default 0).  ``unit``
    ``s``/``ms``/``us``/``ns``/``datetime``; default: datetime when the first value is an ISO
    date-time, else seconds.  Numbers are returned as given (sorted); date-times as seconds from the
    first one.

    Raises:
        TraceError / pard.TraceError: the message names the option, the file, the line and the value.
    """
    opt = spell
    if unit is not None and unit not in UNITS:
        raise TraceError(f"{opt('unit')} must be one of {', '.join(UNITS)}, got {unit!r}")
    rows = _head(path, 1)
    if not rows:
        raise TraceError(f"{opt('trace')} {str(path)!r}: the file is empty")
    header = not all(_is_value(f) for f in rows[0] if f)
    if header:
        col = _pick_column(path, rows[0], column, opt)
        p, df, name, offset = _read_timestamp_csv(path, col)
        miss = first_missing(df, [name])
        if miss is not None:
            raise TraceError(f"{opt('trace')} {str(path)!r}, line {miss[0] + offset}, column {name!r}: missing value")
        raw = _times_from_column(p, df, name, unit, offset)  # type: ignore[arg-type]
        where = f"column {name!r}"
        first = str(df[name].iloc[0])
    else:
        if column is not None and not re.fullmatch(r"\d+", column):
            raise TraceError(f"{opt('column')} {column!r}: {str(path)!r} has no header line; pass a 0-based index")
        idx = 0 if column is None else int(column)
        p, df = read_csv_text(path, header=False)
        if idx >= df.shape[1]:
            raise TraceError(f"{opt('column')} {idx}: {str(path)!r} has only {df.shape[1]} column(s)")
        df = drop_blank_rows(df)
        if df.empty:
            raise TraceError(f"{opt('trace')} {str(path)!r}: the file holds no arrivals")
        raw = _times_from_column(p, df, idx, unit, 1)  # type: ignore[arg-type]
        where = f"column {idx}"
        first = str(df[idx].iloc[0])
    if unit is None:
        unit = "datetime" if _DATE_RE.match(first) else "s"
    order = sort_order(np.asarray(raw, dtype=np.float64), str(path))
    arr = np.asarray(raw, dtype=np.float64) if order is None else np.asarray(raw, dtype=np.float64)[order]
    return arr, f"{where}, {'ISO date-times' if unit == 'datetime' else unit}"
