"""Beam search equals transformers' ``generate``: tokens exactly, sequence scores and per-token scores within fp32
rounding, for single prompts and left-padded batches, with end-of-text reached mid-search or not at all.

The checkpoint is the peaked one (initializer_range 0.2), so near-ties do not decide. Besides GPT-2's own
end-of-text (which these random weights never choose), each case runs with the end-of-text id moved to a token
the model chooses often, so that beams finish at different lengths and ``early_stopping`` and ``length_penalty``
decide which sequences come back.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.beam_search import BeamConfig, BeamScorer
from tests.conftest import move_eos
from tests.generate_reference import assert_equal_results, transformers_generate

TEXTS = ("The quick brown fox", "Hello", "In a shocking finding, scientists discovered a herd")
NEW = 10

CASES = [
    {"num_beams": 2},
    {"num_beams": 4, "num_return_sequences": 4},
    {"num_beams": 3, "length_penalty": 0.0, "num_return_sequences": 2},
    {"num_beams": 3, "length_penalty": -1.0},
    {"num_beams": 3, "length_penalty": 2.0, "num_return_sequences": 3},
    {"num_beams": 3, "early_stopping": True, "num_return_sequences": 2},
    {"num_beams": 5, "early_stopping": "never", "length_penalty": 1.5},
    {"num_beams": 3, "early_stopping": "never", "length_penalty": -0.5, "num_return_sequences": 3},
    {"num_beams": 4, "no_repeat_ngram_size": 2, "repetition_penalty": 1.3, "num_return_sequences": 2},
    {"num_beams": 3, "min_new_tokens": 6, "early_stopping": True},
    {"num_beams": 3, "bad_words_ids": ((22104,), (15383, 15383)), "no_repeat_ngram_size": 3},
    {"num_beams": 2, "forced_eos_token_id": (50256,), "num_return_sequences": 2},
]


@pytest.fixture(scope="module")
def model(peaked_runtime: Gpt2Onnx) -> Gpt2Onnx:
    return peaked_runtime


@pytest.fixture(scope="module")
def prompts(model: Gpt2Onnx) -> list[list[int]]:
    return [model.encode(text) for text in TEXTS]


@pytest.fixture(scope="module")
def frequent_eos(model: Gpt2Onnx, prompts: list[list[int]], tmp_path_factory: pytest.TempPathFactory) -> Gpt2Onnx:
    """The export with its end-of-text id moved to the token its beams choose most often."""
    found = model.generate_ids(prompts, GenerationOptions(max_new_tokens=NEW, num_beams=4, num_return_sequences=4))
    token = Counter(t for r in found for t in r.token_ids).most_common(1)[0][0]
    return Gpt2Onnx.load(move_eos(model._loaded.folder, token, tmp_path_factory.mktemp("frequent-eos") / "export"))


def eos_of(model: Gpt2Onnx) -> int:
    return int(model.manifest.tokens["eos_token_id"])


@pytest.mark.parametrize("case", CASES, ids=lambda case: ",".join(f"{k}={v}" for k, v in case.items()))
@pytest.mark.parametrize("eos", ["gpt2", "frequent"])
def test_beam_search_equals_transformers(
    case: dict[str, Any], eos: str, model: Gpt2Onnx, frequent_eos: Gpt2Onnx, prompts: list[list[int]], peaked_model: Any
) -> None:
    runtime = model if eos == "gpt2" else frequent_eos
    options = GenerationOptions(max_new_tokens=NEW, **case)
    hf_case = {k: ([list(v) for v in case[k]] if k == "bad_words_ids" else case[k]) for k in case}
    if "forced_eos_token_id" in case:
        hf_case["forced_eos_token_id"] = list(case["forced_eos_token_id"])
    for batch in ([prompts[0]], prompts):  # alone, and a left-padded batch
        expected = transformers_generate(peaked_model, batch, eos_of(runtime), max_new_tokens=NEW, **hf_case)
        ours = runtime.generate_ids(batch, options)
        assert_equal_results(ours, expected)
        count = options.num_return_sequences
        assert [(r.index, r.sequence) for r in ours] == [(i, j) for i in range(len(batch)) for j in range(count)]


def test_frequent_eos_makes_beams_finish_early(frequent_eos: Gpt2Onnx, prompts: list[list[int]]) -> None:
    """The cases above do exercise end-of-text: without a length penalty, short finished beams win."""
    options = GenerationOptions(max_new_tokens=NEW, num_beams=4, num_return_sequences=4, length_penalty=0.0)
    found = frequent_eos.generate_ids(prompts, options)
    assert {r.finish_reason for r in found} == {"eos", "length"}
    assert len({len(r.token_ids) for r in found}) > 2


def test_beam_search_ignoring_eos_runs_to_the_limit(
    model: Gpt2Onnx, prompts: list[list[int]], peaked_model: Any
) -> None:
    options = GenerationOptions(max_new_tokens=NEW, num_beams=3, num_return_sequences=2, ignore_eos=True)
    ours = model.generate_ids(prompts, options)
    expected = transformers_generate(
        peaked_model, prompts, None, max_new_tokens=NEW, num_beams=3, num_return_sequences=2
    )
    assert_equal_results(ours, expected)
    assert all(len(r.token_ids) == NEW and r.finish_reason == "length" for r in ours)


def test_beam_search_text_and_results_through_the_api(model: Gpt2Onnx) -> None:
    found = model.generate(list(TEXTS[:2]), GenerationOptions(max_new_tokens=6, num_beams=3, num_return_sequences=2))
    assert [(r.prompt, r.sequence) for r in found] == [(TEXTS[0], 0), (TEXTS[0], 1), (TEXTS[1], 0), (TEXTS[1], 1)]
    assert all(r.text == model.decode(r.token_ids) for r in found)
    assert found[0].score >= found[1].score and found[2].score >= found[3].score
    assert found[0].timings["prefill_ms"] > 0


def test_scorer_first_step_extends_beam_zero_only() -> None:
    """The scorer's contract: parents index the prompt's own beams, tokens come from the candidates."""
    scorer = BeamScorer(2, BeamConfig(num_beams=3, max_new_tokens=4, eos_token_ids=(0,)))
    log_probs = np.log(np.random.default_rng(0).dirichlet(np.ones(20), size=6))  # (P·K, V)
    parents, tokens = scorer.step(log_probs)
    assert parents.shape == tokens.shape == (2, 3) and (parents == 0).all(), "the first step extends beam 0 only"
    best = [int(t) for t in np.argsort(-log_probs[0])[:6] if t != 0][:3]  # beam 0's best, end-of-text excluded
    assert tokens[0].tolist() == best
