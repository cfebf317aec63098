"""The planner's settings, one object for every way in: :func:`pard.simulate`, :class:`pard.Runtime`,
:func:`pard.ray.deploy` and ``pard serve``'s file (its ``planner:`` section) all take a
:class:`PlannerConfig`, or a mapping of its fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._checks import check_bool, check_float, show
from .errors import PardTypeError, PardValueError

__all__ = ["PlannerConfig", "MIN_SYNC_INTERVAL_S", "MAX_SYNC_INTERVAL_S", "MAX_SAMPLES"]

#: Shortest accepted ``sync_interval_s``: below a millisecond a sync sees too few samples per interval
#: for the planner's estimates to mean anything.  The paper syncs every 1 s (DESIGN §3.5).
MIN_SYNC_INTERVAL_S = 1e-3
#: Longest accepted ``sync_interval_s`` (1 h): the run recorder keeps per-second series up to the last
#: sync, so one huge interval would allocate a series per second of it, and a planner whose windows are
#: seconds learns nothing from hour-long gaps anyway.
MAX_SYNC_INTERVAL_S = 3600.0
#: Largest accepted Monte Carlo sample count ``samples`` (DESIGN §3.2): each sync draws ``samples``
#: float64 values per downstream stage, so 10^6 is already ~8 MB per array per sync.
MAX_SAMPLES = 1_000_000


@dataclasses.dataclass(frozen=True)
class PlannerConfig:
    """How the planner runs (DESIGN §3.5); every field has the paper's default.

    Attributes:
        sync_interval_s: the planner's period (s), in [:data:`MIN_SYNC_INTERVAL_S`, :data:`MAX_SYNC_INTERVAL_S`].
        lam: the downstream batch-wait quantile ``lambda`` in [0, 1]; None: the policy's own
            (``PolicySpec.lam``), else the paper's 0.1.
        window_s: the initial (and, with ``adapt_window=False``, fixed) estimation window (s, >= 0.001).
        adapt_window: resize the window by the entry stages' input burstiness (CV).
        samples: Monte Carlo sample count ``M``, an int in ``1 ..`` :data:`MAX_SAMPLES`.
        cv_history_s: how far back the CV of the input rate looks (s, > 0).
        min_cv_intervals: sync intervals seen before the window first follows the CV (int >= 1).
        seed: seeds the Monte Carlo draws (an int >= 0); None: the run's own (``simulate``: its ``seed``
            + 1; the live runtime and Ray: 0).

    Raises:
        PardValueError / PardTypeError: a field out of range or of the wrong type, named as
            ``planner.<field>`` with its value.
    """

    sync_interval_s: float = 1.0
    lam: float | None = None
    window_s: float = 5.0
    adapt_window: bool = True
    samples: int = 10_000
    cv_history_s: float = 60.0
    min_cv_intervals: int = 10
    seed: int | None = None

    def __post_init__(self) -> None:
        f = "planner."
        set_ = object.__setattr__  # frozen: the checked values replace the given ones
        set_(self, "sync_interval_s", check_float(f + "sync_interval_s", self.sync_interval_s,
                                                  low=MIN_SYNC_INTERVAL_S, high=MAX_SYNC_INTERVAL_S))
        if self.lam is not None:
            set_(self, "lam", check_float(f + "lam", self.lam, low=0.0, high=1.0))
        set_(self, "window_s", check_float(f + "window_s", self.window_s, low=1e-3))
        set_(self, "adapt_window", check_bool(f + "adapt_window", self.adapt_window))
        set_(self, "samples", _int(f + "samples", self.samples, 1, MAX_SAMPLES))
        set_(self, "cv_history_s", check_float(f + "cv_history_s", self.cv_history_s, low=0.0, low_open=True))
        set_(self, "min_cv_intervals", _int(f + "min_cv_intervals", self.min_cv_intervals, 1, 10**9))
        if self.seed is not None:
            set_(self, "seed", _int(f + "seed", self.seed, 0, 2**64 - 2))

    @classmethod
    def of(cls, value: PlannerConfig | Mapping[str, Any] | None) -> PlannerConfig:
        """``value`` as a PlannerConfig: itself, the defaults for None, or a mapping of fields.

        Raises:
            PardTypeError: not one of those, or a mapping with a key that is not a field (named, with
                the fields allowed).
        """
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise PardTypeError(f"planner must be a pard.PlannerConfig or a mapping of its fields, got "
                                f"{type(value).__name__}: {show(value)}")
        fields = [fl.name for fl in dataclasses.fields(cls)]
        unknown = sorted(str(k) for k in value if k not in fields)
        if unknown:
            raise PardTypeError(f"planner has unknown field(s) {unknown}; allowed: {', '.join(fields)}")
        return cls(**{str(k): v for k, v in value.items()})

    def planner_kwargs(self, default_seed: int) -> dict[str, Any]:
        """The keyword arguments of :class:`pard.planner.Planner` (all but the stages and the policy)."""
        return {"lam": self.lam, "window_s": self.window_s, "adapt_window": self.adapt_window,
                "samples": self.samples, "seed": default_seed if self.seed is None else self.seed,
                "cv_history_s": self.cv_history_s, "min_cv_intervals": self.min_cv_intervals}


def _int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise PardTypeError(f"{name} must be an int, got {type(value).__name__}: {show(value)}")
    if not low <= int(value) <= high:
        raise PardValueError(f"{name} must be an int in {low}..{high}, got {show(value)}")
    return int(value)

