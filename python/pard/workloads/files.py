"""Trace files and named workloads for the command line and scripts: which format a trace file is in
(sniffed conservatively from its first lines; a binary file is refused by name), reading a CSV of arrival
times with the column and unit chosen or guessed (a unit the column's name states, like ``ts_ms``, is
used), :func:`load_trace`, the arrivals for a trace name (``azure-conv``, ``poisson``, ``bursty`` or a
file) cut to a window and scaled to a rate (DESIGN §5), and :func:`load_requests`, an exact replay of a
CSV with per-request tier and SLO columns.

Messages name the options the way the caller spells them: ``spell("trace_format")`` is
``"trace_format"`` by default; the CLI passes one that gives ``"--trace-format"``.  Needs pandas
for CSV files (the ``pard[cli]`` extra).
"""

from __future__ import annotations

import codecs
import csv
import math
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..errors import PardWarning, TraceError
from ._common import F64, clip, drop_blank_rows, first_missing, read_csv_text, sort_order
from .requests import Workload
from .synthetic import bursty, poisson
from .traces import (_NAME_UNIT, _TIME_NAME, _UNIT_SCALE, BUNDLED_TRACES, _check_request_columns, _read_timestamp_csv,
                     _request_columns, _times_from_column, _unit_in_name, azure_functions, azure_llm, per_second_counts,
                     slo_unit_of, warn_if_slo_ms)
from .transforms import scale, window

__all__ = ["load_trace", "load_requests", "resolve_file_format", "read_csv_trace", "csv_header", "TRACE_FORMATS",
           "UNITS", "BUILTIN_TRACES", "GENERATED_TRACES", "BURSTY_CV", "MS_RATE_SHARE", "MS_SPAN_S"]

#: Formats of a trace file (``trace_format``).
TRACE_FORMATS = ("azure-llm", "azure-functions", "counts", "csv")
#: Names :func:`load_trace` takes besides a file: the bundled trace and two generators.
BUILTIN_TRACES = ("azure-conv", "bursty", "poisson")
#: The generators among them: arrivals drawn from 0, with no timeline of their own.
GENERATED_TRACES = ("bursty", "poisson")


def _keyword(name: str) -> str:
    """How an option is named in messages by default: as the keyword argument."""
    return name


BURSTY_CV = 1.5  #: CV of per-second counts of ``trace bursty`` (the issue's bursty case)
#: An exact replay of numbers read as seconds (no unit given or named) whose mean rate is below this share of
#: the pipeline's capacity, over a span longer than :data:`MS_SPAN_S`, warns that the times may be in ms:
#: milliseconds read as seconds stretch a trace 1000-fold, so a busy minute becomes a near-idle 17 hours.
MS_RATE_SHARE = 0.01
MS_SPAN_S = 1000.0
_SNIFF_BYTES = 8192  # how much of a trace file is checked for binary content


def load_trace(
    trace: str, *, trace_format: str | None, scaling: str, rate: float | None, start_s: float,
    duration_s: float | None, seed: int, column: str | None = None, unit: str | None = None,
    capacity: float | None = None, spell: Callable[[str], str] = _keyword,
) -> tuple[np.ndarray, str]:
    """Arrival times (s) and a label for ``trace`` and its options.

    Generators (``poisson``, ``bursty`` with CV 1.5) produce ``duration_s`` seconds at ``rate``.  A real
    trace (the bundled ``azure-conv`` or a file) is cut to ``[start_s, start_s + duration_s)`` of its own
    time and scaled to ``rate`` (``scaling`` amplify or compress; with compress the window is taken after
    scaling).  ``rate`` None replays a ``csv`` file of seconds exactly (window applied, times unchanged
    when ``start_s`` is 0).  ``duration_s`` None: 300 s, or the whole file for an exact replay.
    A file's format is ``trace_format`` or guessed by :func:`resolve_file_format`; a csv is read by
    :func:`read_csv_trace` (``column``, ``unit``).  The label says which format, column and unit
    were used and whether the format was guessed.  ``capacity`` (req/s, the pipeline's): an exact replay
    of numbers read as seconds by default whose rate is implausibly low for it warns (PardWarning) that the
    times may be in milliseconds (:data:`MS_RATE_SHARE`, :data:`MS_SPAN_S`); the times are kept as read.

    Raises:
        TraceError: the message names the option and the value.
    """
    opt = spell
    _check_window(start_s, duration_s, opt)
    if scaling not in SCALINGS:
        raise TraceError(f"{opt('scaling')} {scaling!r}: expected one of {', '.join(SCALINGS)}")
    by_default_s = False  # numbers read as seconds because nothing said otherwise
    if trace in GENERATED_TRACES:
        if rate is None:
            raise TraceError(f"{opt('trace')} {trace} needs {opt('load')}")
        if start_s:  # a generated trace has no timeline to skip into: silently ignoring it misleads
            raise TraceError(f"{opt('start')} {start_s:g} applies to a real trace (azure-conv or a file); the "
                             f"{trace} generator always starts at 0 (another {opt('seed')} draws other arrivals)")
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
            c = _read_csv(path, column, unit, opt)
            raw, note, by_default_s = _in_order(c.times_s, path), f"csv, {c.where}", c.unit == "s" and not c.stated
        label = f"{path} ({note}{'' if how == 'given' else '; format ' + how})"
    raw = np.asarray(raw, dtype=np.float64)
    if raw.size == 0:
        raise TraceError(f"{opt('trace')} {trace!r} holds no arrivals")
    if rate is None:  # exact replay of a csv of seconds
        if fmt != "csv":
            raise TraceError(f"{opt('load')} is required for {opt('trace_format')} {fmt} (only csv replays exactly)")
        if capacity is not None and by_default_s:
            _warn_if_ms(raw, capacity, str(trace), opt)
        keep = _replay_window(raw, start_s, duration_s)
        if keep is None:
            _check_replayable(raw, trace, opt)
            return raw, f"{label} (exact)"
        _check_replayable(raw[keep] - start_s, trace, opt)
        return raw[keep] - start_s, f"{label} (exact window)"
    dur = 300.0 if duration_s is None else duration_s
    raw = raw - raw[0]
    if duration_s is not None and start_s + dur > float(raw[-1]) * (1 + 1e-9) + 1.0:
        # the run would cover only what the trace has: the header would state the asked duration, a rate
        # over it and a load of that, none of which the run had (--duration 5000 on a 3502 s trace: "load 0.70")
        span = float(raw[-1])
        def secs(x: float) -> str:  # whole seconds, or three digits under ten (a 0.3 s trace is not "0 s")
            return f"{x:.0f}" if x >= 10.0 else f"{x:.3g}"
        fix = (f"pass {opt('duration')} {secs(span - start_s)} or less" if span > start_s else
               f"{opt('start')} must be under {secs(span)} s")  # no duration > 0 fits past the trace's end
        raise TraceError(f"{opt('duration')} {dur:g} from {opt('start')} {start_s:g} runs past the end of "
                         f"{opt('trace')} {trace!r}, which spans {secs(span)} s: {fix}")
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


#: How a real trace is rescaled to a rate (:func:`pard.workloads.scale`'s modes).
SCALINGS = ("amplify", "compress")


def _check_window(start_s: float, duration_s: float | None, opt: Callable[[str], str]) -> None:
    """TraceError unless ``start_s`` is a finite number >= 0 and ``duration_s`` None or a finite number > 0
    (a NaN or negative window selected nothing, silently)."""
    for option, value, ok in (("start", start_s, lambda v: v >= 0), ("duration", duration_s, lambda v: v > 0)):
        if value is None and option == "duration":
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TraceError(f"{opt(option)} must be a number of seconds, got {value!r}")
        if not (math.isfinite(float(value)) and ok(float(value))):
            raise TraceError(f"{opt(option)} {value!r}: expected a finite number of seconds "
                             f"{'>= 0' if option == 'start' else '> 0'}")


def _check_replayable(times_s: F64, trace: str, opt: Callable[[str], str]) -> None:
    """TraceError naming the file when an exact replay's times lie past what the simulator takes: the
    replay keeps the file's own times, and Unix-epoch seconds (1.7e9) are past ``MAX_ARRIVAL_S`` (1e9 s);
    the simulator alone said "arrivals must be <= 1e+09 s", naming neither the file nor the way out."""
    from ..sim import MAX_ARRIVAL_S  # here: pard.sim imports this package

    # only where a --start brings every time within range (past that, the simulator's own error stands)
    if times_s.size and float(times_s.max()) > MAX_ARRIVAL_S >= float(times_s.max() - times_s.min()):
        first = math.floor(float(times_s.min()) * 1e6) / 1e6  # printed to the µs, never past the first
        raise TraceError(
            f"{opt('trace')} {trace!r}: an exact replay keeps the file's own times, and they reach "
            f"{float(times_s.max()):.6g} s, past the {MAX_ARRIVAL_S:g} s the simulator takes (Unix-epoch "
            f"seconds?); replay from the first one with {opt('start')} {first:.6f}, or scale with {opt('load')}")


def _replay_window(times_s: F64, start_s: float, duration_s: float | None) -> npt.NDArray[np.bool_] | None:
    """Which arrivals an exact replay keeps: ``[start_s, start_s + duration_s)`` of the file's own times, or
    None for the whole file (no window asked for)."""
    if duration_s is None and start_s == 0:
        return None
    end = np.inf if duration_s is None else start_s + duration_s
    return (times_s >= start_s) & (times_s < end)


def _warn_if_ms(times_s: F64, capacity: float, source: str, opt: Callable[[str], str]) -> None:
    """PardWarning when times read as seconds give a rate implausibly low for a pipeline of ``capacity``
    req/s: the usual cause is a column of milliseconds (1000x too long a trace, nearly idle)."""
    span = float(times_s[-1] - times_s[0]) if times_s.size > 1 else 0.0
    if not (span > MS_SPAN_S and capacity > 0):
        return
    rate = times_s.size / span
    if rate >= MS_RATE_SHARE * capacity:
        return
    from ..sim import MAX_ARRIVAL_S  # here: pard.sim imports this package

    if float(times_s[-1]) / 1e3 > MAX_ARRIVAL_S:  # even as ms they are past what can be simulated: no hint
        return
    warnings.warn(
        f"{source}: {times_s.size} arrivals over {span:g} s is {rate:.3g} req/s, {rate / capacity * 100:.2g} % of "
        f"the pipeline's capacity ({capacity:.0f} req/s): are the times in milliseconds?  They were read as "
        f"seconds because no unit was given; as ms they would span {span / 1e3:g} s at {rate * 1e3:.3g} req/s "
        f"(load {rate * 1e3 / capacity:.3g}).  Pass {opt('unit')} ms, or {opt('unit')} s to confirm seconds",
        PardWarning, stacklevel=3)


def load_requests(
    trace: str, *, trace_format: str | None = None, start_s: float = 0.0, duration_s: float | None = None,
    column: str | None = None, unit: str | None = None, tier_column: str | None = None,
    slo_column: str | None = None, capacity: float | None = None, spell: Callable[[str], str] = _keyword,
) -> tuple[Workload, str]:
    """An exact replay of csv trace file ``trace`` whose requests carry their own tier and/or SLO, and a label.

    The arrivals are those :func:`load_trace` replays exactly (``rate`` None: the file's times in
    ``[start_s, start_s + duration_s)``, shifted by ``start_s``; ``column``, ``unit``, ``capacity`` as
    there); ``tier_column`` names the column of tier names, ``slo_column`` the column of SLOs, in seconds
    unless its name states ms, us or ns (``slo_ms``).  Only an exact replay: scaling a trace to a rate
    draws new requests, to which the file's tiers and SLOs do not belong.

    Returns:
        A :class:`Workload` (tier codes follow the sorted tier names; match them to a pipeline's with
        :meth:`Workload.tier_codes_for`) and the label :func:`load_trace` would give, naming the columns.

    Raises:
        TraceError: as :func:`load_trace`, plus a file that is not a csv with a header line, a column the
            header lacks (naming the option), a missing tier or SLO, or an SLO that is not a number > 0.
    """
    opt = spell
    _check_window(start_s, duration_s, opt)
    path = Path(trace)
    asked = f"{opt('tier_column')}/{opt('slo_column')}"
    if not path.is_file():
        raise TraceError(f"{asked} read a csv trace FILE; {opt('trace')} {trace!r} is none")
    fmt, how = resolve_file_format(path, trace_format, column, spell=spell)
    if fmt != "csv":
        raise TraceError(f"{asked} apply to {opt('trace_format')} csv, not {fmt}")
    c = _read_csv(path, column, unit, opt)
    if not c.header:
        raise TraceError(f"{asked} name columns of a header line, but {str(path)!r} has none")
    for option, name in (("tier_column", tier_column), ("slo_column", slo_column)):
        if name is not None and name not in c.df.columns:
            raise TraceError(f"{opt(option)} {name!r}: {str(path)!r} has no such column; its header is "
                             f"{clip(','.join(map(str, c.df.columns)))}")
    _check_request_columns(path, c.df, c.offset, c.key, slo_column, tier_column)
    slo_unit = slo_unit_of(slo_column)
    slo, tier, names = _request_columns(path, c.df, c.offset, slo_column, tier_column, _UNIT_SCALE[slo_unit])
    warn_if_slo_ms(path, slo_column, slo, stated=_unit_in_name(slo_column or "") is not None)
    order = sort_order(c.times_s, str(path))
    if order is not None:
        times, slo, tier = c.times_s[order], None if slo is None else slo[order], None if tier is None else tier[order]
    else:
        times = c.times_s
    if capacity is not None and c.unit == "s" and not c.stated:
        _warn_if_ms(times, capacity, str(trace), opt)
    keep = _replay_window(times, start_s, duration_s)
    if keep is not None:
        times, slo, tier = times[keep] - start_s, None if slo is None else slo[keep], None if tier is None else tier[keep]
    _check_replayable(times, trace, opt)
    cols = "".join(f", {what} from column {name!r}" for what, name in (("tiers", tier_column), ("SLOs", slo_column)) if name)
    slo_note = f" ({slo_unit})" if slo_column is not None else ""
    label = (f"{path} (csv, {c.where}{cols}{slo_note}{'' if how == 'given' else '; format ' + how}) "
             f"(exact{'' if keep is None else ' window'})")
    return Workload(arrivals_s=times, slo_s=slo, tier=tier, tier_names=names), label


_DATE_RE = re.compile(r"\s*\d{4}-\d{2}-\d{2}")
UNITS = ("s", "ms", "us", "ns", "datetime")


def _time_like(name: str) -> bool:
    """A column name that says it holds arrival times: ``timestamp``, ``arrival``... or one with a unit
    (``ts_ms``, ``time (s)``); ``latency_ms`` is not one."""
    if _TIME_NAME.match(name):
        return True
    m = _NAME_UNIT.match(name.strip())
    return m is not None and _unit_in_name(name) is not None and bool(_TIME_NAME.match(m["stem"]))


def _check_text(path: Path, opt: Callable[[str], str]) -> None:
    """TraceError unless the start of ``path`` is UTF-8 text without NUL bytes, naming the file and, for
    parquet or gzip, what it is: binary read as text would be echoed back as a kilobyte of garbage."""
    with path.open("rb") as fh:
        head = fh.read(_SNIFF_BYTES)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # a character cut at the end is fine
        if b"\0" not in head:
            return
    except UnicodeDecodeError:
        pass
    where = f"{opt('trace')} {str(path)!r}: not a text CSV file"
    if path.suffix.lower() == ".parquet" or head.startswith(b"PAR1"):
        raise TraceError(f"{where} but parquet, which pard does not read; convert it to CSV first, e.g. "
                         f"pandas.read_parquet(path).to_csv('trace.csv', index=False)")
    if head.startswith(b"\x1f\x8b"):
        raise TraceError(f"{where} but gzip-compressed; decompress it first (gunzip)")
    raise TraceError(f"{where}: its first {min(len(head), _SNIFF_BYTES)} bytes are binary (NUL bytes or not "
                     f"UTF-8); a trace file must be UTF-8 text")


def _is_value(field: str) -> bool:
    """A data field (a number or an ISO date-time) rather than a header name."""
    f = field.strip()
    try:
        float(f)
        return True
    except ValueError:
        return bool(_DATE_RE.match(f))


def _head(path: Path, lines: int = 200) -> list[list[str]]:
    """The first ``lines`` non-blank lines of ``path``, split as csv (a quoted field loses its quotes, as
    pandas reads it: exporters such as pandas' ``quoting=QUOTE_ALL`` quote the header names)."""
    rows: list[list[str]] = []
    with path.open("r", encoding="utf-8-sig", errors="replace") as fh:  # -sig: a BOM (Excel's "CSV UTF-8") is no header text
        for line in fh:
            if line.strip():
                rows.append([f.strip() for f in next(csv.reader([line.rstrip("\r\n")]), [])])
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
    _check_text(path, opt)
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
        raise TraceError(f"{opt('column')} {column!r}: {str(path)!r} has no such column; its header is "
                         f"{clip(','.join(header))}")
    timelike = [h for h in header if _time_like(h)]
    if len(timelike) == 1:
        return timelike[0]
    raise TraceError(
        f"{opt('trace')} {str(path)!r}: cannot tell which column holds the arrival times (header "
        f"{clip(','.join(header))}); pass {opt('column')} NAME|INDEX (and {opt('unit')} {{{','.join(UNITS)}}}), or "
        f"{opt('trace_format')} {{{','.join(TRACE_FORMATS)}}} if this is not a csv of arrival times")


class _CsvTimes(NamedTuple):
    """A csv trace's arrival times as read (seconds, file order) and how they were read."""

    times_s: F64
    df: Any  # the rows, as strings
    key: str | int  # the time column's key in df
    offset: int  # file line = row index + offset
    header: bool
    unit: str  # the unit used: s, ms, us, ns or datetime
    stated: bool  # the unit was given or named by the column (not defaulted)
    where: str  # for the label: the column and the unit


def _read_csv(path: Path, column: str | None, unit: str | None, opt: Callable[[str], str]) -> _CsvTimes:
    """Read the arrival-time column of a csv trace: see :func:`read_csv_trace`."""
    if unit is not None and unit not in UNITS:
        raise TraceError(f"{opt('unit')} must be one of {', '.join(UNITS)}, got {unit!r}")
    _check_text(path, opt)
    rows = _head(path, 1)
    if not rows:
        raise TraceError(f"{opt('trace')} {str(path)!r}: the file is empty")
    header = not all(_is_value(f) for f in rows[0] if f)
    if header:
        p, df, key, offset = _read_timestamp_csv(path, _pick_column(path, rows[0], column, opt))
        miss = first_missing(df, [key])
        if miss is not None:
            raise TraceError(f"{opt('trace')} {str(path)!r}, line {miss[0] + offset}, column {key!r}: missing value")
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
        key, offset = idx, 1
    first = str(df[key].iloc[0])
    # the column's own name may state the unit (ts_ms); a column of date-times is read as such whatever its name
    named = _unit_in_name(str(key)) if header and unit is None and not _DATE_RE.match(first) else None
    raw = _times_from_column(p, df, key, unit or named, offset)  # type: ignore[arg-type]
    used = unit or named or ("datetime" if _DATE_RE.match(first) else "s")
    shown = "ISO date-times" if used == "datetime" else used + (" (stated by the column's name)" if named else "")
    return _CsvTimes(np.asarray(raw, dtype=np.float64), df, key, offset, header, used,
                     unit is not None or named is not None, f"column {key!r}, {shown}")


def _in_order(times_s: F64, path: Path) -> F64:
    """``times_s`` sorted (a PardWarning says how many were out of order)."""
    order = sort_order(times_s, str(path))
    return times_s if order is None else times_s[order]


def read_csv_trace(path: Path, *, column: str | None = None, unit: str | None = None,
                   spell: Callable[[str], str] = _keyword) -> tuple[np.ndarray, str]:
    """Arrival times (s) of a csv trace and a note naming the column and unit used.

    A header line is detected (a first line that is not numbers / ISO date-times).  With a header
    the column is ``column`` (name or 0-based index) or the single time-like name (``timestamp``,
    ``arrival``, ``time``..., also with a unit: ``ts_ms``, ``time (s)``); without one, ``column`` must be
    an index (default 0).  ``unit`` ``s``/``ms``/``us``/``ns``/``datetime``; default: the unit the
    column's name states at its end (``ts_ms``, ``time_us``, ``arrival (ms)``, ``timeMs``; the note says
    so), else datetime when the first value is an ISO date-time, else seconds.  Numbers are returned as
    given (sorted, in seconds); date-times as seconds from the first one.

    Raises:
        TraceError / pard.TraceError: the message names the option, the file, the line and the value; a
            binary file (not UTF-8 text, or NUL bytes) is refused by name, quoting none of it.
    """
    c = _read_csv(path, column, unit, spell)
    return _in_order(c.times_s, path), c.where


def csv_header(path: Path) -> list[str]:
    """The names on the header line of csv file ``path`` ([] when its first line is data, not names)."""
    rows = _head(path, 1)
    if not rows or all(_is_value(f) for f in rows[0] if f):
        return []
    return rows[0]
