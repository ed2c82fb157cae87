"""GPT-2-small-sized equality: beam search and greedy decoding with processors equal transformers' ``generate``
on a model with GPT-2-small's dimensions (peaked: initializer_range 0.2), alone and in a left-padded batch.

Slow (an export of 124M parameters, about a minute): ``pytest -m slow tests/test_generate_small.py``.

Tokens must be those of transformers in float32 and in float64. Scores are judged as verify judges fp32 logits
(FP32_RULE): against the float64 model, within 4 × the float32 model's own distance from it. With these wide weights
the logits reach ±24 and the two float32 implementations err on both sides of the exact value: measured on the
second case (AMD EPYC), per-token log-probabilities 8.3e-4 from float64 for ours, 1.33e-3 for PyTorch's float32,
2.16e-3 between the two, so a fixed tolerance between the float32 results judged rounding, not the export.

A sequence's score is a sum of its per-token scores (greedy) or that sum over length ** length_penalty (beam search),
and the per-token errors in a sum can cancel by chance in either implementation: on an Intel Xeon, PyTorch's float32
score of the first case came within 3.6e-6 of float64 while its per-token scores were up to 2.8e-4 away and ours
2.1e-5 (a limit of 4 × 3.6e-6 failed what was rounding). The float32 source's own error for a score is therefore the
larger of the two it shows: its score's distance from float64, and what its per-token errors add up to in that score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpt2_onnx_core.precisions import FP32_RULE
from gpt2_onnx_runtimes import GenerationOptions, GenerationResult, Gpt2Onnx
from tests.conftest import export_checkpoint, save_checkpoint
from tests.generate_reference import Reference, transformers_generate

pytestmark = pytest.mark.slow

SMALL = {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024}
TEXTS = ("The quick brown fox jumps over the lazy dog", "Hello", "In a shocking finding, scientists discovered")
NEW = 16

CASES = [
    {"num_beams": 4},
    {"num_beams": 4, "num_return_sequences": 3, "no_repeat_ngram_size": 3, "length_penalty": 0.6},
    {"num_beams": 3, "early_stopping": True, "repetition_penalty": 1.2, "min_new_tokens": 10},
    {"num_beams": 1, "no_repeat_ngram_size": 2, "bad_words_ids": ((11,), (13, 198))},
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("small-checkpoint"), seed=0, initializer_range=0.2, **SMALL)


@pytest.fixture(scope="module")
def model(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Gpt2Onnx:
    return Gpt2Onnx.load(export_checkpoint(checkpoint, tmp_path_factory.mktemp("small-export") / "e", check=False))


@pytest.fixture(scope="module")
def reference(checkpoint: Path) -> Any:
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(checkpoint, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def exact(checkpoint: Path) -> Any:
    """The checkpoint in float64: the exact values that both float32 implementations approximate."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(checkpoint, attn_implementation="eager").eval().double()


def _within_the_fp32_rule(what: str, ours: np.ndarray, float64: np.ndarray, source_error: float) -> None:
    """Ours from float64 within FP32_RULE's limit for the float32 source's own error ``source_error``."""
    limit = FP32_RULE.limit(source_error, float(np.abs(float64).max()))
    error = float(np.abs(ours - float64).max())
    assert error <= limit, f"{what}: max |Δ| from float64 {error:.3g} > {limit:.3g} ({FP32_RULE.describe()})"


def _score_error_of_float32(single: Reference, double: Reference) -> float:
    """The float32 source's error for one sequence's score: its score's distance from float64, or what its per-token
    errors add up to in that score (their sum over the score's normalizer, read off float64: sum / score, which is 1
    for greedy and length ** length_penalty for beam search), whichever is larger."""
    normalizer = sum(double.token_scores) / double.score
    per_token = float(np.abs(np.subtract(single.token_scores, double.token_scores)).sum()) / abs(normalizer)
    return max(abs(single.score - double.score), per_token)


def assert_equal_within_the_fp32_rule(
    found: list[GenerationResult], float32: list[Reference], float64: list[Reference]
) -> None:
    assert [r.token_ids for r in found] == [e.tokens for e in float32] == [e.tokens for e in float64]
    _within_the_fp32_rule(
        "scores",
        np.asarray([r.score for r in found]),
        np.asarray([e.score for e in float64]),
        max(_score_error_of_float32(single, exact) for single, exact in zip(float32, float64, strict=True)),
    )
    double = np.asarray([s for e in float64 for s in e.token_scores])
    _within_the_fp32_rule(
        "per-token scores",
        np.asarray([s for r in found for s in r.token_logprobs]),
        double,
        float(np.abs(np.asarray([s for e in float32 for s in e.token_scores]) - double).max()),
    )


@pytest.mark.parametrize("case", CASES, ids=lambda case: ",".join(f"{k}={v}" for k, v in case.items()))
def test_small_model_equals_transformers(case: dict[str, Any], model: Gpt2Onnx, reference: Any, exact: Any) -> None:
    prompts = [model.encode(text) for text in TEXTS]
    hf_case = {k: [list(v) for v in case[k]] if k == "bad_words_ids" else case[k] for k in case}
    for batch in ([prompts[0]], prompts):
        float32 = transformers_generate(reference, batch, 50256, max_new_tokens=NEW, **hf_case)
        float64 = transformers_generate(exact, batch, 50256, max_new_tokens=NEW, **hf_case)
        found = model.generate_ids(batch, GenerationOptions(max_new_tokens=NEW, **case))
        assert_equal_within_the_fp32_rule(found, float32, float64)
