"""A verify report for humans: the source, the limits in force and their basis; a compact table, one row per check
and tensor family (the presents of all layers folded into one row with the worst figures); file integrity; then
every failure in full, one line each, so that none hides behind a folded row."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpt2_onnx.parity import Comparison

if TYPE_CHECKING:
    from gpt2_onnx.verification import VerifyReport

__all__ = ["render_report", "render_table"]


@dataclass
class _Row:
    check: str
    tensor: str
    count: int
    failed: int
    max_abs: float | None
    atol: float | None
    top1: float | None
    kl: float | None
    detail: str

    @property
    def ok(self) -> bool:
        return self.failed == 0


def _family(tensor: str) -> str:
    return "present.*" if tensor.startswith("present.") else tensor


def _check_group(check: str) -> str:
    """Chained decode steps share one row per tensor family."""
    return "decode steps" if re.fullmatch(r"decode step \d+", check) else check


def _worst(values: Iterable[float | None], lowest: bool = False) -> float | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return min(present) if lowest else max(present)


def _rows(comparisons: list[Comparison]) -> list[_Row]:
    groups: dict[tuple[str, str], list[Comparison]] = {}
    for comparison in comparisons:
        key = (_check_group(comparison.check), _family(comparison.tensor))
        groups.setdefault(key, []).append(comparison)
    rows = []
    for (check, family), members in groups.items():
        rows.append(
            _Row(
                check,
                family if len(members) == 1 else f"{family} ({len(members)})",
                len(members),
                sum(not m.ok for m in members),
                _worst(m.max_abs for m in members),
                _worst(m.atol for m in members),
                _worst((m.top1 for m in members), lowest=True),
                _worst(m.kl for m in members),
                "; ".join(sorted({m.detail for m in members if m.detail}))[:60],
            )
        )
    return rows


def _num(value: float | None, spec: str = ".2e") -> str:
    return "" if value is None else format(value, spec)


def render_table(comparisons: list[Comparison]) -> str:
    header = f"{'check':<44} {'tensor':<16} {'max|Δ|':>9} {'tol':>8} {'top-1':>7} {'KL':>9}  result"
    lines = [header, "-" * len(header)]
    for row in _rows(comparisons):
        top1 = "" if row.top1 is None else f"{row.top1:.1%}"
        verdict = "ok" if row.ok else ("FAIL" if row.count == 1 else f"FAIL {row.failed} of {row.count}")
        detail = f"  {row.detail}" if row.detail else ""
        lines.append(
            f"{row.check[:44]:<44} {row.tensor[:16]:<16} {_num(row.max_abs):>9} {_num(row.atol, '.0e'):>8} "
            f"{top1:>7} {_num(row.kl):>9}  {verdict}{detail}"
        )
    return "\n".join(lines)


def render_failures(failures: list[str]) -> str:
    """Every failure in full, one line each (check, tensor, figures and limits); empty when there are none."""
    if not failures:
        return ""
    return "\n".join([f"Failures ({len(failures)}):", *(f"  {line}" for line in failures)])


def render_report(report: VerifyReport) -> str:
    """The whole human report: header with the limits in force, the table, file integrity, every failure."""
    bad_files = sum(not f.ok for f in report.files)
    lines = [
        f"Source: {report.source}; export: {report.precision} on {report.provider}",
        f"Tolerances ({report.precision}): {report.tolerance.describe()}",
        f"Basis: {report.tolerance.basis}",
        render_table(report.parity.comparisons),
        f"Files: {len(report.files) - bad_files} of {len(report.files)} match the manifest's sha256",
    ]
    failures = render_failures(report.failures())
    return "\n".join([*lines, failures] if failures else lines)
