"""gpt2_onnx_runtimes.processors against transformers' own processor classes, on the same arrays: one by one,
then the whole chain as transformers' ``generate`` builds it (``GenerationMixin._get_logits_processor``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from transformers import GenerationConfig
from transformers.generation import logits_process as lp

from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.processors import (
    ForcedEos,
    MinNewTokens,
    MinP,
    NoBadWords,
    NoRepeatNGram,
    RepetitionPenalty,
    RowHistory,
    Temperature,
    TopK,
    TopP,
    logits_processors,
    sampling_warpers,
)

VOCAB = 300
EOS = 7
PROMPT = 5  # the first PROMPT tokens of each history are its prompt
# Four rows of 12 tokens with repeats, so that n-grams and bad words match somewhere.
HISTORY = np.array(
    [
        [1, 2, 3, 1, 2, 3, 1, 2, 9, 4, 1, 2],
        [5, 5, 5, 5, 6, 6, 6, 6, 5, 5, 5, 5],
        [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21],
        [3, 4, 3, 4, 3, 4, 8, 8, 3, 4, 3, 299],
    ]
)


@pytest.fixture
def scores() -> np.ndarray:
    return (np.random.default_rng(0).normal(size=(len(HISTORY), VOCAB)) * 3).astype(np.float32)


def rows(history: np.ndarray = HISTORY) -> list[RowHistory]:
    return [RowHistory(list(map(int, h)), PROMPT) for h in history]


def theirs(processor: Any, scores: np.ndarray, history: np.ndarray = HISTORY) -> np.ndarray:
    out: np.ndarray = processor(torch.from_numpy(history), torch.from_numpy(scores.copy())).numpy()
    return out


def assert_same(ours: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_array_equal(np.isneginf(ours), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(ours[finite], expected[finite], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("penalty", [0.7, 1.3, 2.0])
def test_repetition_penalty(scores: np.ndarray, penalty: float) -> None:
    expected = theirs(lp.RepetitionPenaltyLogitsProcessor(penalty), scores)
    assert_same(RepetitionPenalty(penalty)(scores, rows()), expected)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_no_repeat_ngram(scores: np.ndarray, size: int) -> None:
    ours = NoRepeatNGram(size)(scores, rows())
    assert np.isneginf(ours).any()
    assert_same(ours, theirs(lp.NoRepeatNGramLogitsProcessor(size), scores))


@pytest.mark.parametrize(
    "bad",
    [
        [[4]],
        [[1, 2, 3]],  # row 0 ends with 1, 2: 3 is banned there only
        [[2, 9], [3, 299, 5], [5, 5, 40], [EOS]],  # [EOS] alone is dropped, as transformers drops it
        [[21, 22], [12]],
    ],
)
def test_bad_words(scores: np.ndarray, bad: list[list[int]]) -> None:
    ours = NoBadWords(tuple(map(tuple, bad)), (EOS,))(scores, rows())
    assert_same(ours, theirs(lp.NoBadWordsLogitsProcessor(bad, EOS), scores))


@pytest.mark.parametrize("minimum", [3, 7, 8, 20])
def test_min_new_tokens(scores: np.ndarray, minimum: int) -> None:
    ours = MinNewTokens(minimum, (EOS, 9))(scores, rows())
    assert_same(ours, theirs(lp.MinNewTokensLengthLogitsProcessor(PROMPT, minimum, [EOS, 9]), scores))


@pytest.mark.parametrize("max_new", [7, 8, 9])
def test_forced_eos(scores: np.ndarray, max_new: int) -> None:
    ours = ForcedEos(max_new, (EOS,))(scores, rows())
    assert_same(ours, theirs(lp.ForcedEOSTokenLogitsProcessor(PROMPT + max_new, EOS), scores))


@pytest.mark.parametrize("temperature", [0.3, 1.7])
def test_temperature(scores: np.ndarray, temperature: float) -> None:
    assert_same(Temperature(temperature)(scores, rows()), theirs(lp.TemperatureLogitsWarper(temperature), scores))


@pytest.mark.parametrize(("k", "keep"), [(1, 1), (5, 1), (50, 1), (1, 3), (VOCAB + 5, 1)])
def test_top_k(scores: np.ndarray, k: int, keep: int) -> None:
    assert_same(TopK(k, keep)(scores, rows()), theirs(lp.TopKLogitsWarper(k, min_tokens_to_keep=keep), scores))


@pytest.mark.parametrize(("p", "keep"), [(0.1, 1), (0.5, 1), (0.9, 1), (0.99, 1), (0.05, 3)])
def test_top_p(scores: np.ndarray, p: float, keep: int) -> None:
    assert_same(TopP(p, keep)(scores, rows()), theirs(lp.TopPLogitsWarper(p, min_tokens_to_keep=keep), scores))


@pytest.mark.parametrize(("p", "keep"), [(0.0, 1), (0.05, 1), (0.3, 1), (1.0, 1), (0.9, 4)])
def test_min_p(scores: np.ndarray, p: float, keep: int) -> None:
    assert_same(MinP(p, keep)(scores, rows()), theirs(lp.MinPLogitsWarper(p, min_tokens_to_keep=keep), scores))


def test_processors_leave_their_input_alone(scores: np.ndarray) -> None:
    before = scores.copy()
    for processor in (RepetitionPenalty(1.5), NoRepeatNGram(2), NoBadWords(((4,),)), ForcedEos(8, (EOS,)), TopP(0.5)):
        processor(scores, rows())
    np.testing.assert_array_equal(scores, before)


def test_rows_alone_equal_rows_together(scores: np.ndarray) -> None:
    options = GenerationOptions(
        max_new_tokens=8,
        do_sample=True,
        repetition_penalty=1.3,
        no_repeat_ngram_size=2,
        bad_words_ids=((4,), (1, 2, 3)),
        temperature=0.8,
        top_k=40,
        top_p=0.9,
        min_p=0.02,
    )
    chain = logits_processors(options, (EOS,))
    warpers = sampling_warpers(options)
    together = warpers(chain(scores, rows()), rows())
    for i, history in enumerate(rows()):
        alone = warpers(chain(scores[i : i + 1], [history]), [history])
        np.testing.assert_array_equal(alone[0], together[i])


CHAINS = [
    {"repetition_penalty": 1.4, "no_repeat_ngram_size": 2},
    {"no_repeat_ngram_size": 3, "bad_words_ids": ((4,), (1, 2, 3), (EOS,)), "min_new_tokens": 9},
    {"forced_eos_token_id": (EOS,), "repetition_penalty": 0.8},
    {"do_sample": True, "temperature": 0.7, "top_k": 30, "top_p": 0.8, "repetition_penalty": 1.2},
    {"do_sample": True, "temperature": 1.3, "min_p": 0.05, "no_repeat_ngram_size": 2, "min_new_tokens": 8},
    {"do_sample": True, "top_k": 5, "top_p": 0.5, "min_p": 0.2, "bad_words_ids": ((2, 9),)},
]


@pytest.mark.parametrize("settings", CHAINS)
def test_chain_equals_transformers_chain(scores: np.ndarray, settings: dict[str, Any], tiny_model: Any) -> None:
    """The chain transformers' generate builds (its order, its warpers) from the same settings."""
    options = GenerationOptions(max_new_tokens=8, **settings)
    fields = {**settings, "top_k": options.top_k}  # transformers defaults top_k to 50; here 0 is off
    fields["bad_words_ids"] = [list(seq) for seq in options.bad_words_ids] or None
    fields["forced_eos_token_id"] = list(options.forced_eos_token_id) or None
    config = GenerationConfig(eos_token_id=EOS, max_length=PROMPT + options.max_new_tokens, **fields)
    tiny_model._prepare_special_tokens(config, True, device="cpu")
    expected = tiny_model._get_logits_processor(
        generation_config=config, input_ids_seq_length=PROMPT, encoder_input_ids=torch.from_numpy(HISTORY[:, :PROMPT])
    )
    ours = sampling_warpers(options)(logits_processors(options, (EOS,))(scores, rows()), rows())
    assert len(expected) == len(logits_processors(options, (EOS,))) + len(sampling_warpers(options))
    assert_same(ours, theirs(expected, scores))
