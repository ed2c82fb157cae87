"""Check an export against its ``golden.json`` with ONNX Runtime alone (no torch, no transformers).

What the C++ and C# samples do, in Python: for each case, prefill the prompt, decode greedily for as many steps as
the golden continuation has, and require the same ids; the prompt's last-position top-5 logits must match within the
case's tolerance (the file's where a case has none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_core.golden import (
    GOLDEN_PROMPTS,
    GOLDEN_STEPS,
    GoldenSet,
    golden_case,
    golden_prompt_ids,
    greedy_agreement,
    ranks_agree,
    read_golden,
    top2_margin,
)
from gpt2_onnx_core.parity import Comparison, ParityReport, compare_tensors
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.sampling import greedy
from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["check_golden", "golden_from_export", "greedy_ids"]


def greedy_ids(loaded: LoadedExport, prompt_ids: list[int], steps: int) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Greedy decoding without stopping at end-of-text: (new ids (steps,), the prompt's last logits (V,), each
    step's top-2 margin)."""
    ids, mask = left_pad([prompt_ids], 0)  # (1, T)
    runner = KvCacheRunner(loaded, capacity=ids.shape[1] + steps)
    logits = runner.prefill(ids, mask, position_ids(mask))  # (1, V)
    first_logits = logits[0].copy()
    chosen: list[int] = []
    margins: list[float] = []
    for step in range(steps):
        token = greedy(logits)  # (1,)
        chosen.append(int(token[0]))
        margins.append(top2_margin(logits[0]))
        if step == steps - 1:
            break
        mask = np.concatenate([mask, np.ones((1, 1), dtype=np.int64)], axis=1)  # (1, P + 1)
        logits = runner.decode(token[:, None], mask, position_ids(mask)[:, -1:])  # (1, V)
    return np.array(chosen, dtype=np.int64), first_logits, margins


def golden_from_export(
    loaded: LoadedExport,
    encode: Callable[[str], list[int]],
    logits_atol: float,
    prompts: Sequence[str] = GOLDEN_PROMPTS,
    steps: int = GOLDEN_STEPS,
) -> GoldenSet:
    """Golden vectors computed by ``loaded`` itself: for exports whose precision the source model does not share."""
    import onnxruntime as ort

    n_positions = loaded.manifest.dims.n_positions
    cases = []
    for prompt, ids in zip(prompts, golden_prompt_ids(encode, n_positions, prompts, steps), strict=True):
        chosen, last, margins = greedy_ids(loaded, ids, steps)
        cases.append(golden_case(prompt, ids, chosen.tolist(), last, margins))
    precision = loaded.manifest.precision
    return GoldenSet(cases, logits_atol, f"this export ({precision}) on ONNX Runtime {ort.__version__}, CPU provider")


def check_golden(loaded: LoadedExport, golden: GoldenSet | None = None) -> ParityReport:
    """Compare ``loaded`` with its folder's golden vectors; every case is checked, failures are collected."""
    golden = golden or read_golden(loaded.folder)
    report = ParityReport()
    for index, case in enumerate(golden.cases):
        name = f"golden case {index}"
        atol = golden.atol_for(case)
        ids, last, _ = greedy_ids(loaded, case.input_ids, len(case.greedy_ids))
        agreement = greedy_agreement(ids.tolist(), case, atol)
        report.add(Comparison(name, "greedy tokens", detail=agreement.detail, agrees=agreement.ok))
        top_ids = np.argsort(-last, kind="stable")[: len(case.top5_ids)]
        if not ranks_agree(last, case.top5_ids, atol):
            detail = f"{top_ids.tolist()} vs expected {case.top5_ids}"
            report.add(Comparison(name, "top-5 ids", detail=detail, agrees=False))
        expected = np.array(case.top5_logits, dtype=np.float64)  # fp32 files: the float64 source's values
        found = last[case.top5_ids].astype(np.float64)
        report.add(compare_tensors(name, "top-5 logits", found, expected, atol, case.source_error))
    return report
