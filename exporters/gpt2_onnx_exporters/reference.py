"""The source model as the parity reference: transformers' GPT2LMHeadModel (eager attention), numpy in and out.

Only full-sequence forwards and transformers' own ``generate`` are used, so the reference never depends on how a
transformers release feeds a KV cache back in. A forward can also run in float64 (``exact=True``): the exact result
an fp32 export and the float32 source model are both measured against
(:class:`gpt2_onnx_core.tolerances.ArithmeticRule`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = ["ReferenceModel", "ReferenceOutputs"]


@dataclass(frozen=True)
class ReferenceOutputs:
    logits: np.ndarray  # (B, T, V) float32
    keys: list[np.ndarray]  # per layer (B, nh, T, hs)
    values: list[np.ndarray]  # per layer (B, nh, T, hs)
    exact: ReferenceOutputs | None = None  # the same forward in float64 (float64 arrays), where asked for

    def cache(self) -> list[np.ndarray]:
        """Every layer's keys then values, in the graphs' (layer, key/value) order: (B, nh, T, hs) each."""
        return [tensor for pair in zip(self.keys, self.values, strict=True) for tensor in pair]

    def positions(self, span: slice) -> ReferenceOutputs:
        """The outputs for a span of positions (logits and every layer's keys and values)."""
        return ReferenceOutputs(
            logits=self.logits[:, span],  # (B, t, V)
            keys=[k[:, :, span] for k in self.keys],  # (B, nh, t, hs)
            values=[v[:, :, span] for v in self.values],
            exact=self.exact.positions(span) if self.exact is not None else None,
        )


def _cache_tensors(cache: Any) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    if hasattr(cache, "layers"):  # transformers >= 4.56 DynamicCache
        return [layer.keys for layer in cache.layers], [layer.values for layer in cache.layers]
    return [layer[0] for layer in cache], [layer[1] for layer in cache]  # legacy tuples


@contextlib.contextmanager
def _in_float64(model: GPT2LMHeadModel) -> Iterator[None]:
    """The model's weights in float64 for the duration, then float32 again: float32 values are exact in float64, so
    the round trip changes no bit, and no second copy of the model is held (GPT-2 XL would need 18 GB).

    ``reorder_and_upcast_attn`` computes attention scores in float32 whatever the model's dtype; it changes only the
    order and precision of the same product, softmax(Q Kᵀ × scale), so the float64 pass takes the plain path."""
    reordering = [module for module in model.modules() if getattr(module, "reorder_and_upcast_attn", False)]
    model.double()
    for module in reordering:
        setattr(module, "reorder_and_upcast_attn", False)  # noqa: B010  # a plain attribute torch does not type
    try:
        yield
    finally:
        for module in reordering:
            setattr(module, "reorder_and_upcast_attn", True)  # noqa: B010  # likewise
        model.float()


class ReferenceModel:
    """Runs the source model on numpy inputs."""

    def __init__(self, model: GPT2LMHeadModel) -> None:
        self.model = model.eval()

    @torch.no_grad()
    def _run(self, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray) -> ReferenceOutputs:
        out = self.model(
            input_ids=torch.from_numpy(input_ids),  # (B, T)
            attention_mask=torch.from_numpy(attention_mask),  # (B, T)
            position_ids=torch.from_numpy(position_ids),  # (B, T)
            use_cache=True,
        )
        keys, values = _cache_tensors(out.past_key_values)
        return ReferenceOutputs(
            logits=out.logits.numpy(),  # (B, T, V)
            keys=[k.numpy() for k in keys],
            values=[v.numpy() for v in values],
        )

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray, exact: bool = False
    ) -> ReferenceOutputs:
        """Full-sequence forward in float32: logits at every position and the KV cache it builds; with ``exact``,
        the same forward in float64 too (``.exact``)."""
        found = self._run(input_ids, attention_mask, position_ids)
        if not exact:
            return found
        with _in_float64(self.model):
            precise = self._run(input_ids, attention_mask, position_ids)
        return ReferenceOutputs(found.logits, found.keys, found.values, precise)

    @torch.no_grad()
    def greedy(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, max_new_tokens: int, eos_token_id: int | None
    ) -> np.ndarray:
        """transformers' ``generate(do_sample=False)``: the new tokens only, (B, N); rows that stop early are padded
        with the EOS id, as transformers does."""
        from transformers import GenerationConfig

        # Plain greedy, whatever the checkpoint's generation_config.json asks for (beams, n-gram bans, several
        # sequences). transformers 5 fills every option a config passed to generate leaves unset from the model's
        # own generation_config, so a fresh config alone is not enough: the model's is swapped out for the call.
        config = GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos_token_id,
            pad_token_id=eos_token_id if eos_token_id is not None else 0,
        )
        own = self.model.generation_config
        self.model.generation_config = GenerationConfig()
        try:
            out = self.model.generate(
                input_ids=torch.from_numpy(input_ids),
                attention_mask=torch.from_numpy(attention_mask),
                generation_config=config,
            )
        finally:
            self.model.generation_config = own
        return out[:, input_ids.shape[1] :].numpy()
