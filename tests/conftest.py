"""Shared fixtures: tiny seeded GPT-2 checkpoints (the real GPT-2 vocabulary and tokenizer, a few thousand
hidden units) and their exports. No network, no GPU."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach for the network

TINY_CONFIG: dict[str, Any] = {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 128}


def save_checkpoint(folder: Path, seed: int = 0, tie: bool = True, **config: Any) -> Path:
    """A seeded random GPT2LMHeadModel saved as safetensors, with the real GPT-2 tokenizer files."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from exporters.tokenizer_files import load_packaged_gpt2_tokenizer

    settings = {
        **TINY_CONFIG,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "tie_word_embeddings": tie,
        **config,
    }
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**settings))
    if not tie:  # an untied head must hold its own values, not a copy of the embedding
        with torch.no_grad():
            model.lm_head.weight.normal_(0.0, 0.02)
    model.save_pretrained(folder)
    load_packaged_gpt2_tokenizer().save_pretrained(folder)
    return folder


def export_checkpoint(checkpoint: Path, output: Path, **options: Any) -> Path:
    from gpt2_onnx.config import ExportOptions
    from gpt2_onnx.export import export_model

    export_model(ExportOptions(model=str(checkpoint), output=output, **options))
    return output


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("tiny-checkpoint"))


@pytest.fixture(scope="session")
def tiny_export(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default export (opset 17, fp32) of the tiny checkpoint. Treat as read-only."""
    return export_checkpoint(tiny_checkpoint, tmp_path_factory.mktemp("exports") / "tiny")


@pytest.fixture(scope="session")
def tiny_model(tiny_checkpoint: Path) -> Any:
    """The tiny checkpoint loaded with transformers (eager attention): the parity reference."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(tiny_checkpoint, attn_implementation="eager").eval()


@pytest.fixture(scope="session")
def peaked_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny checkpoint with a wider initialisation (0.2, not 0.02): its next-token distributions are peaked, so
    near-ties between candidates do not decide equality tests of greedy and beam search."""
    return save_checkpoint(tmp_path_factory.mktemp("peaked-checkpoint"), seed=1, initializer_range=0.2)


@pytest.fixture(scope="session")
def peaked_export(peaked_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The peaked checkpoint's export (check=False: the tests using it compare with transformers themselves)."""
    return export_checkpoint(peaked_checkpoint, tmp_path_factory.mktemp("peaked-export") / "tiny", check=False)


@pytest.fixture(scope="session")
def peaked_model(peaked_checkpoint: Path) -> Any:
    """The peaked checkpoint loaded with transformers (eager attention)."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(peaked_checkpoint, attn_implementation="eager").eval()


@pytest.fixture
def copy_export(tiny_export: Path, tmp_path: Path) -> Callable[[], Path]:
    """A writable copy of the tiny export, for tests that damage it."""
    import shutil

    def make() -> Path:
        target = tmp_path / "copy"
        shutil.copytree(tiny_export, target)
        return target

    return make
