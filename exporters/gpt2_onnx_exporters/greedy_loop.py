"""Greedy decoding through a transformers-style KV cache: the loop PyTorch eager (``EagerSystem``) and Optimum's
ONNX model (``benchmarks/optimum_system.py``) are timed with. Torch and numpy only, so that Optimum's environment,
which pins an older transformers, imports it too."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["greedy_loop"]


@torch.inference_mode()
def greedy_loop(
    model: Callable[..., Any],
    input_ids: np.ndarray,
    new_tokens: int,
    device: torch.device | None = None,
    sync: Callable[[], None] = lambda: None,
    **prefill_options: Any,
) -> tuple[list[list[int]], list[float], float]:
    """Greedy decoding of ``input_ids`` (B, T) through the KV cache of a transformers-style causal LM (transformers'
    own, or Optimum's ONNX one): the chosen tokens (B, new_tokens), the moment each step's tokens were on the host,
    and the start. Each token is brought to the host, as ONNX Runtime's loop chooses there. ``prefill_options`` go
    to the prompt's forward only (``logits_to_keep=1`` where the model takes it)."""
    ids = torch.from_numpy(input_ids).to(device)  # (B, T)
    mask = torch.ones_like(ids)
    ones = torch.ones((ids.shape[0], 1), dtype=mask.dtype, device=ids.device)
    chosen: list[list[int]] = []
    marks: list[float] = []
    sync()
    start = time.perf_counter()
    out = model(input_ids=ids, attention_mask=mask, use_cache=True, **prefill_options)
    for step in range(new_tokens):
        token = out.logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        chosen.append(token[:, 0].tolist())
        marks.append(time.perf_counter())
        if step + 1 == new_tokens:
            break
        mask = torch.cat([mask, ones], dim=1)  # (B, P + 1)
        out = model(input_ids=token, attention_mask=mask, past_key_values=out.past_key_values, use_cache=True)
    rows = [list(row) for row in zip(*chosen, strict=True)]  # (B, new_tokens)
    return rows, marks, start
