"""Drop-and-order policies by name (DESIGN §3.6).

A policy is a *value*: the order a stage serves its queue in, the drop rule it applies before a
request joins a batch, and the options the planner (:mod:`pard.planner`) uses when it computes the
downstream terms it publishes to the stage schedulers.  The C++ stage scheduler receives the order and
drop rule as a ``pard._core.Policy``; the planner reads the rest.  No policy is a branch elsewhere in
the code: the simulator, the planner and the live runtime all look the name up here.

Names: ``pard`` (the paper's method), the baselines ``naive``, ``clipper++``, ``nexus``, ``dagor``,
and the PARD ablations ``pard-back``, ``pard-sf``, ``pard-lower``, ``pard-upper``, ``pard-fcfs``,
``pard-lbf``, ``pard-hbf``, ``pard-instant``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, Mapping, get_args

if TYPE_CHECKING:  # pragma: no cover
    from . import _core

__all__ = ["PolicySpec", "POLICIES", "get_policy", "policy_names"]

Order = Literal["fcfs", "lbf", "hbf", "adaptive"]
Drop = Literal["none", "pard", "clipper", "nexus", "dagor"]
Downstream = Literal["full", "none", "sf", "lower", "upper"]

#: What each downstream mode adds to a request's end-to-end estimate at stage k (DESIGN §3.2/§3.6),
#: evaluated along every downstream path and maximised over paths.
DOWNSTREAM_MODES: Mapping[str, str] = MappingProxyType(
    {
        "full": "sum q_i + sum d_i(b_i) + w_k (lambda-quantile of summed batch waits)",
        "none": "0 (no downstream terms; pard-back)",
        "sf": "sum d_i(b_i) (service time only; pard-sf)",
        "lower": "sum q_i + sum d_i(b_i) (w_k = 0; pard-lower)",
        "upper": "sum q_i + 2 * sum d_i(b_i) (w_k = sum d_i; pard-upper)",
    }
)


@dataclass(frozen=True)
class PolicySpec:
    """One named policy: order x drop rule x planner options (DESIGN §3.6).

    Attributes:
        name: the policy's name, e.g. ``"pard"``.
        order: queue order, ``"fcfs" | "lbf" | "hbf" | "adaptive"`` (adaptive = §3.3 hysteresis).
        drop: drop rule in the stage scheduler, ``"none" | "pard" | "clipper" | "nexus" | "dagor"``.
        downstream: how the planner forms the downstream term, a key of ``DOWNSTREAM_MODES``.
        instant: publish ``eps = 0`` (no hysteresis band; ``pard-instant``).
        dagor_threshold_s: Dagor's queueing-delay threshold ``T`` (s).
        dagor_alpha: Dagor's throttle: admit ``1 - alpha`` of the input while overloaded.
        description: one line for tables and ``--help``.

    Raises:
        ValueError: a field outside its choices or range (the message names the field, the value and the
            valid choices); TypeError: a field of the wrong type.
    """

    name: str
    order: Order
    drop: Drop
    downstream: Downstream = "full"
    instant: bool = False
    dagor_threshold_s: float = 0.02
    dagor_alpha: float = 0.4
    description: str = ""

    def __post_init__(self) -> None:
        """Validate every field (ValueError / TypeError naming the field, its value and the valid choices)."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"PolicySpec.name must be a non-empty str, got {self.name!r}")
        for field, choices in (("order", get_args(Order)), ("drop", get_args(Drop)),
                               ("downstream", tuple(DOWNSTREAM_MODES))):
            value = getattr(self, field)
            if not isinstance(value, str) or value not in choices:
                raise ValueError(f"PolicySpec.{field} must be one of {', '.join(map(repr, choices))}, "
                                 f"got {value!r}")
        if not isinstance(self.instant, bool):
            raise TypeError(f"PolicySpec.instant must be True or False, got {self.instant!r}")
        for field, low, high in (("dagor_threshold_s", 0.0, math.inf), ("dagor_alpha", 0.0, 1.0)):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"PolicySpec.{field} must be a real number, got {value!r}")
            if not (math.isfinite(value) and low <= value <= high):
                rng = "finite and >= 0 (seconds)" if field == "dagor_threshold_s" else "in [0, 1]"
                raise ValueError(f"PolicySpec.{field} must be {rng}, got {value!r}")
        if not isinstance(self.description, str):
            raise TypeError(f"PolicySpec.description must be a str, got {self.description!r}")

    def core(self) -> "_core.Policy":
        """The ``pard._core.Policy`` value the C++ stage schedulers take."""
        from . import _core

        return _core.Policy(
            order=self.order,
            drop=self.drop,
            dagor_threshold_s=self.dagor_threshold_s,
            dagor_alpha=self.dagor_alpha,
        )

    @property
    def uses_planner_terms(self) -> bool:
        """True when the stage schedulers read any term the planner publishes: the downstream term
        (the PARD drop rule), ``mu``/``eps`` (the adaptive order) or the queueing delay (dagor).
        FCFS with the naive, clipper or nexus rule reads none, so the simulator may skip the planner."""
        return self.order == "adaptive" or self.drop in ("pard", "dagor")


def _specs() -> dict[str, PolicySpec]:
    specs = [
        PolicySpec("pard", "adaptive", "pard", "full",
                   description="PARD: end-to-end estimate with lambda-quantile batch waits, adaptive order"),
        PolicySpec("naive", "fcfs", "none", "none", description="never drops; FCFS"),
        PolicySpec("clipper++", "fcfs", "clipper", "none",
                   description="FCFS; drop past the stage's proportional SLO share or the deadline"),
        PolicySpec("nexus", "fcfs", "nexus", "none",
                   description="FCFS; sliding batch window over the queue against stage budgets"),
        PolicySpec("dagor", "fcfs", "dagor", "none",
                   description="drop when the stage's queueing delay exceeds T; throttle admission"),
        PolicySpec("pard-back", "adaptive", "pard", "none", description="PARD without downstream terms"),
        PolicySpec("pard-sf", "adaptive", "pard", "sf", description="PARD, downstream = sum of durations"),
        PolicySpec("pard-lower", "adaptive", "pard", "lower", description="PARD with w = 0"),
        PolicySpec("pard-upper", "adaptive", "pard", "upper", description="PARD with w = sum of durations"),
        PolicySpec("pard-fcfs", "fcfs", "pard", "full", description="PARD drop rule, FCFS order"),
        PolicySpec("pard-lbf", "lbf", "pard", "full", description="PARD drop rule, always LBF"),
        PolicySpec("pard-hbf", "hbf", "pard", "full", description="PARD drop rule, always HBF"),
        PolicySpec("pard-instant", "adaptive", "pard", "full", instant=True,
                   description="PARD with eps = 0 (switch order without hysteresis)"),
    ]
    return {s.name: s for s in specs}


#: Every policy by name (read-only).
POLICIES: Mapping[str, PolicySpec] = MappingProxyType(_specs())


def policy_names() -> list[str]:
    """The valid policy names, in a stable order (pard first, then baselines, then ablations)."""
    return list(POLICIES)


def get_policy(policy: str | PolicySpec) -> PolicySpec:
    """Look a policy up by name (a :class:`PolicySpec` is returned unchanged).

    Raises:
        ValueError: unknown name; the message lists the valid ones.
        TypeError: neither a str nor a PolicySpec.
    """
    if isinstance(policy, PolicySpec):
        return policy
    if not isinstance(policy, str):
        raise TypeError(f"policy must be a name (str) or a PolicySpec, got {type(policy).__name__}: {policy!r}")
    spec = POLICIES.get(policy.strip().lower())
    if spec is None:
        raise ValueError(f"unknown policy {policy!r}; valid policies: {', '.join(POLICIES)}")
    return spec
