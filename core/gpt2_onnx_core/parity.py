"""Parity metrics between an export's outputs and the source model's: numpy only, data out, verdicts separate.

Every comparison is recorded; a report fails once, listing every failure with its figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gpt2_onnx_core.tolerances import ArithmeticRule
from gpt2_onnx_core.wording import plural

__all__ = [
    "Comparison",
    "ParityReport",
    "arithmetic_limit",
    "compare_logits",
    "compare_tensors",
    "compare_tokens",
    "kl_divergence",
    "top1_agreement",
]


@dataclass(frozen=True)
class Comparison:
    """One comparison: what was compared, how far apart and against which limits. The verdict, :attr:`ok`, is
    computed from these figures and limits, never stored beside them."""

    check: str  # e.g. "prefill", "decode step 3", "padded batch row 1"
    tensor: str  # e.g. "logits", "present.0.key", "greedy tokens"
    max_abs: float | None = None  # max |actual - expected|
    max_rel: float | None = None  # max_abs / max |expected|
    atol: float | None = None  # limit on max_abs (None: reported, not judged)
    top1: float | None = None  # fraction of positions whose argmax agrees
    min_top1: float | None = None
    kl: float | None = None  # max KL(expected || actual) of next-token distributions
    max_kl: float | None = None
    detail: str = ""
    positions: int | None = None  # next-token distributions compared (what top1 is a fraction of)
    near_ties: int = 0  # positions left out of top1: the reference's top two within the precision's noise
    agrees: bool | None = None  # token or id sequences: whether they agree (None: a comparison of figures)
    agreement_judged: bool = True  # whether ``agrees`` counts (False: reported, not judged at this precision)
    broken: bool = False  # no figures could be compared: shapes differ or values are not finite
    # fp32 against the float64 source: max |float32 source - float64 source|, what ``atol`` was computed from
    source_error: float | None = None

    @property
    def ok(self) -> bool:
        """Within every limit that applies."""
        if self.broken:
            return False
        if self.agrees is not None and self.agreement_judged and not self.agrees:
            return False
        return (
            (self.atol is None or self.max_abs is None or self.max_abs <= self.atol)
            and (self.min_top1 is None or self.top1 is None or self.top1 >= self.min_top1)
            and (self.max_kl is None or self.kl is None or self.kl <= self.max_kl)
        )

    @property
    def shown_detail(self) -> str:
        """The detail as reports show it: a disagreement this precision does not judge says so."""
        if self.detail and self.agrees is False and not self.agreement_judged:
            return f"{self.detail} (reported; not judged at this precision)"
        return self.detail

    @property
    def top1_judged(self) -> bool:
        return self.min_top1 is not None and self.min_top1 > 0

    def describe(self) -> str:
        parts = [f"{self.check}: {self.tensor}"]
        if self.max_abs is not None:
            limit = f"tol {self.atol:.3g}" if self.atol is not None else "reported"
            if self.source_error is not None:
                own = f"float32 source's own {self.source_error:.3g}"
                parts.append(f"max|Δ| from float64 {self.max_abs:.3g} ({limit}), {own}, rel {self.max_rel:.3g}")
            else:
                parts.append(f"max|Δ| {self.max_abs:.3g} ({limit}), rel {self.max_rel:.3g}")
        if self.top1 is not None:
            limit = f"min {self.min_top1:.1%}" if self.top1_judged else "reported"
            of = f" of {plural(self.positions, 'position')}" if self.positions is not None else ""
            ties = f", {plural(self.near_ties, 'near tie')} left out" if self.near_ties else ""
            parts.append(f"top-1 {self.top1:.1%}{of}{ties} ({limit})")
        elif self.near_ties:
            parts.append(f"top-1 not compared: every position a near tie ({plural(self.near_ties, 'position')})")
        if self.kl is not None:
            limit = f"max {self.max_kl:.3g}" if self.max_kl is not None else "reported"
            parts.append(f"KL {self.kl:.3g} ({limit})")
        if self.detail:
            parts.append(self.shown_detail)
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        figures = {key: value for key, value in asdict(self).items() if value is not None and value != ""}
        return {"ok": self.ok, **figures}


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def kl_divergence(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest KL(P_expected || P_actual) over positions, from logits (..., V)."""
    log_p, log_q = _log_softmax(expected), _log_softmax(actual)
    kl = np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)
    return max(0.0, float(np.max(kl)))  # tiny negative values are rounding


def top1_agreement(actual: np.ndarray, expected: np.ndarray, near_tie: float = 0.0) -> tuple[float | None, int, int]:
    """Agreement of the argmax tokens of logits (..., V) over the positions whose expected top two logits are more
    than ``near_tie`` apart: (fraction or None when no position counts, positions counted, positions left out)."""
    expected_2d = expected.reshape(-1, expected.shape[-1]).astype(np.float64)  # (P, V)
    actual_2d = actual.reshape(-1, actual.shape[-1])
    top2 = np.partition(expected_2d, -2, axis=-1)[:, -2:]  # (P, 2): second and first
    counted = (top2[:, 1] - top2[:, 0]) > near_tie  # (P,)
    agree = actual_2d.argmax(axis=-1) == expected_2d.argmax(axis=-1)
    kept = int(counted.sum())
    return (float(agree[counted].mean()) if kept else None), kept, int(counted.size - kept)


def _differences(actual: np.ndarray, expected: np.ndarray) -> tuple[float, float, bool]:
    delta = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    max_abs = float(delta.max()) if delta.size else 0.0
    peak = float(np.abs(expected).max()) if expected.size else 0.0
    return max_abs, (max_abs / peak if peak else max_abs), bool(np.isfinite(actual).all())


def arithmetic_limit(rule: ArithmeticRule, source: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    """(max |float32 source - float64 source|, the limit ``rule`` sets from it) for one tensor; ``source`` and
    ``exact`` are the float32 and float64 source model's values of it."""
    if source.shape != exact.shape or not exact.size:
        return 0.0, 0.0
    source_error = float(np.abs(source.astype(np.float64) - exact).max())
    return source_error, rule.limit(source_error, float(np.abs(exact).max()))


def compare_tensors(
    check: str,
    tensor: str,
    actual: np.ndarray,
    expected: np.ndarray,
    atol: float | None,
    source_error: float | None = None,
) -> Comparison:
    """Compare two arrays of the same shape by max absolute difference (``atol`` None: report only)."""
    if actual.shape != expected.shape:
        return Comparison(check, tensor, detail=f"shape {actual.shape} != expected {expected.shape}", broken=True)
    max_abs, max_rel, finite = _differences(actual, expected)
    detail = "" if finite else "non-finite values"
    return Comparison(
        check, tensor, max_abs, max_rel, atol, detail=detail, broken=not finite, source_error=source_error
    )


def compare_logits(
    check: str,
    actual: np.ndarray,
    expected: np.ndarray,
    atol: float | None,
    min_top1: float | None = None,
    max_kl: float | None = None,
    tensor: str = "logits",
    near_tie: float = 0.0,
    source_error: float | None = None,
) -> Comparison:
    """Compare logits (..., V): max |Δ|, top-1 agreement and KL of the next-token distributions, each judged
    against its limit where one is given (``source_error``: recorded, see :attr:`Comparison.source_error`)."""
    if actual.shape != expected.shape:
        return Comparison(check, tensor, detail=f"shape {actual.shape} != expected {expected.shape}", broken=True)
    max_abs, max_rel, finite = _differences(actual, expected)
    top1, positions, ties = top1_agreement(actual, expected, near_tie) if actual.size else (1.0, 0, 0)
    kl = kl_divergence(actual, expected) if actual.size and finite else float("inf")
    detail = "" if finite else "non-finite values"
    return Comparison(
        check,
        tensor,
        max_abs,
        max_rel,
        atol,
        top1,
        min_top1,
        kl,
        max_kl,
        detail,
        positions,
        ties,
        broken=not finite,
        source_error=source_error,
    )


def compare_tokens(
    check: str, actual: np.ndarray, expected: np.ndarray, first_row: int = 0, judged: bool = True
) -> Comparison:
    """Token sequences (B, N) must be equal (unless not ``judged``: then a divergence is reported only); the detail
    names the first step where a row diverges.

    ``first_row`` is the batch row that ``actual[0]`` stands for, so a check run one row at a time names the
    row where it diverges, not always row 0.
    """
    if actual.shape != expected.shape:
        detail = f"shape {actual.shape} != expected {expected.shape}"
        return Comparison(check, "greedy tokens", detail=detail, broken=True)
    differs = np.argwhere(actual != expected)
    if differs.size == 0:
        detail = f"{plural(actual.shape[-1], 'step')} equal"
        return Comparison(check, "greedy tokens", detail=detail, agrees=True, agreement_judged=judged)
    row, step = (int(v) for v in differs[0])
    found, wanted = int(actual[row, step]), int(expected[row, step])
    return Comparison(
        check,
        "greedy tokens",
        detail=f"row {first_row + row} diverges at step {step}: {found} vs expected {wanted}",
        agrees=False,
        agreement_judged=judged,
    )


@dataclass
class ParityReport:
    """All comparisons of a run; ``failures`` lists those beyond tolerance."""

    comparisons: list[Comparison] = field(default_factory=list)

    def add(self, comparison: Comparison) -> Comparison:
        self.comparisons.append(comparison)
        return comparison

    @property
    def failures(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.failures

    def worst_judged(self) -> list[str]:
        """The worst of each figure a limit applies to, with that limit (``worst KL 0.016 (max 0.05)``): what the
        precision is judged by, not figures only reported."""
        judged = self.comparisons
        found = []
        absolute = [c for c in judged if c.max_abs is not None and c.atol is not None]
        if absolute:
            worst = max(absolute, key=lambda c: (c.max_abs or 0.0) / (c.atol or 1.0))
            found.append(f"worst max|Δ| {worst.max_abs:.3g} (tol {worst.atol:.3g})")
        kl = [c for c in judged if c.kl is not None and c.max_kl is not None]
        if kl:
            worst = max(kl, key=lambda c: (c.kl or 0.0) / (c.max_kl or 1.0))
            found.append(f"worst KL {worst.kl:.3g} (max {worst.max_kl:.3g})")
        top1 = [c for c in judged if c.top1 is not None and c.top1_judged]
        if top1:
            worst = min(top1, key=lambda c: c.top1 or 0.0)
            found.append(f"lowest top-1 {worst.top1:.1%} (min {worst.min_top1:.1%})")
        return found

    def summary(self) -> str:
        """One line: how many comparisons, how many failed, and the first failures; when all pass, the worst of
        each judged figure."""
        count = plural(len(self.comparisons), "comparison")
        if self.ok:
            worst = self.worst_judged()
            return f"{count} within tolerance" + (f" ({', '.join(worst)})" if worst else "")
        shown = "; ".join(c.describe() for c in self.failures[:3])
        more = f"; and {len(self.failures) - 3} more" if len(self.failures) > 3 else ""
        return f"{len(self.failures)} of {count} failed: {shown}{more}"
