"""The serving engine's running batch as its KV cache and step binding changed: one ``BatchEngine`` over one loaded
export (the in-place generation graph), its batch swapped between these ways of :mod:`gpt2_onnx_runtimes.batch_cache`
round by round, the order alternating:

    copied    ``RunningBatch(in_place=False)``: the graph bound to two buffers, past and present, so it concatenates
              and writes the whole cache into the present every step (the engine as it was first)
    in place, bound every step
              ``RunningBatch(in_place=True)`` with its kept binding turned off: one buffer bound as both past and
              present, a step writes one position per row, and every step binds the 2·L cache tensors again
    in place  the engine as it ships: the cache, the constants and a logits buffer bound once and kept until a
              join, leave, trim or layout changes them, so a step binds only its tokens, mask and positions

Each round submits the same requests at once (serve_load.py's prompts of 8..120 words, greedy, end-of-text ignored,
``--max-tokens`` each) and steps the engine until they are done, in this thread: no HTTP, no Ray. Reported: tokens
per second of the whole round (prefills included), the decode steps' own milliseconds (summed over the round, per
step), and whether both layouts gave the same tokens.

    python benchmarks/batch_cache.py benchmarks/out/fp32 --rounds 5   # writes benchmarks/results/<stamp>-batch-cache.*
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from peers_report import cpu_line  # noqa: E402  # benchmarks/, beside this script

from benchmarks.serve_load import requests  # noqa: E402  # after the path
from gpt2_onnx_runtimes import batch_cache  # noqa: E402
from gpt2_onnx_runtimes.batch_requests import CompletionSpec, Update  # noqa: E402
from gpt2_onnx_runtimes.batching import BatchEngine  # noqa: E402
from gpt2_onnx_runtimes.options import GenerationOptions  # noqa: E402

# name: (in place, keeps its step binding)
LAYOUTS = {"copied": (False, False), "in place, bound every step": (True, False), "in place": (True, True)}


class StepClock:
    """Seconds spent in ``RunningBatch.decode`` and the number of steps, while installed."""

    def __init__(self) -> None:
        self.seconds, self.steps = 0.0, 0
        plain = batch_cache.RunningBatch.decode

        def timed(batch: batch_cache.RunningBatch, *args: Any, **kwargs: Any) -> np.ndarray:
            start = time.perf_counter()
            try:
                return plain(batch, *args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.steps += 1

        batch_cache.RunningBatch.decode = timed  # type: ignore[method-assign,assignment]


def one_round(engine: BatchEngine, specs: list[CompletionSpec], clock: StepClock) -> tuple[float, float, list[int]]:
    """(tokens/s, decode ms per step, every token in order)."""
    updates: list[Update] = []
    for spec in specs:
        engine.submit(spec, updates.append)
    clock.seconds, clock.steps = 0.0, 0
    start = time.perf_counter()
    while engine.step():
        pass
    wall = time.perf_counter() - start
    tokens = [getattr(update, "token_id", -1) for update in updates]
    return len(tokens) / wall, 1000 * clock.seconds / max(clock.steps, 1), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    engine = BatchEngine.load(args.export)
    if not engine.loaded.steps.in_place:
        raise SystemExit(f"{args.export}: its generation graph does not write in place (an fp16 export?)")
    dims = engine.dims
    shape = (2 * dims.n_layer, dims.n_head, dims.head_dim)
    batches = {
        name: batch_cache.RunningBatch(*shape, in_place, dims.n_positions, engine.options.max_rows)
        for name, (in_place, _) in LAYOUTS.items()
    }
    for name, (_, keeps) in LAYOUTS.items():
        if not keeps:
            batches[name]._kept_binding = lambda *_: None  # type: ignore[method-assign]  # bind every step
    options = GenerationOptions(max_new_tokens=args.max_tokens, ignore_eos=True)
    specs = [CompletionSpec(tuple(engine.tokenizer.encode(b["prompt"])), options) for b in requests(args.requests, 32)]
    clock = StepClock()
    found: dict[str, dict[str, list[float]]] = {name: {"tokens_per_s": [], "step_ms": []} for name in batches}
    tokens: dict[str, list[int]] = {}
    load = os.getloadavg()[0]
    for number in range(args.rounds + 1):  # round 0 warms every one up
        names = list(batches) if number % 2 == 0 else list(batches)[::-1]
        for name in names:
            engine._batch = batches[name]  # the layout under test
            rate, step_ms, tokens[name] = one_round(engine, specs, clock)
            if number:
                found[name]["tokens_per_s"].append(rate)
                found[name]["step_ms"].append(step_ms)
            time.sleep(0.3)
    same = all(found_tokens == tokens["copied"] for found_tokens in tokens.values())
    medians = {name: {k: float(np.median(v)) for k, v in by.items()} for name, by in found.items()}
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = REPO / "benchmarks" / "results" / f"{stamp}-batch-cache"
    settings = {
        "export": str(args.export),
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "rounds": args.rounds,
        "cpu": cpu_line(),
        "cores": os.cpu_count(),
        "load_before": round(load, 2),
    }
    out.with_suffix(".json").write_text(
        json.dumps({"settings": settings, "rounds": found, "same_tokens": same}, indent=2) + "\n"
    )
    lines = [
        "# The serving batch's KV cache: copied every step, written in place, and its step binding kept",
        "",
        f"`{args.export.name}` (GPT-2-small dimensions), {args.requests} requests submitted at once, {args.max_tokens} "
        f"tokens each, one engine stepped in one thread (no HTTP), {args.rounds} rounds alternating after a warm-up, "
        f"medians. CPU: {settings['cpu']}, {settings['cores']} cores, load average {settings['load_before']} as it "
        f"started. Same tokens from all: {'yes' if same else 'no'}.",
        "",
        "| batch cache | tokens/s (whole round) | decode step, ms | tokens/s rounds |",
        "| --- | --- | --- | --- |",
    ]
    for name, by in medians.items():
        rounds = ", ".join(f"{v:.0f}" for v in found[name]["tokens_per_s"])
        lines.append(f"| {name} | {by['tokens_per_s']:.1f} | {by['step_ms']:.1f} | {rounds} |")
    lines.append("")
    names = list(LAYOUTS)
    for before, after in itertools.pairwise(names):
        lines.append(
            f"- {after} ÷ {before}: tokens/s {medians[after]['tokens_per_s'] / medians[before]['tokens_per_s']:.2f}×, "
            f"decode step {medians[after]['step_ms'] / medians[before]['step_ms']:.2f}×."
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
