"""The in-place cache's attention reading the packed (B, S, 3d) projection, against reading three Slices of it:
time to first token and decode ms/token per export, the two graphs loaded side by side in one process and run
alternately, round by round; writes a Markdown table to benchmarks/results/.

    .venv/bin/python benchmarks/packed_qkv.py OUT/fp32 OUT/int8 OUT/int4 --pairs 15

The difference is small (one Split node per layer), smaller than what separate processes differ by on a shared
machine, so both graphs live in one process, each round runs both, the order alternating, and the ratios are paired
in two ways:
- a prompt that runs right after the other graph's generation is slower, whichever graph it is (the machine's state
  after a burst, not the graph): one round's ratio depends on its order, the geometric mean of two rounds in opposite
  orders does not;
- the session loaded first decodes at another speed than the one loaded second, whichever graph it holds: both are
  loaded in one order and measured, then loaded again in the other order and measured as long again.

"Slices" loads the export with the packing turned off (the only difference in the graph:
``inplace_attention.packed_qkv`` answers None, so every GroupQueryAttention reads the q, k and v Slices). Each round
of each graph is one greedy generation: a random ``--context``-token prompt (its time to first token: the prefill
and the first choice), then ``--new-tokens`` tokens (the median later token). Both graphs' tokens must be the same,
and the first logits equal to the bit; otherwise the script stops.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from peers_report import cpu_line, save_result  # benchmarks/, beside this script

from gpt2_onnx_runtimes import inplace_attention
from gpt2_onnx_runtimes.generation import Generation
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

RESULTS = Path(__file__).resolve().parent / "results"
GRAPHS = ("packed", "Slices")


@contextlib.contextmanager
def _slices_apart() -> Iterator[None]:
    """Loads inside build the attention over the q, k and v Slices, as before the packing."""
    packed = inplace_attention.packed_qkv
    inplace_attention.packed_qkv = lambda *args, **kwargs: None
    try:
        yield
    finally:
        inplace_attention.packed_qkv = packed


def _generate(loaded: LoadedExport, prompt: list[int], new_tokens: int) -> tuple[float, float, list[int | None]]:
    """One greedy generation: time to first token (ms), the median later token (ms), the tokens."""
    options = GenerationOptions(max_new_tokens=new_tokens, ignore_eos=True)
    tokens: list[int | None] = []
    times = []
    start = time.perf_counter()
    for event in Generation(loaded, [prompt], options).steps():
        times.append(time.perf_counter())
        tokens.append(event.tokens[0])
    return 1000 * (times[0] - start), 1000 * float(np.median(np.diff(times))), tokens


def _prompt_logits(loaded: LoadedExport, prompt: list[int]) -> np.ndarray:
    """The last position's logits (1, 1, V) after ``prompt``, through the in-place cache."""
    ids = np.array([prompt], dtype=np.int64)  # (1, T)
    runner = KvCacheRunner(loaded, capacity=len(prompt) + 1)
    return runner.prefill(ids, np.ones_like(ids), np.arange(len(prompt))[None])


def _load(folder: Path, graph: str, options: RuntimeOptions) -> LoadedExport:
    if graph == "packed":
        return LoadedExport.load(folder, options)
    with _slices_apart():
        return LoadedExport.load(folder, options)


def _rounds(loaded: dict[str, LoadedExport], args: argparse.Namespace, seed: int) -> dict[str, dict[str, list[float]]]:
    """``args.pairs`` pairs of rounds over both loaded graphs (after one uncounted round); stops where they differ."""
    vocab = loaded["packed"].manifest.dims.vocab_size
    rng = np.random.default_rng(seed)
    prompt = rng.integers(0, vocab, args.context).tolist()
    if not np.array_equal(*(_prompt_logits(loaded[graph], prompt) for graph in GRAPHS)):
        raise SystemExit("the packed graph computes other logits than the Slices' graph")
    figures: dict[str, dict[str, list[float]]] = {graph: {"first_token_ms": [], "decode_ms": []} for graph in GRAPHS}
    for number in range(2 * args.pairs + 1):
        prompt = rng.integers(0, vocab, args.context).tolist()
        runs = {}
        for graph in GRAPHS if number % 2 else GRAPHS[::-1]:  # counted rounds: packed first, then Slices first, ...
            runs[graph] = _generate(loaded[graph], prompt, args.new_tokens)
        if runs["packed"][2] != runs["Slices"][2]:
            raise SystemExit("the packed graph chose other tokens than the Slices' graph")
        if number:
            for graph, (first_ms, decode_ms, _) in runs.items():
                figures[graph]["first_token_ms"].append(first_ms)
                figures[graph]["decode_ms"].append(decode_ms)
    return figures


def measure(args: argparse.Namespace) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per export: both graphs loaded (one load order), their rounds; then both loaded again the other way round,
    their rounds: the session loaded first decodes at another speed than the one loaded second (3-4 % on fp32,
    whichever graph it holds), so each graph is measured from both places, as many rounds each."""
    found: dict[str, dict[str, dict[str, list[float]]]] = {}
    options = RuntimeOptions(intra_op_threads=args.threads)
    for folder in args.folders:
        figures: dict[str, dict[str, list[float]]] = {g: {"first_token_ms": [], "decode_ms": []} for g in GRAPHS}
        for seed, order in enumerate((GRAPHS, GRAPHS[::-1])):
            loaded = {graph: _load(folder, graph, options) for graph in order}
            for graph, measured in _rounds(loaded, args, seed).items():
                for figure, values in measured.items():
                    figures[graph][figure].extend(values)
            for one in loaded.values():
                one.close()
            del loaded
        found[folder.name] = figures
        print(f"{folder.name} done", file=sys.stderr, flush=True)
    return found


def report(found: dict[str, dict[str, dict[str, list[float]]]], args: argparse.Namespace) -> str:
    lines = [
        f"# GroupQueryAttention reading the packed projection: a {args.context}-token prompt, then "
        f"{args.new_tokens} tokens",
        "",
        f"CPU: {cpu_line()}, {args.threads} intra-op threads; `benchmarks/packed_qkv.py`, both graphs of an export "
        f"loaded in one process and run alternately, {args.pairs} pairs of rounds in opposite orders (after one "
        "uncounted round), then loaded again in the other order, as many pairs again. "
        "Packed: the in-place cache's GroupQueryAttention reads the (B, S, 3d) projection; Slices: it reads the q, "
        "k and v Slices of it (one Split node per layer once ONNX Runtime fuses them). Same tokens, first logits "
        "equal to the bit. Times: medians over rounds; ratios: the median over pairs of each pair's geometric mean "
        "of its two rounds' ratios (a prompt right after the other graph's run is slower, whichever it is).",
        "",
        "| export | time to first token, packed (ms) | Slices (ms) | packed ÷ Slices | decode, packed (ms/token) "
        "| Slices (ms/token) | packed ÷ Slices |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, figures in found.items():
        cells = []
        for figure in ("first_token_ms", "decode_ms"):
            packed, apart = np.array(figures["packed"][figure]), np.array(figures["Slices"][figure])
            ratios = packed / apart  # (2 · pairs,): packed first, then Slices first, then packed first, ...
            ratio = float(np.median(np.sqrt(ratios[0::2] * ratios[1::2])))
            cells.append(f"{np.median(packed):.2f} | {np.median(apart):.2f} | {ratio:.3f}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=15, help="pairs of rounds, one in each order")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    found = measure(args)
    text = report(found, args)
    settings = {key: value for key, value in vars(args).items() if key != "folders"}
    raw = {"cpu": cpu_line(), "settings": settings, "exports": found}
    path = save_result(RESULTS, "-packed-qkv", text, raw)
    print(text + f"\nwritten: {path} and its .json")


if __name__ == "__main__":
    main()
