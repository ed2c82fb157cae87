"""``bench``'s table: one row per figure with the direction that is better, one column per system, then one ratio
column per ONNX system. Every ratio agrees with the figures printed in its row: timings are the system's median
over the baseline's median; memory and files are over the system's own weight bytes, a row of the table too.
With --decode-contexts, a row per extra context and, below it, each system's ms/token there over its own after the
decode prompt (the two medians printed)."""

from __future__ import annotations

from gpt2_onnx.app.bench.report import MIB, BenchReport, decode_context_key, decode_growth_key, metrics

__all__ = ["render_table"]

LOWER, HIGHER = "lower", "higher"
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


def _cells(report: BenchReport, path: tuple[str, ...], fmt: str, scale: float = 1.0) -> list[str]:
    """``system[path[0]][path[1]]… / scale`` for each system, formatted; "—" where a system lacks it."""
    cells = []
    for system in report.systems.values():
        value: object = system
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        cells.append(format(value / scale, fmt) if isinstance(value, int | float) else "—")
    return cells


def _ratio_cells(report: BenchReport, key: str | None, fmt: str) -> list[str]:
    if key is None:
        return ["" for _ in report.ratios]
    return ["—" if key not in ratios else format(ratios[key], fmt) + "×" for ratios in report.ratios.values()]


def _growth_row(report: BenchReport, length: int) -> list[str]:
    """Each system's decode ms/token after ``length`` tokens over its own after the decode prompt (the ratio of
    the two medians printed above); no ratio to the baseline."""
    settings = report.settings
    label = f"decode ms/token after {length} ÷ after {settings.decode_prompt_length} tokens"
    if settings.growth_over_context_run:
        label += f", {settings.context_new_tokens} new tokens each"
    growth = [
        cell if cell == "—" else f"{cell}×" for cell in _cells(report, ("figures", decode_growth_key(length)), ".2f")
    ]
    return [label, LOWER, *growth, *_ratio_cells(report, None, "")]


def _rows(report: BenchReport) -> list[list[str]]:
    rows: list[list[str]] = []
    contexts = {decode_context_key(n): n for n in report.settings.growth_contexts}
    for metric in metrics(report.settings):
        better = HIGHER if metric.higher_is_better else LOWER
        rows.append(
            [
                metric.label,
                better,
                *_cells(report, ("figures", metric.key), ",.1f"),
                *_ratio_cells(report, metric.key, ".2f"),
            ]
        )
        if metric.key.startswith("first_token_ms/"):
            n = metric.key.split("/")[1]
            overhead = _cells(report, ("figures", f"first_token_overhead_ms/{n}"), ",.1f")
            label = f"time to first token − graph prefill, {n} (ms)"
            rows.append([label, LOWER, *overhead, *_ratio_cells(report, None, "")])
        if metric.key == "decode_ms_per_token":
            p90 = _cells(report, ("figures", "decode_ms_per_token_p90"), ",.1f")
            rows.append(["decode ms/token (p90)", LOWER, *p90, *_ratio_cells(report, None, "")])
        if metric.key in contexts:  # an extra context (--decode-contexts): its growth, per system
            rows.append(_growth_row(report, contexts[metric.key]))
    weights = _cells(report, ("weight_bytes",), ",.0f", MIB)
    rows.append(["weight bytes (MiB)", "", *weights, *_ratio_cells(report, None, "")])
    for text, key, ratio in _MEMORY_ROWS:
        memory = _cells(report, ("memory", key), ",.0f", MIB)
        rows.append([text, LOWER, *memory, *_ratio_cells(report, ratio, ".2f")])
    files = _cells(report, ("files", "model_files"), ",.1f", 1e6)
    file_ratios = _ratio_cells(report, "model_files_per_weight_byte", ".4f")
    rows.append(["graphs + weights on disk (MB)", LOWER, *files, *file_ratios])
    rows.append(["load (s)", LOWER, *_cells(report, ("timing", "load_s"), ".1f"), *_ratio_cells(report, None, "")])
    if report.perplexity is not None:
        w = report.perplexity
        label = f"perplexity, {w['scored_tokens']:,} tokens (window {w['window']}, stride {w['stride']})"
        figures = _cells(report, ("perplexity",), ",.4f")
        rows.append([label, LOWER, *figures, *_ratio_cells(report, "perplexity", ".5f")])
    return rows


def _footer(report: BenchReport) -> str:
    timings = (
        f"timings × {report.baseline}, the ratio of the medians shown (per-round paired ratios: --json)"
        if report.baseline
        else "no baseline for timings"
    )
    perplexity = (
        f"; perplexity of {report.perplexity['text']} × {report.baseline}'s"
        if report.perplexity is not None and report.baseline
        else ""
    )
    return (
        f"ratio columns: {timings}; memory and files × the system's own weight bytes (row 'weight bytes'){perplexity}"
    )


def render_table(report: BenchReport) -> str:
    header = ["", "better", *report.systems, *(f"{label} ratio" for label in report.ratios)]
    rows = [header, *_rows(report)]
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(header))]
    lines = [
        "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False)))
        for row in rows
    ]
    return "\n".join([*lines, _footer(report)])
