"""Parity checks of an export folder against its source model (ONNX Runtime on the CPU vs transformers).

Used by ``export`` before it commits a folder, and the base that ``verify`` builds on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gpt2_onnx.batching import decode_position_ids, left_pad, position_ids
from gpt2_onnx.names import ATTENTION_MASK, DECODE, INPUT_IDS, KV_KINDS, LOGITS, POSITION_IDS, PREFILL, past_name, present_name
from gpt2_onnx.parity import ParityReport, compare_tensors, compare_tokens

if TYPE_CHECKING:
    from exporters.reference import ReferenceModel, ReferenceOutputs
    from runtimes.session import LoadedExport

__all__ = ["CheckSettings", "run_export_checks"]

FP32_LOGITS_ATOL = 1e-4  # |Δlogits| for fp32 exports
FP32_KV_ATOL = 1e-4


@dataclass(frozen=True)
class CheckSettings:
    prompts: tuple[tuple[int, ...], ...]  # token ids; the first is the main prompt, all form the padded batch
    decode_steps: int = 4
    logits_atol: float = FP32_LOGITS_ATOL
    kv_atol: float = FP32_KV_ATOL


def _feeds(ids: np.ndarray, mask: np.ndarray, positions: np.ndarray, past: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    feeds = {INPUT_IDS: ids, ATTENTION_MASK: mask, POSITION_IDS: positions}
    return {**feeds, **(past or {})}


def _presents_as_past(outputs: dict[str, np.ndarray], n_layer: int) -> dict[str, np.ndarray]:
    return {past_name(i, kv): outputs[present_name(i, kv)] for i in range(n_layer) for kv in KV_KINDS}


def _empty_past(batch: int, loaded: LoadedExport) -> dict[str, np.ndarray]:
    dims = loaded.manifest.dims
    empty = np.zeros((batch, dims.n_head, 0, dims.head_dim), dtype=np.float32)  # (B, nh, 0, hs)
    return {past_name(i, kv): empty for i in range(dims.n_layer) for kv in KV_KINDS}


def _compare_kv(report: ParityReport, check: str, outputs: dict[str, np.ndarray], ref: ReferenceOutputs, atol: float) -> None:
    for layer in range(len(ref.keys)):
        for kv, expected in (("key", ref.keys[layer]), ("value", ref.values[layer])):
            name = present_name(layer, kv)
            report.add(compare_tensors(check, name, outputs[name], expected, atol))


def check_prefill_and_decode(loaded: LoadedExport, reference: ReferenceModel, prompt: Sequence[int], settings: CheckSettings, report: ParityReport) -> None:
    """Prefill (logits, every present), decode with an empty past, then chained decode steps teacher-forced with
    transformers' greedy tokens, and the greedy tokens themselves."""
    n_layer = loaded.manifest.dims.n_layer
    ids, mask = left_pad([prompt], 0)
    pos = position_ids(mask)
    steps = settings.decode_steps
    greedy = reference.greedy(ids, mask, steps + 1, eos_token_id=None)  # (1, steps + 1)
    full_ids = np.concatenate([ids, greedy[:, :steps]], axis=1)  # (1, T + steps)
    full_mask = np.ones_like(full_ids)
    ref = reference.forward(full_ids, full_mask, position_ids(full_mask))
    t = ids.shape[1]

    out = loaded.run(PREFILL, _feeds(ids, mask, pos))
    expected_logits = ref.logits[:, :t] if out[LOGITS].shape[1] == t else ref.logits[:, t - 1 : t]
    report.add(compare_tensors("prefill", LOGITS, out[LOGITS], expected_logits, settings.logits_atol, logits=True))
    _compare_kv(report, "prefill", out, ref.positions(slice(0, t)), settings.kv_atol)

    merged = loaded.run(DECODE, _feeds(ids, mask, pos, _empty_past(1, loaded)))
    report.add(compare_tensors("decode, empty past", LOGITS, merged[LOGITS], ref.logits[:, :t], settings.logits_atol, logits=True))

    chosen = [int(out[LOGITS][0, -1].argmax())]
    past = _presents_as_past(out, n_layer)
    step_mask = mask
    for step in range(steps):
        step_mask = np.concatenate([step_mask, np.ones((1, 1), dtype=np.int64)], axis=1)  # (1, P + 1)
        step_ids = greedy[:, step : step + 1]  # teacher-forced with the reference's token
        out = loaded.run(DECODE, _feeds(step_ids, step_mask, decode_position_ids(step_mask, 1), past))
        expected = ref.logits[:, t + step : t + step + 1]
        report.add(compare_tensors(f"decode step {step + 1}", LOGITS, out[LOGITS], expected, settings.logits_atol, logits=True))
        chosen.append(int(out[LOGITS][0, -1].argmax()))
        past = _presents_as_past(out, n_layer)
    _compare_kv(report, f"decode step {steps}", out, ref.positions(slice(0, t + steps)), settings.kv_atol)
    report.add(compare_tokens(f"greedy, {steps + 1} tokens", np.array([chosen]), greedy))


def check_padded_batch(loaded: LoadedExport, reference: ReferenceModel, prompts: Sequence[Sequence[int]], settings: CheckSettings, report: ParityReport) -> None:
    """A left-padded batch of prompts of different lengths: each row's logits equal that prompt run alone."""
    ids, mask = left_pad(prompts, 0)
    out = loaded.run(PREFILL, _feeds(ids, mask, position_ids(mask)))
    for row, prompt in enumerate(prompts):
        alone_ids = np.array([prompt], dtype=np.int64)
        alone = reference.forward(alone_ids, np.ones_like(alone_ids), position_ids(np.ones_like(alone_ids)))
        report.add(compare_tensors(f"padded batch row {row}", LOGITS, out[LOGITS][row : row + 1, -1:], alone.logits[:, -1:], settings.logits_atol, logits=True))


def run_export_checks(folder: Path, reference: ReferenceModel, settings: CheckSettings) -> ParityReport:
    """The checks ``export`` runs before committing a folder."""
    from runtimes.session import LoadedExport, RuntimeOptions

    loaded = LoadedExport.load(folder, RuntimeOptions(provider="cpu"))
    report = ParityReport()
    check_prefill_and_decode(loaded, reference, settings.prompts[0], settings, report)
    if len(settings.prompts) > 1:
        check_padded_batch(loaded, reference, settings.prompts, settings, report)
    return report
