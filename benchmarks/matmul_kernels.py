"""The matrix products of GPT-2-small alone, one ONNX Runtime kernel choice per session, interleaved in one process:
what each int8/int4 kernel and setting costs a 128-token prompt (M = 128) and a decode step (M = 1).

    python benchmarks/matmul_kernels.py --rounds 9          # writes benchmarks/results/<stamp>-kernels.{json,md}
    python benchmarks/matmul_kernels.py --suffix=-xeon      # ... <stamp>-kernels-xeon.{json,md}: another CPU's run

Each variant is one graph holding the 12 layers' four projections (x·W_qkv 768→2304, x·W_o 768→768, x·W_fc
768→3072, h·W_proj 3072→768) on random weights (σ 0.02), so the weights are as many bytes as the model's. The
variants run in turn, the order rotated each round, with ONNX Runtime's spinning off (each session's threads idle
before the next runs); the table gives medians and each variant's time ÷ the first variant's, paired per round.
Variants (``MatMulNBits`` weights cut as gpt2-onnx's exporter cuts them):

    fp32                    MatMul over float32 weights (MLAS SGEMM, prepacked)
    nbits-B-bBLOCK-aLEVEL   MatMulNBits, B bits, blocks of BLOCK along K (smaller where K needs), accuracy_level LEVEL
    dynamic                 DynamicQuantizeMatMul: int8 weights per column, activations to uint8 per tensor
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from peers_report import cpu_flags, save_result  # noqa: E402  # benchmarks/, beside this script

from gpt2_onnx.app.bench.environment import machine_info  # noqa: E402  # after the path
from gpt2_onnx_core.block_quant import quantize_blocks, quantize_columns  # noqa: E402
from gpt2_onnx_core.precisions import Quantization  # noqa: E402

LAYERS = 12
PROJECTIONS = (("qkv", 768, 2304, "x"), ("o", 768, 768, "x"), ("fc", 768, 3072, "x"), ("proj", 3072, 768, "h"))
DEFAULT_VARIANTS = (
    "fp32",
    "nbits-8-b128-a4",
    "nbits-8-b128-a0",
    "nbits-8-b256-a4",
    "dynamic",
    "nbits-4-b32-a4",
    "nbits-4-b32-a0",
    "nbits-4-b64-a4",
    "nbits-4-b128-a4",
    "nbits-4-b256-a4",
)


def _node(variant: str, name: str, source: str, weight: np.ndarray) -> tuple[Any, list[Any]]:
    """The node multiplying ``source`` by ``weight`` (K, N) in ``variant``'s way, and its initializers."""
    from onnx import helper, numpy_helper

    k, n = weight.shape
    if variant == "fp32":
        return helper.make_node("MatMul", [source, name], [f"{name}.y"]), [numpy_helper.from_array(weight, name)]
    if variant == "dynamic":
        q = quantize_columns(weight)
        node = helper.make_node(
            "DynamicQuantizeMatMul", [source, name, f"{name}.s"], [f"{name}.y"], domain="com.microsoft"
        )
        return node, [numpy_helper.from_array(q.values, name), numpy_helper.from_array(q.scales, f"{name}.s")]
    _, bits, block, level = variant.split("-")
    settings = Quantization(bits=int(bits), block_size=int(block[1:]), accuracy_level=int(level[1:]))
    blocks = quantize_blocks(np.ascontiguousarray(weight.T), settings.bits, settings.block_for(k))
    attributes = {"K": k, "N": n, "bits": settings.bits, "block_size": blocks.block_size}
    node = helper.make_node(
        "MatMulNBits",
        [source, name, f"{name}.s"],
        [f"{name}.y"],
        domain="com.microsoft",
        accuracy_level=settings.accuracy_level,
        **attributes,
    )
    return node, [numpy_helper.from_array(blocks.packed, name), numpy_helper.from_array(blocks.scales, f"{name}.s")]


def build(variant: str, rows: int, weights: dict[str, np.ndarray]) -> bytes:
    """One graph: every projection of every layer, each reading the input x (rows, 768) or h (rows, 3072)."""
    from onnx import TensorProto, helper

    nodes, initializers, outputs = [], [], []
    for name, weight in weights.items():
        node, tensors = _node(variant, name, "h" if name.endswith(".proj") else "x", weight)
        nodes.append(node)
        initializers += tensors
        outputs.append(helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None))
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 768]),
        helper.make_tensor_value_info("h", TensorProto.FLOAT, [rows, 3072]),
    ]
    graph = helper.make_graph(nodes, variant, inputs, outputs, initializers)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    return model.SerializeToString()


def measure(variants: list[str], rows: int, rounds: int, threads: int) -> dict[str, list[float]]:
    """Seconds per run of each variant's graph, ``rounds`` runs each, interleaved (after one warm-up run each)."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    weights = {
        f"{layer}.{name}": (rng.standard_normal((k, n)) * 0.02).astype(np.float32)
        for layer in range(LAYERS)
        for name, k, n, _ in PROJECTIONS
    }
    sessions = {}
    for variant in variants:
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sessions[variant] = ort.InferenceSession(
            build(variant, rows, weights), options, providers=["CPUExecutionProvider"]
        )
    feed = {name: rng.standard_normal((rows, width)).astype(np.float32) for name, width in (("x", 768), ("h", 3072))}
    times: dict[str, list[float]] = {variant: [] for variant in variants}
    for session in sessions.values():
        session.run(None, feed)
    for index in range(rounds):
        for variant in variants[index % len(variants) :] + variants[: index % len(variants)]:
            start = time.perf_counter()
            sessions[variant].run(None, feed)
            times[variant].append(time.perf_counter() - start)
    return times


def table(found: dict[int, dict[str, list[float]]], variants: list[str]) -> list[str]:
    """Markdown rows: per variant, median ms and × the first variant (paired per round) at each M."""
    head = " | ".join(f"M = {rows}: ms (× {variants[0]})" for rows in found)
    lines = [f"| kernel | {head} |", "|---|" + "---:|" * len(found)]
    for variant in variants:
        cells = []
        for times in found.values():
            ratio = statistics.median(a / b for a, b in zip(times[variant], times[variants[0]], strict=True))
            cells.append(f"{1000 * statistics.median(times[variant]):.1f} ({ratio:.2f}×)")
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return lines


def cpu_features() -> str:
    """Which of the kernel-deciding CPU features the machine has, in words."""
    flags = cpu_flags()
    present = [flag for flag, here in flags.items() if here]
    return f"present: {', '.join(present)}; absent: {', '.join(f for f, here in flags.items() if not here)}"


def machine_sentence(before: dict[str, Any], after: dict[str, Any]) -> str:
    """A result's closing sentence on where it ran, from ``machine_info`` before and after the measurement."""
    versions = ", ".join(f"{k} {v}" for k, v in sorted(before["libraries"].items()))
    return (
        f"Machine: {before['cpu']}, {before['physical_cores']} cores ({cpu_features()}); load average "
        f"{before['load_average']} before, {after['load_average']} after (shared machine: the ratios, not the "
        f"milliseconds, carry over). Versions: {versions}; ONNX Runtime loaded: {after['onnxruntime_loaded']}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    parser.add_argument("--rows", default="128,1", help="M values: prompt tokens (128) and a decode step (1)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--suffix", default="", help="appended to the results' kind, e.g. --suffix=-xeon")
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results", help="where to write")
    args = parser.parse_args()
    variants = args.variants.split(",")
    before = machine_info("cpu")
    found = {int(rows): measure(variants, int(rows), args.rounds, args.threads) for rows in args.rows.split(",")}
    after = machine_info("cpu")
    raw = {"variants": variants, "rounds": args.rounds, "threads": args.threads, "seconds": found}
    raw |= {"before": before, "after": after}
    text = [
        "# GPT-2-small's matrix products by kernel",
        "",
        *table(found, variants),
        "",
        f"The 48 projections of GPT-2-small (12 layers × qkv, attention out, MLP in, MLP out) alone, random weights, "
        f"{args.threads} intra-op threads, spinning off, {args.rounds} interleaved rounds (order rotated), medians; "
        "× is each round's time ÷ the first kernel's in the same round. " + machine_sentence(before, after),
    ]
    print(save_result(args.results, "-kernels" + args.suffix, "\n".join(text) + "\n", raw))
    print("\n".join(text))


if __name__ == "__main__":
    main()
