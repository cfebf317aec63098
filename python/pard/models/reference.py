"""NumPy reference models: real array computations that stand in for a pipeline's DNN stages.

The live runtime (:mod:`pard.runtime`) needs stages that do real work, whose cost grows with the batch
size, so that ``pard run`` exercises batching, queueing and dropping the way a GPU deployment does.
This module builds, for any pipeline graph, one small network per stage, written in plain array code
(2x2 stride-2 "patchify" convolutions, 3x3 convolutions through im2col, dense layers, ReLU) with
weights drawn from a seeded generator:

* the entry stages take an image-like ``float32`` array of shape ``INPUT_SHAPE`` = (32, 32, 3)
  (height, width, channels; channels last);
* a stage whose input is still a large feature map halves its height and width and widens its
  channels (a convolutional block); once the map is small, stages are multi-layer perceptrons;
* each stage's output is the next stage's input; a stage with several predecessors (a DAG join,
  e.g. ``expression`` in ``da``) takes the concatenation of its predecessors' flattened outputs.

Every model is array-module generic: it computes with the module of its input (NumPy, or CuPy for a
``cupy.ndarray``), caching one copy of its weights per module.  Costs on one CPU core with one BLAS
thread are milliseconds per batch and grow with the batch size (the im2col and the matrix products
are linear in it); ``pard profile`` measures them on the machine at hand.

Neighbours: :mod:`pard.executors` wraps a model as a stage executor (stack, run, split);
:mod:`pard.profiling` measures each model's duration per batch size; :mod:`pard.cli_live` wires them
into ``pard run``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, PardValueError

__all__ = [
    "INPUT_SHAPE",
    "MAX_MODEL_BYTES",
    "StageModel",
    "array_module",
    "reference_models",
    "sample_inputs",
    "join_inputs",
]

#: Shape of one request's payload at an entry stage: (height, width, channels), float32.
INPUT_SHAPE: tuple[int, int, int] = (32, 32, 3)

# A stage whose input is an image-like map with at least this many pixels per side gets a
# convolutional block (patchify to half the side, then 3x3 convolutions); smaller maps and flat
# feature vectors get a position-wise MLP block (three dense layers at every position, i.e. 1x1
# convolutions, with a residual connection).
_CONV_MIN_SIDE = 8
_CONV_DEPTH = 3
# Work per request of the costliest stage at scale 1: 64 million multiply-adds (about 2 ms on one
# core of a 2020s x86 server with one BLAS thread).  Other stages get their share of it.
_REF_MACS = 64e6

#: Most bytes of weights :func:`reference_models` allocates for one pipeline (2 GiB: about scale
#: 100 for the built-ins); a larger ``scale`` is refused before anything is allocated.
MAX_MODEL_BYTES = 2 << 30
_MAX_SCALE = 1e6


def array_module(x: Any) -> Any:
    """The array module (``numpy`` or ``cupy``) that owns array ``x``.

    Args:
        x: an array (``numpy.ndarray`` or ``cupy.ndarray``).
    Returns:
        the module to compute with.  Anything that is not a CuPy array maps to NumPy.
    """
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy  # noqa: PLC0415 - optional dependency, present when x is a CuPy array

        return cupy
    return np


def _conv3x3(xp: Any, x: Any, w: Any, b: Any) -> Any:
    """3x3 convolution, padding 1, stride 1, then ReLU.  x: (N, H, W, C); w: (9C, C'); -> (N, H, W, C')."""
    n, h, wd, c = x.shape
    p = xp.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = xp.concatenate([p[:, i : i + h, j : j + wd, :] for i in range(3) for j in range(3)], axis=-1)
    y = cols.reshape(n * h * wd, 9 * c) @ w
    y += b
    xp.maximum(y, 0, out=y)
    return y.reshape(n, h, wd, -1)


def _patchify(xp: Any, x: Any, w: Any, b: Any) -> Any:
    """2x2 convolution with stride 2, then ReLU.  x: (N, H, W, C); w: (4C, C'); -> (N, H/2, W/2, C')."""
    n, h, wd, c = x.shape
    t = x.reshape(n, h // 2, 2, wd // 2, 2, c).transpose(0, 1, 3, 2, 4, 5)
    y = xp.ascontiguousarray(t).reshape(n * (h // 2) * (wd // 2), 4 * c) @ w
    y += b
    xp.maximum(y, 0, out=y)
    return y.reshape(n, h // 2, wd // 2, -1)


def _dense(xp: Any, x: Any, w: Any, b: Any, *, relu: bool) -> Any:
    """Dense layer.  x: (N, F); w: (F, F'); -> (N, F')."""
    y = x @ w
    y += b
    if relu:
        xp.maximum(y, 0, out=y)
    return y


@dataclass
class StageModel:
    """One stage's reference network: a callable from a batch of inputs to a batch of outputs.

    Attributes:
        name: the stage's name.
        kind: ``"conv"`` (a 2x2 stride-2 convolution, then ``depth`` 3x3 convolutions, ReLU after
            each) or ``"mlp"`` (three dense layers applied at every position of the map, ReLU
            between them, with a residual connection).
        input_shape: shape of one request's input, (height, width, channels) or (features,).
        output_shape: shape of one request's output.
        params: the weights as NumPy ``float32`` arrays, in layer order (w, b, w, b, ...).

    Calling the model with an array of shape ``(B, *input_shape)`` (NumPy or CuPy; cast to float32)
    returns a float32 array of shape ``(B, *output_shape)`` of the same module.  Raises
    ``ValueError`` when the input's shape is not ``(B, *input_shape)`` with ``B >= 1``.
    """

    name: str
    kind: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    params: list[np.ndarray]
    _by_module: dict[str, list[Any]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _weights(self, xp: Any) -> list[Any]:
        key = xp.__name__
        cached = self._by_module.get(key)
        if cached is None:
            with self._lock:
                cached = self._by_module.get(key)
                if cached is None:
                    cached = [xp.asarray(p) for p in self.params]
                    self._by_module[key] = cached
        return cached

    def __call__(self, batch: Any) -> Any:
        xp = array_module(batch)
        shape = tuple(int(d) for d in batch.shape)
        if len(shape) != len(self.input_shape) + 1 or shape[1:] != self.input_shape or shape[0] < 1:
            raise PardValueError(
                f"stage {self.name!r} expects a batch of shape (B >= 1, "
                f"{', '.join(map(str, self.input_shape))}), got {shape}"
            )
        x = batch.astype(xp.float32, copy=False)
        p = self._weights(xp)
        if self.kind == "conv":
            x = _patchify(xp, x, p[0], p[1])
            for i in range(2, len(p), 2):
                x = _conv3x3(xp, x, p[i], p[i + 1])
            return x
        n = shape[0]
        flat = x.reshape(-1, x.shape[-1])
        h = _dense(xp, flat, p[0], p[1], relu=True)
        h = _dense(xp, h, p[2], p[3], relu=True)
        y = _dense(xp, h, p[4], p[5], relu=False)
        y += flat
        return y.reshape(n, *self.output_shape)

    @property
    def macs_per_request(self) -> int:
        """Multiply-adds of the matrix products for one request (a size indicator, not a time)."""
        positions = 1
        if self.kind == "conv":
            positions = (self.input_shape[0] // 2) * (self.input_shape[1] // 2)
        elif len(self.input_shape) == 3:
            positions = self.input_shape[0] * self.input_shape[1]
        return int(sum(positions * int(w.shape[0]) * int(w.shape[1]) for w in self.params[0::2]))


def _init(rng: np.random.Generator, fan_in: int, fan_out: int) -> tuple[np.ndarray, np.ndarray]:
    """He-initialised weights (keeps activations O(1) through the ReLU stack) and small biases."""
    w = rng.standard_normal((fan_in, fan_out), dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))
    b = rng.standard_normal(fan_out, dtype=np.float32) * np.float32(0.01)
    return w, b


def _plan(
    input_shape: tuple[int, ...], scale: float, cost: float = 1.0
) -> tuple[str, tuple[int, ...], list[tuple[int, int]]]:
    """One stage's architecture for ``input_shape`` without allocating it: (kind, output shape,
    (fan_in, fan_out) of each dense/conv layer in order), sized to ``scale * cost * _REF_MACS``
    multiply-adds per request."""
    target = scale * cost * _REF_MACS
    if (
        len(input_shape) == 3
        and min(input_shape[0], input_shape[1]) >= _CONV_MIN_SIDE
        and input_shape[0] % 2 == 0
        and input_shape[1] % 2 == 0
    ):
        h, w, c = input_shape
        pos = (h // 2) * (w // 2)
        # pos * (4 c C + 9 depth C^2) = target, solved for the channel count C
        qa, qb = pos * 9.0 * _CONV_DEPTH, pos * 4.0 * c
        c_out = max(4, int(round((-qb + math.sqrt(qb * qb + 4.0 * qa * target)) / (2.0 * qa))))
        return "conv", (h // 2, w // 2, c_out), [(4 * c, c_out)] + [(9 * c_out, c_out)] * _CONV_DEPTH
    c = int(input_shape[-1])
    pos = int(np.prod(input_shape[:-1])) if len(input_shape) > 1 else 1
    # pos * (2 c H + H^2) = target, solved for the hidden width H
    hidden = max(4, int(round(-c + math.sqrt(c * c + target / pos))))
    return "mlp", input_shape, [(c, hidden), (hidden, hidden), (hidden, c)]


def _build(name: str, input_shape: tuple[int, ...], plan: tuple[str, tuple[int, ...], list[tuple[int, int]]],
           rng: np.random.Generator) -> StageModel:
    """Allocate and seed one stage's model from its :func:`_plan`."""
    kind, out_shape, layers = plan
    params: list[np.ndarray] = []
    for fan_in, fan_out in layers:
        params.extend(_init(rng, fan_in, fan_out))
    return StageModel(name, kind, input_shape, out_shape, params)


def _graph(pipeline: Any) -> tuple[list[str], dict[str, list[str]], dict[str, float]]:
    """Stage names in topological order, each stage's predecessors, and each stage's relative cost.

    ``pipeline`` is a PipelineSpec (or any object with ``stages`` carrying ``name``/``successors``
    and ``topological_order()``) or a built-in pipeline's name.  The relative cost of a stage is its
    profile's time per request at its largest batch, ``d(max_batch) / max_batch``, over the largest
    such time in the pipeline (1.0 for every stage when the stages carry no profile).
    """
    if isinstance(pipeline, str):
        from ..config import builtin  # noqa: PLC0415 - pard.config is loaded only when needed

        pipeline = builtin(pipeline)
    order = [s if isinstance(s, str) else s.name for s in pipeline.topological_order()]
    preds: dict[str, list[str]] = {name: [] for name in order}
    per_request: dict[str, float] = {}
    for st in pipeline.stages:
        for succ in st.successors:
            preds[succ].append(st.name)
        # an llm stage runs on its own engine (tiny_llama), so it does not size the array models
        if hasattr(st, "duration") and hasattr(st, "max_batch") and getattr(st, "kind", "dnn") != "llm":
            per_request[st.name] = float(st.duration(int(st.max_batch))) / int(st.max_batch)
    # predecessors in topological order, so a join's concatenation order is deterministic
    rank = {name: i for i, name in enumerate(order)}
    for name in preds:
        preds[name].sort(key=rank.__getitem__)
    top = max(per_request.values(), default=0.0)
    cost = {n: (per_request[n] / top if top > 0 and n in per_request else 1.0) for n in order}
    return order, preds, cost


def reference_models(
    pipeline: Any, *, seed: int = 0, scale: float = 1.0, balance: str = "profile"
) -> dict[str, StageModel]:
    """Build one seeded reference network per stage of a pipeline.

    Args:
        pipeline: a :class:`pard.config.PipelineSpec`, or the name of a built-in pipeline
            (``"tm"``, ``"lv"``, ``"ga"``, ``"da"``).
        seed: seed of the weights (the same seed gives the same weights on every machine).
        scale: multiplies every stage's work per request (1.0: the reference size, 64 million
            multiply-adds per request for the costliest stage; smaller is faster, e.g. for tests).
        balance: ``"profile"`` (default) scales each stage's work per request in proportion to its
            profile's time per request at max batch, ``d(max_batch)/max_batch``, so the reference
            models keep the relative costs of the pipeline they stand in for; ``"equal"`` gives
            every stage the same size.
    Returns:
        ``{stage name: StageModel}`` in topological order.  Entry stages take ``INPUT_SHAPE``; each
        other stage takes its predecessor's output, or for a join the concatenation of its
        predecessors' flattened outputs (see :func:`join_inputs`).
    Raises:
        pard.ConfigError: via :func:`pard.config.builtin` for an unknown pipeline name; ``scale``
            not a finite number > 0, or so large that the weights would exceed
            :data:`MAX_MODEL_BYTES` (checked before anything is allocated).
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (math.isfinite(scale) and scale > 0):
        raise ConfigError(f"reference_models: scale must be a finite number > 0, got {scale!r}")
    if scale > _MAX_SCALE:  # past this the plan's arithmetic itself overflows; memory ran out long before
        raise ConfigError(f"reference_models: scale={scale!r} is far past MAX_MODEL_BYTES = "
                          f"{MAX_MODEL_BYTES / 2**30:g} GiB of weights (about scale 100 fits); use a smaller scale")
    if balance not in ("profile", "equal"):
        raise PardValueError(f"reference_models: balance must be 'profile' or 'equal', got {balance!r}")
    order, preds, cost = _graph(pipeline)
    # Plan every stage first (pure arithmetic) and refuse a size past the limit before allocating.
    plans: dict[str, tuple[tuple[int, ...], tuple[str, tuple[int, ...], list[tuple[int, int]]]]] = {}
    for name in order:
        ps = preds[name]
        if not ps:
            in_shape: tuple[int, ...] = INPUT_SHAPE
        elif len(ps) == 1:
            in_shape = plans[ps[0]][1][1]
        else:
            in_shape = _join_shape([plans[p][1][1] for p in ps])
        plans[name] = (in_shape, _plan(in_shape, scale, cost[name] if balance == "profile" else 1.0))
    nbytes = 4 * sum((fi + 1) * fo for _, (_, _, layers) in plans.values() for fi, fo in layers)
    if nbytes > MAX_MODEL_BYTES:
        raise ConfigError(
            f"reference_models: scale={scale!r} needs {nbytes / 2**30:.3g} GiB of weights, more than "
            f"MAX_MODEL_BYTES = {MAX_MODEL_BYTES / 2**30:g} GiB; use a smaller scale "
            f"(weights grow about linearly with it)")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x70A4D]))
    return {name: _build(name, in_shape, plan, rng) for name, (in_shape, plan) in plans.items()}


def _join_shape(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """Shape of a join's input (see :func:`join_inputs`)."""
    if all(len(s) == 3 for s in shapes):
        side_h = min(s[0] for s in shapes)
        side_w = min(s[1] for s in shapes)
        if all(s[0] % side_h == 0 and s[1] % side_w == 0 for s in shapes):
            return (side_h, side_w, sum(s[2] for s in shapes))
    return (sum(int(np.prod(s)) for s in shapes),)


def join_inputs(parts: Sequence[Any]) -> Any:
    """A join stage's input for one request, built from its predecessors' outputs.

    Args:
        parts: the predecessors' outputs for one request (NumPy or CuPy arrays), in the order of
            :func:`reference_models` (predecessors in topological order).
    Returns:
        for image-like maps (height, width, channels) whose sides are multiples of the smallest
        ones: each map average-pooled down to the smallest height and width, then concatenated
        along the channel axis; otherwise the outputs flattened and concatenated (1-D).  Same
        array module as the parts.
    Raises:
        ValueError: if ``parts`` is empty.
    """
    if not parts:
        raise PardValueError("join_inputs needs at least one part, got none")
    xp = array_module(parts[0])
    shapes = [tuple(int(d) for d in p.shape) for p in parts]
    target = _join_shape(shapes)
    if len(target) == 1:
        return xp.concatenate([xp.reshape(p, (-1,)) for p in parts])
    th, tw = target[0], target[1]
    pooled = []
    for p, (h, w, c) in zip(parts, shapes):
        if (h, w) != (th, tw):
            p = p.reshape(th, h // th, tw, w // tw, c).mean(axis=(1, 3))
        pooled.append(p)
    return xp.concatenate(pooled, axis=-1)


def sample_inputs(n: int, *, seed: int = 0, shape: tuple[int, ...] = INPUT_SHAPE) -> np.ndarray:
    """``n`` seeded image-like payloads, float32 in [0, 1), shape ``(n, *shape)``."""
    if n < 1:
        raise PardValueError(f"sample_inputs needs n >= 1, got {n!r}")
    return np.random.default_rng(seed).random((n, *shape), dtype=np.float32)
