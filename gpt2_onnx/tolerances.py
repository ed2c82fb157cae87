"""Parity tolerances per precision: how close an export must be to its source model, and why.

fp32 graphs compute the same arithmetic as PyTorch in another order, so they are held to absolute differences and
identical greedy tokens. Lower precisions are judged by agreement of the next-token distributions (top-1 agreement
and KL divergence) instead; their thresholds come from measurement and say so in ``basis``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpt2_onnx.errors import ManifestError

__all__ = ["TOLERANCES", "Tolerance", "tolerance_for"]


@dataclass(frozen=True)
class Tolerance:
    """Limits for one precision. A None limit is not judged (its figure is still reported)."""

    logits_atol: float | None  # max |Δlogits|
    kv_atol: float | None  # max |ΔKV|
    min_top1: float  # fraction of positions whose argmax agrees
    max_kl: float | None  # max KL(source || export) of next-token distributions
    greedy_exact: bool  # free-running greedy tokens must be identical
    basis: str  # how the limits were set

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(
        logits_atol=1e-4,
        kv_atol=1e-4,
        min_top1=1.0,
        max_kl=1e-6,
        greedy_exact=True,
        basis=(
            "fp32 against fp32: measured max |Δlogits| 2e-7 (tiny) to 4e-6 (GPT-2 small, 1024 positions); "
            "1e-4 leaves headroom for other CPUs and thread counts"
        ),
    ),
}


def tolerance_for(precision: str) -> Tolerance:
    try:
        return TOLERANCES[precision]
    except KeyError as exc:
        raise ManifestError(f"no parity tolerances are defined for precision '{precision}'") from exc
