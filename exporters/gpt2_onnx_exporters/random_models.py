"""Seeded random-weight GPT-2 models with the dimensions of the published checkpoints, built offline.

The weights are a function of the preset and the seed alone (:func:`seeded_weights`): each parameter is drawn from
a stream of its own, NumPy's legacy ``RandomState`` (whose streams NumPy keeps unchanged from release to release,
NEP 19) seeded by the seed and the parameter's checkpoint name, in GPT-2's own scheme. Not transformers' own
initialisation, whose order and draws may change between its releases: ``verify`` rebuilds the source of a
random:NAME export from its manifest, so a rebuild under another transformers or torch release must give the same
weights.

Random weights have small logits (``random:gpt2``: within about ±3) and a quiet residual stream, where a trained GPT-2's
logits run to a hundred and more and a few residual channels carry activations in the hundreds. The
``-trained-scale`` presets imitate both, for the tolerance tests (:data:`TRAINED_SCALE`): seeded as the plain
preset, then layer 0's MLP writes a constant 200 into two residual channels (every later position and layer carries
them, as trained GPT-2s' "massive activations" do), every later LayerNorm gives those channels a small weight (0.05,
as trained ones do), ln_f's bias is zeroed and its weight scaled so that the logits span about ±100.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpt2_onnx_core.config import RANDOM_PREFIX
from gpt2_onnx_core.errors import UnsupportedModelError

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = [
    "RANDOM_PREFIX",
    "RANDOM_PRESETS",
    "TRAINED_SCALE",
    "TrainedScale",
    "build_random_model",
    "random_preset_name",
    "seeded_weights",
]


# (n_layer, n_head, n_embd) of each published checkpoint; all share vocab 50257 and 1024 positions.
RANDOM_PRESETS: dict[str, tuple[int, int, int]] = {
    "gpt2": (12, 12, 768),  # 124M parameters, 498 MB fp32
    "gpt2-medium": (24, 16, 1024),  # 355M
    "gpt2-large": (36, 20, 1280),  # 774M
    "gpt2-xl": (48, 25, 1600),  # 1.5B, 6.2 GB fp32: above protobuf's 2 GB limit
    "distilgpt2": (6, 12, 768),  # 82M
    "tiny": (2, 4, 64),  # for trying the tool in seconds; the real vocabulary, so the real tokenizer works
}


@dataclass(frozen=True)
class TrainedScale:
    """How a ``-trained-scale`` preset changes its plain preset's seeded weights."""

    base: str  # the plain preset
    ln_f_scale: float  # ln_f.weight × this (measured: max |logit| ≈ 100 on a 200-token prompt, seed 0)
    outlier: float = 200.0  # layer 0's mlp.c_proj.bias at the outlier channels
    outlier_ln_weight: float = 0.05  # every later LayerNorm's weight at those channels (before ln_f's scaling)

    def channels(self, n_embd: int) -> tuple[int, int]:
        return n_embd // 4 + 5, (3 * n_embd) // 4 - 3


# Measured with seed 0 on a 200-token prompt of random ids (RandomState(0), AMD EPYC, torch 2.13): unscaled max
# |logit| 0.138 (tiny) and 0.191 (gpt2) once the outliers are in, so these scales give logits within about ±100 (tiny
# and gpt2).
TRAINED_SCALE: dict[str, TrainedScale] = {
    "tiny-trained-scale": TrainedScale("tiny", ln_f_scale=725.0),
    "gpt2-trained-scale": TrainedScale("gpt2", ln_f_scale=525.0),
}
RANDOM_PRESETS.update({name: RANDOM_PRESETS[scale.base] for name, scale in TRAINED_SCALE.items()})
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
    """A GPT2LMHeadModel with seeded random weights (:func:`seeded_weights`) and tied head."""
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
    model = GPT2LMHeadModel(config)  # transformers' initialisation, which seeded_weights replaces whole
    seeded_weights(model, seed)
    if name in TRAINED_SCALE:
        _imitate_trained_scale(model, TRAINED_SCALE[name])
    return model


def _stream(seed: int, name: str) -> np.random.RandomState:
    """Parameter ``name``'s own stream under ``seed``: RandomState seeded by (seed, name) through SHA-256."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return np.random.RandomState(np.frombuffer(digest, dtype=np.uint32))


def seeded_weights(model: GPT2LMHeadModel, seed: int) -> None:
    """Every parameter of ``model`` replaced in place by GPT-2's initialisation, drawn from its own stream
    (:func:`_stream`): the embeddings and projections normal(0, initializer_range), the two residual projections of
    each layer (``attn.c_proj`` and ``mlp.c_proj``) normal(0, initializer_range / sqrt(2 · n_layer)), biases 0,
    LayerNorms' weights 1 and biases 0. A tied head is the token embedding, so it is drawn once."""
    import torch

    config = model.config
    std = float(config.initializer_range)
    residual_std = std / math.sqrt(2 * config.n_layer)
    with torch.no_grad():
        for name, parameter in model.named_parameters():  # one entry per tensor: the tied head is wte's
            owner = model.get_submodule(name.rpartition(".")[0])
            if isinstance(owner, torch.nn.LayerNorm):
                parameter.fill_(1.0 if name.endswith(".weight") else 0.0)
            elif name.endswith(".bias"):
                parameter.zero_()
            else:
                scale = residual_std if name.endswith(".c_proj.weight") else std
                drawn = _stream(seed, name).standard_normal(tuple(parameter.shape))  # float64, parameter's shape
                parameter.copy_(torch.from_numpy((drawn * scale).astype(np.float32)))


def _imitate_trained_scale(model: GPT2LMHeadModel, scale: TrainedScale) -> None:
    """Trained-scale logits and residual outliers in place (see the module's docstring)."""
    import torch

    blocks: Any = model.transformer.h  # nn.ModuleList of GPT2Block
    final: Any = model.transformer.ln_f
    with torch.no_grad():
        for channel in scale.channels(model.config.n_embd):
            blocks[0].mlp.c_proj.bias[channel] = scale.outlier  # the residual stream carries it from here on
            for block in blocks[1:]:
                block.ln_1.weight[channel] = scale.outlier_ln_weight
                block.ln_2.weight[channel] = scale.outlier_ln_weight
            final.weight[channel] = scale.outlier_ln_weight
        final.weight.mul_(scale.ln_f_scale)  # (d,)
        final.bias.zero_()
