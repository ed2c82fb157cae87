"""Batches as the graphs take them: left padding and the position-id rule (numpy only)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["decode_position_ids", "left_pad", "position_ids"]


def left_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Left-pad token sequences into ``input_ids`` and ``attention_mask``, both (B, T) int64.

    Left padding keeps every row's last real token in the last column, so the last-position logits of prefill
    serve every row.
    """
    if not sequences or any(len(seq) == 0 for seq in sequences):
        raise ValueError("every sequence needs at least one token")
    width = max(len(seq) for seq in sequences)
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)  # (B, T)
    mask = np.zeros((len(sequences), width), dtype=np.int64)  # (B, T)
    for row, seq in enumerate(sequences):
        ids[row, width - len(seq) :] = seq
        mask[row, width - len(seq) :] = 1
    return ids, mask


def position_ids(attention_mask: np.ndarray) -> np.ndarray:
    """The contract's rule: cumsum(attention_mask) - 1, with padded positions set to 0 (their value is ignored)."""
    positions = np.cumsum(attention_mask, axis=-1) - 1  # (B, S)
    return np.where(attention_mask > 0, positions, 0).astype(np.int64)


def decode_position_ids(attention_mask: np.ndarray, new: int) -> np.ndarray:
    """Position ids of the last ``new`` tokens of a (B, past + new) mask: (B, new)."""
    return position_ids(attention_mask)[:, -new:]
