"""A whole decode step by the KV cache's format: what the runtime's generation graph costs per token after 128 and
after 1,000 positions over a float32, int8 and int4 cache, interleaved in one process. It answers whether a cache
smaller than int8 would make decode grow less with the context once the weights' passes share the memory system
with it (``benchmarks/gqa_cache_formats.py`` times the attention alone, its cache hot in the CPU's caches).

    python benchmarks/cache_format_steps.py EXPORT --rounds 30     # writes results/<stamp>-cache-steps.{json,md}

The graphs are the runtime's own (``LoadedExport`` with ``kv_cache`` 'float32' and 'int8': the in-place
GroupQueryAttention graph and, for int8, the scales it calibrates when it loads). The int4 graph has no runtime
option: it is the int8 graph with ONNX Runtime's ``kv_cache_bit_width`` 4 and a uint8 cache of two values per byte,
run with the int8 graph's scales (what a step costs does not depend on them; its logits are not used). Each format's
cache is one buffer per tensor of 1,100 positions, bound as past and present as the runtime binds it, holding
random values. Each figure is the best of 5 steps after 2 (the step's weights and cache leave the CPU's caches
between steps as they do in a generation: GPT-2-small's weights are tens of MB), the formats and contexts in turn,
the order rotated each round; medians over rounds, growth (after 1,000 − after 128) and ratio paired per round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from gqa_cache_formats import best_run, interleaved  # noqa: E402  # benchmarks/, beside this script
from matmul_kernels import machine_sentence  # noqa: E402
from peers_report import save_result  # noqa: E402

from gpt2_onnx.app.bench.environment import machine_info  # noqa: E402  # after the path

FORMATS = ("float32", "int8", "int4")
CONTEXTS = (128, 1000)
CAPACITY = 1100
_REPEATS, _WARM = 5, 2
_GENERATION_GRAPH = "the generation graph"  # what gpt2_onnx_runtimes.session names the session it creates


class Step:
    """One format's generation session, its cache bound as both past and present, and the constant inputs."""

    def __init__(
        self, session: Any, constants: dict[str, Any], dtype: Any, last: int, dims: Any, capacity: int = CAPACITY
    ) -> None:
        import onnxruntime as ort

        rng = np.random.default_rng(0)
        self.session, self.binding = session, session.io_binding()
        self.buffers = []  # kept: the binding points into them
        for layer in range(dims.n_layer):
            for kind in ("key", "value"):
                shape = (1, dims.n_head, capacity, last)  # (B, nh, capacity, hs; hs/2 for int4)
                array = (
                    rng.standard_normal(shape).astype(np.float32)
                    if dtype == np.float32
                    else rng.integers(0, 100, shape).astype(dtype)
                )
                buffer = ort.OrtValue.ortvalue_from_numpy(array)
                self.buffers.append(buffer)
                self.binding.bind_ortvalue_input(f"past_key_values.{layer}.{kind}", buffer)
                self.binding.bind_ortvalue_output(f"present.{layer}.{kind}", buffer)
        for name, value in constants.items():
            self.binding.bind_ortvalue_input(name, value)
        self.binding.bind_output("logits")

    def seconds(self, context: int) -> float:
        """The best of a few steps of one new token after ``context`` positions."""
        self.binding.bind_cpu_input("input_ids", np.array([[5]], np.int64))
        self.binding.bind_cpu_input("attention_mask", np.ones((1, context + 1), np.int64))
        self.binding.bind_cpu_input("position_ids", np.array([[context]], np.int64))
        return best_run(lambda: self.session.run_with_iobinding(self.binding), _REPEATS, _WARM)


def int4_cache_graph(serialized: bytes, head_dim: int) -> bytes:
    """The int8-cache generation graph ``serialized`` over a 4-bit cache: GroupQueryAttention's
    ``kv_cache_bit_width`` 4, the cache tensors uint8 of ``head_dim`` / 2 (two values per byte)."""
    import onnx
    from onnx import TensorProto

    model = onnx.load_from_string(serialized)
    for node in model.graph.node:
        for attribute in node.attribute:
            if node.op_type == "GroupQueryAttention" and attribute.name == "kv_cache_bit_width":
                attribute.i = 4
    for value in [*model.graph.input, *model.graph.output]:
        tensor = value.type.tensor_type
        if value.name.startswith(("past_key_values.", "present.")) and tensor.elem_type == TensorProto.INT8:
            tensor.elem_type = TensorProto.UINT8
            tensor.shape.dim[3].dim_value = head_dim // 2
    return model.SerializeToString()


def load_steps(folder: Path, threads: int, capacity: int = CAPACITY) -> tuple[dict[str, Step], list[Any]]:
    """Each format's :class:`Step` (a cache of ``capacity`` positions) for the export in ``folder``, and the loaded
    exports (kept open)."""
    import onnxruntime as ort

    from gpt2_onnx_runtimes import session as runtime

    made: dict[str, tuple[bytes, Any]] = {}
    create = runtime.create_session

    def capturing(serialized: bytes, session_options: Any, options: Any, what: str) -> Any:
        if what == _GENERATION_GRAPH:
            made[options.kv_cache] = (serialized, session_options)
        return create(serialized, session_options, options, what)

    runtime.create_session = capturing  # type: ignore[assignment]
    try:
        loaded = {
            cache: runtime.LoadedExport.load(
                folder, runtime.RuntimeOptions(intra_op_threads=threads, inter_op_threads=1, kv_cache=cache)
            )
            for cache in ("float32", "int8")
        }
    finally:
        runtime.create_session = create  # type: ignore[assignment]
    dims = loaded["int8"].manifest.dims
    serialized, session_options = made["int8"]
    int4 = ort.InferenceSession(
        int4_cache_graph(serialized, dims.head_dim), session_options, providers=["CPUExecutionProvider"]
    )
    steps = {
        cache: Step(
            loaded[cache].steps.decode, dict(loaded[cache].steps.constant_inputs), dtype, dims.head_dim, dims, capacity
        )
        for cache, dtype in (("float32", np.float32), ("int8", np.int8))
    }
    int8_constants = dict(loaded["int8"].steps.constant_inputs)
    steps["int4"] = Step(int4, int8_constants, np.uint8, dims.head_dim // 2, dims, capacity)
    return steps, list(loaded.values())


def measure(
    steps: dict[str, Step], rounds: int, contexts: tuple[int, int] = CONTEXTS
) -> dict[str, dict[int, list[float]]]:
    """Seconds per step, by format and context, ``rounds`` of each, interleaved."""
    return interleaved({cache: steps[cache] for cache in FORMATS}, rounds, contexts)


def table(found: dict[str, dict[int, list[float]]]) -> list[str]:
    """Markdown rows: per format, median ms at each context, the growth and the ratio, paired per round."""
    first, last = sorted(next(iter(found.values())))
    lines = [
        f"| KV cache | after {first} positions, ms | after {last:,}, ms | growth, ms "
        f"| after {last:,} ÷ after {first} |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for cache, times in found.items():
        pairs = list(zip(times[first], times[last], strict=True))
        growth = statistics.median(b - a for a, b in pairs)
        ratio = statistics.median(b / a for a, b in pairs)
        lines.append(
            f"| {cache} | {1000 * statistics.median(times[first]):.2f} | {1000 * statistics.median(times[last]):.2f}"
            f" | {1000 * growth:.2f} | {ratio:.3f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=Path, help="an int8 or int4 export folder (GPT-2-small for the docs' run)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--suffix", default="", help="appended to the results' kind, e.g. --suffix=-xeon")
    args = parser.parse_args()
    steps, loaded = load_steps(args.export, args.threads)
    before = machine_info("cpu")
    found = measure(steps, args.rounds)
    after = machine_info("cpu")
    precision = loaded[0].manifest.precision
    raw = {"export": str(args.export), "precision": precision, "formats": FORMATS, "contexts": CONTEXTS}
    raw |= {"rounds": args.rounds, "threads": args.threads, "seconds": found, "before": before, "after": after}
    text = [
        "# A whole decode step by KV cache format",
        "",
        *table(found),
        "",
        f"One decode step of the runtime's generation graph for `{args.export.name}` ({precision}), a cache of "
        f"{CAPACITY:,} positions bound as past and present, {args.threads} intra-op threads; each figure the best of "
        f"{_REPEATS} steps after {_WARM}, {args.rounds} rounds in rotated order, medians; growth and ratio paired "
        "per round. int4: the int8 graph with `kv_cache_bit_width` 4 (no runtime option). "
        + machine_sentence(before, after),
    ]
    print(save_result(REPO / "benchmarks" / "results", "-cache-steps" + args.suffix, "\n".join(text) + "\n", raw))
    print("\n".join(text))
    for export in loaded:
        export.close()


if __name__ == "__main__":
    main()
