"""Logits processors agree with transformers' own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpt2_onnx_runtimes.sampling import apply_repetition_penalty, sample, top_k_filter, top_p_filter


@pytest.fixture
def logits() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(3, 500)).astype(np.float32) * 3


@pytest.mark.parametrize("k", [1, 5, 50])
def test_top_k_matches_transformers(logits: np.ndarray, k: int) -> None:
    from transformers.generation.logits_process import TopKLogitsWarper

    expected = TopKLogitsWarper(k)(None, torch.from_numpy(logits)).numpy()
    np.testing.assert_array_equal(np.isinf(top_k_filter(logits, k)), np.isinf(expected))


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.99])
def test_top_p_matches_transformers(logits: np.ndarray, p: float) -> None:
    from transformers.generation.logits_process import TopPLogitsWarper

    expected = TopPLogitsWarper(p)(None, torch.from_numpy(logits)).numpy()
    np.testing.assert_array_equal(np.isinf(top_p_filter(logits, p)), np.isinf(expected))


def test_repetition_penalty_matches_transformers(logits: np.ndarray) -> None:
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    history = [[1, 2, 2, 7], [3], [0, 499]]
    expected = RepetitionPenaltyLogitsProcessor(1.3)(
        torch.tensor([h + [h[-1]] * (4 - len(h)) for h in history]), torch.from_numpy(logits.copy())
    )
    np.testing.assert_allclose(apply_repetition_penalty(logits, history, 1.3), expected.numpy(), rtol=1e-6)


def test_sampling_follows_the_distribution() -> None:
    logits = np.log(np.array([[0.7, 0.2, 0.1, 1e-12]], dtype=np.float64))
    rng = np.random.default_rng(0)
    draws = [int(sample(logits, 1.0, 0, 1.0, [rng])[0]) for _ in range(4000)]
    counts = np.bincount(draws, minlength=4) / len(draws)
    np.testing.assert_allclose(counts[:3], [0.7, 0.2, 0.1], atol=0.03)
    assert counts[3] == 0


def test_top_k_one_makes_sampling_greedy(logits: np.ndarray) -> None:
    rngs = [np.random.default_rng(i) for i in range(3)]
    np.testing.assert_array_equal(sample(logits, 0.7, 1, 1.0, rngs), logits.argmax(axis=-1))
