"""The Optimum side-by-side's JSON (benchmarks/optimum_side_by_side.py) as a Markdown table with its context.

Usage: python benchmarks/optimum_table.py RESULT.json > RESULT.md

Columns: each system's figure (timings with their paired ratio × PyTorch eager in brackets), then gpt2-onnx ÷
each Optimum column: timings paired per round, memory and files as plain quotients. Lower is better everywhere
except tokens/s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from markdown_table import cell, machine_sentence  # this folder: run as python benchmarks/optimum_table.py

MIB = 2**20

# (row text, figure key): timings, with ratios × eager and ours ÷ Optimum paired per round.
_TIMINGS = (
    ("prefill 128 tokens, ms (median)", "prefill_ms/128"),
    ("time to first token (128-token prompt), ms", "first_token_ms/128"),
    ("decode ms/token, median", "decode_ms_per_token"),
    ("decode ms/token, p90", "decode_ms_per_token_p90"),
    ("tokens/s, batch 4 (higher is better)", "batch_tokens_per_s"),
)
# (row text, section, key, scale, format)
_SIZES = (
    ("RSS before loading (interpreter + libraries), MiB", "memory", "rss_before_load", MIB, ",.0f"),
    ("RSS after loading, MiB", "memory", "rss_after_load", MIB, ",.0f"),
    ("RSS ready (prefill + one decode step run), MiB", "memory", "rss_ready", MIB, ",.0f"),
    ("RSS after generating, MiB", "memory", "rss_after_generate", MIB, ",.0f"),
    ("peak RSS, MiB", "memory", "peak_rss_after_generate", MIB, ",.0f"),
    ("graphs + weights on disk, MB", "files", "model_files", 1e6, ",.1f"),
)


def _label(name: str) -> str:
    return {
        "pytorch-eager": "PyTorch eager",
        "gpt2-onnx": "gpt2-onnx fp32 (default: merged session)",
        "gpt2-onnx+prepack": "gpt2-onnx fp32, split, prepacked per session",
        "optimum-onnx": "Optimum-ONNX (tie kept)",
        "optimum-onnx-untied": "Optimum-ONNX (tie duplicated)",
    }.get(name, name)


def _timing_row(report: dict[str, Any], text: str, key: str) -> str:
    systems, ratios = report["systems"], report["ratios"]
    cells = []
    for name, system in systems.items():
        cells.append(cell(system["figures"].get(key), ",.1f", ratios.get(name, {}).get(key)))
    cells += [f"{vs['ratios'][key]:.2f}×" if key in vs["ratios"] else "—" for vs in report["vs_optimum"]]
    return f"| {text} | " + " | ".join(cells) + " |"


def _size_row(report: dict[str, Any], text: str, section: str, key: str, scale: float, fmt: str) -> str:
    systems = report["systems"]

    def value(name: str) -> float | None:
        found = (systems[name].get(section) or {}).get(key)
        return None if found is None else float(found)

    values = {name: value(name) for name in systems}
    cells = ["—" if v is None else format(v / scale, fmt) for v in values.values()]
    for pair in report["vs_optimum"]:
        ours, theirs = values[pair["system"]], values[pair["baseline"]]
        cells.append("—" if ours is None or not theirs else f"{ours / theirs:.2f}×")
    return f"| {text} | " + " | ".join(cells) + " |"


def table(report: dict[str, Any]) -> str:
    names = list(report["systems"])
    pairs = report["vs_optimum"]
    header = [*map(_label, names), *(f"{_label(p['system'])} ÷ {_label(p['baseline'])}" for p in pairs)]
    lines = ["| | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|"]
    lines += [_timing_row(report, text, key) for text, key in _TIMINGS]
    lines += [_size_row(report, *row) for row in _SIZES]
    tables = report["vocab_tables"]
    cells = [str(tables[name]["count"]) if name in tables else "1 (tied in memory)" for name in names]
    cells += ["—"] * len(pairs)
    lines.append("| vocabulary-sized tensors stored (1: tie kept) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def context(report: dict[str, Any]) -> str:
    m, s, greedy = report["machine"], report["settings"], report["greedy"]
    ours = ", ".join(f"{n} {v}" for n, v in sorted(m["libraries"].items()))
    theirs = ", ".join(f"{n} {v}" for n, v in report["optimum_env"].items() if v)
    spread = "; ".join(
        f"{pair['system']} ÷ {pair['baseline']} {min(pair['decode_ratio_per_round']):.2f}–"
        f"{max(pair['decode_ratio_per_round']):.2f}"
        for pair in report["vs_optimum"]
        if pair.get("decode_ratio_per_round")  # recorded since the second run
    )
    agree = (
        f"all {len(greedy['tokens'])} systems chose the same {s['new_tokens']} greedy tokens"
        if greedy["agree"]
        else f"greedy tokens differ: first difference per system {greedy['first_difference']}"
    )
    return (
        f"`benchmarks/optimum_side_by_side.sh`: one `gpt2_onnx.app.bench` run, {s['repeats']} interleaved rounds after "
        f"{s['warmup']} warm-up, each system in its own process; {s['threads']} threads (ONNX Runtime intra-op and "
        f"torch), batch 1, decode after a {s['decode_prompt_length']}-token prompt, {s['new_tokens']} new tokens, "
        f"greedy. Same weights everywhere: `random:gpt2` seed 0 saved as a safetensors checkpoint, exported by "
        f"`gpt2-onnx export` and by Optimum's `main_export` (text-generation-with-past); {agree}. "
        f"Ratios in brackets: timings × PyTorch eager, paired per round (lower is faster except tokens/s); the "
        f"÷ columns: timings paired per round, memory and files plain quotients. "
        + (f"Decode ratio per round, lowest–highest: {spread}. " if spread else "")
        + f"{machine_sentence(m)} "
        f"Main venv (eager, gpt2-onnx): {ours}. Optimum venv: {theirs}."
    )


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(table(report))
    print()
    print(context(report))


if __name__ == "__main__":
    main()
