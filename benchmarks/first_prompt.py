"""The first prompts after a load: time to first token of each of several different prompts in a fresh process,
with the weights file's private maps handed back as the runtime now does (``by-map``: ``MADV_DONTNEED`` where a
map's pages are the file's own, see gpt2_onnx_runtimes.mapped_pages) against ``MADV_PAGEOUT`` for every map (the
runtime's choice before), per export, interleaved round by round; writes benchmarks/results/<stamp>-first-prompt.

    .venv/bin/python benchmarks/first_prompt.py OUT/gpt2-onnx-int8 OUT/gpt2-onnx-int4 --rounds 5

Each process loads one export with the engine's defaults, then runs ``--prompts`` greedy generations of one token,
each after a different random ``--context``-token prompt (the same prompts in every process): the time to first
token of each (its prefill and the first choice). In an int8 or int4 export the tied embedding is both the head's
prepacked weight and the lookup's table, so the first prompts read embedding rows that no run has read since the
load handed its pages back; a page the kernel must read from the disk again is a major fault (``ru_majflt``),
counted per prompt. RSS: the process's resident set after the load and after the prompts, and its
high-water mark (``VmHWM``). Rounds rotate the order of the configurations; medians over rounds, and the first
prompt's time ÷ ``pageout``'s of the same export, paired per round.
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from peers_report import cpu_line, save_result  # benchmarks/, beside this script

from gpt2_onnx.app.bench.memory import memory_snapshot
from gpt2_onnx_runtimes import mapped_pages
from gpt2_onnx_runtimes.generation import Generation
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("pageout", "by-map")


def one(folder: Path, mode: str, prompts: int, context: int, threads: int) -> dict[str, float | list[float]]:
    """One configuration in this process: each prompt's time to first token (ms) and the page faults it took that
    the disk had to serve (major faults), and the RSS figures (MiB)."""
    if mode == "pageout":  # the runtime's advice before: every private map paged out
        mapped_pages.PrivateMap.advice = property(lambda _self: mapped_pages.MADV_PAGEOUT)  # type: ignore[method-assign,assignment]
    loaded = LoadedExport.load(folder, RuntimeOptions(intra_op_threads=threads))
    after_load = memory_snapshot()["rss"] / 2**20
    rng = np.random.default_rng(0)
    first_tokens, major_faults = [], []
    for _ in range(prompts):
        prompt = rng.integers(0, loaded.manifest.dims.vocab_size, context).tolist()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        start = time.perf_counter()
        for _ in Generation(loaded, [prompt], GenerationOptions(max_new_tokens=1, ignore_eos=True)).steps():
            first_tokens.append(1000 * (time.perf_counter() - start))
        major_faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults)
    memory = memory_snapshot()
    return {
        "first_token_ms": first_tokens,
        "major_faults": major_faults,
        "rss_after_load_mib": after_load,
        "rss_after_prompts_mib": memory["rss"] / 2**20,
        "peak_rss_mib": memory["peak_rss"] / 2**20,
    }


def _child(args: argparse.Namespace, folder: Path, mode: str) -> dict[str, float | list[float]]:
    command = [sys.executable, __file__, "--one", str(folder), mode]
    command += ["--prompts", str(args.prompts), "--context", str(args.context), "--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{folder.name} {mode} failed:\n{done.stderr[-2000:]}")
    figures: dict[str, float | list[float]] = json.loads(done.stdout.splitlines()[-1])
    return figures


Found = dict[tuple[str, str], list[dict[str, float | list[float]]]]  # (export, mode) → one figure set per round


def measure(args: argparse.Namespace) -> Found:
    configs = list(itertools.product(args.folders, MODES))
    found: Found = {(folder.name, mode): [] for folder, mode in configs}
    for number in range(args.rounds):
        shift = number % len(configs)
        for folder, mode in configs[shift:] + configs[:shift]:
            found[(folder.name, mode)].append(_child(args, folder, mode))
        print(f"round {number + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    return found


def report(found: Found, args: argparse.Namespace) -> str:
    heads = " | ".join(f"prompt {index + 1} (ms)" for index in range(args.prompts))
    lines = [
        f"# The first {args.prompts} prompts after a load ({args.context} tokens each, all different)",
        "",
        f"CPU: {cpu_line()}, {args.threads} intra-op threads; `benchmarks/first_prompt.py`, each configuration in a "
        f"fresh process, {args.rounds} rounds in rotated order. Time to first token of each prompt in turn (prefill "
        "and the first choice). pageout: every private map of the weights file paged out after the load (the "
        "runtime before); by-map: `MADV_DONTNEED` where a map's pages are the file's own (they stay in the page "
        "cache), `MADV_PAGEOUT` elsewhere (the runtime now). Medians over rounds; the ratio is prompt 1's time ÷ "
        "pageout's of the same export, paired per round. Major faults: page faults the disk served (`ru_majflt`), in "
        "prompt 1 and in the later prompts together. RSS in MiB.",
        "",
        f"| export | mode | {heads} | prompt 1 × pageout | major faults, prompt 1 / the rest | RSS after load | "
        "after the prompts | peak |",
        "| --- | --- | " + "---: | " * args.prompts + "---: | ---: | ---: | ---: | ---: |",
    ]
    for (name, mode), rounds in found.items():
        times = np.array([r["first_token_ms"] for r in rounds])  # (rounds, prompts)
        base = np.array([r["first_token_ms"] for r in found[(name, "pageout")]])
        ratio = float(np.median(times[:, 0] / base[:, 0]))
        cells = " | ".join(f"{value:.0f}" for value in np.median(times, axis=0))
        faults = np.array([r["major_faults"] for r in rounds])  # (rounds, prompts)
        rest = float(np.median(faults[:, 1:].sum(axis=1)))
        rss = [
            float(np.median([float(r[key]) for r in rounds]))
            for key in ("rss_after_load_mib", "rss_after_prompts_mib", "peak_rss_mib")
        ]  # type: ignore[arg-type]
        memory = " | ".join(f"{value:.0f}" for value in rss)
        lines.append(
            f"| {name} | {mode} | {cells} | {ratio:.2f} | {np.median(faults[:, 0]):.0f} / {rest:.0f} | {memory} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one", nargs=2, metavar=("FOLDER", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        folder, mode = args.one
        print(json.dumps(one(Path(folder), mode, args.prompts, args.context, args.threads)))
        return
    if not args.folders:
        parser.error("give at least one export folder")
    found = measure(args)
    text = report(found, args)
    settings = {key: value for key, value in vars(args).items() if key not in ("folders", "one")}
    rounds = [{"export": name, "mode": mode, "rounds": figures} for (name, mode), figures in found.items()]
    raw = {"cpu": cpu_line(), "settings": settings, "results": rounds}
    path = save_result(RESULTS, "-first-prompt", text, raw)
    print(text + f"\nwritten: {path} and its .json")


if __name__ == "__main__":
    main()
