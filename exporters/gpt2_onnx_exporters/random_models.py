"""Seeded random-weight GPT-2 models with the dimensions of the published checkpoints, built offline."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpt2_onnx.config import RANDOM_PREFIX
from gpt2_onnx.errors import UnsupportedModelError

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = ["RANDOM_PREFIX", "RANDOM_PRESETS", "build_random_model", "random_preset_name"]


# (n_layer, n_head, n_embd) of each published checkpoint; all share vocab 50257 and 1024 positions.
RANDOM_PRESETS: dict[str, tuple[int, int, int]] = {
    "gpt2": (12, 12, 768),  # 124M parameters, 498 MB fp32
    "gpt2-medium": (24, 16, 1024),  # 355M
    "gpt2-large": (36, 20, 1280),  # 774M
    "gpt2-xl": (48, 25, 1600),  # 1.5B, 6.2 GB fp32: above protobuf's 2 GB limit
    "distilgpt2": (6, 12, 768),  # 82M
    "tiny": (2, 4, 64),  # for trying the tool in seconds; the real vocabulary, so the real tokenizer works
}
GPT2_VOCAB_SIZE = 50257
GPT2_POSITIONS = 1024
ENDOFTEXT_ID = 50256


def random_preset_name(spec: str) -> str | None:
    """``"gpt2"`` for ``"random:gpt2"``; None when ``spec`` does not ask for random weights."""
    if not spec.startswith(RANDOM_PREFIX):
        return None
    name = spec[len(RANDOM_PREFIX) :]
    if name not in RANDOM_PRESETS:
        known = ", ".join(RANDOM_PRESETS)
        raise UnsupportedModelError(f"unknown random model '{spec}'; choose random:NAME with NAME one of {known}")
    return name


def build_random_model(name: str, seed: int) -> GPT2LMHeadModel:
    """A GPT2LMHeadModel with seeded random weights (transformers' own initialisation) and tied head."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    n_layer, n_head, n_embd = RANDOM_PRESETS[name]
    config = GPT2Config(
        vocab_size=GPT2_VOCAB_SIZE,
        n_positions=GPT2_POSITIONS,
        n_layer=n_layer,
        n_head=n_head,
        n_embd=n_embd,
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=ENDOFTEXT_ID,
    )
    torch.manual_seed(seed)
    return GPT2LMHeadModel(config)
