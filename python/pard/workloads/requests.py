"""Per-request attributes beside the arrival times: a per-request SLO, a service tier and token counts.

Every loader and generator in :mod:`pard.workloads` returns a plain sorted ``float64`` array of
arrival times.  When requests also carry their own SLO or tier (DESIGN §3.7: per-request SLOs,
service tiers with weights), they travel together in a :class:`Workload`: from a CSV with such
columns (:func:`pard.workloads.csv_requests`) or by drawing tiers for an array of arrivals
(:func:`assign_tiers`).  Tier *names* match the keys of :attr:`pard.config.PipelineSpec.tiers`,
which give their weights.  Requests bound for an LLM stage also carry token counts: their input
tokens, their true output length (what a simulated engine generates before its end of sequence), and
optionally the client's output-length hint (``max_tokens``); :func:`pard.workloads.draw_tokens` samples
real pairs from the bundled Azure LLM trace for arrivals that come from a generator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ..errors import PardTypeError, PardValueError
from ._common import F64, as_arrivals, check_positive, rng, show

__all__ = ["Workload", "assign_tiers"]

I32 = npt.NDArray[np.int32]


def _array(name: str, value: object, what: str, *, kinds: str = "iuf") -> npt.NDArray[np.generic]:
    """``value`` as a NumPy array of numbers (float64 unless ``kinds`` asks for integers), or
    PardTypeError naming the Workload field ``name`` and the value."""
    a = None
    if not isinstance(value, (str, bytes, Mapping)):
        try:
            a = np.asarray(value)
        except (TypeError, ValueError):
            a = None
    if a is None or a.dtype.kind not in kinds or a.ndim == 0:
        raise PardTypeError(f"Workload {name} must be a 1-D array of {what}, got {type(value).__name__}: "
                            f"{show(value)}")
    return a.astype(np.float64, copy=False) if kinds == "iuf" else a


@dataclass(frozen=True)
class Workload:
    """Arrival times with optional per-request SLOs and tiers, all aligned by request.

    Attributes:
        arrivals_s: shape (n,), float64, sorted, seconds (time 0 = the trace's first arrival for
            loaded traces, the start of the window for generated ones).
        slo_s: shape (n,), float64 seconds, each request's own SLO; or None: every request uses
            the pipeline's SLO.
        tier: shape (n,), int32 codes into ``tier_names``; or None: one untiered class.
        tier_names: the tier names, code ``i`` is ``tier_names[i]``.
        in_tokens: shape (n,), int32 >= 0, each request's input (prompt) tokens (0 = unknown); or None.
        out_tokens: shape (n,), int32 >= 1, each request's true output length in tokens: a simulated
            LLM stage generates exactly this many (capped by the stage's ``max_output_tokens`` and the
            hint); no drop rule reads it.  Or None.
        max_tokens: shape (n,), int32 >= 0, the client's output-length hint (0 = none); or None.

    Raises:
        ValueError: mismatched lengths, an SLO that is not finite and > 0, a tier code outside
            ``range(len(tier_names))``, or a token count out of its range (the message names the
            field and the first bad index).
    """

    arrivals_s: F64
    slo_s: F64 | None = None
    tier: I32 | None = None
    tier_names: tuple[str, ...] = field(default_factory=tuple)
    in_tokens: I32 | None = None
    out_tokens: I32 | None = None
    max_tokens: I32 | None = None

    def __post_init__(self) -> None:
        # a list (or anything array-like) is taken as an array; a string or a mapping is refused by name
        object.__setattr__(self, "arrivals_s", as_arrivals(_array("arrivals_s", self.arrivals_s, "arrival times in seconds"),
                                                           "arrivals_s"))
        if self.slo_s is not None:
            object.__setattr__(self, "slo_s", _array("slo_s", self.slo_s, "SLOs in seconds"))
        if self.tier is not None:
            codes = _array("tier", self.tier, "tier codes", kinds="iu")
            object.__setattr__(self, "tier", codes.astype(np.int32, copy=False))
        n = self.arrivals_s.shape[0]
        if self.slo_s is not None:
            if self.slo_s.shape != (n,):
                raise PardValueError(f"slo_s has shape {self.slo_s.shape}, expected ({n},) like arrivals_s")
            bad = ~(np.isfinite(self.slo_s) & (self.slo_s > 0))
            if bad.any():
                i = int(np.argmax(bad))
                raise PardValueError(f"slo_s[{i}] = {show(self.slo_s[i])} must be finite and > 0 seconds")
        if self.tier is not None:
            if self.tier.shape != (n,):
                raise PardValueError(f"tier has shape {self.tier.shape}, expected ({n},) like arrivals_s")
            if n and (self.tier.min() < 0 or self.tier.max() >= len(self.tier_names)):
                raise PardValueError(
                    f"tier codes must lie in [0, {len(self.tier_names)}) (tier_names "
                    f"{self.tier_names}), got range [{self.tier.min()}, {self.tier.max()}]"
                )
        for name, low in (("in_tokens", 0), ("out_tokens", 1), ("max_tokens", 0)):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _tokens(name, value, n, low))

    @property
    def has_tokens(self) -> bool:
        """Whether every request carries its input and output token counts (what an LLM stage needs)."""
        return self.in_tokens is not None and self.out_tokens is not None

    def __len__(self) -> int:
        return int(self.arrivals_s.shape[0])

    def tier_codes_for(self, tiers: Mapping[str, float]) -> I32 | None:
        """This workload's tiers as codes of a pipeline whose ``tiers`` are ``tiers`` (name -> weight),
        matched by name (not by position); None when it has no tiers.

        Raises:
            PardValueError: a tier name the pipeline does not declare.
        """
        if self.tier is None:
            return None
        index = {name: i for i, name in enumerate(tiers)}
        unknown = [name for name in self.tier_names if name not in index]
        if unknown:
            raise PardValueError(f"the workload's tier(s) {unknown} are not tiers of the pipeline "
                                 f"(its tiers: {list(tiers)})")
        return np.array([index[name] for name in self.tier_names], dtype=np.int32)[self.tier]


def _tokens(name: str, value: object, n: int, low: int) -> I32:
    """``value`` as an int32 array of shape (n,) with every entry in [low, 2**31 - 1], or PardValueError
    naming the Workload field ``name``, the first bad index and its value."""
    a = _array(name, value, "token counts (integers)", kinds="iu")
    if a.shape != (n,):
        raise PardValueError(f"{name} has shape {a.shape}, expected ({n},) like arrivals_s")
    bad = (a < low) | (a > np.iinfo(np.int32).max)
    if bad.any():
        i = int(np.argmax(bad))
        raise PardValueError(f"{name}[{i}] = {show(a[i])} must be an integer in [{low}, 2147483647] tokens")
    return np.ascontiguousarray(a, dtype=np.int32)


def assign_tiers(
    arrivals: npt.ArrayLike,
    shares: Mapping[str, float],
    *,
    slo_s: float | Mapping[str, float] | None = None,
    seed: int | np.random.Generator = 0,
) -> Workload:
    """Give each arrival a tier drawn independently with probabilities ``shares`` (seeded).

    Args:
        arrivals: shape (n,), seconds >= 0.
        shares: tier name -> share of requests (finite, > 0; normalised to sum 1).  Codes follow
            the mapping's order.
        slo_s: None (pipeline SLO for all), one SLO in seconds for all, or tier name -> SLO.
        seed: int seed or a numpy Generator.

    Returns:
        A :class:`Workload` with ``tier`` (and ``slo_s`` if given).

    Raises:
        ValueError: empty shares, a share or SLO that is not finite and > 0, or an SLO mapping
            that misses a tier.
    """
    a = as_arrivals(arrivals)
    if not shares:
        raise PardValueError("shares must name at least one tier, got {}")
    names = tuple(shares)
    p = np.array([check_positive(f"share of tier {k!r}", v) for k, v in shares.items()])
    p = p / p.sum()
    codes = rng(seed).choice(len(names), size=a.size, p=p).astype(np.int32)
    slo: F64 | None = None
    if isinstance(slo_s, Mapping):
        missing = [k for k in names if k not in slo_s]
        if missing:
            raise PardValueError(f"slo_s has no SLO for tier(s) {missing}")
        per_tier = np.array([check_positive(f"slo_s[{k!r}]", slo_s[k]) for k in names])
        slo = per_tier[codes]
    elif slo_s is not None:
        if not math.isfinite(float(slo_s)) or float(slo_s) <= 0:
            raise PardValueError(f"slo_s must be finite and > 0 seconds, got {slo_s!r}")
        slo = np.full(a.size, float(slo_s))
    return Workload(arrivals_s=a, slo_s=slo, tier=codes, tier_names=names)
