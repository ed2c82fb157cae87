"""The texts every check prompts the model with: the export's own parity check takes the first few, ``verify`` all of
them, golden.json the first three (its cases carry their token ids, so a consumer needs no tokenizer to use them)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["CHECK_PROMPTS", "check_prompt_ids"]

CHECK_PROMPTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Hello",
    "In a shocking finding, scientists discovered a herd of unicorns living in a remote, previously unexplored valley",
    "Once upon a time",
    "The meaning of life is",
    "ONNX Runtime",
    "A long time ago in a galaxy far, far away",
    "import numpy as np",
)


def check_prompt_ids(encode: Callable[[str], list[int]], longest: int) -> list[tuple[int, ...]]:
    """Every check prompt's token ids, cut to ``longest`` tokens (a prompt that encodes to nothing is token 0)."""
    return [tuple(encode(text)[:longest]) or (0,) for text in CHECK_PROMPTS]
