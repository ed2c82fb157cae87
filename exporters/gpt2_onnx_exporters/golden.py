"""Compute golden vectors from the source model (transformers), for ``golden.json``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gpt2_onnx.batching import position_ids
from gpt2_onnx.golden import GOLDEN_PROMPTS, GOLDEN_STEPS, GoldenSet, golden_case, golden_prompt_ids, top2_margin
from gpt2_onnx_exporters.reference import ReferenceModel

__all__ = ["build_golden"]


def build_golden(
    reference: ReferenceModel,
    encode: Callable[[str], list[int]],
    n_positions: int,
    logits_atol: float,
    prompts: Sequence[str] = GOLDEN_PROMPTS,
    steps: int = GOLDEN_STEPS,
) -> GoldenSet:
    """One case per prompt: its ids, transformers' greedy continuation and the last position's top-5 logits."""
    cases = []
    for prompt, ids in zip(prompts, golden_prompt_ids(encode, n_positions, prompts, steps), strict=True):
        input_ids = np.array([ids], dtype=np.int64)  # (1, T)
        mask = np.ones_like(input_ids)
        greedy = reference.greedy(input_ids, mask, steps, eos_token_id=None)[0]  # (N,)
        # The logits each greedy token was chosen from: one pass over the prompt and all but the last new token.
        sequence = np.concatenate([input_ids, greedy[None, :-1]], axis=1)  # (1, T + N - 1)
        full_mask = np.ones_like(sequence)
        logits = reference.forward(sequence, full_mask, position_ids(full_mask)).logits  # (1, T + N - 1, V)
        step_logits = logits[0, len(ids) - 1 :]  # (N, V)
        margins = [top2_margin(row) for row in step_logits]
        cases.append(golden_case(prompt, ids, greedy.tolist(), step_logits[0], margins))
    return GoldenSet(cases, logits_atol, "transformers GPT2LMHeadModel (eager attention), generate(do_sample=False)")
