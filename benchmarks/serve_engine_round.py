"""A serving round through the batching engine alone: no Ray, no HTTP, no clients' threads. Beside
``benchmarks/serve_peers.py``'s figure for the same requests it shows what the HTTP path costs, and its split
shows where the engine's own time goes.

The requests are ``benchmarks/serve_peers.py``'s (48 prompts of 8..120 words, greedy, 32 tokens each, the
end-of-text token ignored so that every request runs its 32), 16 of them in flight at once: a request that
finishes is replaced by the next, as the 16 client threads do. The engine is driven step by step on this thread
(:meth:`BatchEngine.step`), timing its prefills, its joins and its batched decode steps. ``--profile`` runs it all
under ONNX Runtime's profiler (slower) and adds kernel time by operator type per round, prompts and batched steps
apart (a run whose attention reads one new position is a step's; the load's own runs count in the first round).
``--logprobs-cost`` runs each round a second time right after (or before: the order alternates) with every request
asking for its tokens' log-probabilities (``logprobs: 0``), which the engine otherwise skips, and reports the
tokens/s of both and their ratio per round. ``--width-cost`` then times batched steps of 16 rows over pasts of
even widths (no padding), fits their milliseconds to a line in the width, and prices the round's padding at that
line's slope: what attention without the batch's padding (rows of their own lengths) would save.

    python benchmarks/serve_engine_round.py EXPORT [--kv-cache int8] [--prompt-kernel dynamic] [--profile] \
        [--logprobs-cost] [--width-cost] > benchmarks/results/STAMP-serve-engine-round-NAME.txt
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "runtimes")]  # this checkout's packages

from benchmarks.op_profile import CONTROL_FLOW_OPS  # noqa: E402  # after the path
from benchmarks.serve_load import requests  # noqa: E402
from benchmarks.serve_peers import machine_now  # noqa: E402
from gpt2_onnx_runtimes import session as session_module  # noqa: E402
from gpt2_onnx_runtimes.batch_requests import CompletionSpec, Update  # noqa: E402
from gpt2_onnx_runtimes.batching import BatchEngine  # noqa: E402
from gpt2_onnx_runtimes.options import GenerationOptions  # noqa: E402
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions  # noqa: E402

IN_FLIGHT = 16
PARTS = ("_prefill", "_join", "_decode")  # the engine's methods whose time a round reports


def timed_parts(engine: BatchEngine, spent: dict[str, float]) -> None:
    """Wrap the engine's prefill, join and decode so that each adds its seconds to ``spent``."""
    for part in PARTS:
        original: Callable[..., Any] = getattr(engine, part)

        def wrapper(*args: Any, _original: Callable[..., Any] = original, _part: str = part) -> Any:
            start = time.perf_counter()
            try:
                return _original(*args)
            finally:
                name = _part.strip("_")
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

        setattr(engine, part, wrapper)


def padding_counter(engine: BatchEngine) -> list[int]:
    """[positions the batched steps attend over, of which padding]: each step's rows × the batch's width, less
    the rows' own lengths (the attention mask's ones); counted as the steps run."""
    counts = [0, 0]
    decode: Callable[[], None] = engine._decode

    def counted() -> None:
        batch = engine._batch
        counts[0] += batch.rows * batch.length
        counts[1] += batch.rows * batch.length - int(batch.mask.sum())
        decode()

    engine._decode = counted  # type: ignore[method-assign]
    return counts


def one_round(engine: BatchEngine, specs: list[CompletionSpec]) -> tuple[float, int]:
    """Every spec once, ``IN_FLIGHT`` at a time: (wall seconds, tokens generated)."""
    waiting = list(specs)
    tokens = 0

    def sink(update: Update) -> None:
        nonlocal tokens
        tokens += 1
        if getattr(update, "finish_reason", None) is not None and waiting:
            engine.submit(waiting.pop(0), sink)

    start = time.perf_counter()
    for _ in range(min(IN_FLIGHT, len(waiting))):
        engine.submit(waiting.pop(0), sink)
    while engine.step():
        pass
    return time.perf_counter() - start, tokens


WIDTHS = (32, 128, 256, 512)  # past positions of the steps --width-cost times
WIDTH_STEPS = 12  # steps timed per width and repeat, the first two not counted


def step_ms(engine: BatchEngine, width: int, rows: int = IN_FLIGHT) -> float:
    """Median ms of a batched decode step of ``rows`` rows, every row's past ``width`` positions of random
    keys and values (the batch emptied first; no padding)."""
    dims, batch = engine.dims, engine._batch
    batch.clear()
    rng = np.random.default_rng(width)
    past = [
        (0.1 * rng.standard_normal((1, dims.n_head, width, dims.head_dim))).astype(np.float32)
        for _ in range(2 * dims.n_layer)
    ]  # (1, nh, width, hs) each
    batch.join(past, rows)
    tokens = np.full(rows, 100, dtype=np.int64)  # (rows,)
    steps = engine.loaded.steps
    times = []
    for _ in range(WIDTH_STEPS):
        start = time.perf_counter()
        batch.decode(steps.decode, tokens, engine._names, steps.constant_inputs)  # (rows, V)
        times.append(time.perf_counter() - start)
    batch.clear()
    return 1000 * float(np.median(times[2:]))


def width_cost(engine: BatchEngine, repeats: int = 3) -> tuple[dict[int, float], float, float]:
    """({width: median ms of a 16-row step}, the fitted line's ms at width 0, its ms per position)."""
    found: dict[int, list[float]] = {width: [] for width in WIDTHS}
    for _ in range(repeats):  # the widths interleaved
        for width in WIDTHS:
            found[width].append(step_ms(engine, width))
    medians = {width: float(np.median(times)) for width, times in found.items()}
    slope, intercept = np.polyfit(list(medians), list(medians.values()), 1)
    return medians, float(intercept), float(slope)


_ATTENTION_OPS = frozenset({"GroupQueryAttention", "MultiHeadAttention", "Attention"})


def _first_dims(event: dict[str, Any]) -> list[Any]:
    """The dims of a node event's first input ([] where the profile has none)."""
    shapes = event.get("args", {}).get("input_type_shape") or [{}]
    return list(next(iter(shapes[0].values()), []))


def kernel_times(profile: Path) -> dict[str, dict[str, float]]:
    """ms per operator type, ``prompt`` and ``step`` apart, from one ONNX Runtime profile.

    Each node counts with the run it ran in (the ``model_run`` event whose span holds it), and a run is a step's
    when its attention reads one new position ((B, 1, ·) first input). Not node by node: in a prompt's run the
    last layer past its attention runs on the last position alone, (B, 1, d), and the head's input is (B, d) in
    every run (``gpt2_onnx_runtimes.generation_graph``). A run without an attention node falls back to the node's
    own first input. Control-flow nodes (the single-row head's If) are left out: their time is their subgraphs'
    nodes', which count themselves."""
    events = json.loads(profile.read_text())
    spans = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e["name"] == "model_run"
    )
    starts = [start for start, _ in spans]
    nodes = [
        e
        for e in events
        if e.get("cat") == "Node"
        and e["name"].endswith("_kernel_time")
        and e["args"].get("op_name") not in CONTROL_FLOW_OPS
    ]

    def run_of(event: dict[str, Any]) -> int | None:
        index = bisect.bisect_right(starts, event["ts"]) - 1
        return index if index >= 0 and event["ts"] <= spans[index][1] else None

    def one_position(dims: list[Any]) -> bool:
        return len(dims) >= 2 and dims[1] == 1

    run_is_step: dict[int | None, bool] = {}
    for event in nodes:
        run = run_of(event)
        if run is not None and run not in run_is_step and event["args"].get("op_name") in _ATTENTION_OPS:
            run_is_step[run] = one_position(_first_dims(event))
    found: dict[str, dict[str, float]] = {"prompt": {}, "step": {}}
    for event in nodes:
        step = run_is_step.get(run_of(event))
        part = "step" if (one_position(_first_dims(event)) if step is None else step) else "prompt"
        op = event["args"].get("op_name", "?")
        found[part][op] = found[part].get(op, 0.0) + event["dur"] / 1000
    return {
        part: {op: round(ms, 1) for op, ms in sorted(ops.items(), key=lambda item: -item[1])}
        for part, ops in found.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds after a warm-up one")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kv-cache", default="float32")
    parser.add_argument("--prompt-kernel", default="export")
    parser.add_argument("--profile", action="store_true", help="every run under ONNX Runtime's profiler")
    parser.add_argument("--width-cost", action="store_true", help="price the steps' padding (see the docstring)")
    parser.add_argument(
        "--logprobs-cost", action="store_true", help="each round again asking for log-probabilities (docstring)"
    )
    args = parser.parse_args()
    options = RuntimeOptions(intra_op_threads=args.threads, kv_cache=args.kv_cache, prompt_kernel=args.prompt_kernel)
    with tempfile.TemporaryDirectory(prefix="engine-round-") as folder:
        if args.profile:
            plain = session_module.session_options_for

            def profiled(runtime: RuntimeOptions, **keywords: Any) -> Any:
                so = plain(runtime, **keywords)
                so.enable_profiling, so.profile_file_prefix = True, str(Path(folder) / "profile")
                return so

            session_module.session_options_for = profiled  # type: ignore[assignment]
        engine = BatchEngine.load(args.export, options)
        options_then = GenerationOptions(max_new_tokens=32, ignore_eos=True)
        specs = [
            CompletionSpec(tuple(engine.tokenizer.encode(body["prompt"])), options_then) for body in requests(48, 32)
        ]
        asking = [replace(spec, logprobs=0) for spec in specs]  # the same requests asking for log-probabilities
        machine = machine_now()
        print(
            f"{args.export.name}, {args.threads} threads, cache {args.kv_cache}, prompt kernel {args.prompt_kernel}: "
            f"{sum(len(s.prompt_ids) for s in specs)} prompt tokens in {len(specs)} requests, {IN_FLIGHT} in flight; "
            f"{machine['cpu']}, {machine['cpus']} cores, onnxruntime {machine['onnxruntime']}"
        )
        spent: dict[str, float] = {}
        padding = padding_counter(engine)
        timed_parts(engine, spent)
        one_round(engine, specs)  # warm-up
        padded_positions: list[int] = []
        ratios: list[float] = []  # --logprobs-cost: without ÷ with, per round
        for number in range(args.rounds):
            asked = one_round(engine, asking) if args.logprobs_cost and number % 2 else None  # before, odd rounds
            spent.clear()
            padding[:] = [0, 0]
            wall, tokens = one_round(engine, specs)
            parts = ", ".join(f"{part} {seconds:.2f} s" for part, seconds in spent.items())
            padded = f"{100 * padding[1] / max(1, padding[0]):.0f} % of the steps' attended positions padding"
            line = f"round {number + 1}: {wall:.2f} s, {tokens / wall:.0f} tokens/s; {parts}; {padded}"
            padded_positions.append(padding[1])
            if args.logprobs_cost:
                asked_wall, asked_tokens = asked or one_round(engine, asking)  # after, even rounds
                ratio = (tokens / wall) / (asked_tokens / asked_wall)
                ratios.append(ratio)
                line += (
                    f"; asking log-probabilities {asked_tokens / asked_wall:.0f} tokens/s, without ÷ with {ratio:.3f}"
                )
            print(line, flush=True)
        if ratios:
            higher = sum(ratio > 1 for ratio in ratios)
            median = float(np.median(ratios))
            print(f"  without ÷ with log-probabilities: median {median:.3f}, higher in {higher} of {len(ratios)}")
        if args.width_cost:
            medians, fixed, per_position = width_cost(engine)
            by_width = ", ".join(f"{width}: {ms:.1f}" for width, ms in medians.items())
            padding_s = float(np.median(padded_positions)) * per_position / IN_FLIGHT / 1000  # row-positions × ms
            print(
                f"  {IN_FLIGHT}-row steps by past width, ms: {by_width}; fitted {fixed:.1f} ms + {per_position:.4f} ms "
                f"per position; the round's padding ({np.median(padded_positions):.0f} row-positions) at that slope: "
                f"{padding_s:.2f} s a round"
            )
        if args.profile:
            sessions = {id(s): s for s in vars(engine.loaded.steps).values() if hasattr(s, "end_profiling")}
            for session in sessions.values():
                for part, ops in kernel_times(Path(session.end_profiling())).items():
                    per_round = {op: ms / (args.rounds + 1) for op, ms in ops.items()}
                    top = ", ".join(f"{op} {ms:.0f}" for op, ms in list(per_round.items())[:6])
                    print(f"  kernel ms per round, {part}s: {sum(per_round.values()):.0f} ({top})")


if __name__ == "__main__":
    main()
