"""The Open Inference Protocol codec: v2 JSON and binary tensors, datatypes, errors naming the field."""

from __future__ import annotations

import json
import re
import struct

import numpy as np
import pytest

pytest.importorskip("starlette")

from pard.errors import PardError  # noqa: E402
from pard.serve.protocol import (  # noqa: E402
    DATATYPES,
    ProtocolError,
    datatype_of,
    decode_request,
    encode_response,
)


def _binary_body(doc: dict, blobs: list[bytes]) -> tuple[bytes, int]:
    header = json.dumps(doc).encode()
    return header + b"".join(blobs), len(header)


def test_json_request_decodes_to_arrays_of_the_named_datatype() -> None:
    """A JSON FP32 [2, 3] tensor and an INT64 scalar vector decode to exactly those arrays."""
    doc = {"id": "r1", "parameters": {"timeout": 5000}, "inputs": [
        {"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]},
        {"name": "k", "shape": [2], "datatype": "INT64", "data": [[7], [8]]},
    ]}
    req = decode_request(json.dumps(doc).encode())
    assert req.id == "r1" and req.parameters == {"timeout": 5000}
    np.testing.assert_array_equal(req.inputs["x"], np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    assert req.inputs["x"].dtype == np.float32 and req.inputs["k"].dtype == np.int64
    assert req.inputs["k"].tolist() == [7, 8]


def test_binary_request_decodes_raw_little_endian_tensors_in_input_order() -> None:
    """Two binary inputs after the JSON header are split by binary_data_size and read little-endian."""
    a = np.arange(6, dtype="<f4").reshape(2, 3)
    b = np.array([1, -2], dtype="<i2")
    words = [b"hi", b"pard!"]
    strings = b"".join(struct.pack("<I", len(w)) + w for w in words)
    doc = {"inputs": [
        {"name": "a", "shape": [2, 3], "datatype": "FP32", "parameters": {"binary_data_size": a.nbytes}},
        {"name": "b", "shape": [2], "datatype": "INT16", "parameters": {"binary_data_size": b.nbytes}},
        {"name": "s", "shape": [2], "datatype": "BYTES", "parameters": {"binary_data_size": len(strings)}},
    ]}
    body, n = _binary_body(doc, [a.tobytes(), b.tobytes(), strings])
    req = decode_request(body, n)
    np.testing.assert_array_equal(req.inputs["a"], a)
    np.testing.assert_array_equal(req.inputs["b"], b)
    assert req.inputs["s"].tolist() == words


@pytest.mark.parametrize("datatype", sorted(set(DATATYPES) - {"BYTES"}))
def test_every_numeric_datatype_round_trips_binary_and_json(datatype: str) -> None:
    """Encoding an array and decoding the response's tensor gives the same values, binary and JSON."""
    arr = (np.arange(6) % 2).astype(DATATYPES[datatype]).reshape(3, 2)
    assert datatype_of(arr) == datatype
    for binary in (True, False):
        body, headers = encode_response("m", "", [("y", arr)], {"y": binary})
        length = int(headers["inference-header-content-length"]) if binary else len(body)
        doc = json.loads(body[:length])
        out = doc["outputs"][0]
        assert (out["name"], out["shape"], out["datatype"]) == ("y", [3, 2], datatype)
        # decode the response tensor with the request decoder: the same wire form
        req_doc = {"inputs": [{k: v for k, v in out.items()}]}
        back = decode_request(json.dumps(req_doc).encode() + body[length:], len(json.dumps(req_doc).encode())
                              if binary else None)
        np.testing.assert_array_equal(back.inputs["y"], arr)


def test_response_without_binary_outputs_is_plain_json_with_the_id() -> None:
    """A JSON-only response has no binary header, echoes the request id and carries the parameters."""
    body, headers = encode_response("tm", "abc", [("o", np.array([1.5], dtype=np.float64))], {},
                                    parameters={"pard_request_id": 3})
    assert headers == {"content-type": "application/json"}
    assert json.loads(body) == {"model_name": "tm", "id": "abc", "parameters": {"pard_request_id": 3}, "outputs": [
        {"name": "o", "shape": [1], "datatype": "FP64", "data": [1.5]}]}


@pytest.mark.parametrize(("doc", "field"), [
    ({"inputs": []}, "inputs must be a non-empty list"),
    ({"inputs": [{"name": "x", "shape": [2], "datatype": "FP99", "data": [1, 2]}]}, "inputs[0].datatype"),
    ({"inputs": [{"name": "x", "shape": [2, -1], "datatype": "FP32", "data": [1, 2]}]}, "inputs[0].shape"),
    ({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "data": [1, 2]}]}, "inputs[0].data holds 2"),
    ({"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": ["a"]}]}, "inputs[0].data"),
    ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32"}]}, "neither data nor"),
    ({"inputs": [{"name": "", "shape": [1], "datatype": "FP32", "data": [1]}]}, "inputs[0].name"),
    ({"id": 5, "inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]}, "id must be a string"),
    ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}], "outputs": [{}]}, "outputs[0].name"),
    # bool("false") is True: a string or number flag turned binary output on unasked
    ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}],
      "outputs": [{"name": "o", "parameters": {"binary_data": "false"}}]},
     "outputs[0].parameters.binary_data must be true or false, got 'false'"),
    ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}],
      "parameters": {"binary_data_output": 1}}, "parameters.binary_data_output must be true or false, got 1"),
])
def test_malformed_requests_name_the_field(doc: dict, field: str) -> None:
    """Each malformed request raises ProtocolError (a PardError and ValueError) naming the field."""
    with pytest.raises(ProtocolError) as info:
        decode_request(json.dumps(doc).encode())
    assert field in str(info.value)
    assert isinstance(info.value, PardError) and isinstance(info.value, ValueError)


def test_binary_size_mismatches_are_refused() -> None:
    """A binary tensor of the wrong size, an overrun, leftover bytes and a bad header length are errors."""
    doc = {"inputs": [{"name": "a", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 4}}]}
    body, n = _binary_body(doc, [b"\0" * 4])
    with pytest.raises(ProtocolError, match="needs 8"):
        decode_request(body, n)
    with pytest.raises(ProtocolError, match="overruns"):
        decode_request(body[:-1], n)
    good, m = _binary_body({"inputs": [{"name": "a", "shape": [1], "datatype": "FP32",
                                        "parameters": {"binary_data_size": 4}}]}, [b"\0" * 4])
    with pytest.raises(ProtocolError, match="no input claims"):
        decode_request(good + b"\0", m)
    with pytest.raises(ProtocolError, match="Inference-Header-Content-Length"):
        decode_request(body, len(body) + 1)
    # data and binary_data_size both: the binary part won and data was ignored (a new user's report)
    both, k = _binary_body({"inputs": [{"name": "a", "shape": [1], "datatype": "FP32", "data": [7],
                                        "parameters": {"binary_data_size": 4}}]}, [b"\0" * 4])
    with pytest.raises(ProtocolError, match=r"inputs\[0\] \('a'\) gives both data and parameters.binary_data_size"):
        decode_request(both, k)
    with pytest.raises(ProtocolError, match="not valid JSON"):
        decode_request(b"{nope")


def test_strict_json_both_ways() -> None:
    """NaN/Infinity tokens and FP32-overflowing numbers are refused; non-finite outputs are JSON null."""
    for text, needle in [('{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,NaN]}]}', "NaN"),
                         ('{"inputs":[{"name":"x","shape":[1],"datatype":"FP64","data":[-Infinity]}]}', "-Infinity"),
                         ('{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,1e39]}]}',
                          "data[1] = 1e+39 is out of the range of FP32")]:
        with pytest.raises(ProtocolError, match=re.escape(needle)):
            decode_request(text.encode())
    ok = decode_request(b'{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[3.4e38]}]}')
    assert ok.inputs["x"][0] == np.float32(3.4e38)
    body, _ = encode_response("m", "", [("y", np.array([1.0, np.nan, np.inf], np.float32))], {})
    doc = json.loads(body, parse_constant=lambda t: pytest.fail(f"non-JSON token {t}"))
    assert doc["outputs"][0]["data"] == [1.0, None, None]


@pytest.mark.parametrize("datatype, data, needle", [
    ("FP32", [1.0, True], "data[1] = True is not a number, as datatype FP32 needs"),
    ("INT32", [1, 1.5], "data[1] = 1.5 is not a whole number, as datatype INT32 needs"),
    ("UINT8", [False], "data[0] = False is not a whole number"),
    ("BOOL", [True, 1], "data[1] = 1 is not true or false"),
    ("FP64", [None, 1.0], "data[0] = None is not a number"),
])
def test_json_elements_of_the_wrong_kind_are_refused(datatype: str, data: list, needle: str) -> None:
    """NumPy alone would read JSON true as 1.0 and truncate 1.5 to the INT32 1, without a word."""
    doc = {"inputs": [{"name": "x", "shape": [len(data)], "datatype": datatype, "data": data}]}
    with pytest.raises(ProtocolError, match=re.escape(needle)):
        decode_request(json.dumps(doc).encode())


def test_json_elements_of_the_right_kind_decode_exactly() -> None:
    """Whole numbers are numbers for the float types; nested lists are row-major (the v2 protocol)."""
    doc = {"inputs": [{"name": "f", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2.5], [3, -4]]},
                      {"name": "b", "shape": [2], "datatype": "BOOL", "data": [True, False]},
                      {"name": "i", "shape": [3], "datatype": "INT64", "data": [-(2**40), 0, 7]}]}
    req = decode_request(json.dumps(doc).encode())
    assert req.inputs["f"].tolist() == [[1.0, 2.5], [3.0, -4.0]] and req.inputs["f"].dtype == np.float32
    assert req.inputs["b"].tolist() == [True, False]
    assert req.inputs["i"].tolist() == [-(2**40), 0, 7]



def test_ragged_data_is_refused_as_ragged() -> None:
    """Even nestings are read row-major whatever their shape (Triton's reading: [[7], [8]] for shape [2]);
    an uneven one is named as such, not as 'is not a number' (a fresh user's report)."""
    doc = {"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "data": [[0.5, 0.5], [0.5]]}]}
    with pytest.raises(ProtocolError, match="data is nested unevenly"):
        decode_request(json.dumps(doc).encode())


def test_a_body_of_nul_bytes_is_not_read_as_utf_32() -> None:
    """JSON is UTF-8 (RFC 8259): NUL bytes are an invalid JSON body, not a UTF-32 codec error."""
    with pytest.raises(ProtocolError, match="not valid JSON: Expecting value") as info:
        decode_request(b"\0" * 50)
    assert "utf-32" not in str(info.value)
