"""The checkpoint's own configuration files, copied into the export folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpt2_onnx_core.names import GENERATION_CONFIG_FILE, MODEL_CONFIG_FILE

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = ["model_description", "save_model_configs"]


def save_model_configs(model: GPT2LMHeadModel, folder: Path) -> list[str]:
    """Write ``config.json`` and ``generation_config.json``; return their names."""
    model.config.to_json_file(str(folder / MODEL_CONFIG_FILE))
    model.generation_config.to_json_file(str(folder / GENERATION_CONFIG_FILE))
    return [MODEL_CONFIG_FILE, GENERATION_CONFIG_FILE]


def model_description(model: GPT2LMHeadModel, tied: bool) -> dict[str, Any]:
    """The manifest's description of the model beyond its dimensions."""
    config = model.config
    unique = {id(p): p for p in model.parameters()}
    return {
        "architecture": "GPT2LMHeadModel",
        "parameters": sum(p.numel() for p in unique.values()),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in unique.values()),
        "tied_lm_head": tied,
        "activation_function": config.activation_function,
        "layer_norm_epsilon": config.layer_norm_epsilon,
        "n_inner": config.n_inner if config.n_inner is not None else 4 * config.n_embd,
        "scale_attn_weights": config.scale_attn_weights,
        "scale_attn_by_inverse_layer_idx": config.scale_attn_by_inverse_layer_idx,
        "reorder_and_upcast_attn": config.reorder_and_upcast_attn,
    }
