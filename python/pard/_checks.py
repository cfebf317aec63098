"""Argument checks shared across pard: each raises a :class:`pard.errors.PardError` subclass
(``PardTypeError`` / ``PardValueError``) whose message names the argument and quotes the value."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import PardTypeError, PardValueError

__all__ = ["show", "real_number", "as_float", "check_positive", "check_nonnegative", "check_float", "real_array",
           "check_bool", "fmt_num", "fmt_bytes"]

F64 = npt.NDArray[np.float64]


def show(x: object) -> str:
    """``repr`` of a value for a message, with NumPy scalars shown as plain numbers."""
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return repr(x.item())
    return repr(x)


def real_number(name: str, value: object, bound: str) -> float:
    """``value`` as a float, or TypeError naming ``name`` when it is not a real number."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PardTypeError(f"{name} must be a real number {bound}, got {type(value).__name__}: {show(value)}")
    return as_float(value)


def as_float(value: Any) -> float:
    """``float(value)``, with an int past float's range (10**400) as +-inf, which every finite-range
    check then refuses with its own message (instead of an OverflowError)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def check_positive(name: str, value: float) -> float:
    """``value`` as a float; TypeError unless a real number (int or float, NumPy's too; not a str, bool
    or complex), ValueError unless finite and > 0."""
    v = real_number(name, value, "> 0")
    if not math.isfinite(v) or v <= 0.0:
        raise PardValueError(f"{name} must be finite and > 0, got {show(value)}")
    return v


def check_nonnegative(name: str, value: float) -> float:
    """``value`` as a float; TypeError unless a real number (int or float, NumPy's too; not a str, bool
    or complex), ValueError unless finite and >= 0."""
    v = real_number(name, value, ">= 0")
    if not math.isfinite(v) or v < 0.0:
        raise PardValueError(f"{name} must be finite and >= 0, got {show(value)}")
    return v


def fmt_num(x: float) -> str:
    """A number for messages: ``12``, ``0.5``, ``2.7e+09`` (never ``np.float64(...)``)."""
    v = float(x)
    if v == int(v) and abs(v) < 1e7:
        return str(int(v))
    return f"{v:.4g}"


def fmt_bytes(n: float) -> str:
    """``n`` bytes as ``"1.2 GiB"`` etc."""
    for unit, size in (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 1024:.1f} KiB"


def check_float(name: str, value: Any, *, low: float, low_open: bool = False, high: float = math.inf) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise PardTypeError(f"{name} must be a number, got {type(value).__name__}: {show(value)}")
    v = as_float(value)
    ok = (v > low if low_open else v >= low) and v <= high and math.isfinite(v)
    if not ok:
        bound = f"{'>' if low_open else '>='} {low}" + (f" and <= {high}" if math.isfinite(high) else "")
        raise PardValueError(f"{name} must be a finite number {bound}, got {show(value)}")
    return v


def real_array(name: str, value: Any, what: str) -> F64:
    """``value`` as a float64 array; TypeError naming ``name`` for strings, complex numbers, booleans or
    other non-real entries (never a silent cast: NumPy would drop an imaginary part with a warning)."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise PardTypeError(f"{name} must be {what}, got {type(value).__name__}") from exc
    kind = raw.dtype.kind
    if kind in "iuf":
        return raw.astype(np.float64, copy=False)
    if kind == "O":
        flat = raw.reshape(-1)
        for i, x in enumerate(flat):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                where = f"{name}[{i}]" if raw.ndim else name
                raise PardTypeError(f"{name} must be {what}; {where} is {type(x).__name__}: {show(x)}")
        return np.array([as_float(x) for x in flat], dtype=np.float64).reshape(raw.shape)
    desc = {"c": "complex", "b": "bool", "U": "str", "S": "bytes", "M": "datetime64", "m": "timedelta64"}
    sample = f": {show(raw.reshape(-1)[0])}" if raw.size else ""
    raise PardTypeError(f"{name} must be {what}, got {desc.get(kind, str(raw.dtype))} values{sample}")


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise PardTypeError(f"{name} must be True or False, got {type(value).__name__}: {show(value)}")
    return bool(value)
