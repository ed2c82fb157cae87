"""Next-token choice on numpy scores: greedy argmax, or a draw from the softmax with one generator per row.

The processors and warpers that shape the scores first live in :mod:`gpt2_onnx_runtimes.processors`; the generation
core (:mod:`gpt2_onnx_runtimes.decoding`) runs them, then these.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpt2_onnx_runtimes.processors import softmax

__all__ = ["draw", "greedy"]


def greedy(scores: np.ndarray) -> np.ndarray:
    """(B, V) → (B,) argmax ids."""
    return scores.argmax(axis=-1).astype(np.int64)


def draw(scores: np.ndarray, generators: Sequence[np.random.Generator]) -> np.ndarray:
    """One id per row from softmax(scores); row i draws from ``generators[i]`` (one uniform number per row and
    step), so its result does not depend on the batch it is in."""
    cdf = np.cumsum(softmax(scores), axis=-1)  # (B, V)
    picks = [
        int(np.searchsorted(cdf[row], gen.random() * cdf[row, -1], side="right")) for row, gen in enumerate(generators)
    ]
    return np.minimum(np.asarray(picks, dtype=np.int64), scores.shape[-1] - 1)
