"""The cost model of a real LLM engine: llama.cpp's step time against running sequences and prompt tokens.

pard's LLM stage (DESIGN §3.8, issue 38) models a step of iteration-level batching as
``decode(n) + sum over joiners of (base + per_token * prompt tokens)``.  This script measures that
model (with :func:`pard.profiling.llm.measure_llm`, what ``pard profile`` runs) on :class:`pard.executors.llama_cpp.LlamaCppEngine` running the tiny random-weight llama of
:mod:`pard.models.tiny_llama` (or one of the sizes given), and prints it in the stage spec's form,
so a spec (and later ``pard profile``) can use it:

* ``decode(n)``: with ``n`` sequences running (short prompts, already prefilled), the median wall
  time of a step in which each emits one token, for n = 1, 2, 4, ... up to ``--max-seqs``;
  made non-decreasing (a running maximum), as a stage spec's table must be;
* ``prefill``: the step time of one sequence joining an empty engine with ``P`` prompt tokens
  (``--prompts``), minus ``decode(1)``, fitted by least squares to ``base + per_token * P``;
* two checks of the model, each against its anchor in the same run: the batching gain
  ``n * decode(1) / decode(n)`` (one shared step against ``n`` single ones), and additivity: a
  step with ``n`` running and one joiner against ``decode(n + 1) + prefill(P)``.

Times are wall seconds of :meth:`LlamaCppEngine.step`, Python included: what an LLM stage's worker
pays per step.  On a shared machine read the ratios, not the absolute figures.

Usage: ``python bench/llm_engine.py [--layers 2] [--width 64] [--heads 4] [--vocab 256] [--max-seqs 32]
[--context 8192] [--threads 1] [--steps 20] [--repeats 3] [--prompts 16,64,256,1024] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from pard.executors.llama_cpp import LlamaCppEngine
from pard.models.tiny_llama import write_tiny_llama
from pard.profiling.llm import measure_llm


def to_yaml(doc: dict[str, Any]) -> str:
    """The profile as a stage spec's fields (DESIGN §1 of issue 38's LLM stage)."""
    decode = ", ".join(f"{n}: {s:.6g}" for n, s in doc["decode"].items())
    p = doc["prefill"]
    return (f"prefill: {{base: {p['base']:.6g}, per_token: {p['per_token']:.6g}}}\n"
            f"decode: {{{decode}}}\nmax_seqs: {doc['max_seqs']}\nkv_tokens: {doc['kv_tokens']}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, help="a GGUF model (default: write the tiny llama of the sizes below)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--max-seqs", type=int, default=32)
    ap.add_argument("--context", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20, help="timed decode steps per repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", default="16,64,256,1024", help="prompt lengths of the prefill fit")
    ap.add_argument("--json", action="store_true", help="print the whole measurement as JSON")
    args = ap.parse_args(argv)
    prompts = [int(x) for x in args.prompts.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or write_tiny_llama(Path(tmp) / "tiny.gguf", layers=args.layers, width=args.width,
                                               heads=args.heads, vocab=args.vocab, context=max(args.context, 2048))
        with LlamaCppEngine(model, max_seqs=args.max_seqs, context=args.context, threads=args.threads) as eng:
            doc = measure_llm(eng, prompts=prompts, steps=args.steps, repeats=args.repeats)
    doc["model"] = {"path": str(args.model) if args.model else None, "layers": args.layers, "width": args.width,
                    "heads": args.heads, "vocab": args.vocab, "threads": args.threads}
    if args.json:
        json.dump({**doc, "decode": {str(n): s for n, s in doc["decode"].items()}}, sys.stdout, indent=1)
        print()
        return 0
    what = args.model.name if args.model else f"tiny llama {args.layers}x{args.width}, vocab {args.vocab}"
    print(f"# llama.cpp, {what}, {args.threads} thread(s); median step seconds")
    print(to_yaml(doc), end="")
    gain = doc["checks"]["batching_gain"]
    print("# batching gain n*decode(1)/decode(n): " + ", ".join(f"{n}: {g:.2f}" for n, g in gain.items()))
    add = doc["checks"]["additivity"]
    print(f"# additivity: {add['running']} running + a {add['prompt']}-token joiner: one step "
          f"{add['measured_s'] * 1e3:.3f} ms, decode(n+1) + prefill({add['prompt']}) measured apart "
          f"{add['parts_s'] * 1e3:.3f} ms (ratio {add['ratio']:.2f})")
    errs = doc["measured"]["prefill_fit_rel_error"]
    print("# linear prefill fit error by prompt length: " + ", ".join(f"{p}: {e:+.0%}" for p, e in errs.items()))
    quad = doc["measured"]["prefill_quadratic"]
    if quad is not None:
        longest = max(prompts)
        share = quad["per_token2"] * longest**2 / max(doc["measured"]["prefill_s"][str(longest)], 1e-12)
        print(f"# quadratic fit: per_token2 {quad['per_token2']:.3g} s/token^2, "
              f"{share:.0%} of prefill({longest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
