"""transformers' ``generate`` as the reference for equality tests: a left-padded batch in, each returned
sequence's new tokens, score and per-token scores out, in the runtime's result order (prompt-major)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

PAD = 50256


@dataclass(frozen=True)
class Reference:
    tokens: list[int]
    score: float  # beam search: sequences_scores; greedy: the sum of the token scores
    token_scores: list[float]  # compute_transition_scores (normalized for greedy, as generated for beams)


def _cut(tokens: list[int], eos: int | None) -> list[int]:
    """A sequence's own tokens: up to and including its first end-of-text (transformers pads after it)."""
    return tokens[: tokens.index(eos) + 1] if eos is not None and eos in tokens else tokens


def transformers_generate(
    model: Any, prompts: Sequence[Sequence[int]], eos: int | None, **kwargs: Any
) -> list[Reference]:
    """``model.generate`` over ``prompts`` left-padded with ``PAD`` (their mask says so)."""
    import torch

    width = max(map(len, prompts))
    ids = torch.tensor([[PAD] * (width - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=mask,
            pad_token_id=PAD,
            eos_token_id=eos,
            output_scores=True,
            return_dict_in_generate=True,
            **kwargs,
        )
    beams = getattr(out, "beam_indices", None) is not None  # beam search, asked for or from the checkpoint
    transition = model.compute_transition_scores(
        out.sequences, out.scores, out.beam_indices if beams else None, normalize_logits=not beams
    ).numpy()  # (rows, new tokens)
    found = []
    for row, sequence in enumerate(out.sequences[:, width:].tolist()):
        tokens = _cut(sequence, eos)
        token_scores = [float(x) for x in transition[row, : len(tokens)]]
        score = float(out.sequences_scores[row]) if beams else float(np.sum(token_scores))
        found.append(Reference(tokens, score, token_scores))
    return found


def assert_equal_results(ours: Sequence[Any], expected: Sequence[Reference], score_tolerance: float = 1e-4) -> None:
    """Same tokens exactly; scores and per-token scores within ``score_tolerance`` (1e-4 suits tiny models, whose
    logits differ from PyTorch's by ~1e-5)."""
    assert [r.token_ids for r in ours] == [e.tokens for e in expected]
    for result, reference in zip(ours, expected, strict=True):
        assert abs(result.score - reference.score) <= score_tolerance * max(1.0, abs(reference.score)), (
            result.score,
            reference.score,
        )
        np.testing.assert_allclose(result.token_logprobs, reference.token_scores, rtol=1e-4, atol=score_tolerance)
