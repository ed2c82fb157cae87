"""The serving engine's running batch before and after its KV cache was written in place: one ``BatchEngine`` over
one loaded export (the in-place generation graph), its batch swapped between the two layouts of
:mod:`gpt2_onnx_runtimes.batch_cache` round by round, the order alternating:

    copied    ``RunningBatch(in_place=False)``: the graph bound to two buffers, past and present, so it concatenates
              and writes the whole cache into the present every step (the engine as it was before)
    in place  ``RunningBatch(in_place=True)``: one buffer bound as both, a step writes one position per row

Each round submits the same requests at once (serve_load.py's prompts of 8..120 words, greedy, end-of-text ignored,
``--max-tokens`` each) and steps the engine until they are done, in this thread: no HTTP, no Ray. Reported: tokens
per second of the whole round (prefills included), the decode steps' own milliseconds (summed over the round, per
step), and whether both layouts gave the same tokens.

    python benchmarks/batch_cache.py benchmarks/out/fp32 --rounds 5   # writes benchmarks/results/<stamp>-batch-cache.*
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from benchmarks.serve_load import requests  # noqa: E402  # after the path
from gpt2_onnx.app.environment import describe_environment  # noqa: E402
from gpt2_onnx_runtimes import batch_cache  # noqa: E402
from gpt2_onnx_runtimes.batch_requests import CompletionSpec, Update  # noqa: E402
from gpt2_onnx_runtimes.batching import BatchEngine  # noqa: E402
from gpt2_onnx_runtimes.options import GenerationOptions  # noqa: E402

LAYOUTS = {"copied": False, "in place": True}


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
        for name, in_place in LAYOUTS.items()
    }
    options = GenerationOptions(max_new_tokens=args.max_tokens, ignore_eos=True)
    specs = [CompletionSpec(tuple(engine.tokenizer.encode(b["prompt"])), options) for b in requests(args.requests, 32)]
    clock = StepClock()
    found: dict[str, dict[str, list[float]]] = {name: {"tokens_per_s": [], "step_ms": []} for name in batches}
    tokens: dict[str, list[int]] = {}
    load = os.getloadavg()[0]
    for number in range(args.rounds + 1):  # round 0 warms both up
        names = list(batches) if number % 2 == 0 else list(batches)[::-1]
        for name in names:
            engine._batch = batches[name]  # the layout under test
            rate, step_ms, tokens[name] = one_round(engine, specs, clock)
            if number:
                found[name]["tokens_per_s"].append(rate)
                found[name]["step_ms"].append(step_ms)
            time.sleep(0.3)
    same = tokens["copied"] == tokens["in place"]
    medians = {name: {k: float(np.median(v)) for k, v in by.items()} for name, by in found.items()}
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = REPO / "benchmarks" / "results" / f"{stamp}-batch-cache"
    settings = {
        "export": str(args.export),
        "requests": args.requests,
        "max_tokens": args.max_tokens,
        "rounds": args.rounds,
        "cpu": describe_environment()["cpu"],
        "cores": os.cpu_count(),
        "load_before": round(load, 2),
    }
    out.with_suffix(".json").write_text(
        json.dumps({"settings": settings, "rounds": found, "same_tokens": same}, indent=2) + "\n"
    )
    before, after = medians["copied"], medians["in place"]
    lines = [
        "# The serving batch's KV cache: copied every step against written in place",
        "",
        f"`{args.export.name}` (GPT-2-small dimensions), {args.requests} requests submitted at once, {args.max_tokens} "
        f"tokens each, one engine stepped in one thread (no HTTP), {args.rounds} rounds alternating after a warm-up, "
        f"medians. CPU: {settings['cpu']}, {settings['cores']} cores, load average {settings['load_before']} as it "
        f"started. Same tokens from both: {'yes' if same else 'no'}.",
        "",
        "| batch cache | tokens/s (whole round) | decode step, ms | tokens/s rounds |",
        "| --- | --- | --- | --- |",
    ]
    for name, by in medians.items():
        rounds = ", ".join(f"{v:.0f}" for v in found[name]["tokens_per_s"])
        lines.append(f"| {name} | {by['tokens_per_s']:.1f} | {by['step_ms']:.1f} | {rounds} |")
    lines += [
        "",
        f"In place ÷ copied: tokens/s {after['tokens_per_s'] / before['tokens_per_s']:.2f}×, decode step "
        f"{after['step_ms'] / before['step_ms']:.2f}×.",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
