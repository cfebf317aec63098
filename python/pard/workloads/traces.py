"""Real arrival traces from files: the Azure LLM inference trace 2023, Azure Functions 2019
per-minute counts, per-second count files (Wikipedia / Twitter form), and any CSV with a
timestamp or seconds column.  Also the bundled copy of the Azure LLM "conversation" trace.

Every loader returns a sorted ``float64`` NumPy array of shape (n,): arrival times in seconds from
the trace's first arrival (so the first element is 0.0).  Unsorted timestamps are sorted with a
:class:`pard.errors.PardWarning` saying how many were out of order.  Bad input raises
:class:`pard.errors.TraceError` (a ``ValueError``) naming the file, the line and column, and the
problem.  Files are parsed with pandas.  Scale a trace to a target rate with
:func:`pard.workloads.scale` (DESIGN §5).
"""

from __future__ import annotations

import csv
import re
import warnings
from importlib import resources
from typing import TYPE_CHECKING, Callable, Literal, overload

import numpy as np

from ..config.models import MAX_SLO_S, MIN_SLO_S as _MIN_SLO_S
from ..errors import PardValueError, PardWarning, TraceError
from ._common import (MAX_ARRIVALS, F64, PathLike, clip, drop_blank_rows, existing_trace_file,
                      finish, first_missing, pandas, read_csv, read_csv_text, rng, sort_order, spread_counts)
from .requests import I32, Workload

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import pandas as pd

__all__ = [
    "azure_llm",
    "azure_llm_conv",
    "draw_tokens",
    "azure_functions",
    "per_second_counts",
    "csv_timestamps",
    "csv_requests",
    "AZURE_LLM_COLUMNS",
    "AZURE_FUNCTIONS_KEYS",
    "BUNDLED_TRACES",
]

#: Header of the Azure LLM inference trace 2023 CSV files.
AZURE_LLM_COLUMNS: tuple[str, ...] = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
#: Key columns of the Azure Functions 2019 invocation files; minute columns "1".."1440" follow.
AZURE_FUNCTIONS_KEYS: tuple[str, ...] = ("HashOwner", "HashApp", "HashFunction", "Trigger")

Unit = Literal["s", "ms", "us", "ns", "datetime"]
_UNIT_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}

_TIME_NAME = re.compile(r"^(t|ts|time|times|timestamp|timestamps|arrival|arrivals|arrival_?time|arrival_?s|"
                        r"send_?time|send_?s|date|datetime|time_?s|seconds|sec|secs)$", re.IGNORECASE)
# a unit at the end of a column's name: "ts_ms", "time (ms)", "time[us]", "timeMs", "arrival_ns", "time_s"
_NAME_UNIT = re.compile(r"^(?P<stem>.*?)(?P<sep>[\s_.\-(\[]*)(?P<unit>ms|us|µs|ns|s)[)\]]?\s*$", re.IGNORECASE)


def _unit_in_name(name: str) -> str | None:
    """The unit (``ms``, ``us``, ``ns``, ``s``) a column's name states at its end, or None.

    The unit must stand apart: after a separator (``ts_ms``, ``time (ms)``), in camelCase (``timeMs``),
    alone (``ms``), or right after a time-like word (``timems``); so ``items`` or ``status`` state none.
    A bare ``s`` counts only after a separator (``times`` and ``ts`` are names, not units)."""
    m = _NAME_UNIT.match(name.strip())
    if m is None:
        return None
    stem, sep, unit = m["stem"], m["sep"], m["unit"]
    if unit.lower() == "s":
        apart = bool(sep)
    else:
        camel = bool(stem) and stem[-1].islower() and unit[0].isupper()
        apart = bool(sep) or not stem or camel or bool(_TIME_NAME.match(stem))
    return unit.lower().replace("µ", "u") if apart else None

_ISO_EXAMPLE = "2023-11-16 18:15:46.6805900"


def _require_columns(p: object, df: pd.DataFrame, expected: tuple[str, ...]) -> None:
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise TraceError(
            f"{p}: missing column(s) {', '.join(missing)}: expected header "
            f"{','.join(expected)}, found {','.join(map(str, df.columns))}"
        )


# A time of day followed by a UTC offset or Z: "...T00:00:00+02:00", "... 12:00Z" (a date alone has none).
_ZONED_RE = r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:Z|[+-]\d{2}(?::?\d{2})?)\s*$"


def _check_one_zone_style(p: object, raw: pd.Series, column: str | int, line_offset: int, df: pd.DataFrame) -> None:
    """TraceError when some timestamps carry a UTC offset and others do not: the naive ones would be read as
    UTC, so one ``+02:00`` row among local times shifts the replay by hours, silently."""
    zoned = raw.str.contains(_ZONED_RE, regex=True).to_numpy(dtype=bool)
    if zoned.any() and not zoned.all():
        i = int(np.argmin(zoned)) if zoned[0] else int(np.argmax(zoned))  # the first unlike the first row
        raise TraceError(
            f"{p}, line {int(df.index[i]) + line_offset}, column {column!r}: timestamp {raw.iloc[i]!r} "
            f"{'has no' if zoned[0] else 'has a'} UTC offset, unlike line {int(df.index[0]) + line_offset} "
            f"({raw.iloc[0]!r}): give every timestamp an offset (or none), so that they share one clock"
        )


def _times_from_column(
    p: object, df: pd.DataFrame, column: str | int, unit: Unit | None, line_offset: int
) -> F64:
    """Raw seconds (any origin, unsorted) from the string column ``column`` of ``df``; ``unit`` None: date-times,
    or numbers in the unit the column's name states (``ts_ms``: :func:`_unit_in_name`, the CLI's rule), else s."""
    pd = pandas()
    raw = df[column]
    if unit is None:
        first = raw.iloc[0] if len(raw) else ""
        numeric = not np.isnan(pd.to_numeric(pd.Series([first]), errors="coerce").iloc[0])
        unit = (_unit_in_name(str(column)) or "s") if numeric else "datetime"
    if unit == "datetime":
        t = pd.to_datetime(raw, format="ISO8601", errors="coerce", utc=True)
        # ISO 8601 parsing alone would also accept bare numbers (as years): insist on a date.
        bad = t.isna() | ~raw.str.match(r"\s*\d{4}-\d{2}-\d{2}")
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            raise TraceError(
                f"{p}, line {int(df.index[i]) + line_offset}, column {column!r}: cannot parse "
                f"{raw.iloc[i]!r} as a timestamp (expected ISO 8601, like {_ISO_EXAMPLE!r})"
            )
        _check_one_zone_style(p, raw, column, line_offset, df)
        secs = (t - t.min()).dt.total_seconds().to_numpy(dtype=np.float64)
        return np.ascontiguousarray(secs)
    if unit not in _UNIT_SCALE:
        raise PardValueError(f"unit must be one of 's', 'ms', 'us', 'ns', 'datetime' or None, got {unit!r}")
    vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(vals)
    if bad.any():
        i = int(np.argmax(bad))
        idx = df.index[i]
        what = "is not finite" if raw.iloc[i].strip().lower() in ("nan", "inf", "-inf", "+inf") else "is not a number"
        raise TraceError(
            f"{p}, line {int(idx) + line_offset}, column {column!r}: timestamp {raw.iloc[i]!r} {what}"
        )
    neg = vals < 0
    if neg.any():
        i = int(np.argmax(neg))
        raise TraceError(
            f"{p}, line {int(df.index[i]) + line_offset}, column {column!r}: timestamp "
            f"{raw.iloc[i]!r} is negative (expected seconds >= 0)"
        )
    out: F64 = vals * _UNIT_SCALE[unit]
    return out


def _check_nonneg_ints(p: object, df: pd.DataFrame, columns: list[str], line_offset: int) -> None:
    pd = pandas()
    for c in columns:
        vals = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(vals) | (vals < 0) | (vals != np.round(vals))
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceError(
                f"{p}, line {int(df.index[i]) + line_offset}, column {c!r}: "
                f"{df[c].iloc[i]!r} is not a non-negative integer"
            )


@overload
def azure_llm(path: PathLike, *, tokens: Literal[False] = False) -> F64: ...
@overload
def azure_llm(path: PathLike, *, tokens: Literal[True]) -> Workload: ...


def azure_llm(path: PathLike, *, tokens: bool = False) -> F64 | Workload:
    """Arrival times from an Azure LLM inference trace 2023 CSV file; with ``tokens=True``, a
    :class:`Workload` that also carries each request's real token counts (``in_tokens`` =
    ``ContextTokens``, ``out_tokens`` = ``GeneratedTokens``, aligned with the sorted arrivals).

    Format: header ``TIMESTAMP,ContextTokens,GeneratedTokens``; one request per line, timestamps
    like ``2023-11-16 18:15:46.6805900`` (ISO 8601).  Source: the Azure Public Dataset
    (github.com/Azure/AzurePublicDataset), CC-BY 4.0; cite Patel et al., "Splitwise: Efficient
    generative LLM inference using phase splitting", ISCA 2024.  Blank lines are skipped.

    Returns:
        shape (n,), float64, sorted seconds from the first request; or that as ``arrivals_s`` of a
        Workload with ``in_tokens`` and ``out_tokens`` (shape (n,), int32).

    Raises:
        TraceError: missing file, empty file, wrong or missing columns, a malformed row (too many
            or too few fields), an unparseable timestamp, or a token count that is not a
            non-negative integer; the message names the file, line and column.
    Warns:
        PardWarning: the timestamps were not sorted (says how many were out of order).
    """
    p, df = read_csv_text(path, header=True)
    _require_columns(p, df, AZURE_LLM_COLUMNS)
    df = drop_blank_rows(df)
    if df.empty:
        raise TraceError(f"{p}: the file has a header but no rows")
    miss = first_missing(df, list(AZURE_LLM_COLUMNS))
    if miss is not None:
        raise TraceError(f"{p}, line {miss[0] + 2}, column {miss[1]!r}: missing value (malformed row)")
    _check_nonneg_ints(p, df, ["ContextTokens", "GeneratedTokens"], 2)
    raw = _times_from_column(p, df, "TIMESTAMP", "datetime", 2)
    if not tokens:
        return finish(raw, str(p))
    order = sort_order(raw, str(p))
    arrivals = finish(raw if order is None else raw[order], str(p))
    ctx = df["ContextTokens"].astype(np.int64).to_numpy()
    gen = df["GeneratedTokens"].astype(np.int64).to_numpy()
    if order is not None:
        ctx, gen = ctx[order], gen[order]
    # a request that generated nothing still ends with one step (its end-of-sequence token)
    return Workload(arrivals_s=arrivals, in_tokens=ctx, out_tokens=np.maximum(gen, 1))


@overload
def azure_llm_conv(*, tokens: Literal[False] = False) -> F64: ...
@overload
def azure_llm_conv(*, tokens: Literal[True]) -> Workload: ...


def azure_llm_conv(*, tokens: bool = False) -> F64 | Workload:
    """The bundled Azure LLM inference trace 2023, "conversation" service (no network needed).

    19 366 requests over 3 502 s (58 min) on 2023-11-16: mean 5.53 req/s, coefficient of
    variation of per-second counts 0.50 and of 10-second counts 0.27 (a steady trace; evaluate
    with :func:`pard.workloads.bursty` too).  Source: Azure/AzurePublicDataset,
    ``data/AzureLLMInferenceTrace_conv.csv``; license CC-BY 4.0; cite Patel, Choukse, Zhang, Shah,
    Goiri, Maleki, Bianchini, "Splitwise: Efficient generative LLM inference using phase
    splitting", ISCA 2024.  See ``pard/data/NOTICE.md``.  The CLI calls it ``azure-conv``.

    With ``tokens=True``: a :class:`Workload` with the requests' real input and output token counts
    (:func:`azure_llm`); input tokens: median 1 020, mean 1 155, max 14 050; output tokens: median
    129, mean 211, max 1 000.

    Returns:
        shape (19366,), float64, sorted seconds from the first request (or that Workload).
    """
    res = resources.files("pard").joinpath("data", "azure_llm_2023_conv.csv")
    with resources.as_file(res) as path:
        return azure_llm(path, tokens=True) if tokens else azure_llm(path)


def draw_tokens(n: int, *, seed: int | np.random.Generator = 0) -> tuple[I32, I32]:
    """``n`` (input tokens, output tokens) pairs drawn with replacement from the bundled Azure LLM
    conversation trace (:func:`pard.workloads.azure_llm_conv`), each pair kept together, seeded.

    For arrivals from a generator or a rescaled trace, which no longer line up one-to-one with the
    trace's requests.  Source: Azure Public Dataset, CC-BY 4.0; Patel et al., "Splitwise", ISCA 2024.

    Returns:
        ``(in_tokens, out_tokens)``, each shape (n,), int32.
    Raises:
        PardValueError: ``n`` is not an integer >= 0.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise PardValueError(f"n must be an integer >= 0, got {n!r}")
    trace = azure_llm_conv(tokens=True)
    assert trace.in_tokens is not None and trace.out_tokens is not None
    pick = rng(seed).integers(0, len(trace), size=int(n))
    return trace.in_tokens[pick].copy(), trace.out_tokens[pick].copy()


#: Traces shipped with pard, by the name the CLI uses -> a loader taking no arguments.
BUNDLED_TRACES: dict[str, Callable[[], F64]] = {"azure-conv": azure_llm_conv}


def azure_functions(
    path: PathLike,
    *,
    app: str | None = None,
    function: str | None = None,
    owner: str | None = None,
    spread: Literal["uniform", "poisson"] = "uniform",
    seed: int | np.random.Generator = 0,
    max_arrivals: float = MAX_ARRIVALS,
) -> F64:
    """Arrival times from an Azure Functions 2019 per-minute invocation-count file.

    Format: header ``HashOwner,HashApp,HashFunction,Trigger,1,2,...,1440``; one row per function,
    column ``m`` holds its invocations in minute ``m`` of the day.  Rows are selected by the given
    hashes (all rows when none is given) and their counts summed per minute.  Each minute's count
    is spread inside the minute: ``"uniform"`` spaces them evenly, ``"poisson"`` places them at
    independent uniform times (a Poisson process conditioned on the count; seeded).
    Source: Azure Public Dataset, "Serverless in the Wild" (Shahrad et al., USENIX ATC 2020).

    Returns:
        shape (n,), float64, sorted seconds from the first invocation.

    Raises:
        TraceError: missing/empty/malformed file, missing key or minute columns, no row matching
            the hashes, a count that is missing, non-numeric, negative or fractional (names the
            line and column), or no invocations at all.
        TraceError: the counts sum to more than ``max_arrivals`` (checked before allocating).
    """
    pd = pandas()
    p, df = read_csv(path, dtype={k: str for k in AZURE_FUNCTIONS_KEYS}, skip_blank_lines=False, engine="c")
    minutes = [str(m) for m in range(1, 1441)]
    expected = AZURE_FUNCTIONS_KEYS + ("1", "...", "1440")
    missing = [c for c in (*AZURE_FUNCTIONS_KEYS, *minutes) if c not in df.columns]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise TraceError(
            f"{p}: missing column(s) {shown}: expected header {','.join(expected)}, "
            f"found {','.join(map(str, df.columns[:8]))}{',...' if len(df.columns) > 8 else ''}"
        )
    df = df[~df.isna().all(axis=1)]
    if df.empty:
        raise TraceError(f"{p}: the file has a header but no rows")
    mask = np.ones(len(df), dtype=bool)
    for col, want in (("HashOwner", owner), ("HashApp", app), ("HashFunction", function)):
        if want is not None:
            mask &= (df[col] == want).to_numpy()
            if not mask.any():
                raise TraceError(f"{p}: no row has {col} == {want!r} (with the other hashes given)")
    sel = df[mask]
    block = sel[minutes]
    text_cols = [c for c in minutes if not pd.api.types.is_numeric_dtype(block[c])]
    if text_cols:  # a non-numeric entry made pandas keep a column as text: coerce it to find it
        block = block.copy()
        for c in text_cols:
            block[c] = pd.to_numeric(block[c], errors="coerce")
    counts = block.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(counts) | (counts < 0) | (counts != np.round(counts))
    if bad.any():
        r, j = (int(x) for x in np.argwhere(bad)[0])
        raw = sel[minutes[j]].iloc[r]
        problem = "missing value" if pd.isna(raw) else f"'{raw}' is not a non-negative integer count"
        raise TraceError(f"{p}, line {int(sel.index[r]) + 2}, column {minutes[j]!r}: {problem}")
    per_minute = counts.sum(axis=0)
    _check_total(p, float(per_minute.sum()), max_arrivals)
    times = spread_counts(per_minute.astype(np.int64), 60.0, spread, rng(seed))
    return finish(times, str(p))


def _check_total(path: object, total: float, max_arrivals: float) -> None:
    """TraceError when a counts file's counts sum to more than ``max_arrivals``: checked before the
    counts become int64 (a count past 2**63 would wrap) and before one time per arrival is allocated."""
    if isinstance(max_arrivals, bool) or not float(max_arrivals) > 0:
        raise PardValueError(f"max_arrivals must be a number > 0, got {max_arrivals!r}")
    if total > float(max_arrivals):
        raise TraceError(f"{path}: the counts sum to {total:.3g} arrivals, above the limit "
                         f"max_arrivals={float(max_arrivals):.3g} (one time per arrival is kept in memory)")


def per_second_counts(
    path: PathLike,
    *,
    spread: Literal["uniform", "poisson"] = "uniform",
    seed: int | np.random.Generator = 0,
    max_arrivals: float = MAX_ARRIVALS,
) -> F64:
    """Arrival times from a file of per-second request counts, one integer per line.

    Line ``i`` (from 1) holds the number of requests in second ``i - 1``; this is the form of the
    Wikipedia and Twitter traces used in the PARD paper.  No header.  Each second's count is
    spread inside the second, evenly (``"uniform"``) or at independent uniform times
    (``"poisson"``, seeded).  Trailing blank lines are ignored; a blank line inside is an error
    (it would shift every later second).

    Returns:
        shape (n,), float64, sorted seconds from the first request.

    Raises:
        TraceError: missing or empty file, a line with more than one field, a blank line, a value
            that is not a non-negative integer (names the line), or all counts zero.
        TraceError: the counts sum to more than ``max_arrivals`` (checked before allocating).
    """
    pd = pandas()
    p, df = read_csv_text(path, header=False)
    if df.shape[1] != 1:
        extra = (df.iloc[:, 1:] != "").any(axis=1)
        idx = int(extra.idxmax()) if extra.any() else 0
        raise TraceError(
            f"{p}, line {idx + 1}: expected one integer per line, got {df.shape[1]} fields"
        )
    col = df.iloc[:, 0].str.strip()
    nonblank = np.flatnonzero((col != "").to_numpy())
    if nonblank.size == 0:
        raise TraceError(f"{p}: the file has no counts")
    col = col.iloc[: nonblank[-1] + 1]
    vals = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(vals) | (vals < 0) | (vals != np.round(vals))
    if bad.any():
        i = int(np.argmax(bad))
        what = "blank line" if col.iloc[i] == "" else f"{col.iloc[i]!r} is not a non-negative integer count"
        raise TraceError(f"{p}, line {i + 1}: {what}")
    _check_total(p, float(vals.sum()), max_arrivals)
    return finish(spread_counts(vals.astype(np.int64), 1.0, spread, rng(seed)), str(p))


def _read_timestamp_csv(path: PathLike, column: str | int) -> tuple[object, pd.DataFrame, str | int, int]:
    """(path, rows as strings, the column's key in them, line offset: file line = row index + offset).

    With a column given by position, a first line whose every field is a number or an ISO date is
    data, not a header (a header-less file must not lose its first request).
    """
    headerless = isinstance(column, int) and not isinstance(column, bool) and _first_line_is_data(
        existing_trace_file(path))
    p, df = read_csv_text(path, header=not headerless)
    key: str | int
    if isinstance(column, int) and not isinstance(column, bool):
        if not 0 <= column < df.shape[1]:
            raise TraceError(f"{p}: column index {column} out of range: the file has {df.shape[1]} columns")
        key = column if headerless else str(df.columns[column])
    else:
        key = str(column)
        if key not in df.columns:
            raise TraceError(
                f"{p}: no column {key!r}; the header has {clip(','.join(map(str, df.columns)))}"
            )
    df = drop_blank_rows(df)
    if df.empty:
        raise TraceError(f"{p}: the file has a header but no rows")
    return p, df, key, 1 if headerless else 2


_DATA_CELL = re.compile(r"\s*([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|\d{4}-\d{2}-\d{2}\S*)\s*$")


def _first_line_is_data(path: Path) -> bool:
    """True when the file's first line is all numbers or ISO dates (so it is no header)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            first = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return False  # read_csv_text reports the problem with its own message
    return bool(first) and all(_DATA_CELL.match(c) for c in first)


def csv_timestamps(path: PathLike, *, column: str | int, unit: Unit | None = None) -> F64:
    """Arrival times from any CSV with a header and a timestamp or seconds column.

    Args:
        path: the CSV file (a header line, then one request per line; blank lines skipped).
        column: the column's name, or its 0-based position.
        unit: ``"datetime"`` (ISO 8601 date-times), or ``"s"``, ``"ms"``, ``"us"``, ``"ns"`` for
            numbers (>= 0) in that unit; None infers datetime vs numbers from the first value, and numbers
            are in the unit the column's name states at its end (``ts_ms``, ``time (us)``), else seconds,
            as ``pard simulate`` reads them.

    Returns:
        shape (n,), float64, sorted seconds from the first request.

    Raises:
        TraceError: missing/empty/malformed file, unknown column, an empty, non-numeric, NaN,
            infinite, negative or unparseable timestamp (names line and column).
    Warns:
        PardWarning: the timestamps were not sorted (says how many were out of order).
    """
    p, df, name, offset = _read_timestamp_csv(path, column)
    miss = first_missing(df, [name])
    if miss is not None:
        raise TraceError(f"{p}, line {miss[0] + offset}, column {name!r}: missing value")
    return finish(_times_from_column(p, df, name, unit, offset), str(p))


def slo_unit_of(slo_column: str | None) -> str:
    """The unit of an SLO column: the one its name states (``slo_ms``), else seconds (also with no column)."""
    return (_unit_in_name(slo_column) or "s") if slo_column is not None else "s"


#: An SLO column of plain numbers (no unit stated) whose every SLO is at least this many seconds warns that it
#: may hold milliseconds: a 300 ms SLO read as 300 s makes every request feasible, silently.
SLO_MS_HINT_S = 10.0


def warn_if_slo_ms(p: object, slo_column: str | None, slo: F64 | None, stated: bool) -> None:
    """PardWarning when SLOs read as seconds by default (no unit given or named) all look like milliseconds."""
    if slo is None or stated or slo.size == 0 or float(slo.min()) < SLO_MS_HINT_S:
        return
    warnings.warn(PardWarning(
        f"{p}: column {slo_column!r}: every SLO is {float(slo.min()):g} s or more, read as seconds because "
        f"nothing states a unit; if these are milliseconds, name the column {slo_column}_ms (or give the "
        f"SLO unit), and if seconds, name it {slo_column}_s"), stacklevel=3)


def _check_request_columns(p: object, df: pd.DataFrame, offset: int, name: str | int, slo_column: str | None,
                          tier_column: str | None) -> None:
    """TraceError unless the SLO and tier columns asked for exist and no row misses a time, SLO or tier."""
    for c in (slo_column, tier_column):
        if c is not None and c not in df.columns:
            raise TraceError(f"{p}: no column {c!r}; the header has {clip(','.join(map(str, df.columns)))}")
    cols = [name] + [c for c in (slo_column, tier_column) if c is not None]
    miss = first_missing(df, cols)
    if miss is not None:
        raise TraceError(f"{p}, line {miss[0] + offset}, column {miss[1]!r}: missing value")


def _request_columns(p: object, df: pd.DataFrame, offset: int, slo_column: str | None, tier_column: str | None,
                     slo_scale: float) -> tuple[F64 | None, I32 | None, tuple[str, ...]]:
    """Each row's SLO (seconds: the column's numbers times ``slo_scale``) and tier code, unsorted, with the
    tier names (codes follow the sorted names); TraceError for a bad SLO, naming its line."""
    pd = pandas()
    slo: F64 | None = None
    if slo_column is not None:
        slo = pd.to_numeric(df[slo_column], errors="coerce").to_numpy(dtype=np.float64) * slo_scale
        # the simulator's and the runtime's range (the C++ core's nanosecond clock), named at its line here
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(slo) | (slo < _MIN_SLO_S) | (slo > MAX_SLO_S)
        if bad.any():
            i = int(np.argmax(bad))
            unit = "" if slo_scale == 1.0 else f", read in units of {slo_scale:g} s"
            raise TraceError(
                f"{p}, line {int(df.index[i]) + offset}, column {slo_column!r}: SLO "
                f"{df[slo_column].iloc[i]!r} is not a number of seconds in [{_MIN_SLO_S:g}, {MAX_SLO_S:g}]{unit}"
            )
    tier: I32 | None = None
    names: tuple[str, ...] = ()
    if tier_column is not None:
        labels = df[tier_column].str.strip().to_numpy(dtype=str)
        names = tuple(sorted(set(labels.tolist())))
        tier = np.searchsorted(np.array(names), labels).astype(np.int32)
    return slo, tier, names


def csv_requests(
    path: PathLike,
    *,
    column: str | int,
    slo_column: str | None = None,
    tier_column: str | None = None,
    unit: Unit | None = None,
    slo_unit: Literal["s", "ms", "us", "ns"] | None = None,
) -> Workload:
    """Requests from a CSV with arrival times and, optionally, per-request SLO and tier columns.

    Like :func:`csv_timestamps`, plus: ``slo_column`` holds each request's SLO (``slo_unit``,
    finite, > 0) and ``tier_column`` each request's tier name.  Tier codes follow the sorted tier
    names, so the same file always gives the same codes.  ``slo_unit`` None: the unit the SLO column's
    name states (``slo_ms``), else seconds, as :func:`pard.workloads.load_requests` and the CLI read it.

    Returns:
        :class:`Workload` with ``arrivals_s`` (n,) sorted from 0, and ``slo_s`` / ``tier`` (n,)
        permuted with the arrivals (None when the column was not asked for).

    Raises:
        TraceError: as :func:`csv_timestamps`, plus a missing SLO/tier column or value, or an SLO
            outside [1e-9, 1e9] s (names line and column).
    """
    p, df, name, offset = _read_timestamp_csv(path, column)
    _check_request_columns(p, df, offset, name, slo_column, tier_column)
    times = _times_from_column(p, df, name, unit, offset)
    if slo_unit is not None and slo_unit not in _UNIT_SCALE:
        raise PardValueError(f"slo_unit must be one of 's', 'ms', 'us', 'ns' or None, got {slo_unit!r}")
    unit = slo_unit or slo_unit_of(slo_column)
    slo, tier, names = _request_columns(p, df, offset, slo_column, tier_column, _UNIT_SCALE[unit])
    warn_if_slo_ms(p, slo_column, slo, stated=slo_unit is not None or _unit_in_name(slo_column or "") is not None)
    order = sort_order(times, str(p))
    if order is not None:
        times = times[order]
        slo = None if slo is None else slo[order]
        tier = None if tier is None else tier[order]
    arrivals = np.ascontiguousarray(times - times[0], dtype=np.float64)
    return Workload(arrivals_s=arrivals, slo_s=slo, tier=tier, tier_names=names)
