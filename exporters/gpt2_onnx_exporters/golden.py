"""Compute golden vectors from the source model (transformers), for ``golden.json``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from gpt2_onnx_core.batching import position_ids
from gpt2_onnx_core.golden import GOLDEN_PROMPTS, GOLDEN_STEPS, GoldenSet, golden_case, golden_prompt_ids, top2_margin
from gpt2_onnx_core.parity import arithmetic_limit
from gpt2_onnx_core.tolerances import ArithmeticRule
from gpt2_onnx_exporters.reference import ReferenceModel

__all__ = ["build_golden"]


def build_golden(
    reference: ReferenceModel,
    encode: Callable[[str], list[int]],
    n_positions: int,
    rule: ArithmeticRule,
    prompts: Sequence[str] = GOLDEN_PROMPTS,
    steps: int = GOLDEN_STEPS,
) -> GoldenSet:
    """One case per prompt: its ids, transformers' greedy continuation, the last position's top-5 logits from the
    float64 source, and the case's limit by ``rule`` over every position the case decodes."""
    cases = []
    for prompt, ids in zip(prompts, golden_prompt_ids(encode, n_positions, prompts, steps), strict=True):
        input_ids = np.array([ids], dtype=np.int64)  # (1, T)
        mask = np.ones_like(input_ids)
        greedy = reference.greedy(input_ids, mask, steps, eos_token_id=None)[0]  # (N,)
        # The logits each greedy token was chosen from: one pass over the prompt and all but the last new token.
        sequence = np.concatenate([input_ids, greedy[None, :-1]], axis=1)  # (1, T + N - 1)
        full_mask = np.ones_like(sequence)
        out = reference.forward(sequence, full_mask, position_ids(full_mask), exact=True)
        assert out.exact is not None  # asked for
        step_logits = out.logits[0, len(ids) - 1 :]  # (N, V) float32
        exact_logits = out.exact.logits[0, len(ids) - 1 :]  # (N, V) float64
        margins = [top2_margin(row) for row in step_logits]
        source_error, atol = arithmetic_limit(rule, step_logits, exact_logits)
        cases.append(golden_case(prompt, ids, greedy.tolist(), exact_logits[0], margins, (atol, source_error)))
    return GoldenSet(
        cases,
        max(case.logits_atol or 0.0 for case in cases),
        "transformers GPT2LMHeadModel (eager attention): generate(do_sample=False) in float32 for the tokens, "
        "the same model in float64 for top5_logits",
        f"each case: {rule.describe()}, over the positions it decodes",
    )
