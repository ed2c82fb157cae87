"""Parity tolerances: how close an export must be to its source model, and why (each precision's are in
:mod:`gpt2_onnx_core.precisions`).

fp32 graphs compute the same arithmetic as PyTorch in another order, so they are judged as floating point works
(:class:`ArithmeticRule`): the source model run in float64 is the exact reference, and the export may be as far from
it as a small factor of the float32 source model's own distance from it, plus a floor scaled by the values'
magnitude; greedy tokens must be identical. Lower precisions are judged by agreement of the next-token
distributions (top-1 agreement and KL divergence) instead; their thresholds come from measurement and say so in
``basis``. docs/verification.md gives the measurements behind each.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ArithmeticRule", "PerplexityLimit", "Tolerance"]


@dataclass(frozen=True)
class ArithmeticRule:
    """An fp32 export against the exact result: for each compared tensor,

        max |export - float64 source| <= factor * max |float32 source - float64 source| + floor * max |float64 source|

    The first term follows the arithmetic (logit magnitude, widths, depths and accumulation lengths all grow the
    float32 source's own error, and the export's with it); the floor covers tensors whose float32 source error
    happens to be near zero, in units of the values' magnitude."""

    factor: float
    floor: float  # relative to the tensor's largest |float64 value|

    def limit(self, source_error: float, peak: float) -> float:
        """The largest |export - float64 source| allowed for a tensor."""
        return self.factor * source_error + self.floor * peak

    def describe(self) -> str:
        return f"max |Δ| from float64 ≤ {self.factor:g} × float32 source's + {self.floor:.2g} × max |value|"


@dataclass(frozen=True)
class Tolerance:
    """Limits for one precision. A None limit is not judged (its figure is still reported)."""

    logits_atol: float | None  # max |Δlogits|
    kv_atol: float | None  # max |ΔKV|
    min_top1: float  # fraction of positions whose argmax agrees
    max_kl: float | None  # max KL(source || export) of next-token distributions
    greedy_exact: bool  # free-running greedy tokens must be identical
    basis: str  # how the limits were set
    # top-1 agreement leaves out positions whose reference top-2 logits are at most this far apart: where the
    # precision's own logit error can swap them, a changed argmax says nothing (0: every position counts)
    near_tie: float = 0.0
    # fp32: logits and KV judged against the float64 source by this rule (logits_atol and kv_atol then unused)
    arithmetic: ArithmeticRule | None = None

    def describe(self) -> str:
        """The limits in force, one line: each judged figure with its limit, then those only reported."""
        judged: list[str] = []
        reported: list[str] = []
        if self.min_top1 > 0:
            ties = f" (near ties ≤ {self.near_tie:.3g} apart left out)" if self.near_tie else ""
            judged.append(f"top-1 ≥ {self.min_top1:.0%}{ties}")
        else:
            reported.append("top-1")
        if self.arithmetic is not None:
            judged.append(f"logits and KV: {self.arithmetic.describe()}")
        absolute = () if self.arithmetic else (("max |Δlogits|", self.logits_atol), ("max |ΔKV|", self.kv_atol))
        for label, limit in (("KL", self.max_kl), *absolute):
            if limit is None:
                reported.append(label)
            else:
                judged.append(f"{label} ≤ {limit:.3g}")
        if self.greedy_exact:
            judged.append("greedy tokens identical")
        else:
            reported.append("greedy divergence")
        text = ", ".join(judged)
        return f"{text}; reported, not judged: {', '.join(reported)}" if reported else text

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PerplexityLimit:
    """How far an export's perplexity may move from its source's, relative, for one precision (None: reported)."""

    max_relative: float | None  # on |ppl(export) / ppl(source) - 1|
    basis: str
