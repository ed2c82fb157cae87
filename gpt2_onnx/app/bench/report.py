"""From raw worker answers to figures: medians and p90s, ratios to the eager baseline, JSON (the table is in
:mod:`gpt2_onnx.app.bench.table`).

Two ratios per timed figure. ``ratios``: the system's median over the baseline's median, the figures the table
prints beside it, so that every ratio cell agrees with them. ``paired_ratios``: each round's figure over the
baseline's figure of the same round (measured moments apart), then the median over rounds; that cancels most
of a shared machine's load drift, and may differ from the ratio of the medians (JSON only). Memory and file
ratios are × each system's own weight bytes (a quantized export's own weights), which the table shows as a row.

With ``BenchSettings.decode_contexts``, each extra decode run is a figure like the decode run's
(``decode_ms_per_token/C``: the median of its steps, then over rounds), with ratios like every figure, and each
system's growth ``decode_growth/C``: its ms/token after C tokens over its own after ``decode_prompt_length`` (the
ratio of the two medians, as the table shows it; ``decode_growth_paired/C``: round by round, then the median); over
the run of as many steps after ``decode_prompt_length`` where that length is one of the contexts too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpt2_onnx.app.bench.tasks import RawResults, decode_context_task, growth_base_task
from gpt2_onnx_core.bench_settings import BenchSettings
from gpt2_onnx_core.wording import plural

__all__ = [
    "BenchReport",
    "Metric",
    "decode_context_key",
    "decode_growth_key",
    "median_ratios",
    "metrics",
    "paired_per_round",
    "paired_ratios",
    "summarize",
]

MIB = 2**20

# Per-round figure of a task: the milliseconds (or tokens/s) one round contributes.
_RoundFigure = Callable[[dict[str, Any]], float]


def _ms(key: str) -> _RoundFigure:
    return lambda answer: 1000.0 * float(answer[key])


def _step_median_ms(answer: dict[str, Any]) -> float:
    return 1000.0 * float(np.median(answer["step_s"]))


def decode_context_key(length: int) -> str:
    """The figure of the decode run after ``length`` tokens: ms/token, the median of its steps."""
    return f"decode_ms_per_token/{length}"


def decode_growth_key(length: int, paired: bool = False) -> str:
    """A system's ms/token after ``length`` tokens over its own after the decode prompt (``paired``: per round)."""
    return f"decode_growth_paired/{length}" if paired else f"decode_growth/{length}"


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
    after = " after decode" if settings.decode_steps_before_prefill else ""
    rows = [
        Metric(f"prefill_ms/{n}", f"prefill {plural(n, 'token')}{after} (ms)", f"prefill/{n}", _ms("s"))
        for n in settings.prompt_lengths
    ]
    rows += [
        Metric(
            f"first_token_ms/{n}",
            f"time to first token, {plural(n, 'token')} (ms)",
            f"first_token/{n}",
            _ms("first_token_s"),
        )
        for n in settings.prompt_lengths
    ]
    rows.append(Metric("decode_ms_per_token", "decode ms/token (median)", "decode", _step_median_ms))
    rows += [
        Metric(
            decode_context_key(n),
            f"decode ms/token after {plural(n, 'token')} (median)",
            decode_context_task(n),
            _step_median_ms,
        )
        for n in settings.decode_contexts
    ]
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


def _step_p90_ms(answers: Sequence[dict[str, Any]]) -> float:
    """The 90th percentile of every decode step of ``answers`` (all rounds), in milliseconds."""
    steps = [1000.0 * s for answer in answers for s in answer["step_s"]]
    return float(np.percentile(steps, 90))


def _decode_growth(raw: RawResults, figures: dict[str, Any], settings: BenchSettings) -> dict[str, float]:
    """Per growth context: the system's ms/token there over its own after the decode prompt (the decode run, or
    the run of as many steps after that prompt: ``BenchSettings.growth_over_context_run``), as the ratio of the two
    medians and as the median of the per-round ratios."""
    base_task = growth_base_task(settings)
    base_key = decode_context_key(settings.decode_prompt_length) if base_task != "decode" else "decode_ms_per_token"
    found: dict[str, float] = {}
    for n in settings.growth_contexts:
        found[decode_growth_key(n)] = figures[decode_context_key(n)] / figures[base_key]
        rounds = zip(raw.tasks[decode_context_task(n)], raw.tasks[base_task], strict=True)
        per_round = [_step_median_ms(longer) / _step_median_ms(base) for longer, base in rounds]
        found[decode_growth_key(n, paired=True)] = float(np.median(per_round))
    return found


def _system_figures(raw: RawResults, timed: Sequence[Metric], settings: BenchSettings) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for metric in timed:
        per_round = [metric.figure(answer) for answer in raw.tasks[metric.task]]
        figures[metric.key] = float(np.median(per_round))
    for key in [m.key for m in timed if m.key.startswith("first_token_ms/")]:
        prefill = figures.get(key.replace("first_token_ms/", "prefill_ms/"))
        if prefill is not None:  # what generation adds to the graph's own prefill: buffers, the first choice
            figures[key.replace("first_token_ms/", "first_token_overhead_ms/")] = figures[key] - prefill
    figures["decode_ms_per_token_p90"] = _step_p90_ms(raw.tasks["decode"])
    for n in settings.decode_contexts:
        figures[f"decode_ms_per_token_p90/{n}"] = _step_p90_ms(raw.tasks[decode_context_task(n)])
    figures.update(_decode_growth(raw, figures, settings))
    return figures


def paired_per_round(raw: RawResults, base: RawResults, metric: Metric) -> list[float]:
    """``metric`` of ``raw`` over ``base``'s, round by round (each pair measured moments apart)."""
    ours = [metric.figure(answer) for answer in raw.tasks[metric.task]]
    theirs = [metric.figure(answer) for answer in base.tasks[metric.task]]
    return [a / b for a, b in zip(ours, theirs, strict=True)]


def paired_ratios(raw: RawResults, base: RawResults, settings: BenchSettings) -> dict[str, float]:
    """Every timed figure of ``raw`` over ``base``'s: the median of the per-round ratios."""
    return {m.key: float(np.median(paired_per_round(raw, base, m))) for m in metrics(settings)}


def median_ratios(figures: dict[str, Any], base: dict[str, Any], settings: BenchSettings) -> dict[str, float]:
    """Every timed figure over the baseline's: the ratio of the two medians (what the table shows beside it)."""
    return {m.key: figures[m.key] / base[m.key] for m in metrics(settings) if base.get(m.key)}


@dataclass(frozen=True)
class BenchReport:
    """Figures per system (by label), ratios of each ONNX system to the baseline, and the run's context."""

    settings: BenchSettings
    machine: dict[str, Any]
    parameter_bytes: int
    systems: dict[str, dict[str, Any]]  # label → kind, figures, memory, files, weight bytes, load seconds
    ratios: dict[str, dict[str, float]]  # onnx label → metric key → ratio of the medians (memory: × own weights)
    baseline: str | None
    paired_ratios: dict[str, dict[str, float]] = field(default_factory=dict)  # onnx label → per-round medians
    perplexity: dict[str, Any] | None = None  # --perplexity: the text and its windows (each system's figure is
    # systems[label]["perplexity"], its ratio to the baseline's ratios[label]["perplexity"])

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": self.settings.to_json(),
            "machine": self.machine,
            "parameter_bytes": self.parameter_bytes,
            "baseline": self.baseline,
            "systems": self.systems,
            "ratios": self.ratios,
            "paired_ratios": self.paired_ratios,
            "perplexity": self.perplexity,
        }


def _weight_bytes(raw: RawResults, parameter_bytes: int) -> int:
    """The bytes of weights a system holds: an export's own (quantized) tensors, else the checkpoint's."""
    files = raw.load.get("files") or {}
    return int(files.get("weight_bytes") or parameter_bytes)


def _weight_ratios(system: dict[str, Any]) -> dict[str, float]:
    memory, files, weights = system["memory"], system.get("files") or {}, system["weight_bytes"]
    found = {
        "rss_ready_per_weight_byte": memory["rss_ready"] / weights,
        "peak_rss_after_generate_per_weight_byte": memory["peak_rss_after_generate"] / weights,
    }
    if files:
        found["model_files_per_weight_byte"] = files["model_files"] / weights
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
            "figures": _system_figures(raw, timed, settings),
            "memory": _memory(raw),
            "files": raw.load.get("files"),
            "weight_bytes": _weight_bytes(raw, parameter_bytes),
        }
    base = next((raw for raw in raws if raw.spec.kind == "eager"), None)
    ratios: dict[str, dict[str, float]] = {}
    paired: dict[str, dict[str, float]] = {}
    for raw in raws:
        if raw.spec.kind != "onnx":
            continue
        system = systems[raw.spec.label]
        found = median_ratios(system["figures"], systems[base.spec.label]["figures"], settings) if base else {}
        ratios[raw.spec.label] = {**found, **_weight_ratios(system)}
        if base is not None:
            paired[raw.spec.label] = paired_ratios(raw, base, settings)
    return BenchReport(settings, machine, parameter_bytes, systems, ratios, base.spec.label if base else None, paired)
