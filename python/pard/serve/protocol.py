"""The Open Inference Protocol's tensors (KServe v2, Triton's and MLServer's HTTP API): JSON and binary.

A v2 inference request is a JSON object ``{"id"?, "parameters"?, "inputs": [{"name", "shape",
"datatype", "data" | "parameters": {"binary_data_size"}}], "outputs"?: [{"name", "parameters"?:
{"binary_data"}}]}``.  With the binary tensor extension the HTTP body is that JSON header
(``Inference-Header-Content-Length`` bytes) followed by the raw tensors, in input order, for every
input whose ``parameters.binary_data_size`` is set.  Responses take the same two forms.

This module decodes requests into NumPy arrays and encodes NumPy outputs into responses; it knows
nothing of pipelines (:mod:`pard.serve.app` does the routing).  Every malformed field raises
:class:`ProtocolError`, whose message names the field (``inputs[0].shape``) and the value, and which
the app answers with HTTP 400.

Datatypes (v2 name -> NumPy): ``BOOL`` bool, ``UINT8..UINT64``, ``INT8..INT64``, ``FP16`` float16,
``FP32`` float32, ``FP64`` float64, ``BYTES`` (object array of ``bytes``; binary form: each element
a 4-byte little-endian length, then its bytes).  ``BF16`` has no NumPy type and is refused.

Strict JSON both ways (RFC 8259 has no NaN or Infinity): a request with ``NaN`` / ``Infinity``
tokens, a JSON number out of its datatype's range (``1e39`` as FP32, ``300`` as UINT8, ``1e400``, an
integer longer than Python's int-string limit of 4 300 digits), or an element of the wrong kind
(``true`` where a number belongs, ``1.5`` for an integer type, ``1`` for BOOL), is a 400 naming the
element; a non-finite float output is written ``null`` in JSON (ask for binary output to get its bits).

:func:`decode_request_async` decodes a large body in a worker thread, so that the event loop keeps
answering other requests (health checks too) meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from ..errors import PardError

__all__ = [
    "DATATYPES",
    "HEADER_LENGTH",
    "ProtocolError",
    "InferRequest",
    "datatype_of",
    "decode_request",
    "decode_request_async",
    "encode_response",
]

#: The HTTP header of the binary tensor extension: the JSON part's length in bytes.
HEADER_LENGTH = "Inference-Header-Content-Length"

#: v2 datatype name -> NumPy dtype (BYTES: object arrays of bytes).
DATATYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8), "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(object),
}
_BY_DTYPE = {dt: name for name, dt in DATATYPES.items() if name != "BYTES"}

#: Bodies larger than this (bytes) are decoded in a worker thread by :func:`decode_request_async`: about
#: a millisecond of decoding, past which the event loop's other work would wait on it.
DECODE_INLINE_BYTES = 256 * 1024
#: The most dimensions a tensor may have (NumPy 1's limit; NumPy 2 allows 64).
MAX_DIMS = 32


class ProtocolError(PardError, ValueError):
    """A request does not follow the v2 protocol; the message names the field and the value."""


@dataclass
class InferRequest:
    """A decoded v2 request.

    Attributes:
        id: the client's request id (``""`` when absent), echoed in the response.
        inputs: tensor name -> array, in request order.
        parameters: the request-level ``parameters`` (e.g. ``timeout`` in µs, ``priority``).
        outputs: names of the outputs asked for (empty: all).
        binary_outputs: output name -> whether to return it as binary data; ``"*"`` is the default
            for outputs not listed (``parameters.binary_data_output``).
    """

    id: str
    inputs: dict[str, np.ndarray]
    parameters: dict[str, Any] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    binary_outputs: dict[str, bool] = field(default_factory=dict)

    def wants_binary(self, name: str) -> bool:
        """Whether output ``name`` goes back as binary data."""
        return self.binary_outputs.get(name, self.binary_outputs.get("*", False))


def datatype_of(array: np.ndarray) -> str:
    """The v2 datatype name of a NumPy array; ProtocolError for a dtype v2 has no name for."""
    if array.dtype == object or array.dtype.kind in ("S", "U"):
        return "BYTES"
    name = _BY_DTYPE.get(array.dtype)
    if name is None:
        raise ProtocolError(f"output dtype {array.dtype} has no v2 datatype; expected one of {sorted(DATATYPES)}")
    return name


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _shape(where: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                              for d in value):
        raise ProtocolError(f"{where}.shape must be a list of ints >= 0, got {_show(value)}")
    if len(value) > MAX_DIMS:
        raise ProtocolError(f"{where}.shape has {len(value)} dimensions, more than {MAX_DIMS}")
    return tuple(value)


#: Up to this many elements, a flat float list is range-checked in Python (below NumPy's per-call cost).
SMALL_JSON_DATA = 256
#: The largest finite value of each float datatype.
_FMAX = {dt: float(np.finfo(dt).max) for dt in {d for d in DATATYPES.values() if d.kind == "f"}}


def _out_of_range(where: str, data: list[Any], datatype: str, exc: Exception) -> ProtocolError:
    """The error for a list of numbers NumPy could not convert: name the first element out of
    ``datatype``'s range, or (none found) the whole list and NumPy's reason."""
    dt = DATATYPES[datatype]
    # Python numbers: an int of 400 digits compares with them exactly, where NumPy's overflow
    lo, hi = ((int(np.iinfo(dt).min), int(np.iinfo(dt).max)) if dt.kind in "iu"
              else (-float(np.finfo(dt).max), float(np.finfo(dt).max)))
    for i, x in enumerate(np.asarray(data, dtype=object).reshape(-1).tolist()):
        if isinstance(x, int) and not lo <= x <= hi:
            shown = _show(x) if x.bit_length() < 256 else f"an integer of {len(str(abs(x)))} digits"
            return ProtocolError(f"{where}.data[{i}] = {shown} is out of the range of {datatype} [{lo}, {hi}]")
    return ProtocolError(f"{where}.data is not a list of {datatype} values ({exc}): {_show(data)}")


def _from_json_data(where: str, data: Any, shape: tuple[int, ...], datatype: str) -> np.ndarray:
    count = math.prod(shape)
    if datatype == "BYTES":
        flat = np.asarray(data, dtype=object).reshape(-1) if isinstance(data, list) else None
        if flat is None or not all(isinstance(x, str) for x in flat):
            raise ProtocolError(f"{where}.data must be a list of strings for datatype BYTES, got {_show(data)}")
        arr = np.array([x.encode("utf-8") for x in flat], dtype=object)
    else:
        if not isinstance(data, list):
            raise ProtocolError(f"{where}.data must be a list of numbers, got {_show(data)}")
        flat = _check_json_kinds(where, data, datatype)  # any even nesting is read row-major, as Triton reads it
        dt = DATATYPES[datatype]
        if flat and dt.kind == "f" and 0 < len(data) <= SMALL_JSON_DATA and max(max(data), -min(data)) <= _FMAX[dt]:
            # a short flat list within range: Python's min and max bound it for less than NumPy's error-state
            # and finiteness checks cost per call (JSON has no inf or NaN; orjson refuses 1e400)
            arr = np.array(data, dtype=dt)
            if arr.size != count:
                raise ProtocolError(f"{where}.data holds {arr.size} elements but shape {list(shape)} needs {count}")
            return arr.reshape(shape)
        try:
            if dt.kind == "f" and dt.itemsize < 8:
                with np.errstate(over="ignore"):  # an overflow becomes inf, refused below
                    arr = np.asarray(data, dtype=dt).reshape(-1)
            else:  # a JSON number is a float64 or an int: no overflow to silence (ints raise)
                arr = np.asarray(data, dtype=dt).reshape(-1)
        except (TypeError, ValueError, OverflowError) as exc:
            raise _out_of_range(where, data, datatype, exc) from None
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():  # JSON numbers are finite: it overflowed
            i = int(np.flatnonzero(~np.isfinite(arr))[0])
            x = np.asarray(data, dtype=object).reshape(-1)[i]
            raise ProtocolError(f"{where}.data[{i}] = {_number(x)} is out of the range of {datatype}")
    if arr.size != count:
        raise ProtocolError(f"{where}.data holds {arr.size} elements but shape {list(shape)} needs {count}")
    return arr.reshape(shape)


def _check_json_kinds(where: str, data: list[Any], datatype: str) -> bool:
    """Each JSON element must be of its datatype's kind: ``true``/``false`` for BOOL only, whole numbers
    for the integer types (NumPy would read ``true`` as 1 and truncate ``1.5`` to 1 without a word).
    Returns whether ``data`` is a flat list (no nesting)."""
    kind = DATATYPES[datatype].kind
    allowed = {bool} if kind == "b" else {int} if kind in "iu" else {int, float}
    if set(map(type, data)) <= allowed:  # a flat list, the common case: no object array to build
        return True
    try:
        flat = np.asarray(data, dtype=object).reshape(-1)
    except ValueError:
        flat = np.array([None])  # cannot be laid out at all: the loop below names it ragged
    items = flat.tolist()
    if set(map(type, items)) <= allowed:  # one pass at C speed; the loop below only names the culprit
        return False
    need = "true or false" if kind == "b" else "a whole number" if kind in "iu" else "a number"
    i, x = next((i, x) for i, x in enumerate(items) if type(x) not in allowed)
    if isinstance(x, list) or x is None and flat.size == 1 and isinstance(data[0], list):
        raise ProtocolError(f"{where}.data is nested unevenly (its lists at one depth differ in length): "
                            f"{_show(data)}")
    raise ProtocolError(f"{where}.data[{i}] = {_number(x)} is not {need}, as datatype {datatype} needs")


def _number(x: Any) -> str:
    """An element as a message shows it: a JSON number past float64's range (``1e400``) is read as inf."""
    if isinstance(x, float) and not math.isfinite(x):
        return "a number past float64's range"
    return _show(x)


def _from_binary(where: str, raw: bytes, shape: tuple[int, ...], datatype: str) -> np.ndarray:
    count = math.prod(shape)
    if datatype != "BYTES":
        dt = DATATYPES[datatype].newbyteorder("<")
        if len(raw) != count * dt.itemsize:
            raise ProtocolError(f"{where}.parameters.binary_data_size is {len(raw)} bytes but shape "
                                f"{list(shape)} of {datatype} needs {count * dt.itemsize}")
        return np.frombuffer(raw, dtype=dt).astype(DATATYPES[datatype]).reshape(shape)
    items, pos = [], 0
    while pos < len(raw):
        if pos + 4 > len(raw):
            raise ProtocolError(f"{where}: truncated BYTES element length at byte {pos}")
        (n,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        if pos + n > len(raw):
            raise ProtocolError(f"{where}: BYTES element of {n} bytes overruns the tensor at byte {pos}")
        items.append(bytes(raw[pos:pos + n]))
        pos += n
    if len(items) != count:
        raise ProtocolError(f"{where} holds {len(items)} BYTES elements but shape {list(shape)} needs {count}")
    return np.array(items, dtype=object).reshape(shape)


def _refuse_constant(token: str) -> Any:
    raise ProtocolError(f"the request body is not valid JSON: {token} is not a JSON number (RFC 8259)")


class _HugeInt:
    """A JSON integer past Python's int-string limit (``sys.get_int_max_str_digits()``, 4 300 digits), which
    ``int()`` refuses with ValueError: no datatype holds it, and reading it costs time quadratic in its length."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))


def _int_or_huge(text: str) -> int | _HugeInt:
    try:
        return int(text)
    except ValueError:
        return _HugeInt(text)


def _huge_int_error(header: str) -> ProtocolError | None:
    """Parse again, keeping integers past the limit as :class:`_HugeInt`, and name the first one's field
    (``inputs[0].data[3]``; nested lists indexed as nested); None when there is none.  Only on the error
    path: a parse_int hook costs a Python call per integer."""
    try:
        doc = json.loads(header, parse_constant=_refuse_constant, parse_int=_int_or_huge)
    except (ValueError, RecursionError):  # something else is wrong with it too: the caller's generic error
        return None
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:  # iterative: the document may nest deeper than Python's recursion limit allows
        where, value = stack.pop()
        if isinstance(value, _HugeInt):
            return ProtocolError(f"{where or 'the body'} is an integer of {value.digits} digits, out of the "
                                 f"range of every datatype")
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


def _split_body(body: bytes, header_length: int | None) -> tuple[Any, bytes]:
    if header_length is None:
        header, rest = body, b""
    else:
        if not 0 < header_length <= len(body):
            raise ProtocolError(f"{HEADER_LENGTH} is {header_length} but the body has {len(body)} bytes")
        header, rest = body[:header_length], body[header_length:]
    try:  # the common case: orjson parses strict JSON (UTF-8, no NaN) several times faster
        doc = orjson.loads(header)
    except orjson.JSONDecodeError:  # json below says what is wrong, in the words the tests pin
        pass
    else:
        if not isinstance(doc, dict):
            raise ProtocolError(f"the request body must be a JSON object, got {_show(doc)}")
        return doc, rest
    try:
        # UTF-8 only (RFC 8259 §8.1): json.loads on bytes would guess UTF-16/32 from NUL bytes
        text = header.decode("utf-8")
        doc = json.loads(text, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"the request body is not valid JSON: {exc}") from None
    except RecursionError:  # json's decoder recurses per nesting level: '[' * 100000 exhausts the stack
        raise ProtocolError("the request body's JSON is nested too deeply to decode") from None
    except ProtocolError:  # NaN / Infinity (_refuse_constant)
        raise
    except ValueError as exc:  # an integer past the int-string limit; name where it is
        raise (_huge_int_error(text) or ProtocolError(f"the request body is not valid JSON: {exc}")) from None
    if not isinstance(doc, dict):
        raise ProtocolError(f"the request body must be a JSON object, got {_show(doc)}")
    return doc, rest


def _decode_inputs(entries: Any, rest: bytes) -> dict[str, np.ndarray]:
    if not isinstance(entries, list) or not entries:
        raise ProtocolError(f"inputs must be a non-empty list of tensors, got {_show(entries)}")
    tensors: dict[str, np.ndarray] = {}
    pos = 0
    for i, t in enumerate(entries):
        where = f"inputs[{i}]"
        if not isinstance(t, dict):
            raise ProtocolError(f"{where} must be an object, got {_show(t)}")
        name, datatype = t.get("name"), t.get("datatype")
        if not isinstance(name, str) or not name:
            raise ProtocolError(f"{where}.name must be a non-empty string, got {_show(name)}")
        if name in tensors:
            raise ProtocolError(f"{where}.name {name!r} is given twice")
        if datatype not in DATATYPES:
            raise ProtocolError(f"{where}.datatype must be one of {sorted(DATATYPES)}, got {_show(datatype)}")
        shape = _shape(where, t.get("shape"))
        params = t.get("parameters") or {}
        size = params.get("binary_data_size") if isinstance(params, dict) else None
        if size is not None and "data" in t:  # which one holds the tensor? Refuse rather than guess
            raise ProtocolError(f"{where} ({name!r}) gives both data and parameters.binary_data_size; give one")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise ProtocolError(f"{where}.parameters.binary_data_size must be an int >= 0, got {_show(size)}")
            if pos + size > len(rest):
                raise ProtocolError(f"{where}.parameters.binary_data_size {size} overruns the binary part "
                                    f"({len(rest) - pos} bytes left)")
            tensors[name] = _from_binary(where, rest[pos:pos + size], shape, datatype)
            pos += size
        elif "data" in t:
            tensors[name] = _from_json_data(where, t["data"], shape, datatype)
        else:
            raise ProtocolError(f"{where} ({name!r}) has neither data nor parameters.binary_data_size")
    if pos != len(rest):
        raise ProtocolError(f"the binary part has {len(rest) - pos} bytes no input claims")
    return tensors


def _decode_outputs(entries: Any, default_binary: bool) -> tuple[list[str], dict[str, bool]]:
    binary = {"*": default_binary}
    if entries is None:
        return [], binary
    if not isinstance(entries, list):
        raise ProtocolError(f"outputs must be a list, got {_show(entries)}")
    names = []
    for i, o in enumerate(entries):
        name = o.get("name") if isinstance(o, dict) else None
        if not isinstance(name, str) or not name:
            raise ProtocolError(f"outputs[{i}].name must be a non-empty string, got {_show(o)}")
        params = o.get("parameters") or {}
        names.append(name)
        binary[name] = _flag(params, "binary_data", default_binary, f"outputs[{i}].parameters")
    return names, binary


def _flag(params: Any, key: str, default: bool, where: str) -> bool:
    """``params[key]`` as a JSON boolean (``default`` when absent); ProtocolError for anything else:
    ``bool("false")`` is True, so a string or a number would turn binary output on unasked."""
    value = params.get(key, default) if isinstance(params, dict) else default
    if not isinstance(value, bool):
        raise ProtocolError(f"{where}.{key} must be true or false, got {_show(value)}")
    return value


def decode_request(body: bytes, header_length: int | None = None) -> InferRequest:
    """Decode a v2 inference request body (JSON, or JSON + binary tensors).

    Args:
        body: the HTTP body.
        header_length: the ``Inference-Header-Content-Length`` header's value, or None.

    Returns: an :class:`InferRequest`.
    Raises: ProtocolError naming the first bad field and its value.
    """
    doc, rest = _split_body(body, header_length)
    rid = doc.get("id", "")
    if not isinstance(rid, str):
        raise ProtocolError(f"id must be a string, got {_show(rid)}")
    params = doc.get("parameters") or {}
    if not isinstance(params, dict):
        raise ProtocolError(f"parameters must be an object, got {_show(params)}")
    inputs = _decode_inputs(doc.get("inputs"), rest)
    names, binary = _decode_outputs(doc.get("outputs"), _flag(params, "binary_data_output", False, "parameters"))
    return InferRequest(id=rid, inputs=inputs, parameters=params, outputs=names, binary_outputs=binary)


async def decode_request_async(body: bytes, header_length: int | None = None) -> InferRequest:
    """:func:`decode_request`, in a worker thread (``asyncio.to_thread``) for a body larger than
    :data:`DECODE_INLINE_BYTES`, inline for a smaller one (a thread hand-over costs more than its decode).
    A multi-megabyte JSON body takes the GIL for hundreds of milliseconds either way, but in a thread the
    interpreter switches back to the event loop every few milliseconds, so health checks and small
    requests keep being answered.  Same arguments, result and errors as :func:`decode_request`."""
    if len(body) <= DECODE_INLINE_BYTES:
        return decode_request(body, header_length)
    return await asyncio.to_thread(decode_request, body, header_length)


def _binary_bytes(array: np.ndarray) -> bytes:
    if datatype_of(array) != "BYTES":
        return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    parts = []
    for x in array.reshape(-1):
        b = x if isinstance(x, bytes) else str(x).encode("utf-8")
        parts.append(struct.pack("<I", len(b)) + b)
    return b"".join(parts)


def _json_data(array: np.ndarray) -> list[Any]:
    if datatype_of(array) == "BYTES":
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in array.reshape(-1)]
    return array.reshape(-1).tolist()  # orjson writes NaN and infinities as null: strict JSON has no token for them


def encode_response(model_name: str, request_id: str, outputs: Sequence[tuple[str, np.ndarray]],
                    binary: Mapping[str, bool] | InferRequest, *, parameters: Mapping[str, Any] | None = None,
                    ) -> tuple[bytes, dict[str, str]]:
    """Encode a v2 inference response.

    Args:
        model_name: the model (pipeline) name.  request_id: echoed as ``id`` when not empty.
        outputs: ``(name, array)`` pairs, in response order.
        binary: the request (its :meth:`InferRequest.wants_binary`) or output name -> bool.
        parameters: response-level ``parameters`` (e.g. pard's request id and outcome).

    Returns:
        ``(body, headers)``: with any binary output, headers carry ``Inference-Header-Content-Length``
        and ``Content-Type: application/octet-stream``; otherwise ``application/json``.
    """
    wants = binary.wants_binary if isinstance(binary, InferRequest) else (lambda n: bool(binary.get(n, False)))
    entries, blobs = [], []
    for name, arr in outputs:
        a = np.asarray(arr)
        entry: dict[str, Any] = {"name": name, "shape": list(a.shape), "datatype": datatype_of(a)}
        if wants(name):
            blob = _binary_bytes(a)
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            entry["data"] = _json_data(a)
        entries.append(entry)
    doc: dict[str, Any] = {"model_name": model_name, "outputs": entries}
    if request_id:
        doc["id"] = request_id
    if parameters:
        doc["parameters"] = dict(parameters)
    header = orjson.dumps(doc)
    if not blobs:
        return header, {"content-type": "application/json"}
    return header + b"".join(blobs), {"content-type": "application/octet-stream",
                                      HEADER_LENGTH.lower(): str(len(header))}
