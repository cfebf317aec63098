"""The Open Inference Protocol's tensors over gRPC: ``ModelInferRequest`` to NumPy, NumPy to ``ModelInferResponse``.

The messages are ``tritonclient.grpc.service_pb2``'s (KServe v2's ``GRPCInferenceService``, as Triton ships
it).  An input's data comes either as raw little-endian bytes (``raw_input_contents``, one entry per input, in
input order: what ``tritonclient.grpc`` sends) or as typed contents (``contents.fp32_contents``, ...); a
request uses one form for all its inputs.  BYTES elements are raw as a 4-byte little-endian length then the
bytes, typed as ``bytes_contents``; FP16 has no typed field and comes raw only.  Outputs always go back raw,
as Triton answers.

Every malformed field raises :class:`~pard.serve.protocol.ProtocolError` naming it (``inputs[0].shape``,
``raw_input_contents[1]``) and the value; the gRPC front answers it INVALID_ARGUMENT.  Neighbours:
:mod:`.protocol` (the same tensors in JSON and binary HTTP), :mod:`.grpc_front` (the service).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .protocol import DATATYPES, MAX_DIMS, InferRequest, ProtocolError, _binary_bytes, _from_binary, datatype_of

__all__ = ["parameters_of", "decode_infer", "encode_infer"]

#: v2 datatype -> the typed-contents field that carries it (FP16 has none: raw only).
_CONTENTS = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
    "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
    "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parameters_of(params: Any) -> dict[str, Any]:
    """A ``map<string, InferParameter>`` as a dict of Python values (bool, int, str or float)."""
    out: dict[str, Any] = {}
    for key, p in params.items():
        kind = p.WhichOneof("parameter_choice")
        if kind is not None:
            out[key] = getattr(p, kind)
    return out


def _shape(where: str, dims: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(int(d) for d in dims)
    if len(shape) > MAX_DIMS or any(d < 0 for d in shape):
        raise ProtocolError(f"{where}.shape must be at most {MAX_DIMS} dimensions, each >= 0, got {_show(list(shape))}")
    return shape


def _typed(where: str, tensor: Any, shape: tuple[int, ...], datatype: str) -> np.ndarray:
    """An input's typed contents as an array of ``shape``."""
    field = _CONTENTS.get(datatype)
    if field is None:
        raise ProtocolError(f"{where}.contents: {datatype} has no typed contents field; send it in "
                            "raw_input_contents")
    values = getattr(tensor.contents, field)
    count = math.prod(shape)
    if len(values) != count:
        raise ProtocolError(f"{where}.contents.{field} holds {len(values)} elements but shape {list(shape)} "
                            f"needs {count}")
    others = [f for f in set(_CONTENTS.values()) if f != field and len(getattr(tensor.contents, f))]
    if others:
        raise ProtocolError(f"{where}.contents: a {datatype} tensor's data belongs in {field}, got "
                            f"{sorted(others)}")
    if datatype == "BYTES":
        return np.array(list(values), dtype=object).reshape(shape)
    dt = DATATYPES[datatype]
    if dt.kind in "iu" and dt.itemsize < 4:  # carried in a 32-bit field: each value must fit the datatype
        wide = np.array(values, dtype=np.int64)
        info = np.iinfo(dt)
        bad = np.flatnonzero((wide < info.min) | (wide > info.max))
        if bad.size:
            raise ProtocolError(f"{where}.contents.{field}[{int(bad[0])}] = {int(wide[bad[0]])} is out of "
                                f"{datatype}'s range [{info.min}, {info.max}]")
        return wide.astype(dt).reshape(shape)
    return np.array(values, dtype=dt).reshape(shape)


def decode_infer(request: Any, parameters: dict[str, Any] | None = None) -> InferRequest:
    """The :class:`InferRequest` (NumPy inputs) of a ``ModelInferRequest``; ``parameters``: its
    :func:`parameters_of`, when already read.  Raises ProtocolError naming the field."""
    raw = request.raw_input_contents
    inputs: dict[str, np.ndarray] = {}
    if raw and len(raw) != len(request.inputs):
        raise ProtocolError(f"raw_input_contents holds {len(raw)} entries but the request has "
                            f"{len(request.inputs)} inputs: one per input, in order, or none")
    for i, tensor in enumerate(request.inputs):
        where = f"inputs[{i}]"
        name, datatype = tensor.name, tensor.datatype
        if not name:
            raise ProtocolError(f"{where}.name must be a tensor name, got ''")
        if name in inputs:
            raise ProtocolError(f"{where}.name: input {name!r} is given twice")
        if datatype not in DATATYPES:
            raise ProtocolError(f"{where}.datatype must be one of {sorted(DATATYPES)}, got {_show(datatype)}")
        shape = _shape(where, tensor.shape)
        if raw:
            if tensor.HasField("contents") and any(len(getattr(tensor.contents, f)) for f in set(_CONTENTS.values())):
                raise ProtocolError(f"{where}.contents: a request with raw_input_contents carries every input's "
                                    "data there, not in contents")
            if datatype != "BYTES" and len(raw[i]) != math.prod(shape) * DATATYPES[datatype].itemsize:
                raise ProtocolError(f"raw_input_contents[{i}] holds {len(raw[i])} bytes but {where} ({name!r}, "
                                    f"shape {list(shape)} of {datatype}) needs "
                                    f"{math.prod(shape) * DATATYPES[datatype].itemsize}")
            inputs[name] = _from_binary(f"raw_input_contents[{i}]", raw[i], shape, datatype)
        else:
            inputs[name] = _typed(where, tensor, shape, datatype)
    outputs = [o.name for o in request.outputs]
    return InferRequest(id=request.id, inputs=inputs,
                        parameters=parameters_of(request.parameters) if parameters is None else parameters,
                        outputs=outputs)


def encode_infer(pb: Any, model_name: str, request_id: str, outputs: Sequence[tuple[str, np.ndarray]]) -> Any:
    """A ``ModelInferResponse`` (``pb``: the ``service_pb2`` module) carrying ``outputs`` raw.
    Raises ProtocolError for an array v2 has no datatype for."""
    response = pb.ModelInferResponse(model_name=model_name, model_version="1", id=request_id)
    for name, arr in outputs:
        a = np.asarray(arr)
        tensor = response.outputs.add()
        tensor.name = name
        tensor.datatype = datatype_of(a)
        tensor.shape.extend(a.shape)
        response.raw_output_contents.append(_binary_bytes(a))
    return response
