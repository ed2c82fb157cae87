"""``gpt2-onnx serve`` with different options on the same requests from the same concurrent clients: which option
set answers more tokens per second on this machine.

Each repeat starts one server per option set in turn (the order rotating between repeats, so that neither always
follows the other), sends one warm-up round, then ``--rounds`` rounds, and stops it: one server up at a time, so
that an idle one takes nothing from the other. The requests and clients are ``benchmarks/serve_peers.py``'s: 48
prompts of 8..120 words, greedy, 32 tokens at most, not streamed, from 16 client threads.

Figures: tokens/s per round (completion tokens the server reports over the round's wall time); per option set the
median over every round; beside the first option set, the median over repeats of each repeat's ratio of mean
tokens/s (a repeat's servers started within a minute or two of each other) and in how many repeats it was higher.

    python benchmarks/serve_options.py EXPORT --variant "spinning=--spinning" --variant "sleeping=--no-spinning" \\
        --repeats 3 --out benchmarks/results/STAMP-serve-spinning-NAME.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.serve_load import requests  # noqa: E402  # after the path
from benchmarks.serve_peers import Outcomes, machine_now, one_round  # noqa: E402
from benchmarks.serve_process import ServeProcess  # noqa: E402


def measure(
    export: Path, variants: dict[str, list[str]], bodies: list[dict[str, Any]], clients: int, rounds: int, repeats: int
) -> dict[str, list[list[float]]]:
    """tokens/s per round, per repeat, per option set."""
    found: dict[str, list[list[float]]] = {name: [] for name in variants}
    names = list(variants)
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            with tempfile.TemporaryDirectory(prefix="serve-options-") as logs:
                server = ServeProcess(export, Path(logs), "--model-name", "bench", *variants[name]).start()
                try:
                    one_round(server.url, bodies[:clients], clients, {}, Outcomes("warm-up"))
                    outcomes = Outcomes(name)
                    for _ in range(rounds):
                        one_round(server.url, bodies, clients, {}, outcomes)
                finally:
                    server.stop()
            found[name].append([round(tokens / wall, 1) for _, tokens, wall in outcomes.rounds])
            print(f"repeat {repeat + 1}/{repeats}: {name} {found[name][-1]}", file=sys.stderr, flush=True)
    return found


def summary(found: dict[str, list[list[float]]]) -> list[dict[str, Any]]:
    first = next(iter(found.values()))
    rows = []
    for name, repeats in found.items():
        ratios = [float(np.mean(mine) / np.mean(base)) for mine, base in zip(repeats, first, strict=True)]
        rows.append(
            {
                "name": name,
                "tokens_per_s": round(float(np.median([t for rounds in repeats for t in rounds])), 1),
                "rounds": repeats,
                "ratio_to_first": round(float(np.median(ratios)), 3),
                "repeats_higher": sum(r > 1 for r in ratios),
            }
        )
    return rows


def table(results: dict[str, Any]) -> str:
    settings, machine = results["settings"], results["machine"]
    first = results["variants"][0]["name"]
    lines = [
        f"| export | options | tokens/s, median | tokens/s by repeat | × {first} (repeats higher) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in results["variants"]:
        options = results["options"][row["name"]]
        by_repeat = "; ".join(", ".join(f"{t:.0f}" for t in rounds) for rounds in row["rounds"])
        lines.append(
            f"| {results['export']} | {row['name']}: `{options or '(none)'}` | {row['tokens_per_s']:.1f} | {by_repeat} "
            f"| {row['ratio_to_first']:.3f} ({row['repeats_higher']}/{len(row['rounds'])}) |"
        )
    lines += [
        "",
        f"`gpt2-onnx serve` (one replica, 2 threads, 16 rows) with each option set, one server up at a time, "
        f"{settings['repeats']} repeats rotating the order, each a warm-up round then {settings['rounds']} rounds of "
        f"{settings['requests']} requests (prompts of 8..120 words, greedy, {settings['max_tokens']} tokens at most) "
        f"from {settings['clients']} client threads; tokens/s: the completion tokens the server reports over the "
        "round's wall time; ×: the median over repeats of the repeat's mean tokens/s ÷ the first option set's. "
        f"Machine: {machine['cpu']}, {machine['cpus']} cores, {machine['platform']}; load average "
        f"{machine['load_before'][0]:.2f} before, {machine['load_after'][0]:.2f} after; onnxruntime "
        f"{machine['onnxruntime']}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument(
        "--variant", action="append", metavar="NAME=OPTIONS", required=True,
        help="a name and the serve options it adds ('NAME=' for none); the first is the reference",
    )  # fmt: skip
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=48, help="requests per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per server start")
    parser.add_argument("--repeats", type=int, default=3, help="server starts per option set")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write (and .md beside it)")
    args = parser.parse_args()
    if any("=" not in given for given in args.variant):
        parser.error("each --variant is NAME=OPTIONS, e.g. 'sleeping=--no-spinning' ('NAME=' for none)")
    variants = {name: shlex.split(options) for name, options in (given.split("=", 1) for given in args.variant)}
    if len(variants) < 2:
        parser.error("give at least two --variant, with different names")
    machine = machine_now()
    bodies = requests(args.requests, args.max_tokens)
    found = measure(args.export, variants, bodies, args.clients, args.rounds, args.repeats)
    machine["load_after"] = os.getloadavg()
    results = {
        "export": args.export.name,
        "options": {name: " ".join(options) for name, options in variants.items()},
        "settings": {k: getattr(args, k) for k in ("clients", "requests", "rounds", "repeats", "max_tokens")},
        "machine": machine,
        "variants": summary(found),
    }
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
