"""From raw worker answers to figures: medians and p90s, paired ratios to the eager baseline, a table, JSON.

Ratios are paired: each round's figure of a system divided by the baseline's figure of the same round
(measured moments apart), then the median over rounds. That cancels most of the load drift of a shared
machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpt2_onnx.bench.runner import RawResults
from gpt2_onnx.bench.settings import BenchSettings

__all__ = ["BenchReport", "Metric", "metrics", "paired_per_round", "paired_ratios", "summarize"]

MIB = 2**20

# Per-round figure of a task: the milliseconds (or tokens/s) one round contributes.
_RoundFigure = Callable[[dict[str, Any]], float]


def _ms(key: str) -> _RoundFigure:
    return lambda answer: 1000.0 * float(answer[key])


def _step_median_ms(answer: dict[str, Any]) -> float:
    return 1000.0 * float(np.median(answer["step_s"]))


@dataclass(frozen=True)
class Metric:
    """One row of the table: a task, how a round's answer becomes a figure, and which way is better."""

    key: str  # JSON key, e.g. "prefill_ms/128"
    label: str  # table text
    task: str
    figure: _RoundFigure
    higher_is_better: bool = False


def metrics(settings: BenchSettings) -> list[Metric]:
    """The timed figures of a run, in table order."""
    tokens = settings.batch_size * settings.new_tokens
    rows = [
        Metric(f"prefill_ms/{n}", f"prefill {n} tokens (ms)", f"prefill/{n}", _ms("s")) for n in settings.prompt_lengths
    ]
    rows += [
        Metric(f"first_token_ms/{n}", f"time to first token, {n} (ms)", f"first_token/{n}", _ms("first_token_s"))
        for n in settings.prompt_lengths
    ]
    rows.append(Metric("decode_ms_per_token", "decode ms/token (median)", "decode", _step_median_ms))
    rows.append(
        Metric(
            "batch_tokens_per_s",
            f"tokens/s, batch {settings.batch_size}",
            "batch",
            lambda answer: tokens / float(answer["total_s"]),
            higher_is_better=True,
        )
    )
    return rows


def _memory(raw: RawResults) -> dict[str, int]:
    load, end = raw.load, raw.end_memory
    found = {
        "rss_before_load": raw.load["before"]["rss"],
        "rss_after_load": load["after"]["rss"],
        "peak_rss_after_load": load["after"]["peak_rss"],
        "rss_ready": load["ready"]["rss"],
        "rss_after_generate": end["rss"],
        "peak_rss_after_generate": end["peak_rss"],
    }
    for part in ("rss_anon", "rss_file"):  # Linux only
        for moment, snapshot in (("ready", load["ready"]), ("after_generate", end)):
            if part in snapshot:
                found[f"{part}_{moment}"] = snapshot[part]
    return found


def _system_figures(raw: RawResults, timed: Sequence[Metric]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for metric in timed:
        per_round = [metric.figure(answer) for answer in raw.tasks[metric.task]]
        figures[metric.key] = float(np.median(per_round))
    steps = [1000.0 * s for answer in raw.tasks["decode"] for s in answer["step_s"]]
    figures["decode_ms_per_token_p90"] = float(np.percentile(steps, 90))
    return figures


def paired_per_round(raw: RawResults, base: RawResults, metric: Metric) -> list[float]:
    """``metric`` of ``raw`` over ``base``'s, round by round (each pair measured moments apart)."""
    ours = [metric.figure(answer) for answer in raw.tasks[metric.task]]
    theirs = [metric.figure(answer) for answer in base.tasks[metric.task]]
    return [a / b for a, b in zip(ours, theirs, strict=True)]


def paired_ratios(raw: RawResults, base: RawResults, settings: BenchSettings) -> dict[str, float]:
    """Every timed figure of ``raw`` over ``base``'s: the median of the per-round ratios."""
    return {m.key: float(np.median(paired_per_round(raw, base, m))) for m in metrics(settings)}


@dataclass(frozen=True)
class BenchReport:
    """Figures per system (by label), ratios of each ONNX system to the baseline, and the run's context."""

    settings: BenchSettings
    machine: dict[str, Any]
    parameter_bytes: int
    systems: dict[str, dict[str, Any]]  # label → kind, figures, memory, files, load seconds
    ratios: dict[str, dict[str, float]]  # onnx label → metric key → ratio to the baseline
    baseline: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": self.settings.to_json(),
            "machine": self.machine,
            "parameter_bytes": self.parameter_bytes,
            "baseline": self.baseline,
            "systems": self.systems,
            "ratios": self.ratios,
        }

    def table(self) -> str:
        """The figures as aligned text: one row per figure, one column per system, then the ratios."""
        return _render(self)


def _weight_ratios(system: dict[str, Any], parameter_bytes: int) -> dict[str, float]:
    memory, files = system["memory"], system.get("files") or {}
    parameter_bytes = files.get("weight_bytes") or parameter_bytes  # a quantized export's own weights
    found = {
        "rss_ready_per_weight_byte": memory["rss_ready"] / parameter_bytes,
        "peak_rss_after_generate_per_weight_byte": memory["peak_rss_after_generate"] / parameter_bytes,
    }
    if files:
        found["model_files_per_weight_byte"] = files["model_files"] / parameter_bytes
    return found


def summarize(
    raws: Sequence[RawResults], settings: BenchSettings, machine: dict[str, Any], parameter_bytes: int
) -> BenchReport:
    timed = metrics(settings)
    systems: dict[str, dict[str, Any]] = {}
    for raw in raws:
        systems[raw.spec.label] = {
            "kind": raw.spec.kind,
            "folder": raw.spec.folder,
            "model": raw.spec.model,
            "timing": {"load_s": raw.load["load_s"]},
            "figures": _system_figures(raw, timed),
            "memory": _memory(raw),
            "files": raw.load.get("files"),
        }
    base = next((raw for raw in raws if raw.spec.kind == "eager"), None)
    ratios: dict[str, dict[str, float]] = {}
    for raw in raws:
        if raw.spec.kind != "onnx":
            continue
        found = paired_ratios(raw, base, settings) if base is not None else {}
        ratios[raw.spec.label] = {**found, **_weight_ratios(systems[raw.spec.label], parameter_bytes)}
    return BenchReport(settings, machine, parameter_bytes, systems, ratios, base.spec.label if base else None)


_MEMORY_ROWS = (  # (table text, memory key, ratio key or None)
    ("RSS before load (MiB)", "rss_before_load", None),
    ("RSS after load (MiB)", "rss_after_load", None),
    ("peak RSS after load (MiB)", "peak_rss_after_load", None),
    ("RSS ready: both graphs run once (MiB)", "rss_ready", "rss_ready_per_weight_byte"),
    ("RSS after generating (MiB)", "rss_after_generate", None),
    ("  of which anonymous (MiB)", "rss_anon_after_generate", None),
    ("  of which file-backed (MiB)", "rss_file_after_generate", None),
    ("peak RSS after generating (MiB)", "peak_rss_after_generate", "peak_rss_after_generate_per_weight_byte"),
)


def _cells(report: BenchReport, section: str, key: str, fmt: str, scale: float = 1.0) -> list[str]:
    """``system[section][key] / scale`` for each system, formatted; "—" where a system lacks it."""
    cells = []
    for system in report.systems.values():
        value = (system.get(section) or {}).get(key)
        cells.append("—" if value is None else format(value / scale, fmt))
    return cells


def _ratio_cells(report: BenchReport, key: str | None, fmt: str) -> list[str]:
    if key is None:
        return []
    return ["—" if key not in ratios else format(ratios[key], fmt) for ratios in report.ratios.values()]


def _rows(report: BenchReport) -> list[list[str]]:
    rows: list[list[str]] = []
    for metric in metrics(report.settings):
        rows.append(
            [
                metric.label,
                *_cells(report, "figures", metric.key, ",.1f"),
                *_ratio_cells(report, metric.key, ".2f"),
            ]
        )
        if metric.key == "decode_ms_per_token":
            rows.append(["decode ms/token (p90)", *_cells(report, "figures", "decode_ms_per_token_p90", ",.1f")])
    for text, key, ratio in _MEMORY_ROWS:
        rows.append([text, *_cells(report, "memory", key, ",.0f", MIB), *_ratio_cells(report, ratio, ".2f")])
    files = _cells(report, "files", "model_files", ",.1f", 1e6)
    rows.append(["graphs + weights on disk (MB)", *files, *_ratio_cells(report, "model_files_per_weight_byte", ".4f")])
    rows.append(["load (s)", *_cells(report, "timing", "load_s", ".1f")])
    return rows


def _render(report: BenchReport) -> str:
    """Timing ratios are × the baseline (paired medians); memory and file ratios are × the weight bytes."""
    header = ["", *report.systems, *(f"{label} ratio" for label in report.ratios)]
    rows = [header, *_rows(report)]
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(header))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False)))
        for row in rows
    ]
    base = f"× {report.baseline}" if report.baseline else "no baseline"
    weights = f"{report.parameter_bytes / MIB:,.0f} MiB"
    note = f"ratios: timings {base} (paired per round); memory and files × the weight bytes ({weights})"
    return "\n".join([*lines, note])
