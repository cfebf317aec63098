"""A tiny llama model with seeded random weights, written as a GGUF file llama.cpp loads.

:func:`write_tiny_llama` is what the llama.cpp engine (:mod:`pard.executors.llama_cpp`), its tests
and ``bench/llm_engine.py`` run: a real transformer of the llama architecture (RMS norm, rotary
attention, SwiGLU feed-forward) with a byte-level vocabulary, small enough to decode hundreds of
tokens per second on one CPU core.  Its weights are random, as every stage model of pard's: pard
measures cost (prefill and decode step times), not answers.  Needs the ``gguf`` package
(extra ``pard[llm]``).

Layout (the names llama.cpp looks up for architecture ``"llama"``, taken from the ``gguf``
package's own tables; GGUF lists a tensor's dimensions innermost first, so a NumPy ``(out, in)``
matrix is stored as ``ne = [in, out]``, the layout of a ggml matmul's weight):

* ``token_embd``: ``(vocab, width)``; ``output_norm``: ``(width,)``; ``output``: ``(vocab, width)``;
* per block ``i``: ``attn_norm`` and ``ffn_norm`` ``(width,)``; ``attn_q``, ``attn_k``,
  ``attn_v``, ``attn_output`` ``(width, width)``; ``ffn_gate``, ``ffn_up`` ``(ffn, width)``;
  ``ffn_down`` ``(width, ffn)``, with ``ffn = 4 * width``.

The vocabulary starts with one token per byte value (``<0x00>`` ... ``<0xFF>``, type BYTE, a
SentencePiece "llama" tokenizer), so any byte string tokenizes and pard's synthetic prompts are byte
tokens; a larger ``vocab`` adds plain tokens after them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ..errors import ConfigError

__all__ = ["write_tiny_llama", "BYTE_VOCAB"]

#: The size of the byte-level vocabulary (one token per byte value).
BYTE_VOCAB = 256
# normal(0, _INIT_STD) weights keep activations O(1) through a few blocks (norm gains are 1)
_INIT_STD = 0.02
_RMS_EPS = 1e-5
_ROPE_BASE = 10000.0


def _check(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low or (
            high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"write_tiny_llama: {name} must be an integer {bound}, got {value!r}")
    return int(value)


def write_tiny_llama(path: str | Path, *, layers: int = 2, width: int = 64, heads: int = 4,
                     vocab: int = BYTE_VOCAB, context: int = 2048, seed: int = 0) -> Path:
    """Write a llama-architecture GGUF model with seeded random float32 weights to ``path``.

    Args:
        path: the file to write (its directory must exist; an existing file is replaced).
        layers: transformer blocks (>= 1).
        width: embedding width (>= 8), a multiple of ``heads`` whose quotient (the head size) is even
            (rotary embeddings rotate pairs of dimensions).
        heads: attention heads (>= 1); as many key/value heads (no grouped-query attention).
        vocab: vocabulary size (>= 256): the 256 byte tokens, then ``vocab - 256`` plain tokens
            that make the output layer as wide as a real model's (e.g. 32000) for cost studies.
        context: the model's trained context length in tokens (>= 16), the most a sequence may hold.
        seed: the weights' seed; the same arguments give the same file, byte for byte.

    Returns:
        ``path`` as a :class:`pathlib.Path`.

    Raises:
        pard.ConfigError: a size out of range, or ``width`` not divisible into even heads.
        pard.errors.MissingExtraError: the ``gguf`` package is missing (``pip install 'pard[llm]'``).
    """
    layers = _check("layers", layers, 1, 256)
    width = _check("width", width, 8, 1 << 16)
    heads = _check("heads", heads, 1, width)
    vocab = _check("vocab", vocab, BYTE_VOCAB, 1 << 18)
    context = _check("context", context, 16, 1 << 20)
    seed = _check("seed", seed, 0)
    if width % heads or (width // heads) % 2:
        raise ConfigError(f"write_tiny_llama: width {width} must split into {heads} heads of an even size")
    gguf = require("gguf", "llm", "write_tiny_llama")

    out = Path(path)
    rng = np.random.default_rng(seed)
    ffn = 4 * width
    arch = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA]
    writer = gguf.GGUFWriter(str(out), arch)
    writer.add_name(f"pard-tiny-llama-{layers}x{width}")
    writer.add_context_length(context)
    writer.add_embedding_length(width)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(width // heads)
    writer.add_rope_freq_base(_ROPE_BASE)
    writer.add_layer_norm_rms_eps(_RMS_EPS)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _add_byte_tokenizer(writer, gguf, vocab)

    def name(kind: Any, block: int | None = None) -> str:
        base = str(gguf.TENSOR_NAMES[kind])
        return (base.format(bid=block) if block is not None else base) + ".weight"

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * _INIT_STD).astype(np.float32)

    ones = np.ones(width, dtype=np.float32)
    t = gguf.MODEL_TENSOR
    writer.add_tensor(name(t.TOKEN_EMBD), weight(vocab, width))
    for i in range(layers):
        writer.add_tensor(name(t.ATTN_NORM, i), ones)
        for kind in (t.ATTN_Q, t.ATTN_K, t.ATTN_V, t.ATTN_OUT):
            writer.add_tensor(name(kind, i), weight(width, width))
        writer.add_tensor(name(t.FFN_NORM, i), ones)
        writer.add_tensor(name(t.FFN_GATE, i), weight(ffn, width))
        writer.add_tensor(name(t.FFN_UP, i), weight(ffn, width))
        writer.add_tensor(name(t.FFN_DOWN, i), weight(width, ffn))
    writer.add_tensor(name(t.OUTPUT_NORM), ones)
    writer.add_tensor(name(t.OUTPUT), weight(vocab, width))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _add_byte_tokenizer(writer: Any, gguf: Any, vocab: int) -> None:
    """A SentencePiece-style vocabulary: the 256 byte tokens, then plain filler tokens up to ``vocab``;
    ids 0/1/2 double as unk/bos/eos (the engine feeds token ids, so no text maps to them)."""
    extra = vocab - BYTE_VOCAB
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"<0x{b:02X}>" for b in range(BYTE_VOCAB)] + [f"<t{i}>" for i in range(extra)])
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_types([int(gguf.TokenType.BYTE)] * BYTE_VOCAB + [int(gguf.TokenType.NORMAL)] * extra)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
