"""The draw: one uniform number per row and step, from the softmax of the scores the processors and warpers left
(their agreement with transformers' own is tests/test_processors.py's)."""

from __future__ import annotations

import numpy as np

from gpt2_onnx_runtimes.processors import ProcessorChain, RowHistory, Temperature, TopK
from gpt2_onnx_runtimes.sampling import draw


def test_sampling_follows_the_distribution() -> None:
    logits = np.log(np.array([[0.7, 0.2, 0.1, 1e-12]], dtype=np.float64))
    rng = np.random.default_rng(0)
    draws = [int(draw(logits, [rng])[0]) for _ in range(4000)]
    counts = np.bincount(draws, minlength=4) / len(draws)
    np.testing.assert_allclose(counts[:3], [0.7, 0.2, 0.1], atol=0.03)
    assert counts[3] == 0


def test_top_k_one_makes_sampling_greedy() -> None:
    logits = np.random.default_rng(0).normal(size=(3, 500)).astype(np.float32) * 3
    scores = ProcessorChain((Temperature(0.7), TopK(1)))(logits, [RowHistory((), 0)] * 3)
    rngs = [np.random.default_rng(i) for i in range(3)]
    np.testing.assert_array_equal(draw(scores, rngs), logits.argmax(axis=-1))
