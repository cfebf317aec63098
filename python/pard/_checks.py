"""Argument checks shared across pard: each raises a :class:`pard.errors.PardError` subclass
(``PardTypeError`` / ``PardValueError``) whose message names the argument and quotes the value."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import PardTypeError, PardValueError

__all__ = ["show", "yaml11_hint", "real_number", "as_float", "check_positive", "check_nonnegative", "check_float", "real_array",
           "check_bool", "fmt_num", "fmt_bytes"]

F64 = npt.NDArray[np.float64]


def finite_number(x: object) -> float | None:
    """``x`` as a float when it is a finite real number (an int too, bools not), else None; an int past
    float's range is None, not an OverflowError."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return None
    try:
        value = float(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def show(x: object) -> str:
    """``repr`` of a value for a message, with NumPy scalars shown as plain numbers."""
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return repr(x.item())
    if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 200:  # no 4 300-digit repr (or its error)
        return f"an int of {len(hex(x)) - 2} hex digits"
    text = repr(x)
    return text if len(text) <= 200 else text[:200] + "..."


#: A number in exponent form without a dot or with no digit after it (``1e1``, ``5e5``, ``2.e-3``):
#: YAML 1.2 reads it as a float, but YAML 1.1's float pattern (PyYAML's) needs a dot and a signed
#: exponent, so ``1e1`` reaches pard as the string ``'1e1'``.
_YAML11_STRING_NUMBER = re.compile(r"^[-+]?(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9_]+)[eE][-+]?[0-9]+$")


def yaml11_hint(value: object) -> str:
    """For a message refusing ``value`` where a number belongs: when it is a string such as ``'1e1'`` that
    YAML 1.1 (PyYAML) reads as a string, ``" -- YAML 1.1 (PyYAML) reads 1e1 as the string '1e1', not a number
    ...: write 1.0e+1 or 10"`` (not ``1.0e1``: PyYAML's floats need a signed exponent too); otherwise ``""``."""
    if not isinstance(value, str) or not _YAML11_STRING_NUMBER.match(value.strip()):
        return ""
    try:
        number = float(value.replace("_", ""))
    except ValueError:  # pragma: no cover - the pattern only matches float syntax
        return ""
    mantissa, _, exponent = value.strip().lower().partition("e")
    dotted = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent if exponent[:1] in '+-' else '+' + exponent}"
    if dotted == value.strip().lower():
        return ""  # already YAML 1.1's float form: the string came from elsewhere (quotes, JSON)
    plain = str(int(number)) if number.is_integer() and abs(number) < 1e16 else repr(number)
    return (f" -- YAML 1.1 (PyYAML) reads {value} as the string {value!r}, not a number (its floats need a dot "
            f"and a signed exponent): write {dotted} or {plain}")


def real_number(name: str, value: object, bound: str) -> float:
    """``value`` as a float, or TypeError naming ``name`` when it is not a real number."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise PardTypeError(f"{name} must be a real number {bound}, got {type(value).__name__}: {show(value)}"
                            f"{yaml11_hint(value)}")
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
        raise PardTypeError(f"{name} must be a number, got {type(value).__name__}: {show(value)}{yaml11_hint(value)}")
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
