"""Next-token choice on numpy scores: greedy argmax, or a draw from the softmax with one generator per row.

The processors and warpers that shape the scores first live in :mod:`gpt2_onnx_runtimes.processors`; the functions here
that take their parameters (:func:`apply_repetition_penalty`, :func:`top_k_filter`, :func:`top_p_filter`,
:func:`sample`) are shorthands over them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpt2_onnx_runtimes.processors import (
    ProcessorChain,
    RepetitionPenalty,
    RowHistory,
    Temperature,
    TopK,
    TopP,
    softmax,
)

__all__ = ["apply_repetition_penalty", "draw", "greedy", "sample", "top_k_filter", "top_p_filter"]


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


def _rows(count: int) -> list[RowHistory]:
    return [RowHistory((), 0)] * count  # warpers read no history


def apply_repetition_penalty(logits: np.ndarray, history: Sequence[Sequence[int]], penalty: float) -> np.ndarray:
    """transformers' rule: a seen token's logit is divided by ``penalty`` if >= 0, multiplied if negative."""
    return RepetitionPenalty(penalty)(logits, [RowHistory(list(seen), 0) for seen in history])


def top_k_filter(logits: np.ndarray, k: int) -> np.ndarray:
    """Keep the k largest logits per row (ties at the boundary kept); 0 disables."""
    return TopK(k)(logits, _rows(len(logits)))


def top_p_filter(logits: np.ndarray, p: float) -> np.ndarray:
    """Keep the smallest set of most likely tokens whose probability reaches ``p`` (always at least one)."""
    return TopP(p)(logits, _rows(len(logits)))


def sample(
    logits: np.ndarray,
    temperature: float,
    top_k: int,
    top_p: float,
    generators: Sequence[np.random.Generator],
) -> np.ndarray:
    """Temperature, top-k and top-p in transformers' order, then :func:`draw`."""
    warpers = ProcessorChain((Temperature(temperature), TopK(top_k), TopP(top_p)))
    return draw(warpers(logits, _rows(len(logits))), generators)
