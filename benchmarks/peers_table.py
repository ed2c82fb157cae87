"""The peers side-by-side's JSON (benchmarks/peers_side_by_side.py) as a Markdown table with its context.

Usage: python benchmarks/peers_table.py RESULT.json [--pair-with LABEL ...] > RESULT.md

One row per system: prefill of the 128-token prompt as generation pays it (after a decode) and decode ms/token,
each with its ratio × PyTorch eager paired per round (lower is faster), the lowest–highest of the per-round ratios,
peak RSS, the model's files and the 64 greedy tokens against eager's. A run with ``--decode-contexts`` adds a second
table: decode ms/token after the 128-token prompt and after each longer one, each × eager, and each system's
ms/token after the longest over after 128 (its own, per round); without them the output is as it was.

Each ``--pair-with LABEL`` adds a column to each table: every system's prefill and decode, and its growth, over
LABEL's in the same round, the median and the rounds where it was no larger. A machine that slows down for a round
slows every system measured in that round alike, and the pairing cancels it; the growth's own spread across rounds
is several times the gap between systems.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

MIB = 2**20

HEADER = (
    "| system | prefill 128 after a decode, ms (× eager) | decode ms/token (× eager) | × eager per round, "
    "prefill / decode | peak RSS, MiB | model files, MB | 64 tokens vs eager |"
)


def _timing(entry: dict[str, Any], key: str, baseline: bool) -> str:
    text = f"{entry['median'][key]:,.1f}"
    return text if baseline else f"{text} ({entry['ratio'][key]:.2f}×)"


def _spread(entry: dict[str, Any], key: str) -> str:
    rounds = entry["ratio_rounds"][key]
    return f"{min(rounds):.2f}–{max(rounds):.2f}"


def rows(report: dict[str, Any], pair_with: tuple[str, ...] = ()) -> list[str]:
    """The table's rows, systems in the run's order (the baseline first). Each of ``pair_with`` (a system's label)
    adds a column: every system's prefill and decode over that system's, per round (KeyError for a label the run
    does not have)."""
    _check_labels(report, pair_with)
    paired_headings = "".join(f" prefill / decode ÷ {label}'s, per round: median (rounds ≤ 1) |" for label in pair_with)
    lines = [HEADER + paired_headings, "|---" * (7 + len(pair_with)) + "|"]
    baseline = report["baseline"]
    for label, entry in report["peers"].items():
        system = report["systems"][label]
        files = system.get("files") or {}
        model_files = f"{files['model_files'] / 1e6:,.1f}" if "model_files" in files else "—"
        spread = (
            "—" if label == baseline else f"{_spread(entry, 'prefill_ms')} / {_spread(entry, 'decode_ms_per_token')}"
        )
        cells = [
            label,
            _timing(entry, "prefill_ms", label == baseline),
            _timing(entry, "decode_ms_per_token", label == baseline),
            spread,
            f"{system['memory']['peak_rss_after_generate'] / MIB:,.0f}",
            model_files,
            "reference" if label == baseline else report["greedy"]["agreement"][label],
            *(_paired_timings(report, label, other) for other in pair_with),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _contexts(report: dict[str, Any]) -> list[int]:
    """The run's extra decode contexts (none in a run without them, or in a JSON from before they existed)."""
    return [int(n) for n in report["settings"].get("decode_contexts") or []]


def _paired(report: dict[str, Any], label: str, other: str, key: str, field: str = "ratio_rounds") -> str:
    """``label``'s per-round figure ``key`` over ``other``'s, round by round: the median and the rounds where it was
    no larger. ``field`` 'ratio_rounds': the figure × the baseline's in that round (the baseline cancels, so this is
    the two systems' own times paired per round); 'rounds': the figure itself (a growth)."""
    ours = np.asarray(report["peers"][label][field][key])
    theirs = np.asarray(report["peers"][other][field][key])
    paired = ours / theirs
    return f"{float(np.median(paired)):.3f} ({int((paired <= 1.0).sum())}/{paired.size})"


def _paired_timings(report: dict[str, Any], label: str, other: str) -> str:
    """Prefill and decode of ``label`` over ``other``'s, each paired per round (:func:`_paired`)."""
    return f"{_paired(report, label, other, 'prefill_ms')} / {_paired(report, label, other, 'decode_ms_per_token')}"


def _check_labels(report: dict[str, Any], pair_with: tuple[str, ...]) -> None:
    missing = [label for label in pair_with if label not in report["peers"]]
    if missing:
        raise KeyError(f"no system labelled {missing[0]!r} in this run")


def context_rows(report: dict[str, Any], pair_with: tuple[str, ...] = ()) -> list[str]:
    """The second table, decode as the context grows, and a line saying how it was measured; nothing where the run
    had no ``decode_contexts``. Each of ``pair_with`` (a system's label) adds a column: every system's growth over
    that system's, per round (KeyError for a label the run does not have)."""
    contexts = _contexts(report)
    if not contexts:
        return []
    settings, baseline = report["settings"], report["baseline"]
    base, longest = settings["decode_prompt_length"], max(contexts)
    each = settings.get("context_new_tokens", 16)
    keys = ["decode_ms_per_token", *(f"decode_ms_per_token/{n}" for n in contexts)]
    headings = [f"after {n:,} tokens (× eager)" for n in (base, *contexts)]
    over_run = base in contexts  # the growth is over the run of as many steps after the decode prompt
    if over_run:
        headings = [
            f"after {base:,} tokens, {settings['new_tokens']} new (× eager)",
            *(f"after {n:,} tokens, {each} new (× eager)" for n in contexts),
        ]
    growth = f"decode_growth/{longest}"
    _check_labels(report, pair_with)
    paired_headings = "".join(f" ÷ {label}'s, per round: median (rounds ≤ 1) |" for label in pair_with)
    steps = f", {each} new tokens each" if over_run else ""
    lines = [
        f"| system | decode ms/token {' | '.join(headings)} | after {longest:,} ÷ after {base:,}{steps}, per round |"
        + paired_headings,
        "|---" * (len(headings) + 2 + len(pair_with)) + "|",
    ]
    for label, entry in report["peers"].items():
        rounds = entry["rounds"][growth]
        ratio = f"{entry['median'][growth]:.2f}× ({min(rounds):.2f}–{max(rounds):.2f})"
        paired = [_paired(report, label, other, growth, field="rounds") for other in pair_with]
        cells = [label, *(_timing(entry, key, label == baseline) for key in keys), ratio, *paired]
        lines.append("| " + " | ".join(cells) + " |")
    over = (
        f"after {base:,} in the run of {each} new tokens, as many steps as after {longest:,} (the first steps after a "
        "prompt, slower than the rest on some systems, weigh alike in both)"
        if over_run
        else f"after {base:,}"
    )
    note = (
        f"Decode as the context grows, in the same rounds: (last − first token time) / (n − 1) of a generation after "
        f"a random prompt of {base:,} tokens (the decode above, {settings['new_tokens']} tokens) and of "
        f"{', '.join(f'{n:,}' for n in contexts)} tokens ({each} tokens each); "
        f"× eager paired per round; the last column is each system's own ms/token after {longest:,} tokens over "
        f"{over}, round by round: the median (lowest–highest)."
    )
    return [*lines, "", note]


def _versions(report: dict[str, Any]) -> str:
    """Each venv's versions, one clause per venv."""
    clauses = []
    for name, venv in report["venvs"].items():
        listed = ", ".join(f"{package} {version}" for package, version in sorted(venv["versions"].items()))
        clauses.append(f"{name} venv: {listed}")
    return "; ".join(clauses)


def _peer_settings(info: dict[str, dict[str, Any]]) -> str:
    """What the peers resolved, from what each reported of itself (one example of each kind)."""
    notes = []
    openvino = next((i for label, i in info.items() if label.startswith("OpenVINO")), None)
    if openvino:
        defaults = openvino["cpu_defaults"]
        notes.append(
            f"OpenVINO's CPU defaults here: {defaults['INFERENCE_PRECISION_HINT']} compute, "
            f"{defaults['KV_CACHE_PRECISION']} KV cache"
        )
    llama = next((i for label, i in info.items() if label.startswith("llama.cpp")), None)
    if llama:
        kv = "f16" if llama["kv_cache_types"] == [1, 1] else f"ggml types {llama['kv_cache_types']}"
        libraries = ", ".join(llama.get("libraries", []))
        notes.append(
            f"llama.cpp: {kv} KV cache, flash attention {llama['flash_attn_type']}, "
            f"`{llama['system_info'].strip(' |')}`" + (f" ({libraries})" if libraries else "")
        )
    ct2 = {label: i["compute_type"] for label, i in info.items() if label.startswith("CTranslate2")}
    if ct2:
        notes.append("CTranslate2 compute types: " + ", ".join(f"{label} {kind}" for label, kind in ct2.items()))
    return "; ".join(notes)


def _other_work(report: dict[str, Any]) -> str:
    """What other processes took of the CPU during the rounds, and a warning where that was much."""
    other, cores = report.get("other_work"), report["machine"]["cpu_count"]
    if not other:
        return ""
    text = (
        f"Other processes kept {other['other_cores']:.2f} of the {cores} cores busy on average during the rounds "
        f"(the hypervisor took {other['steal_cores']:.2f}). "
    )
    if other["other_cores"] + other["steal_cores"] > 0.1 * cores:
        text += (
            "**The machine was busy**: every system's times are inflated, OpenMP-based runtimes' (torch, "
            "llama.cpp) the most, so the ratios × eager flatter the others. "
        )
    return text


def context(report: dict[str, Any]) -> str:
    m, s = report["machine"], report["settings"]
    flags = report.get("cpu_flags") or {}
    have = ", ".join(flag for flag, present in flags.items() if present) or "—"
    lack = ", ".join(flag for flag, present in flags.items() if not present) or "—"
    return (
        f"`benchmarks/peers_side_by_side.sh`: one `gpt2_onnx.app.bench` run, {s['repeats']} interleaved rounds after "
        f"{s['warmup']} warm-up, the systems' order rotated each round, each system in its own process and venv, "
        f"{s.get('settle_s', 0)} s of pause before each timed task (the previous system's threads go idle); "
        f"{s['threads']} threads everywhere, batch 1, a {s['decode_prompt_length']}-token prompt, "
        f"{s['new_tokens']} new tokens, greedy, end-of-text ignored. One checkpoint for all: `random:gpt2` seed 0 "
        f"(GPT-2-small dimensions) saved by `benchmarks/save_checkpoint.py`, converted by each tool. Prefill: the "
        f"time to first token of a generation that follows the same system's decode run; decode: (last − first "
        f"token time) / {s['new_tokens'] - 1}; both taken on the host, ratios × {report['baseline']} paired per "
        f"round (transformers, {s['attention']} attention, `logits_to_keep=1`). Tokens: each system's "
        f"{s['new_tokens']} greedy tokens against eager's (eager attention), step counted from 0. "
        f"Machine: {m['cpu']}, {m['cpu_count']} logical cores, {m['memory_bytes'] / 2**30:.0f} GiB, "
        f"{m['platform']}; CPU features present: {have}; absent: {lack}; load average {m['load_average']} before, "
        f"{m.get('load_average_after')} after (the bench's own {s['threads']} threads count in it). "
        f"{_other_work(report)}"
        f"Peers: {_peer_settings(report['greedy'].get('info', {}))}. Versions: {_versions(report)}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("result", type=Path, help="the side-by-side's JSON")
    parser.add_argument(
        "--pair-with", action="append", default=[], metavar="LABEL", help="a system to pair the others with"
    )
    args = parser.parse_args()
    report = json.loads(args.result.read_text(encoding="utf-8"))
    try:
        _check_labels(report, tuple(args.pair_with))
    except KeyError as exc:
        parser.error(f"{exc.args[0]} ({args.result})")
    print("\n".join(rows(report, tuple(args.pair_with))))
    print()
    by_context = context_rows(report, tuple(args.pair_with))
    if by_context:
        print("\n".join(by_context))
        print()
    print(context(report))


if __name__ == "__main__":
    main()
