"""Where an llm pipeline's token counts come from, for ``pard simulate`` and ``pard run`` alike.

A trace file with token columns (:mod:`pard.workloads.token_columns`) gives them: an exact replay keeps each
row's own counts, a rescaled trace (new requests) draws rows from the file, seeded.  Any other trace gets
(input, output) pairs drawn from the bundled Azure LLM conversation trace.  The pipeline's capacity reads the
llm stage at the mean lengths of the same source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..workloads import TraceTokens, draw_tokens, file_tokens
from .parsers import spell

__all__ = ["TokenSource", "token_source", "TOKEN_SAMPLE", "BUNDLED_NOTE"]

#: How many token pairs the capacity's mean lengths are read from.
TOKEN_SAMPLE = 100_000
#: What the CLI tells a user whose pipeline has an llm stage and a trace without token counts.
BUNDLED_NOTE = ("the llm stage's requests carry (input, output) token pairs drawn from the bundled Azure LLM "
                "conversation trace (seeded by --seed); the capacity reads the llm stage at their mean lengths")


class TokenSource:
    """An llm pipeline's token counts: the trace file's own columns (``file``), else pairs drawn from the
    bundled trace; ``exact``: the file is replayed exactly, so each row keeps its own counts."""

    def __init__(self, file: TraceTokens | None, exact: bool, trace: str) -> None:
        self.file, self.exact, self.trace = file, exact, trace

    def sample(self, seed: int) -> dict[str, Any]:
        """Token counts the capacity's mean lengths are read from (:func:`pard.sim_llm.bound_spec`'s)."""
        if self.file is not None:
            return self.file.draw(TOKEN_SAMPLE, seed)
        ins, outs = draw_tokens(TOKEN_SAMPLE, seed=seed)
        return {"in_tokens": ins, "out_tokens": outs, "max_tokens": None}

    def for_arrivals(self, n: int, seed: int, start_s: float = 0.0, duration_s: float | None = None
                     ) -> dict[str, Any]:
        """The ``n`` arrivals' ``in_tokens``, ``out_tokens`` and ``max_tokens`` (None: no hints); an exact
        replay's are the rows of the window ``[start_s, start_s + duration_s)``.

        Raises:
            UsageError: an exact replay whose window holds another number of rows than ``n``.
        """
        if self.file is None:
            ins, outs = draw_tokens(n, seed=seed)
            return {"in_tokens": ins, "out_tokens": outs, "max_tokens": None}
        if not self.exact:
            return self.file.draw(n, seed)
        got = self.file.for_replay(start_s, duration_s)
        if got["in_tokens"].size != n:  # pragma: no cover - the same rows and window as the replay's
            raise UsageError(f"--trace {self.trace!r}: {got['in_tokens'].size} token rows for {n} arrivals")
        return got

    def note(self) -> str:
        """The line that says which token counts the run used."""
        if self.file is None:
            return BUNDLED_NOTE
        how = ("each request its own row's counts (an exact replay)" if self.exact else
               "pairs drawn from the file's rows (seeded by --seed: a rescaled trace's requests are new)")
        return (f"the llm stage's requests carry the token counts of {self.trace}'s columns {self.file.columns}: "
                f"{how}; the capacity reads the llm stage at their mean lengths")

    def label(self) -> str:
        """The JSON's ``settings.tokens`` / ``live.llm.tokens.source``."""
        if self.file is None:
            return "bundled azure-conv pairs"
        return f"file columns {self.file.columns} ({'exact replay' if self.exact else 'drawn from the rows'})"


def token_source(trace: str, fmt: str | None, exact: bool, *, column: Any = None, unit: Any = None) -> TokenSource:
    """The :class:`TokenSource` of ``--trace`` (a file of format ``fmt``, or None for a built-in trace or a
    generator).  Raises TraceError as :func:`pard.workloads.file_tokens` for a file's bad token columns."""
    found = None if fmt is None else file_tokens(Path(trace), fmt, column=column, unit=unit, spell=spell)
    return TokenSource(found, exact, trace)
