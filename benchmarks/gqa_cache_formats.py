"""The decode step's attention alone, by the KV cache's format: what ONNX Runtime's GroupQueryAttention costs a
GPT-2-small decode step over a float32, int8 and int4 cache after 128 and after 1,000 positions, interleaved in
one process. It answers whether a smaller cache than int8 would make decode grow less with the context.

    python benchmarks/gqa_cache_formats.py --rounds 100     # writes benchmarks/results/<stamp>-gqa-cache.{json,md}

Each format is one graph of 12 GroupQueryAttention nodes (12 heads of 64, kv_num_heads = num_heads: GPT-2's
multi-head attention, as the runtime's in-place cache builds it: gpt2_onnx_runtimes.inplace_attention), chained
through their outputs, each over its own past key and value of 1,024 positions bound as both past and present (the
cache written in place), one new position per step:

    float32  the cache as the runtime keeps it by default
    int8     kv_cache_bit_width 8, PER_CHANNEL scales (the runtime's --kv-cache int8)
    int4     kv_cache_bit_width 4, PER_CHANNEL scales, two values per uint8 (no runtime option: measured here)

The cache holds random values (what the kernel reads does not change its cost). Each step's time is the best of 5
runs after 3 unmeasured ones (the cache and weights of these graphs alone stay in the CPU's caches, unlike a whole
model's step: the figures are the kernel's own cost), the formats and contexts in turn, the order rotated each
round; medians over rounds, and each format's growth (after 1,000 − after 128) paired per round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from matmul_kernels import machine_sentence  # noqa: E402  # benchmarks/, beside this script
from peers_report import save_result  # noqa: E402

from gpt2_onnx.app.bench.environment import machine_info  # noqa: E402  # after the path

LAYERS, HEADS, HEAD_DIM, CAPACITY = 12, 12, 64, 1024  # GPT-2-small; GPT-2's 1,024 positions
FORMATS = ("float32", "int8", "int4")
CONTEXTS = (128, 1000)
_REPEATS, _WARM = 5, 3  # runs per measurement (best of), unmeasured runs before them


def build(cache: str) -> tuple[bytes, Any, int]:
    """The graph of ``cache``'s format, its cache element type (numpy) and the cache's last dimension."""
    from onnx import TensorProto, helper

    elem, dtype, last = {
        "float32": (TensorProto.FLOAT, np.float32, HEAD_DIM),
        "int8": (TensorProto.INT8, np.int8, HEAD_DIM),
        "int4": (TensorProto.UINT8, np.uint8, HEAD_DIM // 2),  # two 4-bit values per byte
    }[cache]
    width = HEADS * HEAD_DIM

    def value(name: str, kind: int, shape: list[Any]) -> Any:
        return helper.make_tensor_value_info(name, kind, shape)

    inputs = [value(name, TensorProto.FLOAT, [1, 1, width]) for name in ("q", "k", "v")]
    inputs += [value("seqlens_k", TensorProto.INT32, [1]), value("total", TensorProto.INT32, [])]
    quantized = cache != "float32"
    if quantized:
        inputs += [value(name, TensorProto.FLOAT, [1, HEADS, 1, HEAD_DIM]) for name in ("k_scale", "v_scale")]
    nodes, outputs = [], []
    for layer in range(LAYERS):
        past = [f"past_key.{layer}", f"past_value.{layer}"]
        inputs += [value(name, elem, [1, HEADS, CAPACITY, last]) for name in past]
        query = "q" if layer == 0 else f"out.{layer - 1}"  # chained: one step's attention, layer after layer
        names = [query, "k", "v", *past, "seqlens_k", "total"]
        attributes: dict[str, Any] = {"num_heads": HEADS, "kv_num_heads": HEADS}
        if quantized:
            names += ["", "", "", "", "", "k_scale", "v_scale"]  # no rotary, position ids, bias, sink
            attributes |= {"k_quant_type": "PER_CHANNEL", "v_quant_type": "PER_CHANNEL"}
            attributes["kv_cache_bit_width"] = 8 if cache == "int8" else 4
        present = [f"present_key.{layer}", f"present_value.{layer}"]
        nodes.append(
            helper.make_node(
                "GroupQueryAttention", names, [f"out.{layer}", *present], domain="com.microsoft", **attributes
            )
        )
        outputs += [value(name, elem, None) for name in present]
    last_output = value(f"out.{LAYERS - 1}", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, f"gqa-{cache}", inputs, [last_output, *outputs])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 9  # the installed onnx writes a newer IR than ONNX Runtime 1.31 reads
    return model.SerializeToString(), dtype, last


class Step:
    """One format's session with its cache bound as both past and present, as the runtime binds it."""

    def __init__(self, cache: str, threads: int, rng: np.random.Generator) -> None:
        import onnxruntime as ort

        data, dtype, last = build(cache)
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        self.binding = self.session.io_binding()
        self.buffers = []  # kept: the binding points into them
        for layer in range(LAYERS):
            for kind in ("key", "value"):
                shape = (1, HEADS, CAPACITY, last)  # (B, nh, capacity, hs or hs/2)
                array = (
                    rng.standard_normal(shape).astype(np.float32)
                    if cache == "float32"
                    else rng.integers(0, 100, shape).astype(dtype)
                )
                buffer = ort.OrtValue.ortvalue_from_numpy(array)
                self.buffers.append(buffer)
                self.binding.bind_ortvalue_input(f"past_{kind}.{layer}", buffer)
                self.binding.bind_ortvalue_output(f"present_{kind}.{layer}", buffer)
        for name in ("q", "k", "v"):
            self.binding.bind_cpu_input(name, rng.standard_normal((1, 1, HEADS * HEAD_DIM)).astype(np.float32))
        if cache != "float32":
            for name in ("k_scale", "v_scale"):
                self.binding.bind_cpu_input(name, np.full((1, HEADS, 1, HEAD_DIM), 0.02, np.float32))
        self.binding.bind_output(f"out.{LAYERS - 1}")

    def seconds(self, context: int) -> float:
        """The best of a few steps that attend over ``context`` positions (the new one the last)."""
        self.binding.bind_cpu_input("seqlens_k", np.array([context - 1], np.int32))
        self.binding.bind_cpu_input("total", np.array(context, np.int32))
        return best_run(lambda: self.session.run_with_iobinding(self.binding), _REPEATS, _WARM)


def best_run(run: Callable[[], object], repeats: int, warm: int) -> float:
    """The fastest of ``repeats`` timed calls of ``run``, in seconds, after ``warm`` untimed ones."""
    for _ in range(warm):
        run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def interleaved(
    steps: Mapping[str, Any], rounds: int, contexts: Sequence[int] = CONTEXTS
) -> dict[str, dict[int, list[float]]]:
    """Seconds per step of each of ``steps`` (by format; each has ``seconds(context)``) at each context, ``rounds``
    of each, the (format, context) pairs in turn, the order rotated each round."""
    found: dict[str, dict[int, list[float]]] = {cache: {context: [] for context in contexts} for cache in steps}
    pairs = [(cache, context) for cache in steps for context in contexts]
    for index in range(rounds):
        shift = index % len(pairs)
        for cache, context in pairs[shift:] + pairs[:shift]:
            found[cache][context].append(steps[cache].seconds(context))
    return found


def measure(rounds: int, threads: int) -> dict[str, dict[int, list[float]]]:
    """Seconds per step, by format and context, ``rounds`` of each, interleaved."""
    rng = np.random.default_rng(0)
    return interleaved({cache: Step(cache, threads, rng) for cache in FORMATS}, rounds)


def table(found: dict[str, dict[int, list[float]]]) -> list[str]:
    """Markdown rows: per format, median ms at each context, the growth and the growth ÷ float32's, per round."""
    first, last = CONTEXTS
    lines = [
        f"| KV cache | after {first} positions, ms | after {last:,}, ms | growth, ms | growth ÷ float32's |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    growth = {cache: [b - a for a, b in zip(times[first], times[last], strict=True)] for cache, times in found.items()}
    for cache, times in found.items():
        ratio = statistics.median(g / f for g, f in zip(growth[cache], growth["float32"], strict=True))
        lines.append(
            f"| {cache} | {1000 * statistics.median(times[first]):.3f} | {1000 * statistics.median(times[last]):.3f}"
            f" | {1000 * statistics.median(growth[cache]):.3f} | {ratio:.2f}× |"
        )
    return lines


def _cache_mb(bytes_per_value: float, context: int = CONTEXTS[-1]) -> float:
    """The keys and values of every layer over ``context`` positions, in MB."""
    return 2 * LAYERS * HEADS * HEAD_DIM * context * bytes_per_value / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--suffix", default="", help="appended to the results' kind, e.g. --suffix=-xeon")
    args = parser.parse_args()
    before = machine_info("cpu")
    found = measure(args.rounds, args.threads)
    after = machine_info("cpu")
    raw = {"formats": FORMATS, "contexts": CONTEXTS, "rounds": args.rounds, "threads": args.threads}
    raw |= {"seconds": found, "before": before, "after": after}
    text = [
        "# The decode step's attention by KV cache format",
        "",
        *table(found),
        "",
        f"One decode step's attention of GPT-2-small alone: 12 chained GroupQueryAttention nodes (12 heads of 64), "
        f"each cache of {CAPACITY:,} positions bound as past and present, {args.threads} intra-op threads, spinning "
        f"off; each figure the best of {_REPEATS} steps after {_WARM}, {args.rounds} rounds in rotated order, "
        "medians; growth: after 1,000 − after 128, paired per round. The cache a step reads after 1,000 positions: "
        f"{_cache_mb(4):.1f} MB in float32, {_cache_mb(1):.1f} MB in int8, {_cache_mb(0.5):.1f} MB in int4 (scales "
        "aside). " + machine_sentence(before, after),
    ]
    print(save_result(REPO / "benchmarks" / "results", "-gqa-cache" + args.suffix, "\n".join(text) + "\n", raw))
    print("\n".join(text))


if __name__ == "__main__":
    main()
