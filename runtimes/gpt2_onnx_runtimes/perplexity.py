"""The export's log-probability of each token a perplexity plan scores, computed by ONNX Runtime (never torch).

Each window runs through the folder's decode graph with an empty past, which returns logits for every position
(the prefill graph returns the last position's only, unless exported with ``--all-logits``); the same graph
``verify`` checks as "decode, empty past".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpt2_onnx_core.batching import position_ids
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.names import ATTENTION_MASK, DECODE, INPUT_IDS, LOGITS, POSITION_IDS, past_names
from gpt2_onnx_core.perplexity import Window, WindowPlan, target_log_probs
from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["export_log_probs"]


def _window_logits(loaded: LoadedExport, window_ids: np.ndarray) -> np.ndarray:
    """The decode graph over one window from an empty past: logits (T, V) for ``window_ids`` (1, T)."""
    dims = loaded.manifest.dims
    mask = np.ones_like(window_ids)  # (1, T)
    empty = np.zeros((1, dims.n_head, 0, dims.head_dim), dtype=np.float32)  # (1, nh, 0, hs)
    feeds = {
        INPUT_IDS: window_ids,
        ATTENTION_MASK: mask,
        POSITION_IDS: position_ids(mask),  # 0..T-1: each window starts its own context
        **dict.fromkeys(past_names(dims.n_layer), empty),
    }
    return loaded.run(DECODE, feeds)[LOGITS][0]  # (T, V)


def _scored(window: Window, logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """The log-probabilities of the window's scored targets: position t's target is predicted at t - 1."""
    rows = logits[window.scored_from - 1 - window.begin : window.end - 1 - window.begin]  # (scored, V)
    return target_log_probs(rows, tokens[window.scored_from : window.end])


def export_log_probs(loaded: LoadedExport, ids: Sequence[int], plan: WindowPlan) -> np.ndarray:
    """log p(token | the tokens before it in its window) for every token ``plan`` scores, in order: (scored,)."""
    tokens = np.asarray(ids, dtype=np.int64)  # (N,)
    if tokens.shape != (plan.n_tokens,):
        raise InvalidInputError(f"{tokens.shape[0]} token ids given for a plan over {plan.n_tokens}")
    if plan.window > loaded.manifest.dims.n_positions:
        raise InvalidInputError(
            f"windows of {plan.window} tokens exceed the model's {loaded.manifest.dims.n_positions} positions"
        )
    found = [_scored(w, _window_logits(loaded, tokens[None, w.begin : w.end]), tokens) for w in plan.windows]
    return np.concatenate(found)  # (scored,)
