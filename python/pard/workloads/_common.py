"""Shared helpers of pard.workloads: argument checks, seeded RNGs, CSV reading with exact error
locations, and the final sort/shift every loader applies.  Private: nothing here is public API."""

from __future__ import annotations

import csv
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import numpy.typing as npt

from .._checks import check_nonnegative, check_positive, fmt_bytes, fmt_num, real_number, show
from .._extras import require
from ..errors import PardTypeError, PardValueError, PardWarning, TooManyArrivalsError, TraceError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__: list[str] = []
_REEXPORTED = (check_nonnegative, check_positive, fmt_num, real_number, show)  # used by the loaders

#: Default largest expected number of arrivals a generator or :func:`~pard.workloads.scale` will
#: produce (5·10^7: about 0.4 GiB as float64 seconds, a few GiB while generating and simulating).
#: Above it they raise :class:`TooManyArrivalsError` before allocating; pass ``max_arrivals=`` to
#: change the limit.
MAX_ARRIVALS = 50_000_000

#: Bytes a run needs per arrival, roughly: the float64 array plus the generators' temporaries.
_BYTES_PER_ARRIVAL = 32

F64 = npt.NDArray[np.float64]
PathLike = Union[str, Path]


#: The most characters of a file's text (a header, a value) a message quotes: a binary or very wide
#: file must not fill the terminal.
QUOTE_LIMIT = 80


def clip(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, with "..." and the full length when it was longer."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def check_max_arrivals(what: str, expected: float, max_arrivals: int | float) -> None:
    """Raise :class:`TooManyArrivalsError` when ``expected`` arrivals exceed ``max_arrivals``.

    ``what`` names the call and its arguments, e.g. ``"poisson(rate=1e9, duration=10)"``.
    """
    limit = float(max_arrivals)
    if isinstance(max_arrivals, bool) or not (limit > 0):
        raise PardValueError(f"max_arrivals must be a number > 0, got {max_arrivals!r}")
    if expected > limit:
        raise TooManyArrivalsError(
            f"{what}: about {expected:.3g} arrivals expected (~{fmt_bytes(expected * _BYTES_PER_ARRIVAL)} "
            f"of memory), above the limit max_arrivals={fmt_num(limit)}; lower the rate or the duration "
            f"(or raise max_arrivals)",
            expected=float(expected), limit=limit,
        )


def rng(seed: int | np.random.Generator) -> np.random.Generator:
    """A NumPy Generator from an int seed >= 0 (or the Generator itself).  PardTypeError for another
    type, PardValueError for a negative seed (NumPy's own error for it is a bare ValueError)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise PardTypeError(f"seed must be an int or a numpy Generator, got {seed!r}")
    if seed < 0:
        raise PardValueError(f"seed must be an int >= 0 or a numpy Generator, got {int(seed)}")
    return np.random.default_rng(int(seed))


def as_arrivals(arrivals: npt.ArrayLike, name: str = "arrivals") -> F64:
    """``arrivals`` as a 1-D float64 array of finite times >= 0 (ValueError otherwise)."""
    if hasattr(arrivals, "arrivals_s") and hasattr(arrivals, "tier_names"):  # a Workload, not its times
        raise PardTypeError(f"{name} must be an array of arrival times in seconds, got a Workload: pass its "
                            f"arrivals_s (a rescaled trace's requests no longer line up with the Workload's "
                            f"per-request fields; draw new ones, e.g. pard.workloads.draw_tokens)")
    a = np.asarray(arrivals, dtype=np.float64)
    if a.ndim != 1:
        raise PardValueError(f"{name} must be a 1-D array of seconds, got shape {a.shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        i = int(np.argmax(bad))
        raise PardValueError(f"{name}[{i}] = {show(a[i])} is not finite")
    if a.size and a.min() < 0.0:
        i = int(np.argmin(a))
        raise PardValueError(f"{name}[{i}] = {show(a[i])} is negative; arrival times must be >= 0")
    return a


def spread_counts(
    counts: npt.NDArray[np.int64], width: float, spread: str, gen: np.random.Generator
) -> F64:
    """Arrival times for ``counts[i]`` arrivals inside ``[i*width, (i+1)*width)``, sorted.

    ``spread="uniform"``: evenly spaced at ``(k + 0.5) * width / n``; ``"poisson"``: independent
    uniform positions (a Poisson process conditioned on each interval's count).
    """
    if spread not in ("uniform", "poisson"):
        raise PardValueError(f"spread must be 'uniform' or 'poisson', got {spread!r}")
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    starts = np.repeat(np.arange(counts.size, dtype=np.float64) * width, counts)
    if spread == "uniform":
        first = np.repeat(np.cumsum(counts) - counts, counts)
        rank = np.arange(total, dtype=np.int64) - first
        offsets = (rank + 0.5) / np.repeat(counts, counts) * width
    else:
        offsets = gen.random(total) * width
    out = starts + offsets
    out.sort(kind="stable")
    return out


def pandas() -> Any:
    """The pandas module (trace files need it: the ``pard[cli]`` extra), imported on first use."""
    return require("pandas", "cli", "trace files")


def existing_trace_file(path: PathLike) -> Path:
    """``path`` as a Path, or TraceError if it is not a file or is empty (checked before pandas reads it)."""
    if not isinstance(path, (str, os.PathLike)):
        raise PardTypeError(f"trace path must be a str or os.PathLike, got {type(path).__name__}: {show(path)}")
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"{p}: no such trace file")
    if p.stat().st_size == 0:
        raise TraceError(f"{p}: the file is empty")
    return p


def read_csv(path: PathLike, **options: Any) -> tuple[Path, pd.DataFrame]:
    """``pandas.read_csv(path, **options)`` after :func:`existing_trace_file`; TraceError for a missing,
    unreadable, empty or malformed (too many fields) file."""
    pd = pandas()
    p = existing_trace_file(path)
    try:
        with warnings.catch_warnings():
            # pandas only warns when a row has more fields than the header and drops the excess
            warnings.simplefilter("error", pd.errors.ParserWarning)
            return p, pd.read_csv(p, **options)
    except (pd.errors.ParserWarning, pd.errors.ParserError) as exc:
        raise TraceError(_malformed(p, exc)) from None
    except pd.errors.EmptyDataError:
        raise TraceError(f"{p}: the file is empty (no header and no rows)") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise TraceError(f"{p}: cannot read the file: {exc}") from None


def _malformed(p: Path, exc: Exception) -> str:
    """What is wrong with a CSV file pandas refused, by line: the first line with more fields than the
    first line, or where Python's csv module stops (pandas' own text names its C tokenizer, not the file)."""
    line = 0
    try:
        with p.open("r", encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, strict=True)
            first: tuple[int, int] | None = None
            for row in reader:
                line = reader.line_num
                if not row:  # a blank line
                    continue
                if first is None:
                    first = (line, len(row))
                elif len(row) > first[1]:
                    return (f"{p}: line {line} has {len(row)} fields, but line {first[0]} (the first) has "
                            f"{first[1]}; every line of a CSV trace must have as many fields as the first")
    except csv.Error as err:
        return f"{p}: line {line + 1}: not valid CSV: {err}"
    except (OSError, UnicodeDecodeError):
        pass
    return f"{p}: not a well-formed CSV file: {' '.join(str(exc).split())}"


def read_csv_text(path: PathLike, *, header: bool) -> tuple[Path, pd.DataFrame]:
    """Read a CSV as strings with one DataFrame row per file line (blank lines become rows of "").

    The row with index ``i`` is on file line ``i + 2`` with a header and ``i + 1`` without.  Raises
    TraceError as :func:`read_csv`.
    """
    # index_col=False: a row longer than the header is an error, never silently an index column
    return read_csv(path, header=0 if header else None, dtype=str, keep_default_na=False,
                    skip_blank_lines=False, engine="c", index_col=False)


def drop_blank_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that are not entirely empty (blank lines carry no data); the index is kept."""
    if df.empty:
        return df
    blank = (df == "").all(axis=1)
    return df[~blank]


def first_missing(df: pd.DataFrame, columns: list[str]) -> tuple[int, str] | None:
    """(row index, column) of the first empty field among ``columns``, or None."""
    for idx, row_missing in (df[columns] == "").any(axis=1).items():
        if row_missing:
            col = next(c for c in columns if df.at[idx, c] == "")
            return int(idx), col
    return None


def sort_order(times_s: F64, source: str) -> npt.NDArray[np.intp] | None:
    """The stable sorting permutation of ``times_s``, or None if already sorted.

    Warns (PardWarning) how many timestamps were earlier than the one before them.  Raises
    TraceError if there is no arrival at all.
    """
    if times_s.size == 0:
        raise TraceError(f"{source}: the trace has no arrivals")
    out_of_order = int(np.count_nonzero(np.diff(times_s) < 0))
    if not out_of_order:
        return None
    warnings.warn(
        f"{source}: {out_of_order} of {times_s.size} timestamps were earlier than the one "
        f"before them; the arrivals were sorted",
        PardWarning,
        stacklevel=4,
    )
    return np.argsort(times_s, kind="stable")


def finish(times_s: F64, source: str) -> F64:
    """Sorted (see :func:`sort_order`) and shifted so that the first arrival is at 0 s."""
    order = sort_order(times_s, source)
    if order is not None:
        times_s = times_s[order]
    return np.ascontiguousarray(times_s - times_s[0], dtype=np.float64)
