"""Turn ``gpt2-onnx bench --json`` output into the README's performance table (Markdown), with the machine and
library versions it was measured on.

Usage: python benchmarks/markdown_table.py bench.json > table.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

MIB = 2**20


def _timing_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, figure key, ratio format): the timing rows in table order."""
    settings = report["settings"]
    rows = [(f"prefill {n} tokens, ms", f"prefill_ms/{n}", "×") for n in settings["prompt_lengths"]]
    rows += [(f"time to first token ({n}), ms", f"first_token_ms/{n}", "×") for n in settings["prompt_lengths"]]
    rows += [
        ("decode ms/token, median", "decode_ms_per_token", "×"),
        ("decode ms/token, p90", "decode_ms_per_token_p90", ""),
        (f"tokens/s, batch {settings['batch_size']}", "batch_tokens_per_s", "×"),
    ]
    return rows


def cell(value: float | None, fmt: str, ratio: float | None, ratio_fmt: str = ".2f") -> str:
    if value is None:
        return "—"
    text = format(value, fmt)
    return f"{text} ({format(ratio, ratio_fmt)}×)" if ratio is not None else text


def table(report: dict[str, Any]) -> str:
    systems, ratios = report["systems"], report["ratios"]
    labels = list(systems)
    lines = ["| | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for text, key, _ in _timing_rows(report):
        cells = [cell(systems[s]["figures"].get(key), ",.1f", ratios.get(s, {}).get(key)) for s in labels]
        lines.append(f"| {text} | " + " | ".join(cells) + " |")
    for text, key, ratio_key in (
        ("RSS ready (both graphs run once), MiB", "rss_ready", "rss_ready_per_weight_byte"),
        (
            "peak RSS after generating, MiB",
            "peak_rss_after_generate",
            "peak_rss_after_generate_per_weight_byte",
        ),
    ):
        cells = [cell(systems[s]["memory"][key] / MIB, ",.0f", ratios.get(s, {}).get(ratio_key)) for s in labels]
        lines.append(f"| {text} | " + " | ".join(cells) + " |")
    files = [
        cell(systems[s]["files"]["model_files"] / 1e6, ",.1f", ratios[s].get("model_files_per_weight_byte"), ".4f")
        if systems[s].get("files")
        else "—"
        for s in labels
    ]
    lines.append("| graphs + weights, MB | " + " | ".join(files) + " |")
    return "\n".join(lines)


def context(report: dict[str, Any]) -> str:
    m, s = report["machine"], report["settings"]
    libraries = ", ".join(f"{name} {version}" for name, version in sorted(m["libraries"].items()))
    return (
        f"Measured with `gpt2-onnx bench` ({s['repeats']} interleaved rounds after {s['warmup']} warm-up, "
        f"{s['threads']} threads, batch 1, decode after a {s['decode_prompt_length']}-token prompt, "
        f"{s['new_tokens']} new tokens; eager baseline: transformers with {s['attention']} attention). "
        f"Ratios in brackets: timings × PyTorch eager (paired per round, lower is faster except tokens/s), "
        f"memory and files × the weight bytes of each export (fp32 475 MiB; int8/int4 their own, smaller). "
        f"{machine_sentence(m)} Libraries: {libraries}."
    )


def machine_sentence(m: dict[str, Any]) -> str:
    """The machine and its load before and after the run, from a report's ``machine``."""
    return (
        f"Machine: {m['cpu']}, {m['cpu_count']} logical cores, {m['memory_bytes'] / 2**30:.0f} GiB, {m['platform']}, "
        f"Python {m['python']}; load average {m['load_average']} before, {m.get('load_average_after')} after."
    )


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(table(report))
    print()
    print(context(report))


if __name__ == "__main__":
    main()
