"""Parity tolerances: how close an export must be to its source model, and why (each precision's are in
:mod:`gpt2_onnx.precisions`).

fp32 graphs compute the same arithmetic as PyTorch in another order, so they are held to absolute differences and
identical greedy tokens. Lower precisions are judged by agreement of the next-token distributions (top-1 agreement
and KL divergence) instead; their thresholds come from measurement and say so in ``basis``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Tolerance"]


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

    def describe(self) -> str:
        """The limits in force, one line: each judged figure with its limit, then those only reported."""
        judged: list[str] = []
        reported: list[str] = []
        if self.min_top1 > 0:
            ties = f" (near ties ≤ {self.near_tie:.3g} apart left out)" if self.near_tie else ""
            judged.append(f"top-1 ≥ {self.min_top1:.0%}{ties}")
        else:
            reported.append("top-1")
        for label, limit in (("KL", self.max_kl), ("max |Δlogits|", self.logits_atol), ("max |ΔKV|", self.kv_atol)):
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
