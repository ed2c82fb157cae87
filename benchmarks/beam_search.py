"""Beam search speed: gpt2-onnx's runtime against transformers' ``generate``, both with 4 beams, in one run.

    python benchmarks/beam_search.py --export benchmarks/out/fp32 --out benchmarks/results/STAMP-beam.json

The export and the transformers model are the same seeded checkpoint (``random:gpt2``, seed 0: GPT-2-small
dimensions). Each system is a worker process of its own (own threads, own memory) that loads once, warms up, then
generates when the coordinator asks; the rounds alternate which system goes first. Every generation runs exactly
``--new-tokens`` steps (end-of-text ignored) on seeded prompts (``gpt2_onnx_core.bench_protocol.prompt_ids``).

Per step is the time between two consecutive calls of the logits-processor chain, which both loops make once per
step right after the decode run: one decode of all beams, log-softmax, processors, beam bookkeeping and the KV-cache
reorder. tokens/s counts the returned sequence's new tokens (batch × new tokens) over the whole generation,
prefill included. gpt2-onnx's worker also times its KV-cache reorder (``KvCacheRunner.reorder``) on its own.
``benchmarks/beam_search.sh`` runs it and writes the JSON and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CASES = [  # (prompts in the batch, prompt tokens)
    (1, 128),
    (4, 32),
]


def _marks() -> tuple[list[float], Callable[[], None]]:
    marks: list[float] = []
    return marks, lambda: marks.append(time.perf_counter())


def _ours(export: Path, threads: int, beams: int) -> Callable[[list[list[int]], int], dict[str, Any]]:
    import numpy as np

    from gpt2_onnx_runtimes.beam_generation import BeamSearch
    from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
    from gpt2_onnx_runtimes.options import GenerationOptions
    from gpt2_onnx_runtimes.processors import ProcessorChain
    from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
    from gpt2_onnx_runtimes.session import LoadedExport

    loaded = LoadedExport.load(export, RuntimeOptions(provider="cpu", intra_op_threads=threads, inter_op_threads=1))
    reorders: list[float] = []
    reorder = KvCacheRunner.reorder

    def timed_reorder(self: KvCacheRunner, rows: np.ndarray) -> None:
        start = time.perf_counter()
        reorder(self, rows)
        reorders.append(time.perf_counter() - start)

    KvCacheRunner.reorder = timed_reorder  # type: ignore[method-assign]  # this worker's own measurement

    def generate(prompts: list[list[int]], new_tokens: int) -> dict[str, Any]:
        options = GenerationOptions(max_new_tokens=new_tokens, num_beams=beams, ignore_eos=True)
        search = BeamSearch(loaded, prompts, options)
        marks, mark = _marks()

        def marker(scores: Any, rows: Any) -> Any:
            mark()
            return scores

        # the marker runs first in the chain, where transformers' does in its own
        search._processors = ProcessorChain((marker, *search._processors.processors))
        reorders.clear()
        start = time.perf_counter()
        results = search.run()
        total = time.perf_counter() - start
        return {
            "start": start,
            "marks": marks,
            "total_s": total,
            "reorder_s": list(reorders[1:]),  # the first is the expansion to one row per beam
            "tokens": [r.token_ids for r in results],
        }

    return generate


def _transformers(threads: int, beams: int) -> Callable[[list[list[int]], int], dict[str, Any]]:
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    from gpt2_onnx_exporters.source import load_source

    torch.set_num_threads(threads)
    model = load_source("random:gpt2", 0).model
    model.config._attn_implementation = "sdpa"  # transformers' own default for GPT-2
    model.eval()

    class Marker(LogitsProcessor):
        def __init__(self, mark: Callable[[], None]) -> None:
            self.mark = mark

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            self.mark()
            return scores

    def generate(prompts: list[list[int]], new_tokens: int) -> dict[str, Any]:
        marks, mark = _marks()
        ids = torch.tensor(prompts)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                num_beams=beams,
                max_new_tokens=new_tokens,
                eos_token_id=None,
                pad_token_id=50256,
                do_sample=False,
                logits_processor=LogitsProcessorList([Marker(mark)]),
            )
        total = time.perf_counter() - start
        return {"start": start, "marks": marks, "total_s": total, "tokens": out[:, ids.shape[1] :].tolist()}

    return generate


def worker(system: str, export: Path, threads: int, beams: int) -> None:
    """Answer one JSON request per stdin line ({"prompts": [[...]], "new_tokens": N}) with one JSON line."""
    generate = _ours(export, threads, beams) if system == "ours" else _transformers(threads, beams)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(generate(request["prompts"], request["new_tokens"])), flush=True)


class Worker:
    def __init__(self, system: str, args: argparse.Namespace) -> None:
        command = [sys.executable, __file__, "--worker", system, "--export", str(args.export)]
        command += ["--threads", str(args.threads), "--beams", str(args.beams)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.system = system
        self._read()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.system} worker ended early (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, prompts: list[list[int]], new_tokens: int) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"prompts": prompts, "new_tokens": new_tokens}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def _figures(run: dict[str, Any], batch: int, new_tokens: int) -> dict[str, float]:
    marks = run["marks"]
    steps = [b - a for a, b in itertools.pairwise(marks)]
    figures = {
        "ms_per_step": 1000 * statistics.median(steps),
        "first_step_ms": 1000 * (marks[0] - run["start"]),  # prefill (and the first log-softmax)
        "total_ms": 1000 * run["total_s"],
        "tokens_per_s": batch * new_tokens / run["total_s"],
    }
    if run.get("reorder_s"):
        figures["reorder_ms_per_step"] = 1000 * statistics.median(run["reorder_s"])
    return figures


def _median(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in rounds), 3) for key in rounds[0]}


def _best(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's best round (interference from other work only ever makes a round slower)."""
    pick = {key: max if key == "tokens_per_s" else min for key in rounds[0]}
    return {key: round(pick[key](r[key] for r in rounds), 3) for key in rounds[0]}


def reorder_cost(beams: int, lengths: tuple[int, ...] = (128, 512, 1024), repeats: int = 20) -> list[dict[str, Any]]:
    """The CPU cache reorder alone on GPT-2-small's cache (12 layers × key/value, 12 heads × 64), ``beams`` rows:
    the worst case (every row moves: rows rotated by one) and a typical one (one row replaced by another)."""
    import numpy as np

    from gpt2_onnx_runtimes.kv_buffers import KvBuffers

    found = []
    for length in lengths:
        buffers = KvBuffers(24, beams, 12, length, 64)
        buffers._buffers[0].fill(1.0)
        buffers.length = length
        cases = {"every row moves": np.roll(np.arange(beams), 1), "one row moves": np.array([0, 0, *range(2, beams)])}
        row: dict[str, Any] = {"positions": length, "cache_mib": round(buffers._buffers[0].nbytes / 2**20, 1)}
        for label, rows in cases.items():
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                buffers.reorder(rows)
                times.append(time.perf_counter() - start)
            row[f"{label} ms"] = round(1000 * statistics.median(times), 3)
        found.append(row)
    return found


def coordinate(args: argparse.Namespace) -> dict[str, Any]:
    from gpt2_onnx_core.bench_protocol import prompt_ids

    workers = [Worker("ours", args), Worker("transformers", args)]
    load_before = os.getloadavg()
    cases = []
    try:
        for batch, length in CASES:
            prompts = prompt_ids(0, batch, length, 50257).tolist()
            for w in workers:  # warm-up
                w.ask(prompts, 4)
            rounds: dict[str, list[dict[str, float]]] = {w.system: [] for w in workers}
            tokens: dict[str, list[list[int]]] = {}
            for index in range(args.rounds):
                for w in workers if index % 2 == 0 else workers[::-1]:
                    run = w.ask(prompts, args.new_tokens)
                    rounds[w.system].append(_figures(run, batch, args.new_tokens))
                    tokens[w.system] = run["tokens"]
            medians = {system: _median(found) for system, found in rounds.items()}
            best = {system: _best(found) for system, found in rounds.items()}
            cases.append(
                {
                    "batch": batch,
                    "prompt_tokens": length,
                    "new_tokens": args.new_tokens,
                    "beams": args.beams,
                    "median": medians,
                    "best": best,
                    "rounds": rounds,
                    "same_tokens": tokens["ours"] == tokens["transformers"],
                    "ms_per_step_ratio": round(
                        medians["ours"]["ms_per_step"] / medians["transformers"]["ms_per_step"], 3
                    ),
                    "best_ms_per_step_ratio": round(
                        best["ours"]["ms_per_step"] / best["transformers"]["ms_per_step"], 3
                    ),
                }
            )
            print(json.dumps(cases[-1]["median"]), file=sys.stderr, flush=True)
    finally:
        for w in workers:
            w.close()
    return {
        "what": "beam search, gpt2-onnx runtime vs transformers generate, random:gpt2 seed 0 (GPT-2-small dims)",
        "reorder_alone": reorder_cost(args.beams),
        "threads": args.threads,
        "rounds": args.rounds,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cases": cases,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Beam search ({report['cases'][0]['beams']} beams), {report['threads']} threads, {report['rounds']} "
        f"interleaved rounds: median (best round); load average before {report['load_average_before'][0]:.2f}, "
        f"after {report['load_average_after'][0]:.2f}.",
        "",
        "| batch × prompt tokens → new | system | ms/step (lower is better) | tokens/s (higher is better) | "
        "first step ms | KV reorder ms/step | same tokens |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case in report["cases"]:
        label = f"{case['batch']} × {case['prompt_tokens']} → {case['new_tokens']}"
        for system, figures in case["median"].items():
            best = case["best"][system]
            reorder = f"{figures['reorder_ms_per_step']:.2f}" if "reorder_ms_per_step" in figures else "-"
            lines.append(
                f"| {label} | {system} | {figures['ms_per_step']:.1f} ({best['ms_per_step']:.1f}) | "
                f"{figures['tokens_per_s']:.1f} ({best['tokens_per_s']:.1f}) | {figures['first_step_ms']:.1f} "
                f"({best['first_step_ms']:.1f}) | {reorder} | {'yes' if case['same_tokens'] else 'no'} |"
            )
        ratios = f"{case['ms_per_step_ratio']:.2f}× ({case['best_ms_per_step_ratio']:.2f}×)"
        lines.append(f"| {label} | ours / transformers | {ratios} | | | | |")
    lines += ["", "KV-cache reorder alone (CPU buffers, GPT-2-small cache, one row per beam):", ""]
    lines += ["| positions | cache MiB | every row moves, ms | one row moves, ms |", "| --- | --- | --- | --- |"]
    for row in report["reorder_alone"]:
        lines.append(
            f"| {row['positions']} | {row['cache_mib']} | {row['every row moves ms']:.2f} | "
            f"{row['one row moves ms']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", type=Path, required=True, help="an fp32 export of random:gpt2, seed 0")
    parser.add_argument("--out", type=Path, help="where to write the JSON report (and a .md beside it)")
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--worker", choices=["ours", "transformers"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.export, args.threads, args.beams)
        return
    report = coordinate(args)
    table = markdown(report)
    print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(table)


if __name__ == "__main__":
    main()
