"""Parity of exported graphs with transformers' GPT2LMHeadModel, computed here with plain onnxruntime and torch
(independently of gpt2_onnx.app.parity_suite), for the default export and every GPT2Config variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

from gpt2_onnx.app.verify import VerifyOptions, verify_export
from tests.conftest import export_checkpoint, save_checkpoint

ATOL = 1e-4
PROMPT = [464, 2068, 7586, 21831, 18045, 625, 262]  # "The quick brown fox jumps over the"


def sessions(folder: Path) -> dict[str, ort.InferenceSession]:
    return {
        k: ort.InferenceSession(str(folder / f"{k}.onnx"), providers=["CPUExecutionProvider"])
        for k in ("prefill", "decode")
    }


def hf_model(checkpoint: Path) -> Any:
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(checkpoint, attn_implementation="eager").eval()


@torch.no_grad()
def hf_forward(model: Any, ids: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    mask = np.ones_like(ids) if mask is None else mask
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    out = model(
        input_ids=torch.from_numpy(ids),
        attention_mask=torch.from_numpy(mask),
        position_ids=torch.from_numpy(positions),
        use_cache=True,
    )
    kv = [t.numpy() for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
    return out.logits.numpy(), kv


def feeds(
    ids: np.ndarray, mask: np.ndarray, positions: np.ndarray, past: list[np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    result = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
    for i, value in enumerate(past or []):
        result[f"past_key_values.{i // 2}.{'key' if i % 2 == 0 else 'value'}"] = value
    return result


def greedy_chain(
    graphs: dict[str, ort.InferenceSession], prompt: list[int], steps: int
) -> tuple[list[int], list[np.ndarray], list[np.ndarray]]:
    """Greedy decoding with prefill + decode; returns the tokens, each step's logits and the final KV."""
    ids = np.array([prompt], dtype=np.int64)
    mask = np.ones_like(ids)
    out = graphs["prefill"].run(None, feeds(ids, mask, np.arange(len(prompt), dtype=np.int64)[None]))
    logits, past = [out[0][0, -1]], out[1:]
    tokens = [int(out[0][0, -1].argmax())]
    for _ in range(steps - 1):
        mask = np.ones((1, mask.shape[1] + 1), dtype=np.int64)
        position = np.array([[mask.shape[1] - 1]], dtype=np.int64)
        out = graphs["decode"].run(None, feeds(np.array([[tokens[-1]]], dtype=np.int64), mask, position, past))
        logits.append(out[0][0, -1])
        past = out[1:]
        tokens.append(int(out[0][0, -1].argmax()))
    return tokens, logits, past


def assert_parity(folder: Path, model: Any, steps: int = 4) -> None:
    graphs = sessions(folder)
    tokens, logits, past = greedy_chain(graphs, PROMPT, steps)
    full = np.array([PROMPT + tokens[:-1]], dtype=np.int64)
    ref_logits, ref_kv = hf_forward(model, full)
    for step, step_logits in enumerate(logits):
        np.testing.assert_allclose(step_logits, ref_logits[0, len(PROMPT) - 1 + step], atol=ATOL, rtol=0)
    for ours, theirs in zip(past, ref_kv, strict=True):
        np.testing.assert_allclose(ours, theirs, atol=ATOL, rtol=0)
    expected = model.generate(
        torch.tensor([PROMPT]), do_sample=False, max_new_tokens=steps, eos_token_id=None, pad_token_id=0
    )
    assert tokens == expected[0, len(PROMPT) :].tolist()


def test_default_export_matches_transformers(tiny_export: Path, tiny_model: Any) -> None:
    assert_parity(tiny_export, tiny_model, steps=8)


def test_decode_with_empty_past_equals_prefill_over_all_positions(tiny_export: Path, tiny_model: Any) -> None:
    graphs = sessions(tiny_export)
    ids = np.array([PROMPT], dtype=np.int64)
    empty = [np.zeros((1, 4, 0, 16), dtype=np.float32)] * 4
    out = graphs["decode"].run(None, feeds(ids, np.ones_like(ids), np.arange(len(PROMPT))[None], empty))
    ref_logits, ref_kv = hf_forward(tiny_model, ids)
    np.testing.assert_allclose(out[0], ref_logits, atol=ATOL, rtol=0)
    for ours, theirs in zip(out[1:], ref_kv, strict=True):
        np.testing.assert_allclose(ours, theirs, atol=ATOL, rtol=0)


@pytest.mark.parametrize("past_length", [0, 1, 5])
@pytest.mark.parametrize("new", [1, 3])
def test_decode_over_past_lengths_and_new_token_counts(
    tiny_export: Path, tiny_model: Any, past_length: int, new: int
) -> None:
    graphs = sessions(tiny_export)
    sequence = np.array(
        [PROMPT[: past_length + new] if past_length + new <= len(PROMPT) else (PROMPT * 2)[: past_length + new]],
        dtype=np.int64,
    )
    ref_logits, ref_kv = hf_forward(tiny_model, sequence)
    past = [kv[:, :, :past_length] for kv in ref_kv]
    mask = np.ones((1, past_length + new), dtype=np.int64)
    out = graphs["decode"].run(
        None, feeds(sequence[:, past_length:], mask, np.arange(past_length, past_length + new)[None], past)
    )
    np.testing.assert_allclose(out[0], ref_logits[:, past_length:], atol=ATOL, rtol=0)
    np.testing.assert_allclose(out[1], ref_kv[0], atol=ATOL, rtol=0)


def test_left_padded_batch_rows_equal_each_row_alone(tiny_export: Path) -> None:
    graphs = sessions(tiny_export)
    rows = [PROMPT, PROMPT[:2], PROMPT[3:]]
    width = max(map(len, rows))
    ids = np.zeros((3, width), dtype=np.int64)
    mask = np.zeros((3, width), dtype=np.int64)
    for r, row in enumerate(rows):
        ids[r, width - len(row) :], mask[r, width - len(row) :] = row, 1
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    batch = graphs["prefill"].run(None, feeds(ids, mask, positions))
    batch_past = batch[1:]
    step_ids = np.array([[11], [12], [13]], dtype=np.int64)
    step_mask = np.concatenate([mask, np.ones((3, 1), dtype=np.int64)], axis=1)
    batch_step = graphs["decode"].run(None, feeds(step_ids, step_mask, positions[:, -1:] + 1, batch_past))
    for r, row in enumerate(rows):
        alone_ids = np.array([row], dtype=np.int64)
        alone = graphs["prefill"].run(None, feeds(alone_ids, np.ones_like(alone_ids), np.arange(len(row))[None]))
        np.testing.assert_allclose(batch[0][r], alone[0][0], atol=ATOL, rtol=0)
        alone_step = graphs["decode"].run(
            None,
            feeds(
                step_ids[r : r + 1],
                np.ones((1, len(row) + 1), dtype=np.int64),
                np.array([[len(row)]]),
                alone[1:],
            ),
        )
        np.testing.assert_allclose(batch_step[0][r], alone_step[0][0], atol=ATOL, rtol=0)
        for ours, theirs in zip(batch_step[1:], alone_step[1:], strict=True):
            np.testing.assert_allclose(ours[r, :, width - len(row) :], theirs[0], atol=ATOL, rtol=0)


def test_all_logits_prefill_returns_every_position_matching_transformers(
    tiny_checkpoint: Path, tiny_model: Any, tmp_path: Path
) -> None:
    """--all-logits: prefill's logits are (B, T, V), every real position within the fp32 tolerance; the manifest
    and the graph state that shape."""
    import onnx

    from gpt2_onnx_core.manifest import read_manifest

    folder = export_checkpoint(tiny_checkpoint, tmp_path / "all-logits", share_trace=True, all_logits=True)
    manifest = read_manifest(folder)
    vocab = manifest.dims.vocab_size
    assert manifest.export["options"]["all_logits"] is True
    logits_spec = manifest.graphs["prefill"].outputs[0]
    assert (logits_spec.name, logits_spec.dims) == ("logits", ("batch", "sequence", vocab))
    graph = onnx.load(str(folder / "prefill.onnx"), load_external_data=False)
    shape = [d.dim_param or d.dim_value for d in graph.graph.output[0].type.tensor_type.shape.dim]
    assert (graph.graph.output[0].name, shape) == ("logits", ["batch", "sequence", vocab])

    rows = [PROMPT, PROMPT[3:]]  # left-padded batch: the short row's padding comes first
    width = max(map(len, rows))
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, row in enumerate(rows):
        ids[r, width - len(row) :], mask[r, width - len(row) :] = row, 1
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    out = sessions(folder)["prefill"].run(None, feeds(ids, mask, positions))
    assert out[0].shape == (len(rows), width, vocab)
    for r, row in enumerate(rows):
        alone = np.array([row], dtype=np.int64)
        ref_logits, _ = hf_forward(tiny_model, alone)  # (1, len(row), V)
        np.testing.assert_allclose(out[0][r, width - len(row) :], ref_logits[0], atol=ATOL, rtol=0)


VARIANTS = {
    "gelu": {"activation_function": "gelu"},
    "relu": {"activation_function": "relu"},
    "silu": {"activation_function": "silu"},
    "quick_gelu": {"activation_function": "quick_gelu"},
    "no_attention_scaling": {"scale_attn_weights": False},
    "scale_by_inverse_layer_idx": {"scale_attn_by_inverse_layer_idx": True},
    "reorder_and_upcast_attn": {"reorder_and_upcast_attn": True},
    "layer_norm_epsilon": {"layer_norm_epsilon": 1e-2},
    "n_inner": {"n_inner": 96},
    "untied_head": {"tie": False},
}


# The default suite exports three checkpoints that carry every variant but one between them (each one export, its
# own parity check and a verify, instead of nine): one activation each, as they exclude each other, and the three
# settings of the attention's scaling in three different checkpoints. quick_gelu, a fourth activation that needs a
# checkpoint of its own, and each variant alone run with -m slow, as CI does.
COMBINED = (
    ("gelu", "no_attention_scaling", "layer_norm_epsilon"),
    ("relu", "scale_by_inverse_layer_idx", "n_inner"),
    ("silu", "reorder_and_upcast_attn", "untied_head"),
)
ONLY_ALONE = ("quick_gelu",)
assert sorted((*ONLY_ALONE, *(name for group in COMBINED for name in group))) == sorted(VARIANTS), "every variant"


@pytest.mark.parametrize(
    "variants",
    [
        *(pytest.param(group, id="+".join(group)) for group in COMBINED),
        *(pytest.param((name,), id=f"alone-{name}", marks=pytest.mark.slow) for name in sorted(VARIANTS)),
    ],
)
def test_config_variant_matches_transformers(variants: tuple[str, ...], tmp_path: Path) -> None:
    """Every variant's export against transformers (assert_parity) and by verify; the default suite checks each
    variant in COMBINED's checkpoints, ``-m slow`` each alone."""
    settings = {key: value for name in variants for key, value in VARIANTS[name].items()}
    checkpoint = save_checkpoint(tmp_path / "ckpt", seed=1, **settings)
    folder = export_checkpoint(checkpoint, tmp_path / "export")
    model = hf_model(checkpoint)
    if "untied_head" in variants:
        assert not torch.equal(model.lm_head.weight, model.transformer.wte.weight)
    assert_parity(folder, model)
    report = verify_export(VerifyOptions(folder, steps=3, batch_size=2))
    assert report.ok, report.failures()
