"""Decode ms/token as the context grows: the KV cache copied every step (``in_place_kv`` off) against written in
place (on), per precision, beside PyTorch eager, interleaved in one process; writes benchmarks/results/.

    for p in fp32 int8 int4; do
      .venv/bin/gpt2-onnx export --model random:gpt2 --weights-seed 0 --precision $p -o benchmarks/out/$p
    done
    nice .venv/bin/python benchmarks/decode_context.py --exports benchmarks/out --rounds 3

Each measurement is one greedy generation through the runtime's own engine (``Generation``, as the Python API runs
it) after a random prompt of ``context`` tokens: the time of each token after the first (one decode step and the
choice), median over the generation's steps and then over rounds. PyTorch eager (transformers, DynamicCache) runs
the same prompts through the same greedy loop as ``bench``. Every system runs with the same intra-op threads; ONNX
Runtime's threads do not spin between runs (so that they leave the cores to the next system at once), the same for
both of its modes. Rounds rotate the systems' order. The machine may be shared: ratios measured side by side are
what the figures say. PyTorch's OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE``, unless set): on a
machine whose cores other work keeps busy, spinning threads that wait for a descheduled peer at every operator's
barrier made eager decode 40× slower than on a quiet machine (measured), which says nothing about PyTorch.

Beside wall time, each of our steps' process CPU time is recorded (``process_time``: every thread's, so about
twice the wall time on 2 busy threads): on a shared machine it shows the work a step does with less of the
waiting for a core.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads its OpenMP runtime (see the docstring)
REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from peers_report import cpu_line  # noqa: E402  # benchmarks/, beside this script

from gpt2_onnx_core.bench_protocol import GenerationTiming  # noqa: E402  # after the path
from gpt2_onnx_runtimes.export_folder import ExportFolder  # noqa: E402
from gpt2_onnx_runtimes.generation import Generation  # noqa: E402
from gpt2_onnx_runtimes.options import GenerationOptions  # noqa: E402
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions  # noqa: E402
from gpt2_onnx_runtimes.session import LoadedExport  # noqa: E402

EAGER = "pytorch eager"
NO_SPIN = {"session.intra_op.allow_spinning": "0"}
# (prompt (1, C), new tokens) → each token's wall seconds after the first, and its process CPU seconds (or [])
Generate = Callable[[np.ndarray, int], tuple[list[float], list[float]]]


def _ours(folder: Path, in_place: str, threads: int) -> Generate:
    runtime = RuntimeOptions(intra_op_threads=threads, layout="merged", in_place_kv=in_place, session_config=NO_SPIN)  # type: ignore[arg-type]
    loaded = LoadedExport.load(folder, runtime)
    if loaded.steps.in_place != (in_place == "on"):
        raise RuntimeError(f"{folder}: in_place_kv {in_place} was not applied")

    def generate(ids: np.ndarray, new_tokens: int) -> tuple[list[float], list[float]]:
        options = GenerationOptions(max_new_tokens=new_tokens, ignore_eos=True)
        generation = Generation(loaded, ids.tolist(), options)
        start, walls, cpus = time.perf_counter(), [], []
        for _ in generation.steps():
            walls.append(time.perf_counter())
            cpus.append(time.process_time())
        steps = GenerationTiming.from_marks(start, walls).step_s
        return steps, [b - a for a, b in itertools.pairwise(cpus)]

    return generate


def _eager(model: str, seed: int, threads: int) -> Generate:
    from gpt2_onnx_exporters.eager_system import EagerSystem

    system = EagerSystem(model, seed, threads, "cpu", "eager")
    system.load()
    return lambda ids, new_tokens: (system.generate(ids, new_tokens).step_s, [])


def systems(exports: Path, precisions: list[str], model: str, seed: int, threads: int) -> dict[str, Generate]:
    found = {EAGER: _eager(model, seed, threads)}
    for precision in precisions:
        for label, mode in (("copied", "off"), ("in place", "on")):
            found[f"{precision} {label}"] = _ours(exports / precision, mode, threads)
    return found


Found = dict[str, dict[str, dict[int, list[float]]]]  # "wall" / "cpu" → system → context → one median per round


def measure(chosen: dict[str, Generate], contexts: list[int], rounds: int, new_tokens: int, vocab: int) -> Found:
    """ms/token medians per (system, context), one per round: wall time, and process CPU time where recorded."""
    rng = np.random.default_rng(0)
    prompts = {c: rng.integers(0, vocab, (1, c)) for c in contexts}  # (1, C)
    names = list(chosen)
    for name in names:  # warm-up: every system, the longest context once
        chosen[name](prompts[max(contexts)], 4)
    found: Found = {kind: {name: {c: [] for c in contexts} for name in names} for kind in ("wall", "cpu")}
    for index in range(rounds):
        order = names[index % len(names) :] + names[: index % len(names)]
        for context in contexts:
            for name in order:
                time.sleep(0.2)  # the previous system's threads go idle
                walls, cpus = chosen[name](prompts[context], new_tokens)
                found["wall"][name][context].append(1000 * float(np.median(walls)))
                if cpus:
                    found["cpu"][name][context].append(1000 * float(np.median(cpus)))
        print(f"round {index + 1}/{rounds} done", file=sys.stderr, flush=True)
    return found


def _versions() -> str:
    import onnxruntime
    import torch
    import transformers

    return f"onnxruntime {onnxruntime.__version__}, torch {torch.__version__}, transformers {transformers.__version__}"


def _medians(by_system: dict[str, dict[int, list[float]]]) -> dict[str, dict[int, float]]:
    return {name: {c: float(np.median(v)) for c, v in by.items()} for name, by in by_system.items() if all(by.values())}


def report(found: Found, contexts: list[int], settings: dict[str, object]) -> str:
    wall, cpu = _medians(found["wall"]), _medians(found["cpu"])
    first, last = contexts[0], contexts[-1]
    head = " | ".join(f"ms/token at {c}" for c in contexts)
    lines = [
        "# Decode ms/token as the context grows: the KV cache copied every step against written in place",
        "",
        f"GPT-2-small dimensions (`{settings['model']}`, seed {settings['seed']}), batch 1, "
        f"{settings['threads']} intra-op threads, {settings['new_tokens']} new tokens after a prompt of each length, "
        f"{settings['rounds']} rounds interleaved in one process, medians. CPU: {settings['cpu']}; "
        f"{settings['versions']}; load average {settings['load']} on {settings['cores']} cores as it started: the "
        "machine was shared with other work, so the wall times are this run's, and the ratios, measured side by "
        "side, are what the figures say. CPU ms/token: the process's CPU time per step (every thread's).",
        "",
        f"| system | {head} | {last} ÷ {first} | × eager at {first} | × eager at {last} | "
        f"CPU ms/token at {first} / {last} | CPU {last} ÷ {first} |",
        "| --- | " + " | ".join("---" for _ in contexts) + " | --- | --- | --- | --- | --- |",
    ]
    for name, by in wall.items():
        cells = " | ".join(f"{by[c]:.2f}" for c in contexts)
        spent = cpu.get(name)
        cpu_cells = f"{spent[first]:.2f} / {spent[last]:.2f} | {spent[last] / spent[first]:.2f}" if spent else "— | —"
        lines.append(
            f"| {name} | {cells} | {by[last] / by[first]:.2f} | {by[first] / wall[EAGER][first]:.2f} | "
            f"{by[last] / wall[EAGER][last]:.2f} | {cpu_cells} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", type=Path, required=True, help="a folder holding one export per precision")
    parser.add_argument("--precisions", default="fp32,int8,int4")
    parser.add_argument("--contexts", default="128,512,1000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default="random:gpt2", help="the eager side's model: the exports' source")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    load = os.getloadavg()[0]
    chosen = systems(args.exports, args.precisions.split(","), args.model, args.seed, args.threads)
    folder = args.exports / args.precisions.split(",")[0]
    vocab = ExportFolder.open(folder).manifest.dims.vocab_size
    found = measure(chosen, contexts, args.rounds, args.new_tokens, vocab)
    settings: dict[str, object] = {
        "model": args.model,
        "seed": args.seed,
        "threads": args.threads,
        "new_tokens": args.new_tokens,
        "rounds": args.rounds,
        "cpu": cpu_line(),
        "machine": platform.machine(),
        "versions": _versions(),
        "load": f"{load:.1f}",
        "cores": os.cpu_count(),
    }
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = REPO / "benchmarks" / "results" / f"{stamp}-decode-context"
    raw = {
        "settings": settings,
        "ms_per_token": {
            kind: {name: {str(c): v for c, v in by.items()} for name, by in systems.items()}
            for kind, systems in found.items()
        },
    }
    out.with_suffix(".json").write_text(json.dumps(raw, indent=2) + "\n")
    text = report(found, contexts, settings)
    out.with_suffix(".md").write_text(text)
    print(text)
    print(f"written: {out}.md and .json")


if __name__ == "__main__":
    main()
