"""The source model's log-probability of each token a perplexity plan scores, computed by PyTorch (transformers).

Each window is one full forward from position 0 without a cache, the model as its users run it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.perplexity import WindowPlan, target_log_probs

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = ["source_log_probs"]


@torch.no_grad()
def source_log_probs(model: GPT2LMHeadModel, ids: Sequence[int], plan: WindowPlan) -> np.ndarray:
    """log p(token | the tokens before it in its window) for every token ``plan`` scores, in order: (scored,)."""
    tokens = np.asarray(ids, dtype=np.int64)  # (N,)
    if tokens.shape != (plan.n_tokens,):
        raise InvalidInputError(f"{tokens.shape[0]} token ids given for a plan over {plan.n_tokens}")
    if plan.window > model.config.n_positions:
        raise InvalidInputError(f"windows of {plan.window} tokens exceed the model's {model.config.n_positions}")
    found = []
    for window in plan.windows:
        window_ids = torch.from_numpy(tokens[None, window.begin : window.end])  # (1, T)
        logits = model(input_ids=window_ids, use_cache=False).logits[0].float().numpy()  # (T, V)
        rows = logits[window.scored_from - 1 - window.begin : window.end - 1 - window.begin]  # (scored, V)
        found.append(target_log_probs(rows, tokens[window.scored_from : window.end]))
    return np.concatenate(found)  # (scored,)
