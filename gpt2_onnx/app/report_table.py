"""A verify report for humans: the source, the limits in force and their basis; a compact table, one row per check
and tensor family (the presents of all layers folded into one row with the worst figures); file integrity; then
every failure in full, one line each, so that none hides behind a folded row.

Each row says what it compares the export with ("vs"): the source model run in PyTorch, or golden.json, which
holds the source model's output for fp32 exports and, for fp16, int8 and int4 (precisions the source model does
not run at), the export's own output when it was made: there a golden row is a regression check of the folder (0.00e+00
is expected), not a comparison with the source.

In the table, top-1 is the agreement over every position the row compared (not its worst single position), and a
figure that no limit applies to at this precision is shown in parentheses: reported, not judged. Nothing is cut:
the columns are as wide as their longest entry."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpt2_onnx_core.parity import Comparison
from gpt2_onnx_core.precisions import precision_named, with_int8_kv_cache
from gpt2_onnx_core.wording import plural

if TYPE_CHECKING:
    from gpt2_onnx.app.verify_report import VerifyReport
    from gpt2_onnx_core.perplexity import PerplexityComparison

__all__ = ["render_failures", "render_perplexity", "render_report", "render_table"]

SOURCE = "source model"  # what every row but the golden ones compares with
GOLDEN_FROM = {"source": "golden.json (source model)", "export": "golden.json (this export, when made)"}
GOLDEN_CHECK = "golden case"
TOP1_NOTE = "top-1: agreement over every position a row compared, near ties of the precision left out"
REPORTED_NOTE = "(…): reported, not judged at this precision"


@dataclass
class _Row:
    check: str
    tensor: str
    against: str  # what the export is compared with
    count: int
    failed: int
    max_abs: float | None
    atol: float | None
    top1: float | None  # agreement over all positions of the row
    kl: float | None
    detail: str
    abs_judged: bool
    top1_judged: bool
    kl_judged: bool

    @property
    def ok(self) -> bool:
        return self.failed == 0


def _family(tensor: str) -> str:
    return "present.*" if tensor.startswith("present.") else tensor


def _check_group(check: str) -> str:
    """Chained decode steps share one row per tensor family."""
    return "decode steps" if re.fullmatch(r"decode step \d+", check) else check


def _worst(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _agreement(members: list[Comparison]) -> float | None:
    """Top-1 agreement over every position the members compared (each weighted by its positions)."""
    counted = [(m.top1, m.positions or 1) for m in members if m.top1 is not None]
    if not counted:
        return None
    return sum(top1 * n for top1, n in counted) / sum(n for _, n in counted)


def _details(members: list[Comparison]) -> str:
    """The members' details, whole: the first, and how many others differ (each is listed under Failures)."""
    found = list(dict.fromkeys(m.shown_detail for m in members if m.shown_detail))
    if len(found) <= 1:
        return found[0] if found else ""
    return f"{found[0]}; and {plural(len(found) - 1, 'other')}"


def _rows(comparisons: list[Comparison], golden: str) -> list[_Row]:
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
                golden if check.startswith(GOLDEN_CHECK) else SOURCE,
                len(members),
                sum(not m.ok for m in members),
                _worst(m.max_abs for m in members),
                _worst(m.atol for m in members),
                _agreement(members),
                _worst(m.kl for m in members),
                _details(members),
                abs_judged=any(m.atol is not None for m in members),
                top1_judged=any(m.top1_judged for m in members),
                kl_judged=any(m.max_kl is not None for m in members),
            )
        )
    return rows


def _num(value: float | None, spec: str, judged: bool = True) -> str:
    if value is None:
        return ""
    text = format(value, spec)
    return text if judged else f"({text})"


def _cells(row: _Row) -> list[str]:
    verdict = "ok" if row.ok else ("FAIL" if row.count == 1 else f"FAIL {row.failed} of {row.count}")
    return [
        row.check,
        row.tensor,
        row.against,
        _num(row.max_abs, ".2e", row.abs_judged),
        _num(row.atol, ".0e"),
        _num(row.top1, ".1%", row.top1_judged),
        _num(row.kl, ".2e", row.kl_judged),
        f"{verdict}  {row.detail}" if row.detail else verdict,
    ]


def _has_reported(rows: list[_Row]) -> bool:
    return any(
        (row.max_abs is not None and not row.abs_judged)
        or (row.top1 is not None and not row.top1_judged)
        or (row.kl is not None and not row.kl_judged)
        for row in rows
    )


def render_table(comparisons: list[Comparison], golden_from: str = "source") -> str:
    """The folded table, then a line saying what top-1 counts and, where any is shown, what parentheses mean.
    ``golden_from`` ("source" or "export", the precision's rule) says whose output golden.json holds."""
    header = ["check", "tensor", "vs", "max|Δ|", "tol", "top-1", "KL", "result"]
    rows = _rows(comparisons, GOLDEN_FROM[golden_from])
    body = [_cells(row) for row in rows]
    widths = [max(len(cells[i]) for cells in [header, *body]) for i in range(len(header) - 1)]

    def line(cells: list[str]) -> str:
        left = [cells[i].ljust(widths[i]) for i in range(3)]
        right = [cell.rjust(width) for cell, width in zip(cells[3:-1], widths[3:], strict=True)]
        return " ".join([*left, *right]) + "  " + cells[-1]

    title = line(header)
    note = f"{TOP1_NOTE}; {REPORTED_NOTE}" if _has_reported(rows) else TOP1_NOTE
    return "\n".join([title, "-" * len(title), *(line(cells) for cells in body), note])


def render_failures(failures: list[str]) -> str:
    """Every failure in full, one line each (check, tensor, figures and limits); empty when there are none."""
    if not failures:
        return ""
    return "\n".join([f"Failures ({len(failures)}):", *(f"  {line}" for line in failures)])


def render_perplexity(comparison: PerplexityComparison) -> str:
    """Two lines: the text, its windows and both perplexities with their difference; the limit's basis."""
    verdict = "ok" if comparison.ok else "FAIL"
    return "\n".join(
        [
            f"Perplexity of {comparison.text} ({comparison.plan.describe()}): {verdict}",
            f"  source {comparison.source.value:.6g}, export {comparison.export.value:.6g}, "
            f"Δ {comparison.difference:+.3g} (relative {comparison.relative:+.3g}); "
            + (
                "reported, not judged"
                if comparison.limit.max_relative is None
                else f"limit ±{comparison.limit.max_relative:.3g} relative"
            ),
            f"  basis: {comparison.limit.basis}",
        ]
    )


def _int8_cache_lines(report: VerifyReport) -> list[str]:
    """The limits of the checks over an int8 KV cache, where verify ran them."""
    if report.kv_cache != "int8":
        return []
    return [f"Over the int8 KV cache: {with_int8_kv_cache(report.tolerance).describe()}"]


def _prompt_kernel_lines(report: VerifyReport) -> list[str]:
    """What the checks named 'prompt kernel …' ran, where verify ran them."""
    if report.prompt_kernel == "export":
        return []
    return [
        f"Prompt kernel {report.prompt_kernel}: the checks so named ran the export's projections through "
        "DynamicQuantizeMatMul for every multi-token run (decode steps of generation through the export's own "
        "kernel), judged by the same limits."
    ]


def render_report(report: VerifyReport) -> str:
    """The whole human report: header with the limits in force, the table, file integrity, every failure."""
    bad_files = sum(not f.ok for f in report.files)
    lines = [
        f"Source: {report.source}; export: {report.precision} on {report.provider}",
        f"Tolerances ({report.precision}): {report.tolerance.describe()}",
        f"Basis: {report.tolerance.basis}",
        *_int8_cache_lines(report),
        *_prompt_kernel_lines(report),
        render_table(report.parity.comparisons, precision_named(report.precision).golden_from),
        f"Files: {len(report.files) - bad_files} of {plural(len(report.files), 'file')} match the manifest's sha256",
    ]
    if report.perplexity is not None:
        lines.append(render_perplexity(report.perplexity))
    failures = render_failures(report.failures())
    return "\n".join([*lines, failures] if failures else lines)
