"""ONNX stage models: small convolutional networks of each stage's kind, for ONNX Runtime.

``pard run`` replays a trace through these by default (``--models numpy`` keeps the NumPy reference
models of :mod:`.reference`).  For every stage of a pipeline graph, :func:`onnx_models` builds one
ONNX graph with the ``onnx`` helper API, of the kind the stage's name says:

* **detector** (``*detect*``, ``pose``): a strided convolutional backbone -- per block a 3x3
  stride-2 convolution then a 3x3 convolution, ReLU after each -- with a 1x1 detection head
  (``anchors x (5 + classes)`` channels) at the exit;
* **recogniser** (``*ocr*``, ``*recogn*``, ``*text*``): a convolutional block, the feature map
  averaged over its height, and a per-column classifier, giving ``(columns, symbols)`` sequence
  logits at the exit (a CRNN without the recurrent layer);
* **classifier** (every other stage: ``*classify*``, ``expression``, ``face_landmark``, ...): a
  stride-2 convolution, a residual block, global average pooling and a fully connected head of
  ``_FC_HIDDEN`` units before the logits (the wide FC layer is what makes batching pay on a CPU,
  as it does on a GPU: its weights are read once per batch).

Inputs and outputs keep the reference models' convention: one request's image or feature map is
``(height, width, channels)`` float32, channels last (a ``Transpose`` node at each end of the
graph converts to ONNX's NCHW), so :func:`pard.models.join_inputs` joins DAG branches as before.
The entry stages take :data:`ONNX_INPUT_SHAPE`.  A stage that is not an exit passes on its feature
map (the next stage's input); only exit stages apply their head.  Weights are random (He-normal,
seeded): nothing can be downloaded, and pard measures cost, not accuracy.

Each model is built once per (pipeline graph, seed, scale) and cached as a ``.onnx`` file under
``<pard cache>/models/`` (see :func:`pard.profiling.cache_dir`: ``$PARD_CACHE_DIR`` or ``~/.cache/pard``), where a Triton server can load it
too.  Sizes: at ``scale=1`` a ``tm`` stage's batch of 1 takes about 1-5 ms on one core of a 2020s x86
server and a batch of 16 about 10-40 ms (``pard profile`` measures them on the machine at hand).

Neighbours: :class:`pard.executors.OnnxExecutor` runs the files; :mod:`pard.profiling` times them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._cache import cache_dir
from .._extras import require
from ..errors import ConfigError
from .reference import MAX_MODEL_BYTES, _graph, _join_shape

__all__ = ["OnnxStageModel", "onnx_models", "stage_kind", "ONNX_INPUT_SHAPE", "BUILDER_VERSION"]

#: One request's input at an entry stage: a 64x64 RGB frame, (height, width, channels), float32.
ONNX_INPUT_SHAPE: tuple[int, int, int] = (64, 64, 3)
#: Bumped whenever the graphs change, so cached files of an older builder are not reused.
BUILDER_VERSION = 1
_OPSET = 17
_IR_VERSION = 8  # readable by every onnxruntime since 1.10
# Sizes at scale 1 (channel widths scale by sqrt(scale), so cost grows ~linearly with scale).
_SIDE = 16           # feature maps are brought down to at most 16x16 by a strided stem
_CHANNELS = 64       # feature-map channels after the stem
_DEPTH = 6           # 3x3 convolutions of the costliest stage (others: their share of its cost, >= 2)
_GATE = 256          # hidden units of the context gate (flattened map -> _GATE -> channels)
_FC_HIDDEN = 512     # classifier head's hidden layer
_CLASSES = 16
_ANCHORS = 3
_SYMBOLS = 37  # 26 letters, 10 digits, blank


def stage_kind(name: str) -> str:
    """``"detector"``, ``"recogniser"`` or ``"classifier"``, from a stage's name (see the module doc)."""
    n = name.lower()
    if "detect" in n or n.startswith("pose"):
        return "detector"
    if "ocr" in n or "recogn" in n or "text" in n:
        return "recogniser"
    return "classifier"


@dataclass(frozen=True)
class OnnxStageModel:
    """One stage's ONNX model file and its request shapes.

    Attributes:
        name: the stage's name.  kind: ``"detector"``, ``"recogniser"`` or ``"classifier"``.
        input_shape, output_shape: one request's input and output shapes (batch axis excluded).
        path: the ``.onnx`` file (graph input ``x``, output ``y``, dynamic batch axis).
        macs_per_request: multiply-adds of the convolutions and matrix products per request.
    """

    name: str
    kind: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    path: Path
    macs_per_request: int


class _Graph:
    """A tiny builder over onnx.helper: nodes, initializers and shape bookkeeping in NCHW."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.onnx = require("onnx", "onnx", "the ONNX stage models")
        require("onnx.numpy_helper", "onnx", "the ONNX stage models")
        self.rng = rng
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.macs = 0
        self._n = 0

    def _name(self, base: str) -> str:
        self._n += 1
        return f"{base}{self._n}"

    def _weight(self, shape: tuple[int, ...], fan_in: int) -> str:
        w = (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(math.sqrt(2.0 / fan_in))).astype(np.float32)
        name = self._name("w")
        self.inits.append(self.onnx.numpy_helper.from_array(w, name))
        return name

    def _bias(self, n: int) -> str:
        name = self._name("b")
        self.inits.append(self.onnx.numpy_helper.from_array(
            (self.rng.standard_normal(n, dtype=np.float32) * np.float32(0.01)).astype(np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = self._name(op.lower())
        self.nodes.append(self.onnx.helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x: str, shape: tuple[int, int, int], c_out: int, *, k: int = 3, stride: int = 1,
             relu: bool = True) -> tuple[str, tuple[int, int, int]]:
        """k x k convolution (padding k//2), bias, optional ReLU.  shape: (C, H, W) -> (c_out, H', W')."""
        c, h, w = shape
        h2, w2 = (h + stride - 1) // stride, (w + stride - 1) // stride
        pad = k // 2
        y = self.node("Conv", [x, self._weight((c_out, c, k, k), c * k * k), self._bias(c_out)],
                      kernel_shape=[k, k], strides=[stride, stride], pads=[pad, pad, pad, pad])
        self.macs += h2 * w2 * c * k * k * c_out
        return (self.node("Relu", [y]) if relu else y), (c_out, h2, w2)

    def dense(self, x: str, f_in: int, f_out: int, *, relu: bool) -> str:
        """Gemm with bias on (N, f_in) -> (N, f_out)."""
        y = self.node("Gemm", [x, self._weight((f_in, f_out), f_in), self._bias(f_out)])
        self.macs += f_in * f_out
        return self.node("Relu", [y]) if relu else y

    def model(self, x_in: str, in_shape: tuple[int, ...], y_out: str, out_shape: tuple[int, ...], name: str) -> Any:
        h = self.onnx.helper
        tp = self.onnx.TensorProto
        graph = h.make_graph(self.nodes, name, [h.make_tensor_value_info(x_in, tp.FLOAT, ["batch", *in_shape])],
                             [h.make_tensor_value_info(y_out, tp.FLOAT, ["batch", *out_shape])], self.inits)
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", _OPSET)], producer_name="pard")
        m.ir_version = _IR_VERSION
        m.doc_string = "pard stage model with RANDOM weights (seeded): for timing, not for accuracy"
        self.onnx.checker.check_model(m)
        return m


def _width(base: int, scale: float) -> int:
    return max(4, int(round(base * math.sqrt(scale))))


def _stem(g: _Graph, cur: str, shape: tuple[int, int, int], c_out: int) -> tuple[str, tuple[int, int, int]]:
    """Stride-2 3x3 convolutions (ReLU) until the map's side is at most ``_SIDE``, then one to ``c_out`` channels."""
    while min(shape[1], shape[2]) > _SIDE:
        cur, shape = g.conv(cur, shape, max(c_out // 2, 8) if min(shape[1], shape[2]) > 2 * _SIDE else c_out, stride=2)
    if shape[0] != c_out:
        cur, shape = g.conv(cur, shape, c_out, k=1)
    return cur, shape


def _context_gate(g: _Graph, cur: str, shape: tuple[int, int, int], scale: float) -> str:
    """Squeeze-excitation over the whole flattened map: Flatten -> FC -> ReLU -> FC -> Sigmoid -> scale channels.

    Its first FC layer's weights (``C*H*W x _GATE``, 16 MB at scale 1) are read once per batch, so
    its cost per request falls with the batch size: the batching gain a DNN has on any device.
    """
    c, h, w = shape
    flat = g.node("Flatten", [cur], axis=1)
    hidden = g.dense(flat, c * h * w, _width(_GATE, scale), relu=True)
    gate = g.node("Sigmoid", [g.dense(hidden, _width(_GATE, scale), c, relu=False)])
    gate4 = g.node("Reshape", [gate, _shape_const(g, [-1, c, 1, 1])])
    return g.node("Mul", [cur, gate4])


def _build(name: str, in_shape: tuple[int, ...], exit_stage: bool, rng: np.random.Generator, scale: float,
           cost: float = 1.0) -> tuple[Any, tuple[int, ...], int]:
    """One stage's ONNX ModelProto, its per-request output shape, and its multiply-adds per request.

    ``cost`` (0..1] is the stage's share of the costliest stage's work per request: its number of
    3x3 convolutions is ``max(2, round(_DEPTH * cost))``.
    """
    g = _Graph(rng)
    kind = stage_kind(name)
    flat_in = len(in_shape) == 1
    if flat_in:  # a flat vector (a join of flat outputs): viewed as a 1x1 map
        in_shape = (1, 1, int(in_shape[0]))
    hh, ww, cc = (int(d) for d in in_shape)
    x = "x"
    cur = g.node("Reshape", [x, _shape_const(g, [-1, hh, ww, cc])]) if flat_in else x
    cur = g.node("Transpose", [cur], perm=[0, 3, 1, 2])
    c = _width(_CHANNELS, scale)
    cur, shape = _stem(g, cur, (cc, hh, ww), c)
    depth = max(2, int(round(_DEPTH * min(1.0, max(cost, 0.0)))))
    if kind == "classifier":  # residual pairs
        for _ in range(max(1, depth // 2)):
            y, _s = g.conv(cur, shape, c)
            y, _s = g.conv(y, shape, c, relu=False)
            cur = g.node("Relu", [g.node("Add", [y, cur])])
    else:
        for _ in range(depth):
            cur, shape = g.conv(cur, shape, c)
    cur = _context_gate(g, cur, shape, scale)
    decl = (int(np.prod(in_shape)),) if flat_in else tuple(in_shape)
    if not exit_stage:
        y = g.node("Transpose", [cur], perm=[0, 2, 3, 1])  # back to channels last for the next stage
        out_shape: tuple[int, ...] = (shape[1], shape[2], shape[0])
    elif kind == "detector":  # 1x1 detection head: anchors x (box, objectness, classes) per cell
        head, hs = g.conv(cur, shape, _ANCHORS * (5 + _CLASSES), k=1, relu=False)
        y = g.node("Transpose", [head], perm=[0, 2, 3, 1])
        out_shape = (hs[1], hs[2], hs[0])
    elif kind == "recogniser":  # average over height, then a classifier per column: sequence logits
        col = g.node("ReduceMean", [cur], axes=[2], keepdims=0)           # (N, C, W)
        seq = g.node("Transpose", [col], perm=[0, 2, 1])                  # (N, W, C)
        y = g.node("Add", [g.node("MatMul", [seq, g._weight((c, _SYMBOLS), c)]), g._bias(_SYMBOLS)])
        g.macs += shape[2] * c * _SYMBOLS
        out_shape = (shape[2], _SYMBOLS)
    else:  # classifier head: global average pool, FC, ReLU, FC
        pooled = g.node("Flatten", [g.node("GlobalAveragePool", [cur])], axis=1)
        hidden = g.dense(pooled, c, _width(_FC_HIDDEN, scale), relu=True)
        y = g.dense(hidden, _width(_FC_HIDDEN, scale), _CLASSES, relu=False)
        out_shape = (_CLASSES,)
    return g.model(x, decl, y, out_shape, name), out_shape, g.macs


def _shape_const(g: _Graph, dims: list[int]) -> str:
    name = g._name("shape")
    g.inits.append(g.onnx.numpy_helper.from_array(np.asarray(dims, dtype=np.int64), name))
    return name


def _models_root(directory: Path | None) -> Path:
    if directory is not None:
        return Path(directory)
    return cache_dir() / "models"


def onnx_models(
    pipeline: Any, *, seed: int = 0, scale: float = 1.0, directory: Path | str | None = None
) -> dict[str, OnnxStageModel]:
    """Build (or reuse from the cache) one ONNX model per stage of a pipeline.

    Args:
        pipeline: a :class:`pard.PipelineSpec` or a built-in pipeline's name.
        seed: seed of the random weights.
        scale: multiplies each stage's work per request (channel widths by ``sqrt(scale)``); 1.0 is
            the size ``pard run`` uses, smaller is faster (e.g. for tests).
        directory: where the ``.onnx`` files go (default ``<pard cache>/models``); one
            subdirectory per (graph, seed, scale, builder version).
    Returns:
        ``{stage name: OnnxStageModel}`` in topological order.  Entry stages take
        :data:`ONNX_INPUT_SHAPE`; others their predecessor's output (a join: :func:`join_inputs`'s
        shape of its predecessors' outputs).
    Raises:
        pard.errors.MissingExtraError (an ImportError): the ``onnx`` package is missing (``pip install 'pard[onnx]'``).
        pard.ConfigError: ``scale`` is not a finite number > 0, or an unknown pipeline name.
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (math.isfinite(scale) and scale > 0):
        raise ConfigError(f"onnx_models: scale must be a finite number > 0, got {scale!r}")
    order, preds, cost = _graph(pipeline)
    # the context gate dominates the weights: C*H*W x G floats, both C and G ~ sqrt(scale)
    nbytes = len(order) * _CHANNELS * _SIDE * _SIDE * _GATE * 4 * float(scale) * 1.25
    if nbytes > MAX_MODEL_BYTES:
        raise ConfigError(f"onnx_models: scale={scale!r} needs about {nbytes / 2**30:.1f} GiB of weights, past "
                          f"MAX_MODEL_BYTES = {MAX_MODEL_BYTES / 2**30:g} GiB; use a smaller scale (up to about "
                          f"{MAX_MODEL_BYTES / (nbytes / float(scale)):.0f} for {len(order)} stages)")
    require("onnx", "onnx", "the ONNX stage models")
    exits = {n for n in order if not any(n in preds[m] for m in order)}
    key = json.dumps({"order": order, "preds": preds, "cost": cost, "seed": int(seed), "scale": float(scale),
                      "input": ONNX_INPUT_SHAPE, "builder": BUILDER_VERSION}, sort_keys=True)
    root = _models_root(None if directory is None else Path(directory)) / hashlib.sha256(key.encode()).hexdigest()[:16]
    manifest = root / "manifest.json"
    cached = _read_manifest(manifest, root, order)
    if cached is not None:
        return cached
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x0E1C]))
    out: dict[str, OnnxStageModel] = {}
    for name in order:
        ps = preds[name]
        if not ps:
            in_shape: tuple[int, ...] = ONNX_INPUT_SHAPE
        elif len(ps) == 1:
            in_shape = out[ps[0]].output_shape
        else:
            in_shape = _join_shape([out[p].output_shape for p in ps])
        proto, out_shape, macs = _build(name, in_shape, name in exits, rng, float(scale), cost[name])
        root.mkdir(parents=True, exist_ok=True)
        _write_atomic(root / f"{name}.onnx", proto.SerializeToString())
        out[name] = OnnxStageModel(name, stage_kind(name), tuple(in_shape), tuple(out_shape), root / f"{name}.onnx",
                                   int(macs))
    _write_atomic(manifest, json.dumps({n: {"kind": m.kind, "input_shape": m.input_shape, "output_shape": m.output_shape,
                                            "macs_per_request": m.macs_per_request} for n, m in out.items()}).encode())
    return out


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _read_manifest(manifest: Path, root: Path, order: list[str]) -> dict[str, OnnxStageModel] | None:
    """The cached models when the manifest and every file exist (written last, so it implies the files)."""
    try:
        doc = json.loads(manifest.read_text())
        out = {n: OnnxStageModel(n, str(doc[n]["kind"]), tuple(doc[n]["input_shape"]), tuple(doc[n]["output_shape"]),
                                 root / f"{n}.onnx", int(doc[n]["macs_per_request"])) for n in order}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return out if all(m.path.is_file() for m in out.values()) else None

