"""The export's log-probability of each token a perplexity plan scores, computed by ONNX Runtime (never torch).

Each window runs through the folder's decode graph with an empty past, which returns logits for every position
(the prefill graph returns the last position's only, unless exported with ``--all-logits``); the same graph
``verify`` checks as "decode, empty past".

An export loaded with an int8 KV cache (``RuntimeOptions.kv_cache``) is scored as it generates instead: the
window's unscored context is prefilled through the generation graph, then each scored token is fed as one decode
step over the cache, so every logit read comes from keys and values that went through the int8 cache.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpt2_onnx_core.batching import position_ids
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.names import ATTENTION_MASK, DECODE, INPUT_IDS, LOGITS, POSITION_IDS, past_names
from gpt2_onnx_core.perplexity import Window, WindowPlan, target_log_probs
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
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


def _generated_scored(loaded: LoadedExport, window: Window, tokens: np.ndarray) -> np.ndarray:
    """The window's scored log-probabilities as generation computes them: its context before ``scored_from`` in
    one prefill, then one decode step per token, each step's logits predicting the next token."""
    runner = KvCacheRunner(loaded, capacity=window.end - window.begin)
    context = tokens[None, window.begin : window.scored_from]  # (1, C)
    mask = np.ones_like(context)  # (1, C)
    rows = [runner.prefill(context, mask, position_ids(mask))[0]]  # predicts token scored_from: (V,)
    for index in range(window.scored_from, window.end - 1):
        mask = np.ones((1, index + 1 - window.begin), dtype=np.int64)  # (1, P + 1)
        step = tokens[None, index : index + 1]  # (1, 1)
        rows.append(runner.decode(step, mask, position_ids(mask)[:, -1:])[0])  # predicts token index + 1: (V,)
    return target_log_probs(np.stack(rows), tokens[window.scored_from : window.end])  # (scored,)


def export_log_probs(
    loaded: LoadedExport, ids: Sequence[int], plan: WindowPlan, stepped: bool | None = None
) -> np.ndarray:
    """log p(token | the tokens before it in its window) for every token ``plan`` scores, in order: (scored,).
    ``stepped``: scored as generation computes it (see the module docstring); None: so where the cache is int8."""
    tokens = np.asarray(ids, dtype=np.int64)  # (N,)
    if tokens.shape != (plan.n_tokens,):
        raise InvalidInputError(f"{tokens.shape[0]} token ids given for a plan over {plan.n_tokens}")
    if plan.window > loaded.manifest.dims.n_positions:
        raise InvalidInputError(
            f"windows of {plan.window} tokens exceed the model's {loaded.manifest.dims.n_positions} positions"
        )
    if stepped or (stepped is None and loaded.options.kv_cache != "float32"):
        return np.concatenate([_generated_scored(loaded, w, tokens) for w in plan.windows])  # (scored,)
    found = [_scored(w, _window_logits(loaded, tokens[None, w.begin : w.end]), tokens) for w in plan.windows]
    return np.concatenate(found)  # (scored,)
