"""One row's next token and its log-probabilities, for the batching engine (:mod:`gpt2_onnx_runtimes.batching`).

Every token the engine chooses goes through :func:`choose_token`, which runs the chains
:class:`gpt2_onnx_runtimes.generation.Generation` runs (:func:`~gpt2_onnx_runtimes.processors.logits_processors`, then
:func:`~gpt2_onnx_runtimes.processors.sampling_warpers`, built from the same :class:`GenerationOptions`), and draws
with the row's own generator as it does: a served request alone draws exactly the tokens ``gpt2-onnx run`` draws,
and a change of the processors reaches both at once. In a batch the row's logits carry the batch's float rounding,
which a seeded draw close to a token's boundary can turn into the neighbouring token (docs/serving.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gpt2_onnx.errors import InvalidInputError
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.processors import ProcessorChain, RowHistory, logits_processors, sampling_warpers
from gpt2_onnx_runtimes.sampling import draw, greedy

__all__ = ["MAX_LOGPROBS", "SamplingParams", "TokenLogprobs", "choose_token", "token_logprobs"]

MAX_LOGPROBS = 20  # most alternatives reported per token


@dataclass(frozen=True)
class SamplingParams:
    """How one request chooses tokens. ``temperature`` 0 is greedy (top-k and top-p then play no part)."""

    temperature: float = 0.0  # 0: greedy; > 0: sampling at that temperature
    top_p: float = 1.0  # nucleus mass, in (0, 1]
    top_k: int = 0  # 0 keeps every token
    repetition_penalty: float = 1.0  # > 0; 1 is off; applies to greedy too, as in transformers

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise InvalidInputError(f"temperature must be >= 0 (0: greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise InvalidInputError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise InvalidInputError(f"top_k must be >= 0 (0 disables it), got {self.top_k}")
        if not self.repetition_penalty > 0:
            raise InvalidInputError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @cached_property
    def chains(self) -> tuple[ProcessorChain, ProcessorChain]:
        """The processors and the warpers ``run`` applies for these parameters (greedy: top-k and top-p unread)."""
        if self.greedy:
            options = GenerationOptions(repetition_penalty=self.repetition_penalty)
        else:
            options = GenerationOptions(
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                top_k=self.top_k,
                repetition_penalty=self.repetition_penalty,
            )
        return logits_processors(options, ()), sampling_warpers(options)


@dataclass(frozen=True)
class TokenLogprobs:
    """The chosen token's log-probability and the ``top`` most likely tokens', under the model's own distribution
    (log-softmax of the logits, before penalty, temperature and filtering)."""

    logprob: float
    top: tuple[tuple[int, float], ...]  # (token id, log-probability), most likely first


def choose_token(
    logits: np.ndarray, history: Sequence[int], params: SamplingParams, generator: np.random.Generator
) -> int:
    """The next token of one row from its logits (V,); ``history`` is the row's prompt and generated ids."""
    rows = [RowHistory(list(history), 0)]  # the processors run here read the ids, not where the prompt ends
    processors, warpers = params.chains
    scores = warpers(processors(logits[None, :], rows), rows)  # (1, V): the chains take batches
    return int((greedy(scores) if params.greedy else draw(scores, [generator]))[0])


def token_logprobs(logits: np.ndarray, token: int, top: int) -> TokenLogprobs:
    """``token``'s log-probability under logits (V,) and the ``top`` most likely tokens' (0 <= top <= 20)."""
    shifted = logits.astype(np.float64) - float(logits.max())
    logprobs = shifted - np.log(np.exp(shifted).sum())  # (V,)
    best: list[tuple[int, float]] = []
    if top > 0:
        picked = np.argpartition(-logprobs, top - 1)[:top]
        ordered = picked[np.argsort(-logprobs[picked], kind="stable")]
        best = [(int(t), float(logprobs[t])) for t in ordered]
    return TokenLogprobs(float(logprobs[token]), tuple(best))
