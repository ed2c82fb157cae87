"""The prompt kernel (RuntimeOptions.prompt_kernel 'dynamic', ``--prompt-kernel dynamic``): an int8 or int4 export's
prompts run through a second session whose projections are DynamicQuantizeMatMul over int8 weights requantized per
column at load, while decode steps keep the export's MatMulNBits.

What must hold: every projection but the tied head is replaced, each by int8 weights within half an int8 step of
the blocks it stands for, and the graph given is left as it was; prompts and steps run in separate sessions; on
trained weights a prompt's next-token distribution stays within a small KL of the export kernel's; generation
(with a float32 or an int8 cache) and the folder's graph runs work through it; and where it cannot apply it is
refused with one clear line."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from gpt2_onnx_core.batching import position_ids
from gpt2_onnx_core.block_quant import BlockQuantized, dequantize
from gpt2_onnx_core.errors import InvalidInputError, OptionError
from gpt2_onnx_core.names import DECODE, LOGITS
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.generation import Generation, GenerationOptions
from gpt2_onnx_runtimes.generation_graph import last_position_logits
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.prompt_kernel import PROMPT_WEIGHTS_FILE, dynamic_prompt_graph
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from tests.helpers import SPINNING_ENTRIES, invoke, load_graph, one_error_line, spinning_entries

ROOT = Path(__file__).resolve().parent.parent
MICRO_INT4 = ROOT / "fixtures" / "pydocs-micro-int4"  # trained weights, committed
HELDOUT = ROOT / "checkpoints" / "pydocs-micro" / "heldout.txt"
DYNAMIC = RuntimeOptions(layout="merged", prompt_kernel="dynamic")
EXPORT = RuntimeOptions(layout="merged")


def _kl(p_logits: np.ndarray, q_logits: np.ndarray) -> float:
    """KL(p || q) of two (V,) logit rows, in float64."""
    p = p_logits.astype(np.float64) - p_logits.max()
    q = q_logits.astype(np.float64) - q_logits.max()
    log_p, log_q = p - np.log(np.exp(p).sum()), q - np.log(np.exp(q).sum())
    return float((np.exp(log_p) * (log_p - log_q)).sum())


def _tensor(graph: onnx.ModelProto, folder: Path, name: str, memory: np.ndarray | None = None) -> np.ndarray:
    """Initializer ``name`` of ``graph``: inline, in the folder's weights file, or in the prompt's in-memory file."""
    tensor = next(t for t in graph.graph.initializer if t.name == name)
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return numpy_helper.to_array(tensor)
    info = {entry.key: entry.value for entry in tensor.external_data}
    source = memory if info["location"] == PROMPT_WEIGHTS_FILE else np.fromfile(folder / info["location"], np.uint8)
    assert source is not None
    offset, length = int(info["offset"]), int(info["length"])
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    return source[offset : offset + length].view(dtype).reshape(tuple(tensor.dims))


@pytest.mark.parametrize("precision", ["int4", "int8"])
def test_every_projection_but_the_head_becomes_qgemm_over_the_blocks_it_stands_for(
    shared_export: Callable[..., Path], precision: str
) -> None:
    folder = shared_export(precision=precision)
    graph = last_position_logits(load_graph(folder, DECODE))
    before = graph.SerializeToString()
    layers = ExportFolder.open(folder).manifest.dims.n_layer
    prompt = dynamic_prompt_graph(graph, folder / "model.onnx.data", folder / "decode.onnx")
    assert graph.SerializeToString() == before, "the graph given is left as it was"
    ops = Counter(node.op_type for node in prompt.model.graph.node)
    assert ops["DynamicQuantizeMatMul"] == 4 * layers and ops["MatMulNBits"] == 1  # the tied head stays
    originals = {node.output[0]: node for node in graph.graph.node if node.op_type == "MatMulNBits"}
    for node in (n for n in prompt.model.graph.node if n.op_type == "DynamicQuantizeMatMul"):
        source = originals[node.output[0]]
        attrs = {a.name: a.i for a in source.attribute}
        n, k, bits, block = attrs["N"], attrs["K"], attrs["bits"], attrs["block_size"]
        packed = _tensor(graph, folder, source.input[1]).reshape(n, k // block, -1)
        scales = _tensor(graph, folder, source.input[2]).reshape(n, k // block)
        blocks = dequantize(BlockQuantized(packed, scales, bits, block)).T  # (K, N) as the export computes
        values = _tensor(prompt.model, folder, node.input[1], prompt.weights)  # (K, N) int8
        column = _tensor(prompt.model, folder, node.input[2], prompt.weights)  # (N,)
        assert values.dtype == np.int8 and values.shape == (k, n) and column.shape == (n,)
        error = np.abs(values.astype(np.float32) * column - blocks)  # (K, N)
        assert np.all(error <= column / 2 * (1 + 1e-5) + 1e-7), node.name
    names = {t.name for t in prompt.model.graph.initializer}
    assert not any(name in names for node in originals.values() for name in node.input[1:3] if "wte" not in name)


def test_prompts_have_their_own_session_and_stay_close_to_the_export_kernel_on_trained_weights() -> None:
    """64-token windows of held-out text through the micro checkpoint's int4 export: each prompt's next-token
    distribution within KL 0.01 of the export kernel's (measured up to 8e-4; int4 itself is 0.036 from the source
    model on the trained checkpoint) and the same most likely token in all but at most one window."""
    export = ExportFolder.open(MICRO_INT4)
    dynamic, plain = LoadedExport.open(export, DYNAMIC), LoadedExport.open(export, EXPORT)
    assert dynamic.steps.prefill is not dynamic.steps.decode
    assert plain.steps.prefill is plain.steps.decode
    ids = np.asarray(export.encode_once(HELDOUT.read_text(encoding="utf-8")[:4000]))
    divergences, disagreements = [], 0
    for start in range(0, 600, 37):
        window = ids[None, start : start + 64]  # (1, 64)
        mask = np.ones_like(window)
        rows = [KvCacheRunner(m, capacity=80).prefill(window, mask, position_ids(mask))[0] for m in (dynamic, plain)]
        divergences.append(_kl(rows[1], rows[0]))
        disagreements += int(rows[0].argmax() != rows[1].argmax())
    assert max(divergences) < 0.01 and disagreements <= 1, (max(divergences), disagreements)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, {"session.force_spinning_stop": "1"}),  # spin within a run, never after it
        ({"session.intra_op.allow_spinning": "0"}, {"session.intra_op.allow_spinning": "0"}),
        ({"session.force_spinning_stop": "0"}, {"session.force_spinning_stop": "0"}),
    ],
)
def test_both_sessions_threads_stop_spinning_when_a_run_returns_unless_the_application_says(
    config: dict[str, str], expected: dict[str, str]
) -> None:
    """The prompt session and the step session share the cores: neither's threads may spin on after its run."""
    options = RuntimeOptions(layout="merged", prompt_kernel="dynamic", session_config=config)
    with LoadedExport.load(MICRO_INT4, options) as loaded:
        for session in (loaded.steps.prefill, loaded.steps.decode):
            assert spinning_entries(session) == {key: expected.get(key) for key in SPINNING_ENTRIES}


@pytest.mark.parametrize("kv_cache", ["float32", "int8"])
def test_generation_and_the_folders_graphs_run_through_it(kv_cache: str) -> None:
    chunked = RuntimeOptions(layout="merged", prompt_kernel="dynamic", kv_cache=kv_cache, prefill_chunk=16)  # type: ignore[arg-type]
    with LoadedExport.load(MICRO_INT4, chunked) as loaded:
        prompt = list(range(300, 340))  # three chunks, the later two after a past, all through the prompt session
        results = Generation(loaded, [prompt], GenerationOptions(max_new_tokens=6, ignore_eos=True)).run()
        assert len(results[0].token_ids) == 6
        mask = np.ones((1, 5), dtype=np.int64)
        empty = np.zeros((1, loaded.manifest.dims.n_head, 0, loaded.manifest.dims.head_dim), np.float32)
        feeds = {"input_ids": np.arange(5)[None], "attention_mask": mask, "position_ids": position_ids(mask)}
        feeds |= {name.name: empty for name in loaded.graph_session(DECODE).get_inputs() if "past" in name.name}
        assert loaded.run(DECODE, feeds)[LOGITS].shape == (1, 5, loaded.manifest.dims.vocab_size)


@pytest.mark.parametrize("kv_cache", ["float32", "int8"])
def test_every_chunk_of_a_prompt_runs_through_the_prompt_session(
    kv_cache: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The later chunks of a long prompt are prompt runs too: they take the prompt kernel, not the decode steps'."""
    options = RuntimeOptions(layout="merged", prompt_kernel="dynamic", kv_cache=kv_cache, prefill_chunk=16)  # type: ignore[arg-type]
    with LoadedExport.load(MICRO_INT4, options) as loaded:
        runs: Counter[str] = Counter()
        for name, session in (("prompt", loaded.steps.prefill), ("step", loaded.steps.decode)):
            run = session.run_with_iobinding

            def counted(*args: object, _run: object = run, _name: str = name) -> object:
                runs[_name] += 1
                return _run(*args)  # type: ignore[operator]

            monkeypatch.setattr(session, "run_with_iobinding", counted)
        ids = np.arange(300, 340)[None]  # (1, 40): chunks of 16, 16 and 8
        mask = np.ones_like(ids)
        runner = KvCacheRunner(loaded, capacity=48)
        runner.prefill(ids, mask, position_ids(mask))
        assert runs == {"prompt": 3} and runner.past_length == 40
        runner.decode(np.array([[7]]), np.ones((1, 41), np.int64), np.array([[40]]))
        assert runs == {"prompt": 3, "step": 1}


def test_it_is_refused_where_it_cannot_apply(shared_export: Callable[..., Path]) -> None:
    with pytest.raises(InvalidInputError, match="merged layout on the CPU provider only"):
        RuntimeOptions(layout="split", prompt_kernel="dynamic")
    with pytest.raises(InvalidInputError, match="merged layout on the CPU provider only"):
        RuntimeOptions(provider="cuda", prompt_kernel="dynamic")
    with pytest.raises(InvalidInputError, match="prompt_kernel must be one of export, dynamic, got 'fast'"):
        RuntimeOptions(prompt_kernel="fast")  # type: ignore[arg-type]
    for folder in (shared_export(), shared_export(precision="int8", matmul_kernel="dynamic")):
        with pytest.raises(InvalidInputError, match="needs an export whose projections are MatMulNBits blocks"):
            LoadedExport.load(folder, DYNAMIC)


def test_run_with_the_prompt_kernel_and_its_refusals(shared_export: Callable[..., Path]) -> None:
    int4 = shared_export(precision="int4")
    args = ("--prompt", "Hello there", "--max-new-tokens", "6", "--no-stream", "--prompt-kernel")
    result = invoke("run", str(int4), *args, "dynamic")
    assert result.exit_code == 0 and result.stdout.startswith("Hello there"), result.output
    fp32 = invoke("run", str(shared_export()), *args, "dynamic")
    assert fp32.exit_code == 2 and "this one is fp32" in one_error_line(fp32.output), fp32.output
    split = invoke("run", str(int4), *args, "dynamic", "--layout", "split")
    assert split.exit_code == 2 and "merged layout on the CPU provider only" in one_error_line(split.output)
    bad = invoke("run", str(int4), *args, "fast")
    assert bad.exit_code == 2 and "fast" in bad.output


def test_verify_checks_the_prompt_kernel_and_refuses_it_before_loading(
    shared_export: Callable[..., Path],
) -> None:
    """``verify --prompt-kernel dynamic`` adds the graphs' runs and generation through the prompt kernel, judged
    by the precision's limits; an export it cannot apply to is refused in one line before the source model loads."""
    args = ("--steps", "4", "--batch-size", "2", "--prompt-kernel", "dynamic")
    result = invoke("verify", str(shared_export(precision="int4")), *args, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["prompt_kernel"] == "dynamic" and report["result"] == "pass"
    checks = [c["check"] for c in report["comparisons"] if c["check"].endswith("prompt kernel dynamic")]
    assert any(c.startswith("prefill") for c in checks) and any(c.startswith("free-running") for c in checks)
    assert any(c.startswith("generation row") for c in checks)
    refused = invoke("verify", str(shared_export()), *args)
    assert refused.exit_code == 2 and "this one is fp32" in one_error_line(refused.output), refused.output


def test_serve_refuses_the_prompt_kernel_where_no_replica_could_load_it(shared_export: Callable[..., Path]) -> None:
    from gpt2_onnx.app.serving import app_builder, check_here
    from gpt2_onnx.cli.serve_cmd import _check_options

    with pytest.raises(InvalidInputError, match="runs on the CPU provider only, not cuda"):
        _check_options(None, False, 1, None, "cuda", None, "float32", "dynamic")
    with pytest.raises(InvalidInputError, match="this one is fp32"):
        check_here(shared_export(), None, "dynamic")
    assert check_here(shared_export(precision="int4"), None, "dynamic").manifest.precision == "int4"
    with pytest.raises(OptionError, match="prompt_kernel must be one of export, dynamic, got 'fast'"):
        app_builder({"export": str(shared_export(precision="int4")), "prompt_kernel": "fast"})


def test_bench_adds_a_prompt_kernel_row_for_each_block_quantized_folder(shared_export: Callable[..., Path]) -> None:
    from gpt2_onnx.app.bench.run import system_specs
    from gpt2_onnx_core.manifest import read_manifest

    folders = [shared_export(), shared_export(precision="int4")]
    manifests = [read_manifest(folder) for folder in folders]
    specs = system_specs(folders, manifests, False, None, None, prompt_dynamic=True)
    added = [spec for spec in specs if spec.label.endswith("+prompt-dynamic")]
    assert [(spec.folder, spec.prompt_kernel, spec.layout) for spec in added] == [
        (str(folders[1]), "dynamic", "merged")
    ]
