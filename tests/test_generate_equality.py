"""Greedy decoding with every processor equals transformers' ``generate`` (tokens exactly, per-token
log-probabilities within fp32 rounding), alone and in left-padded batches; sampling repeats exactly by seed,
returns several sequences per prompt, and refuses what it would ignore."""

from __future__ import annotations

from typing import Any

import pytest

from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from tests.conftest import move_eos
from tests.generate_reference import assert_equal_results, transformers_generate

TEXTS = ("The quick brown fox", "Hello", "In a shocking finding, scientists discovered a herd")
NEW = 12

CASES = [
    {},
    {"no_repeat_ngram_size": 1},
    {"no_repeat_ngram_size": 2, "repetition_penalty": 1.2},
    {"no_repeat_ngram_size": 3},
    {"min_new_tokens": 8},
    {"bad_words_ids": ((2436,), (22452, 22452), (16362, 30947))},
    {"forced_eos_token_id": (50256,)},
    {"repetition_penalty": 0.7, "no_repeat_ngram_size": 2, "min_new_tokens": 4, "bad_words_ids": ((42,),)},
]


@pytest.fixture(scope="module")
def model(peaked_runtime: Gpt2Onnx) -> Gpt2Onnx:
    return peaked_runtime


@pytest.fixture(scope="module")
def prompts(model: Gpt2Onnx) -> list[list[int]]:
    return [model.encode(text) for text in TEXTS]


@pytest.fixture(scope="module")
def early_eos(model: Gpt2Onnx, prompts: list[list[int]], tmp_path_factory: pytest.TempPathFactory) -> Gpt2Onnx:
    """The export with its end-of-text id moved to prompt 1's first greedy token, so that greedy ends at once
    unless min_new_tokens holds it back."""
    first = model.generate_ids([prompts[1]], GenerationOptions(max_new_tokens=1))[0].token_ids[0]
    return Gpt2Onnx.load(move_eos(model._loaded.folder, first, tmp_path_factory.mktemp("early-eos") / "export"))


def hf_options(case: dict[str, Any]) -> dict[str, Any]:
    return {
        k: [list(v) for v in case[k]] if k == "bad_words_ids" else list(v) if isinstance(v, tuple) else v
        for k, v in case.items()
    }


@pytest.mark.parametrize("case", CASES, ids=lambda case: ",".join(f"{k}={v}" for k, v in case.items()) or "plain")
@pytest.mark.parametrize("eos", ["gpt2", "early"])
def test_greedy_equals_transformers(
    case: dict[str, Any], eos: str, model: Gpt2Onnx, early_eos: Gpt2Onnx, prompts: list[list[int]], peaked_model: Any
) -> None:
    runtime = model if eos == "gpt2" else early_eos
    eos_id = int(runtime.manifest.tokens["eos_token_id"])
    for batch in ([prompts[0]], [prompts[1]], prompts):
        expected = transformers_generate(peaked_model, batch, eos_id, max_new_tokens=NEW, **hf_options(case))
        assert_equal_results(runtime.generate_ids(batch, GenerationOptions(max_new_tokens=NEW, **case)), expected)


def test_min_new_tokens_holds_back_the_end_of_text(early_eos: Gpt2Onnx, prompts: list[list[int]]) -> None:
    assert early_eos.generate_ids([prompts[1]], GenerationOptions(max_new_tokens=NEW))[0].finish_reason == "eos"
    held = early_eos.generate_ids([prompts[1]], GenerationOptions(max_new_tokens=NEW, min_new_tokens=5))[0]
    assert len(held.token_ids) >= 5


def test_forced_eos_ends_at_the_limit(model: Gpt2Onnx, prompts: list[list[int]]) -> None:
    found = model.generate_ids(prompts, GenerationOptions(max_new_tokens=5, forced_eos_token_id=(50256,)))
    assert all(r.token_ids[-1] == 50256 and len(r.token_ids) == 5 and r.finish_reason == "eos" for r in found)
    assert all(r.token_logprobs[-1] == 0.0 for r in found), "the forced token had probability 1"


def outcome(results: list[Any]) -> list[tuple[int, int, list[int], list[float]]]:
    """What a seed decides (timings aside)."""
    return [(r.index, r.sequence, r.token_ids, r.token_logprobs) for r in results]


def test_sampling_several_sequences_per_prompt(model: Gpt2Onnx, prompts: list[list[int]]) -> None:
    options = GenerationOptions(max_new_tokens=8, do_sample=True, seed=3, top_k=50, num_return_sequences=3)
    found = model.generate_ids(prompts, options)
    assert [(r.index, r.sequence) for r in found] == [(i, j) for i in range(3) for j in range(3)]
    assert outcome(found) == outcome(model.generate_ids(prompts, options)), "seeded: the same again"
    one = GenerationOptions(**{**options.__dict__, "num_return_sequences": 1})
    assert found[6].token_ids == model.generate_ids([prompts[2]], one)[0].token_ids, "sequence 0: as one sequence"
    assert len({tuple(r.token_ids) for r in found[6:]}) == 3
    alone = model.generate_ids([prompts[1]], options)  # padding moves logits by ~1e-7, never the tokens
    assert [r.token_ids for r in found[3:6]] == [r.token_ids for r in alone], "independent of the batch"


def test_sampled_token_logprobs_are_those_of_the_warped_distribution(model: Gpt2Onnx) -> None:
    options = GenerationOptions(max_new_tokens=10, do_sample=True, seed=5, top_k=1)
    found = model.generate(TEXTS[0], options)[0]
    assert found.token_logprobs == [0.0] * 10, "top-k 1 leaves one token, of probability 1"
    assert found.token_ids == model.generate(TEXTS[0], GenerationOptions(max_new_tokens=10))[0].token_ids


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temperature": 0.5}, "temperature applies only when sampling"),
        ({"top_k": 5, "min_p": 0.1}, "top_k and min_p apply only when sampling"),
        ({"seed": 1}, "seed applies only when sampling"),
        ({"length_penalty": 0.5}, "length_penalty applies only to beam search"),
        ({"early_stopping": True}, "early_stopping applies only to beam search"),
        ({"num_return_sequences": 2}, "greedy decoding returns one sequence"),
        ({"num_beams": 2, "num_return_sequences": 3}, "exceeds num_beams 2"),
        ({"num_beams": 2, "do_sample": True}, "beam sampling"),
        ({"num_beams": 2, "stop": ("x",)}, "stop strings are not supported with beam search"),
        ({"min_new_tokens": 2, "ignore_eos": True}, "ignore_eos"),
        ({"num_beams": 0}, "num_beams must be >= 1"),
        ({"no_repeat_ngram_size": -1}, "no_repeat_ngram_size must be >= 0"),
        ({"num_beams": 2, "early_stopping": "sometimes"}, "early_stopping must be True, False or 'never'"),
        ({"do_sample": True, "min_p": 1.5}, "min_p must lie in"),
        ({"bad_words_ids": ((),)}, "empty sequence"),
        ({"bad_words_ids": ((1, -2),)}, "token ids"),
        ({"forced_eos_token_id": (-1,)}, "forced_eos_token_id must be token ids"),
    ],
)
def test_bad_combinations_are_refused_in_one_line(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as caught:
        GenerationOptions(**options)
    assert "\n" not in str(caught.value)


def test_token_ids_options_outside_the_vocabulary(model: Gpt2Onnx) -> None:
    with pytest.raises(InvalidInputError, match="bad_words_ids holds token id 50257"):
        model.generate("Hi", GenerationOptions(bad_words_ids=((50257,),)))
    with pytest.raises(InvalidInputError, match="cannot stream"):
        model.stream("Hi", GenerationOptions(num_beams=2))
    with pytest.raises(InvalidInputError, match="a stream gives one sequence"):
        model.stream("Hi", GenerationOptions(do_sample=True, num_return_sequences=2))
