"""Compute golden vectors from the source model (transformers), for ``golden.json``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from exporters.reference import ReferenceModel
from gpt2_onnx.batching import position_ids
from gpt2_onnx.golden import GoldenCase, GoldenSet

__all__ = ["GOLDEN_PROMPTS", "GOLDEN_STEPS", "build_golden"]

GOLDEN_PROMPTS = (
    "The quick brown fox",
    "Hello, my name is",
    "In a shocking finding, scientists discovered a herd of unicorns living in a remote valley",
)
GOLDEN_STEPS = 16


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
    for prompt in prompts:
        ids = encode(prompt)[: max(1, n_positions - steps)]
        input_ids = np.array([ids], dtype=np.int64)  # (1, T)
        mask = np.ones_like(input_ids)
        greedy = reference.greedy(input_ids, mask, steps, eos_token_id=None)[0]  # (N,)
        last = reference.forward(input_ids, mask, position_ids(mask)).logits[0, -1]  # (V,)
        top = np.argsort(-last)[:5]
        cases.append(
            GoldenCase(
                prompt,
                [int(i) for i in ids],
                [int(t) for t in greedy],
                [int(i) for i in top],
                [float(last[i]) for i in top],
            )
        )
    return GoldenSet(cases, logits_atol, "transformers GPT2LMHeadModel (eager attention), generate(do_sample=False)")
