"""Next-token selection on numpy logits: greedy, or sampling with transformers' processors in transformers' order
(repetition penalty, then temperature, top-k, top-p)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["apply_repetition_penalty", "greedy", "sample", "top_k_filter", "top_p_filter"]


def greedy(logits: np.ndarray) -> np.ndarray:
    """(B, V) → (B,) argmax ids."""
    return logits.argmax(axis=-1).astype(np.int64)


def apply_repetition_penalty(logits: np.ndarray, history: Sequence[Sequence[int]], penalty: float) -> np.ndarray:
    """transformers' rule: a seen token's logit is divided by ``penalty`` if positive, multiplied if negative."""
    if penalty == 1.0:
        return logits
    out = logits.copy()
    for row, seen in enumerate(history):
        ids = np.unique(np.asarray(seen, dtype=np.int64))
        values = out[row, ids]
        out[row, ids] = np.where(values > 0, values / penalty, values * penalty)
    return out


def top_k_filter(logits: np.ndarray, k: int) -> np.ndarray:
    """Keep the k largest logits per row (ties at the boundary kept); 0 disables."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = np.partition(logits, -k, axis=-1)[:, -k][:, None]  # (B, 1)
    return np.where(logits < kth, -np.inf, logits)


def top_p_filter(logits: np.ndarray, p: float) -> np.ndarray:
    """Keep the smallest set of most likely tokens whose probability reaches ``p`` (always at least one)."""
    if p >= 1.0:
        return logits
    order = np.argsort(-logits, axis=-1)  # (B, V) most likely first
    sorted_logits = np.take_along_axis(logits, order, axis=-1)
    probs = _softmax(sorted_logits)
    cumulative = np.cumsum(probs, axis=-1)
    remove_sorted = cumulative - probs >= p  # tokens entirely beyond the nucleus
    remove_sorted[:, 0] = False
    remove = np.zeros_like(remove_sorted)
    np.put_along_axis(remove, order, remove_sorted, axis=-1)
    return np.where(remove, -np.inf, logits)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def sample(
    logits: np.ndarray,
    temperature: float,
    top_k: int,
    top_p: float,
    generators: Sequence[np.random.Generator],
) -> np.ndarray:
    """Sample one id per row; row i draws from ``generators[i]`` so its result does not depend on the batch."""
    scaled = logits.astype(np.float64) / temperature
    filtered = top_p_filter(top_k_filter(scaled, top_k), top_p)
    probs = _softmax(filtered)  # (B, V)
    cdf = np.cumsum(probs, axis=-1)
    picks = [
        int(np.searchsorted(cdf[row], gen.random() * cdf[row, -1], side="right")) for row, gen in enumerate(generators)
    ]
    return np.minimum(np.asarray(picks, dtype=np.int64), logits.shape[-1] - 1)
