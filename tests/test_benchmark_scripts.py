"""Benchmark scripts that drive the runtime's internals, run on tiny exports so that a change to the runtime cannot
leave them broken unnoticed: benchmarks/cache_format_steps.py (the runtime's own graphs over each cache format; the
int4 graph is the int8 one over a 4-bit cache) and benchmarks/op_profile.py (ONNX Runtime's profiler over the
runtime's sessions, the prompt kernel's two included)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _beside_the_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """The script imports its neighbours in benchmarks/ by their own names, as it does when run."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))


def test_each_cache_format_runs_the_runtime_graph(shared_export: Callable[..., Path]) -> None:
    from benchmarks.cache_format_steps import FORMATS, load_steps, measure, table

    steps, loaded = load_steps(shared_export(precision="int4"), threads=1, capacity=40)
    try:
        assert set(steps) == set(FORMATS)
        found = measure(steps, rounds=1, contexts=(4, 30))
        assert {cache: sorted(times) for cache, times in found.items()} == {cache: [4, 30] for cache in FORMATS}
        assert all(seconds[0] > 0 for times in found.values() for seconds in times.values())
        rows = table(found)
        assert rows[0].startswith("| KV cache | after 4 positions, ms | after 30, ms |") and len(rows) == 2 + 3
    finally:
        for export in loaded:
            export.close()


def test_the_int4_graph_is_the_int8_one_over_a_four_bit_cache() -> None:
    from onnx import helper

    from benchmarks.cache_format_steps import int4_cache_graph

    cache = [helper.make_tensor_value_info("past_key_values.0.key", TensorProto.INT8, ["batch", 2, "past", 8])]
    present = [helper.make_tensor_value_info("present.0.key", TensorProto.INT8, ["batch", 2, "total", 8])]
    node = helper.make_node("GroupQueryAttention", ["past_key_values.0.key"], ["present.0.key"], kv_cache_bit_width=8)
    graph = helper.make_graph([node], "g", cache, present)
    model = onnx.load_from_string(int4_cache_graph(helper.make_model(graph).SerializeToString(), head_dim=8))
    assert model.graph.node[0].attribute[0].i == 4
    for value in (model.graph.input[0], model.graph.output[0]):
        assert value.type.tensor_type.elem_type == TensorProto.UINT8
        assert value.type.tensor_type.shape.dim[3].dim_value == 4  # two 4-bit values per byte


def test_op_profile_splits_prefill_and_decode_with_runtime_options(
    shared_export: Callable[..., Path], tmp_path: Path
) -> None:
    """The prompt kernel's two sessions (a clock each) and an int8 cache calibrated at load (those runs left
    out), a prompt of 40 tokens: every kernel is counted in its phase."""
    import json
    import subprocess
    import sys

    out = tmp_path / "profile.json"
    command = [sys.executable, str(REPO / "benchmarks" / "op_profile.py"), str(shared_export(precision="int4"))]
    command += ["--rounds", "1", "--new-tokens", "3", "--threads", "1", "--prompt", "40"]
    command += ["--kv-cache", "int8", "--prompt-kernel", "dynamic", "--json", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
    (summary,) = json.loads(out.read_text()).values()
    prefill, decode = summary["kernel_ms"]["prefill"], summary["kernel_ms"]["decode"]
    assert "DynamicQuantizeMatMul" in prefill and "DynamicQuantizeMatMul" not in decode  # the prompt's session
    assert "MatMulNBits" in decode and "GroupQueryAttention" in decode
    assert summary["wall_ms_median"]["decode"] > 0


def test_op_profile_counts_the_single_row_head_once(shared_export: Callable[..., Path], tmp_path: Path) -> None:
    """fp32 with a tied head: a batch of one row multiplies the table inside an If, whose time is its branch's
    MatMul; the If itself is not counted beside it."""
    import json
    import subprocess
    import sys

    out = tmp_path / "profile.json"
    command = [sys.executable, str(REPO / "benchmarks" / "op_profile.py"), str(shared_export(precision="fp32"))]
    command += ["--rounds", "1", "--new-tokens", "3", "--threads", "1", "--prompt", "8", "--json", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
    (summary,) = json.loads(out.read_text()).values()
    for phase in ("prefill", "decode"):
        assert "If" not in summary["kernel_ms"][phase] and "MatMul" in summary["kernel_ms"][phase]


def test_release_kernels_pairs_each_release_s_run_with_the_installed_one_s() -> None:
    from onnxruntime_release_kernels import table

    runs = {  # {release: [one process's {M: {kernel: median ms}}, ...]}, the pairs in order
        "1.0": [{"128": {"a": 10.0, "b": 4.0}}, {"128": {"a": 20.0, "b": 4.0}}, {"128": {"a": 10.0, "b": 4.0}}],
        "2.0": [{"128": {"a": 5.0, "b": 5.0}}, {"128": {"a": 30.0, "b": 4.0}}, {"128": {"a": 9.0, "b": 6.0}}],
    }
    head, rule, a, b = table(runs, ("1.0", "2.0"), ["a", "b"])
    assert head == "| kernel | M = 128: 1.0 ms | 2.0 ms | ÷ (no larger) |" and rule == "|---|---:|---:|---:|"
    assert a == "| a | 10.0 | 9.0 | 0.900 (2/3) |"  # ratios 0.5, 1.5, 0.9: paired per pair, not medians divided
    assert b == "| b | 4.0 | 5.0 | 1.250 (1/3) |"


def test_release_kernels_refuses_a_folder_without_onnxruntime(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "onnxruntime_release_kernels.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert done.returncode == 2
    assert f"{tmp_path} holds no onnxruntime package" in done.stderr


def test_a_benchmark_states_the_onnxruntime_it_loaded() -> None:
    import onnxruntime

    from gpt2_onnx.app.bench.environment import loaded_onnxruntime, machine_info

    assert loaded_onnxruntime() == onnxruntime.__version__
    assert machine_info("cpu")["onnxruntime_loaded"] == onnxruntime.__version__
