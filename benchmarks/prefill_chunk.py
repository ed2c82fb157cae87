"""A long prompt's prefill chunk (``RuntimeOptions.prefill_chunk``): time to first token, decode ms/token after it and
peak RSS, per export, KV cache format and chunk size, each measurement in a fresh process (peak RSS is a process's
own), interleaved round by round; writes a Markdown table to benchmarks/results/.

    .venv/bin/python benchmarks/prefill_chunk.py OUT/fp32 OUT/int8 OUT/int4 --chunks 64 128 256 0 --rounds 3

Each process loads one export as the engine ships (``--kv-cache`` as given), runs one untimed generation of
``--new-tokens`` tokens after a prompt of ``--warm-context`` tokens (4; or the context's length, for an engine whose
pooled buffers and ONNX Runtime's arena have seen such a generation already), then one greedy generation of
``--new-tokens`` tokens after a random ``--context``-token prompt: its time to first token (the whole prompt's
prefill and the first choice) and the median time of each later token. Peak RSS is the process's high-water mark
(``VmHWM``, read as ``gpt2-onnx bench`` reads it) at the end: load, prefill and decode.
Rounds rotate the order of the configurations. Medians over rounds; ratios to ``--base`` chunk's figures of the same
export and cache, per round.

``--prompt-kernel dynamic`` loads every export with the prompt kernel (int8 and int4 exports). ``--before DIR`` (a
checkout of the code before a change, e.g. ``git worktree add /tmp/before HEAD~1``) runs every configuration a second
time with DIR's packages first on the path, in the same rounds, and adds each figure's ratio to it, paired per round:

    .venv/bin/python benchmarks/prefill_chunk.py OUT/int4 --kv-caches int8 --chunks 128 --prompt-kernel dynamic \
        --before /tmp/before
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from peers_report import cpu_line, save_result  # benchmarks/, beside this script

from gpt2_onnx.app.bench.memory import memory_snapshot
from gpt2_onnx_runtimes.generation import Generation
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

RESULTS = Path(__file__).resolve().parent / "results"
_FIGURES = ("first_token_ms", "decode_ms", "peak_rss_mib")
_THIS, _BEFORE = "this checkout", "before"  # the code a configuration runs
Config = tuple[str, str, int, str]  # export folder's name, KV cache, chunk, code


def one(
    folder: Path,
    kv_cache: str,
    chunk: int,
    context: int,
    new_tokens: int,
    threads: int,
    prompt_kernel: str,
    warm_context: int,
) -> dict[str, float]:
    """One configuration in this process: its figures (see the module docstring)."""
    options = RuntimeOptions(
        intra_op_threads=threads,
        kv_cache=kv_cache,  # type: ignore[arg-type]
        prefill_chunk=chunk,
        prompt_kernel=prompt_kernel,  # type: ignore[arg-type]
    )
    loaded = LoadedExport.load(folder, options)
    vocab = loaded.manifest.dims.vocab_size
    warm = np.random.default_rng(1).integers(0, vocab, warm_context).tolist()
    Generation(loaded, [warm], GenerationOptions(max_new_tokens=new_tokens, ignore_eos=True)).run()
    prompt = np.random.default_rng(0).integers(0, vocab, context).tolist()
    times = []
    start = time.perf_counter()
    for _ in Generation(loaded, [prompt], GenerationOptions(max_new_tokens=new_tokens, ignore_eos=True)).steps():
        times.append(time.perf_counter())
    return {
        "first_token_ms": 1000 * (times[0] - start),
        "decode_ms": 1000 * float(np.median(np.diff(times))),
        "peak_rss_mib": memory_snapshot()["peak_rss"] / 2**20,
    }


def _child(args: argparse.Namespace, folder: Path, kv_cache: str, chunk: int, code: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--one", str(folder), kv_cache, str(chunk)]
    command += ["--context", str(args.context), "--new-tokens", str(args.new_tokens), "--threads", str(args.threads)]
    command += ["--prompt-kernel", args.prompt_kernel, "--warm-context", str(args.warm_context)]
    env = dict(os.environ)
    if code == _BEFORE:  # the other checkout's packages before this one's (installed editable from this checkout)
        paths = [str(args.before / part) for part in ("core", "exporters", "runtimes", "")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{folder.name} {kv_cache} chunk {chunk} ({code}) failed:\n{done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def measure(args: argparse.Namespace) -> dict[Config, dict[str, list[float]]]:
    codes = [_THIS, _BEFORE] if args.before else [_THIS]
    configs = list(itertools.product(args.folders, args.kv_caches, args.chunks, codes))
    found: dict[Config, dict[str, list[float]]] = {
        (folder.name, kv, chunk, code): {figure: [] for figure in _FIGURES} for folder, kv, chunk, code in configs
    }
    for number in range(args.rounds):
        shift = number % len(configs)
        for folder, kv, chunk, code in configs[shift:] + configs[:shift]:
            for figure, value in _child(args, folder, kv, chunk, code).items():
                found[(folder.name, kv, chunk, code)][figure].append(value)
        print(f"round {number + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    return found


def _commit(checkout: Path) -> str:
    """``checkout``'s commit, short, or its path where git cannot say."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"commit {done.stdout.strip()}" if done.returncode == 0 else f"`{checkout}`"


def report(found: dict[Config, dict[str, list[float]]], args: argparse.Namespace) -> str:
    before = f" and to the same configuration run with the packages of {_commit(args.before)}" if args.before else ""
    kernel = f", prompt kernel {args.prompt_kernel}" if args.prompt_kernel != "export" else ""
    lines = [
        f"# Prefill chunk: a {args.context}-token prompt, then {args.new_tokens} tokens{kernel}",
        "",
        f"After an untimed generation with a {args.warm_context}-token prompt.",
        "",
        f"CPU: {cpu_line()}, {args.threads} intra-op threads; `benchmarks/prefill_chunk.py`, each configuration in a "
        f"fresh process, {args.rounds} rounds in rotated order. Chunk 0: the whole prompt in one run. Time to first "
        "token: the prompt's prefill and the first choice; decode: the median later token; peak RSS: the process's "
        f"high-water mark over load, prefill and decode. Medians over rounds; ratios to chunk {args.base} of the "
        f"same export, cache and code{before}, paired per round.",
        "",
        f"The code: this checkout ({_commit(Path(__file__).resolve().parent.parent)}, with any uncommitted changes)"
        + (f"; before: {_commit(args.before)}." if args.before else "."),
        "",
        "| export | KV cache | chunk | code | time to first token (ms) | × chunk "
        f"{args.base} | × before | decode (ms/token) | × chunk {args.base} | × before | peak RSS (MiB) | × before |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def paired(figures: dict[str, list[float]], other: dict[str, list[float]] | None, figure: str) -> str:
        return f"{float(np.median(np.divide(figures[figure], other[figure]))):.2f}" if other else "—"

    for (name, kv, chunk, code), figures in found.items():
        base = found.get((name, kv, args.base, code))
        earlier = found.get((name, kv, chunk, _BEFORE)) if code == _THIS else None
        med = {figure: float(np.median(values)) for figure, values in figures.items()}
        lines.append(
            f"| {name} | {kv} | {chunk or 'whole'} | {code} | {med['first_token_ms']:.0f} | "
            f"{paired(figures, base, 'first_token_ms')} | {paired(figures, earlier, 'first_token_ms')} | "
            f"{med['decode_ms']:.2f} | {paired(figures, base, 'decode_ms')} | "
            f"{paired(figures, earlier, 'decode_ms')} | "
            f"{med['peak_rss_mib']:.0f} | {paired(figures, earlier, 'peak_rss_mib')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--chunks", nargs="+", type=int, default=[64, 128, 256, 0])
    parser.add_argument("--kv-caches", nargs="+", default=["float32", "int8"], choices=["float32", "int8"])
    parser.add_argument("--base", type=int, default=256, help="the chunk the ratios are to")
    parser.add_argument("--context", type=int, default=1000)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-kernel", default="export", choices=["export", "dynamic"])
    parser.add_argument(
        "--warm-context",
        type=int,
        default=4,
        help="the untimed generation's prompt length (the context: a warm engine)",
    )
    parser.add_argument("--before", type=Path, help="a checkout of the code before a change, run beside this one")
    parser.add_argument("--suffix", default="-prefill-chunk", help="the results' name: <UTC stamp><suffix>.md")
    parser.add_argument("--one", nargs=3, metavar=("FOLDER", "KV_CACHE", "CHUNK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        folder, kv, chunk = args.one
        figures = one(
            Path(folder),
            kv,
            int(chunk),
            args.context,
            args.new_tokens,
            args.threads,
            args.prompt_kernel,
            args.warm_context,
        )
        print(json.dumps(figures))
        return
    if not args.folders:
        parser.error("give at least one export folder")
    found = measure(args)
    text = report(found, args)
    settings = {key: str(value) for key, value in vars(args).items() if key not in ("folders", "one")}
    rounds = [
        {"export": name, "kv_cache": kv, "chunk": chunk, "code": code, **figures}
        for (name, kv, chunk, code), figures in found.items()
    ]
    raw = {"cpu": cpu_line(), "settings": settings, "rounds": rounds}
    path = save_result(RESULTS, args.suffix, text, raw)
    print(text + f"\nwritten: {path} and its .json")


if __name__ == "__main__":
    main()
