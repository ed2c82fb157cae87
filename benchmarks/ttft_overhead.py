"""Time to first token against the graph's own prefill, KV buffers fresh per request (before) or kept per model
(after), interleaved round by round in one process; writes a Markdown table to benchmarks/results/.

    .venv/bin/gpt2-onnx export --model random:gpt2 -o /tmp/g2
    .venv/bin/python benchmarks/ttft_overhead.py /tmp/g2 --rounds 40
    .venv/bin/python benchmarks/ttft_overhead.py OUT/fp32 OUT/int8 OUT/int4 --rounds 30   # the engine as it ships
    .venv/bin/python benchmarks/ttft_overhead.py OUT/fp32 OUT/int8 OUT/int4 --inside --rounds 30

``--inside``: the host's own share, measured inside each call: every folder's time to first token, and within that
same call the time its graph runs took (the session's ``run_with_iobinding``, timed by a wrapper around the loaded
session); their difference is what generation adds around the graph (the cache buffers, the bindings, the first
choice), free of the round-to-round noise that a difference of two separate calls carries.

With several folders, only "after" is measured, for each folder in turn within every round (one process, every
export loaded), and the table gives each one's graph prefill, time to first token, and the difference paired per
round (each round's time to first token minus its own prefill, then the median).

"before" gives every generation a pool that keeps nothing (each request maps fresh pages for its cache, as the
engine did before the pool); "after" is the engine as it ships (one pool per loaded model). Each timed prefill or
generation follows a short untimed generation, as in use. Medians over rounds; the machine may be shared, so the
figures say what they are measured on.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from peers_report import cpu_line  # benchmarks/, beside this script

from gpt2_onnx_core.batching import position_ids
from gpt2_onnx_runtimes.decoding import TokenChooser, new_rows
from gpt2_onnx_runtimes.generation import Generation
from gpt2_onnx_runtimes.kv_buffers import BufferPool
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

MODES = ("before", "after")


def _prefill_s(loaded: LoadedExport, ids: np.ndarray) -> float:
    mask = np.ones_like(ids)  # (1, T)
    runner = KvCacheRunner(loaded)  # the graph alone: ONNX Runtime's own outputs, as bench's prefill row
    start = time.perf_counter()
    runner.prefill(ids, mask, position_ids(mask))
    return time.perf_counter() - start


def _first_token_s(loaded: LoadedExport, ids: np.ndarray, new_tokens: int) -> float:
    generation = Generation(loaded, ids.tolist(), GenerationOptions(max_new_tokens=new_tokens, ignore_eos=True))
    start = time.perf_counter()
    for _ in generation.steps():
        return time.perf_counter() - start
    raise RuntimeError("no token")


def _choice_s(vocab: int, reps: int) -> float:
    """Median cost of one greedy choice over (1, V) logits: the same call at the first step and every later one."""
    options = GenerationOptions(max_new_tokens=1, ignore_eos=True)
    choose, rows = TokenChooser(options, ()), new_rows([[1, 2, 3]], options, 0)
    logits = np.random.default_rng(1).standard_normal((1, vocab)).astype(np.float32)  # (1, V)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        choose(logits, rows)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _warm(loaded: LoadedExport) -> None:
    Generation(loaded, [[1, 2, 3, 4]], GenerationOptions(max_new_tokens=4, ignore_eos=True)).run()


def measure(folder: Path, length: int, rounds: int, new_tokens: int) -> dict[str, dict[str, list[float]]]:
    loaded = LoadedExport.load(folder, RuntimeOptions(intra_op_threads=2))
    ids = np.random.default_rng(0).integers(0, loaded.manifest.dims.vocab_size, (1, length))  # (1, T)
    found: dict[str, dict[str, list[float]]] = {m: {"prefill": [], "first_token": []} for m in MODES}
    kept = BufferPool()
    pools = {"before": lambda: BufferPool(keep=0), "after": lambda: kept}
    for _ in range(rounds):
        for mode in MODES:
            loaded.kv_pool = pools[mode]()
            _warm(loaded)
            found[mode]["prefill"].append(_prefill_s(loaded, ids))
            _warm(loaded)
            found[mode]["first_token"].append(_first_token_s(loaded, ids, new_tokens))
    found["after"]["choice"] = [_choice_s(loaded.manifest.dims.vocab_size, 10 * rounds)]
    return found


def _load_all(folders: list[Path], length: int) -> tuple[dict[str, LoadedExport], np.ndarray]:
    """Every folder loaded as the engine ships, by name, and one random prompt (1, T) of their vocabulary."""
    loaded = {folder.name: LoadedExport.load(folder, RuntimeOptions(intra_op_threads=2)) for folder in folders}
    vocab = next(iter(loaded.values())).manifest.dims.vocab_size
    return loaded, np.random.default_rng(0).integers(0, vocab, (1, length))  # (1, T)


def _alternating(names: list[str], rounds: int) -> Iterator[str]:
    """``names`` in each round, in turn, the order reversed every other round."""
    for number in range(rounds):
        yield from names if number % 2 == 0 else names[::-1]


def measure_many(folders: list[Path], length: int, rounds: int, new_tokens: int) -> dict[str, dict[str, list[float]]]:
    """The engine as it ships ("after") on each export, the exports alternating within every round."""
    loaded, ids = _load_all(folders, length)
    found: dict[str, dict[str, list[float]]] = {name: {"prefill": [], "first_token": []} for name in loaded}
    for name in _alternating(list(loaded), rounds):
        _warm(loaded[name])
        found[name]["prefill"].append(_prefill_s(loaded[name], ids))
        _warm(loaded[name])
        found[name]["first_token"].append(_first_token_s(loaded[name], ids, new_tokens))
    return found


class _TimedSession:
    """An ONNX Runtime session whose ``run_with_iobinding`` adds its wall time to :attr:`spent`; the rest is the
    session's own."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self.spent = 0.0

    def run_with_iobinding(self, binding: Any, run_options: Any = None) -> None:
        start = time.perf_counter()
        self._session.run_with_iobinding(binding, run_options)
        self.spent += time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def measure_inside(folders: list[Path], length: int, rounds: int, new_tokens: int) -> dict[str, dict[str, list[float]]]:
    """Per folder and round: the time to first token, and the graph's run time within that same call."""
    loaded, ids = _load_all(folders, length)
    timed = {}
    for name, export in loaded.items():
        steps = export.steps
        timed[name] = _TimedSession(steps.prefill)
        export._steps = dataclasses.replace(steps, prefill=timed[name], decode=timed[name])
    found: dict[str, dict[str, list[float]]] = {name: {"first_token": [], "graph": []} for name in loaded}
    for name in _alternating(list(loaded), rounds):
        _warm(loaded[name])
        timed[name].spent = 0.0
        found[name]["first_token"].append(_first_token_s(loaded[name], ids, new_tokens))
        found[name]["graph"].append(timed[name].spent)
    return found


def report_inside(found: dict[str, dict[str, list[float]]], length: int, rounds: int) -> str:
    lines = [
        f"# Time to first token − the graph's own run, inside each call ({length}-token prompt)",
        "",
        f"CPU: {cpu_line()}, 2 intra-op threads; the engine as it ships; {rounds} rounds, the exports alternating "
        "within each round in one process, each timed generation after a short untimed one. Within every call: its "
        "time to first token and the time its graph runs took (the session's run, timed around it); the difference is "
        "what generation adds around the graph. Medians, and the largest of the rounds.",
        "",
        "| export | graph's run (ms) | time to first token (ms) | difference, median (ms) | difference, largest (ms) |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += _difference_rows(found, "graph", lambda diff: f"{diff.max():+.3f}", 3)
    return "\n".join(lines) + "\n"


def report_many(found: dict[str, dict[str, list[float]]], length: int, rounds: int) -> str:
    lines = [
        f"# Time to first token − graph prefill by precision ({length}-token prompt, GPT-2-small sized export)",
        "",
        f"CPU: {cpu_line()}, 2 intra-op threads; the engine as it ships (KV buffers kept per model, the cache written "
        f"in place); {rounds} rounds, the exports alternating within each round in one process, each timed call after "
        "a short untimed generation. The difference is paired per round (each round's time to first token minus "
        "that round's prefill), then the median, with the middle half of the rounds beside it.",
        "",
        "| export | graph prefill (ms) | time to first token (ms) | difference, paired (ms) | middle half (ms) |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += _difference_rows(found, "prefill", _middle_half, 2)
    return "\n".join(lines) + "\n"


def _middle_half(diff: np.ndarray) -> str:
    low, high = np.percentile(diff, [25, 75])
    return f"{low:+.2f} … {high:+.2f}"


def _difference_rows(
    found: dict[str, dict[str, list[float]]], base: str, spread: Callable[[np.ndarray], str], digits: int
) -> list[str]:
    """One table row per export: the median of ``base`` and of the time to first token, and their difference paired
    per round (median, then ``spread`` of the rounds), in ms."""
    rows = []
    for name, by in found.items():
        diff = 1000.0 * (np.array(by["first_token"]) - np.array(by[base]))
        rows.append(
            f"| {name} | {1000 * np.median(by[base]):.2f} | {1000 * np.median(by['first_token']):.2f} "
            f"| {np.median(diff):+.{digits}f} | {spread(diff)} |"
        )
    return rows


def report(found: dict[str, dict[str, list[float]]], length: int, rounds: int, new_tokens: int) -> str:
    med = {m: {k: 1000.0 * float(np.median(v)) for k, v in found[m].items()} for m in MODES}
    over = {m: med[m]["first_token"] - med[m]["prefill"] for m in MODES}
    lines = [
        f"# Time to first token − graph prefill ({length}-token prompt, GPT-2-small sized random export)",
        "",
        f"CPU: {cpu_line()}, 2 intra-op threads; {rounds} rounds interleaved before/after in one process, medians. "
        "The machine was shared with other work while this ran: read the figures as this run's, not as absolutes.",
        "",
        "| | before (fresh buffers per request) | after (buffers kept per model) |",
        "| --- | --- | --- |",
        f"| graph prefill (ms) | {med['before']['prefill']:.2f} | {med['after']['prefill']:.2f} |",
        f"| time to first token (ms) | {med['before']['first_token']:.2f} | {med['after']['first_token']:.2f} |",
        f"| time to first token − graph prefill (ms) | {over['before']:.2f} | {over['after']:.2f} |",
        "",
        f"One greedy token choice over the (1, V) logits, the first as every later one: "
        f"{med['after']['choice']:.3f} ms (median).",
        "",
        f"Time to first token after ÷ before: {med['after']['first_token'] / med['before']['first_token']:.3f}; "
        f"generations of {new_tokens} new tokens.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--inside", action="store_true", help="the host's share measured inside each call")
    args = parser.parse_args()
    if args.inside:
        found = measure_inside(args.folders, args.length, args.rounds, args.new_tokens)
        text = report_inside(found, args.length, args.rounds)
    elif len(args.folders) == 1:
        found = measure(args.folders[0], args.length, args.rounds, args.new_tokens)
        text = report(found, args.length, args.rounds, args.new_tokens)
    else:
        found = measure_many(args.folders, args.length, args.rounds, args.new_tokens)
        text = report_many(found, args.length, args.rounds)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    kind = "ttft-inside" if args.inside else "ttft-overhead"
    out = Path(__file__).parent / "results" / f"{stamp}-{kind}.md"
    out.write_text(text)
    settings: dict[str, Any] = {key: value for key, value in vars(args).items() if key != "folders"}
    settings["folders"] = [str(folder) for folder in args.folders]
    raw = {"cpu": cpu_line(), "settings": settings, "seconds": found}  # every round's figures, in seconds
    out.with_suffix(".json").write_text(json.dumps(raw, indent=2) + "\n")
    print(text)
    print(f"written: {out} and its .json")


if __name__ == "__main__":
    main()
