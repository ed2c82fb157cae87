"""Two generation graphs of one export, side by side in one process and run alternately, round by round: time to
first token and decode ms/token per export; writes a Markdown table to benchmarks/results/.

    .venv/bin/python benchmarks/paired_graphs.py --compare packed-qkv OUT/fp32 OUT/int8 OUT/int4 --pairs 15
    .venv/bin/python benchmarks/paired_graphs.py --compare single-row-head OUT/fp32 --pairs 15
    .venv/bin/python benchmarks/paired_graphs.py --compare packed-qkv OUT/int8 OUT/int4 --kv-cache int8

``--kv-cache int8`` loads both graphs over the runtime's int8 KV cache (``RuntimeOptions.kv_cache``); its results
are named ``<stamp><suffix>-kv-int8``.

Comparisons (``--compare``), each the runtime's default against the graph it replaced:
- packed-qkv: the in-place cache's GroupQueryAttention reading each layer's packed (B, S, 3d) projection, against
  reading three Slices of it (``packed_qkv`` answering None in inplace_attention while the second graph loads). Same
  computation: the first logits must be equal to the bit.
- last-layer: the last layer's output projection, MLP and norms on the last position only
  (``generation_graph.last_layer_at_last_position``), against on every position (that function answering None
  while the second graph loads). The first logits must agree to 1e-3 of their largest magnitude: in fp32 they
  differ by summation order only, but int8 and int4's MatMulNBits computes one row by another path than many
  (as a decode step's), which moved GPT-2-small int8's by up to 7e-4 of it.
- single-row-head: fp32, the tied head's single row multiplying the transposed copy of the table
  (``generation_graph.single_row_head``), against the table itself (``RuntimeOptions(single_row_head=False)``).
  Another summation order: the first logits must agree to 1e-5 of their largest magnitude.

The differences are small, smaller than what separate processes differ by on a shared machine, so both graphs live
in one process, each round runs both, the order alternating, and the ratios are paired in two ways:
- a prompt that runs right after the other graph's generation is slower, whichever graph it is (the machine's state
  after a burst, not the graph): one round's ratio depends on its order, the geometric mean of two rounds in opposite
  orders does not;
- the session loaded first decodes at another speed than the one loaded second, whichever graph it holds: both are
  loaded in one order and measured, then loaded again in the other order and measured as long again.

Each round of each graph is one greedy generation: a random ``--context``-token prompt (its time to first token:
the prefill and the first choice), then ``--new-tokens`` tokens (the median later token). Both graphs' tokens must
be the same; otherwise the script stops.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
from peers_report import cpu_line, save_result  # benchmarks/, beside this script

from gpt2_onnx_core.layouts import KV_CACHE_FORMATS
from gpt2_onnx_runtimes import inplace_attention, session
from gpt2_onnx_runtimes.generation import Generation
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

RESULTS = Path(__file__).resolve().parent / "results"


def _load_without(module: ModuleType, function: str) -> Callable[[Path, RuntimeOptions], LoadedExport]:
    """A loader under which ``module.function``, one of the generation graph's rewrites, answers None (the graph
    without that rewrite) while the export loads."""

    def load(folder: Path, options: RuntimeOptions) -> LoadedExport:
        keep = getattr(module, function)
        setattr(module, function, lambda *args, **kwargs: None)
        try:
            return LoadedExport.load(folder, options)
        finally:
            setattr(module, function, keep)

    return load


def _load_table_head(folder: Path, options: RuntimeOptions) -> LoadedExport:
    return LoadedExport.load(folder, dataclasses.replace(options, single_row_head=False))


@dataclass(frozen=True)
class Comparison:
    """The runtime's default graph (``names[0]``, loaded plainly) against the one it replaced (``names[1]``)."""

    suffix: str  # the results' name suffix
    title: str
    names: tuple[str, str]
    load_other: Callable[[Path, RuntimeOptions], LoadedExport]
    rtol: float  # the first logits' largest difference, relative to their largest magnitude; 0: equal to the bit
    method: str  # what each graph is, for the table's text


COMPARISONS = {
    "packed-qkv": Comparison(
        "-packed-qkv",
        "GroupQueryAttention reading the packed projection",
        ("packed", "Slices"),
        _load_without(inplace_attention, "packed_qkv"),
        0.0,
        "Packed: the in-place cache's GroupQueryAttention reads the (B, S, 3d) projection; Slices: it reads the q, "
        "k and v Slices of it (one Split node per layer once ONNX Runtime fuses them). Same tokens, first logits "
        "equal to the bit.",
    ),
    "last-layer": Comparison(
        "-last-layer",
        "The last layer past its attention on the last position only",
        ("last position", "every position"),
        _load_without(session, "last_layer_at_last_position"),
        1e-3,
        "Last position: the generation graph's last layer runs its output projection, MLP and norms on the last "
        "position only (``generation_graph.last_layer_at_last_position``); every position: on all of them, as "
        "decode.onnx does (the logits are the last position's either way). Same tokens, first logits within 1e-3 "
        "of their largest magnitude (MatMulNBits takes another path for one row than for many).",
    ),
    "single-row-head": Comparison(
        "-single-row-head",
        "The tied head's single row over the transposed table",
        ("transposed", "table"),
        _load_table_head,
        1e-5,
        "Transposed: a batch of one row multiplies the tied table's transposed copy, (d, V), made at load (MLAS's "
        "single-row kernel over a row-major matrix); table: Gemm(x, table, transB=1) over the (V, d) table as "
        "stored (the kernel's dot products). Same tokens, first logits within 1e-5 of their largest magnitude.",
    ),
}


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


def _load(folder: Path, graph: str, comparison: Comparison, options: RuntimeOptions) -> LoadedExport:
    if graph == comparison.names[0]:
        return LoadedExport.load(folder, options)
    return comparison.load_other(folder, options)


def _check_logits(loaded: dict[str, LoadedExport], prompt: list[int], comparison: Comparison) -> None:
    first, second = (_prompt_logits(loaded[graph], prompt) for graph in comparison.names)  # (1, 1, V) each
    tolerance = comparison.rtol * float(np.abs(second).max())
    if np.abs(first - second).max() > tolerance or (tolerance == 0 and not np.array_equal(first, second)):
        raise SystemExit(f"the {comparison.names[0]} graph computes other logits than the {comparison.names[1]} one")


def _rounds(
    loaded: dict[str, LoadedExport], comparison: Comparison, args: argparse.Namespace, seed: int
) -> dict[str, dict[str, list[float]]]:
    """``args.pairs`` pairs of rounds over both loaded graphs (after one uncounted round); stops where they differ."""
    graphs = comparison.names
    vocab = loaded[graphs[0]].manifest.dims.vocab_size
    rng = np.random.default_rng(seed)
    _check_logits(loaded, rng.integers(0, vocab, args.context).tolist(), comparison)
    figures: dict[str, dict[str, list[float]]] = {graph: {"first_token_ms": [], "decode_ms": []} for graph in graphs}
    for number in range(2 * args.pairs + 1):
        prompt = rng.integers(0, vocab, args.context).tolist()
        runs = {}
        for graph in graphs if number % 2 else graphs[::-1]:  # counted rounds: the default first, then the other
            runs[graph] = _generate(loaded[graph], prompt, args.new_tokens)
        if runs[graphs[0]][2] != runs[graphs[1]][2]:
            raise SystemExit(f"the {graphs[0]} graph chose other tokens than the {graphs[1]} one")
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
    comparison = COMPARISONS[args.compare]
    graphs = comparison.names
    options = RuntimeOptions(intra_op_threads=args.threads, kv_cache=args.kv_cache)
    for folder in args.folders:
        figures: dict[str, dict[str, list[float]]] = {g: {"first_token_ms": [], "decode_ms": []} for g in graphs}
        for seed, order in enumerate((graphs, graphs[::-1])):
            loaded = {graph: _load(folder, graph, comparison, options) for graph in order}
            for graph, measured in _rounds(loaded, comparison, args, seed).items():
                for figure, values in measured.items():
                    figures[graph][figure].extend(values)
            for one in loaded.values():
                one.close()
            del loaded
        found[folder.name] = figures
        print(f"{folder.name} done", file=sys.stderr, flush=True)
    return found


def report(found: dict[str, dict[str, dict[str, list[float]]]], args: argparse.Namespace) -> str:
    comparison = COMPARISONS[args.compare]
    new, old = comparison.names
    cache = f" over the {args.kv_cache} KV cache" if args.kv_cache != "float32" else ""
    flag = f" --kv-cache {args.kv_cache}" if cache else ""
    lines = [
        f"# {comparison.title}{cache}: a {args.context}-token prompt, then {args.new_tokens} tokens",
        "",
        f"CPU: {cpu_line()}, {args.threads} intra-op threads; `benchmarks/paired_graphs.py --compare {args.compare}"
        f"{flag}`, "
        f"both graphs of an export loaded in one process and run alternately, {args.pairs} pairs of rounds in "
        "opposite orders (after one uncounted round), then loaded again in the other order, as many pairs again. "
        f"{comparison.method} Times: medians over rounds; ratios: the median over pairs of each pair's geometric "
        "mean of its two rounds' ratios (a prompt right after the other graph's run is slower, whichever it is).",
        "",
        f"| export | time to first token, {new} (ms) | {old} (ms) | {new} ÷ {old} | decode, {new} (ms/token) "
        f"| {old} (ms/token) | {new} ÷ {old} |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, figures in found.items():
        cells = []
        for figure in ("first_token_ms", "decode_ms"):
            default, other = np.array(figures[new][figure]), np.array(figures[old][figure])
            ratios = default / other  # (2 · pairs,): the default first, then the other first, then ...
            ratio = float(np.median(np.sqrt(ratios[0::2] * ratios[1::2])))
            cells.append(f"{np.median(default):.2f} | {np.median(other):.2f} | {ratio:.3f}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--compare", choices=sorted(COMPARISONS), required=True)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=15, help="pairs of rounds, one in each order")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kv-cache", choices=KV_CACHE_FORMATS, default="float32")
    args = parser.parse_args()
    found = measure(args)
    text = report(found, args)
    settings = {key: value for key, value in vars(args).items() if key != "folders"}
    raw = {"cpu": cpu_line(), "settings": settings, "exports": found}
    suffix = COMPARISONS[args.compare].suffix + ("" if args.kv_cache == "float32" else f"-kv-{args.kv_cache}")
    path = save_result(RESULTS, suffix, text, raw)
    print(text + f"\nwritten: {path} and its .json")


if __name__ == "__main__":
    main()
