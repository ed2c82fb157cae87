"""Checks on tensors before they reach ONNX Runtime, so a wrong call fails with the offending name and shapes
instead of an ONNX Runtime error from deep inside a kernel."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.names import ATTENTION_MASK, DECODE, INPUT_IDS, PAST_PREFIX, POSITION_IDS, GraphKind, past_names
from gpt2_onnx_core.wording import plural

__all__ = ["validate_feeds", "validate_token_ids"]

_FLOAT32 = np.dtype(np.float32)


def validate_token_ids(ids: np.ndarray, vocab_size: int, what: str = INPUT_IDS) -> None:
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
        raise InvalidInputError(f"{what} holds token id {bad}, outside [0, {vocab_size})")


def _array(feeds: Mapping[str, object], name: str) -> np.ndarray:
    value = feeds.get(name)
    if not isinstance(value, np.ndarray):
        raise InvalidInputError(f"missing input '{name}' (a numpy array)")
    return value


def _check_int64(name: str, array: np.ndarray, rank: int) -> None:
    if array.dtype != np.int64:
        raise InvalidInputError(f"{name} must be int64, got {array.dtype}")
    if array.ndim != rank:
        raise InvalidInputError(f"{name} must have {rank} dimensions, got shape {array.shape}")


def validate_feeds(
    kind: GraphKind, feeds: Mapping[str, object], dims: ModelDims, kv_dtype: np.dtype = _FLOAT32
) -> None:
    """Raise :class:`InvalidInputError` unless ``feeds`` fit the graph: names, dtypes, shapes, batch and length
    agreement, token ids within the vocabulary, past of the right layer count, dtype and head size."""
    ids, mask, positions = (_array(feeds, n) for n in (INPUT_IDS, ATTENTION_MASK, POSITION_IDS))
    for name, array in ((INPUT_IDS, ids), (ATTENTION_MASK, mask), (POSITION_IDS, positions)):
        _check_int64(name, array, 2)
    batch, new = ids.shape
    if batch == 0 or new == 0:
        raise InvalidInputError(f"{INPUT_IDS} must hold at least one token per row, got shape {ids.shape}")
    if positions.shape != ids.shape:
        raise InvalidInputError(f"{POSITION_IDS} shape {positions.shape} does not match {INPUT_IDS} shape {ids.shape}")
    validate_token_ids(ids, dims.vocab_size)
    past_len = 0
    if kind == DECODE:
        past_len = _validate_past(feeds, dims, batch, kv_dtype)
    elif any(name.startswith(PAST_PREFIX) for name in feeds):
        raise InvalidInputError("prefill takes no past_key_values; use the decode graph to continue a sequence")
    if mask.shape != (batch, past_len + new):
        raise InvalidInputError(
            f"{ATTENTION_MASK} shape {mask.shape} does not match (batch, past + new) = ({batch}, {past_len} + {new})"
        )
    if past_len + new > dims.n_positions:
        raise InvalidInputError(
            f"sequence of {plural(past_len + new, 'token')} exceeds the model's {dims.n_positions} positions"
        )
    if positions.size and (int(positions.min()) < 0 or int(positions.max()) >= dims.n_positions):
        raise InvalidInputError(
            f"{POSITION_IDS} must lie in [0, {dims.n_positions}), got {int(positions.min())}..{int(positions.max())}"
        )


def _validate_past(feeds: Mapping[str, object], dims: ModelDims, batch: int, kv_dtype: np.dtype) -> int:
    names = {name for name in feeds if name.startswith(PAST_PREFIX)}
    expected = set(past_names(dims.n_layer))
    if names != expected:
        missing, extra = sorted(expected - names)[:3], sorted(names - expected)[:3]
        raise InvalidInputError(
            f"past_key_values must hold {plural(dims.n_layer, 'layer')} × key/value; "
            f"missing {missing}, unexpected {extra}"
        )
    lengths = set()
    for name in sorted(expected):
        past = _array(feeds, name)
        if past.dtype != kv_dtype:
            raise InvalidInputError(f"{name} must be {kv_dtype}, got {past.dtype}")
        want = (batch, dims.n_head, None, dims.head_dim)
        if past.ndim != 4 or past.shape[0] != batch or past.shape[1] != dims.n_head or past.shape[3] != dims.head_dim:
            raise InvalidInputError(f"{name} has shape {past.shape}; expected (batch, n_head, past, head_dim) = {want}")
        lengths.add(past.shape[2])
    if len(lengths) != 1:
        raise InvalidInputError(f"past_key_values disagree on the past length: {sorted(lengths)}")
    return lengths.pop()
