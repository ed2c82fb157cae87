"""OpenAI's presence_penalty, frequency_penalty and logit_bias against a reference written from OpenAI's documented
formula, on arrays and in generation; best_of returns the drawn sequences with the best log-probability per token.

OpenAI's definition (the API reference, "Parameter details"):

    mu[j] -> mu[j] - c[j] * alpha_frequency - float(c[j] > 0) * alpha_presence

where ``mu[j]`` is token j's logit and ``c[j]`` how often it was sampled before the current position; logit_bias
values are added to the logits before sampling.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpt2_onnx_core.errors import OptionError
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.processors import RowHistory, logits_processors

PROMPT = "In a shocking finding, scientists"


def reference(
    logits: list[float], generated: list[int], presence: float, frequency: float, bias: dict[int, float]
) -> list[float]:
    """OpenAI's formula, one token at a time, in plain Python."""
    out = []
    for j, mu in enumerate(logits):
        c = generated.count(j)
        out.append(mu + bias.get(j, 0.0) - c * frequency - float(c > 0) * presence)
    return out


@pytest.mark.parametrize(("presence", "frequency"), [(0.6, 0.0), (0.0, 0.4), (1.5, -0.7), (-2.0, 2.0)])
def test_penalties_and_bias_follow_openais_formula(presence: float, frequency: float) -> None:
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((3, 50)).astype(np.float32)  # (R, V)
    prompts = [[1, 2, 3], [4], [5, 5]]
    generated = [[7, 7, 8, 3, 7], [], [9, 10, 9]]  # the prompt's tokens do not count
    bias = {2: 5.0, 7: -100.0, 49: 0.5}
    options = GenerationOptions(presence_penalty=presence, frequency_penalty=frequency, logit_bias=bias)
    rows = [RowHistory(p + g, len(p)) for p, g in zip(prompts, generated, strict=True)]
    got = logits_processors(options, ())(scores, rows)
    for row in range(3):
        want = reference(scores[row].tolist(), generated[row], presence, frequency, bias)
        np.testing.assert_allclose(got[row], want, rtol=1e-6, atol=1e-5)


def test_greedy_generation_with_penalties_takes_the_references_argmax(tiny_export: Path) -> None:
    """Each token greedy decoding picks under the penalties is the argmax of the reference applied to the model's
    own logits for the text so far (the folder's prefill graph, run on the whole sequence)."""
    model = Gpt2Onnx.load(tiny_export)
    presence, frequency, bias = 0.8, 0.5, {262: 3.0, 11: -100.0}
    options = GenerationOptions(
        max_new_tokens=10, presence_penalty=presence, frequency_penalty=frequency, logit_bias=bias
    )
    result = model.generate(PROMPT, options)[0]
    plain = model.generate(PROMPT, GenerationOptions(max_new_tokens=10))[0]
    assert result.token_ids != plain.token_ids, "the penalties change the text"
    prompt = model.encode(PROMPT)
    for step, token in enumerate(result.token_ids):
        ids = np.asarray([prompt + result.token_ids[:step]], dtype=np.int64)  # (1, T)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(ids.shape[1])[None]}
        logits = model.prefill(**feeds)["logits"][0, -1].astype(np.float64)  # (V,)
        adjusted = np.asarray(reference(logits.tolist(), result.token_ids[:step], presence, frequency, bias))
        assert token == int(adjusted.argmax())
        assert token != 11, "a -100 bias bans the token"


def test_best_of_returns_the_best_per_token_of_the_drawn_sequences(tiny_export: Path) -> None:
    model = Gpt2Onnx.load(tiny_export)
    drawn = model.generate(PROMPT, GenerationOptions(max_new_tokens=6, do_sample=True, seed=9, num_return_sequences=4))
    best = model.generate(
        PROMPT, GenerationOptions(max_new_tokens=6, do_sample=True, seed=9, num_return_sequences=2, best_of=4)
    )
    per_token = sorted(drawn, key=lambda r: -r.score / len(r.token_ids))
    assert [r.token_ids for r in best] == [r.token_ids for r in per_token[:2]]
    assert [r.sequence for r in best] == [0, 1]


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"presence_penalty": 2.5}, "presence_penalty must lie in [-2, 2]"),
        ({"frequency_penalty": -3}, "frequency_penalty must lie in [-2, 2]"),
        ({"logit_bias": {5: 101}}, "logit_bias values must lie in [-100, 100]"),
        ({"logit_bias": {-1: 1}}, "logit_bias keys must be token ids"),
        ({"best_of": 3}, "best_of > 1 needs do_sample"),
        ({"best_of": 1, "do_sample": True, "num_return_sequences": 2}, "best_of 1 is below num_return_sequences 2"),
    ],
)
def test_out_of_range_values_are_refused(options: dict[str, object], fragment: str) -> None:
    with pytest.raises(OptionError) as caught:
        GenerationOptions(**options)  # type: ignore[arg-type]  # the values under test
    assert fragment in str(caught.value)
