"""What the batching engine keeps per request and per choice, and what it reports back.

A request is one prompt with ``n`` choices; each choice is one row of the running batch with its own generator, history,
stop strings and text. A choice ends as :class:`gpt2_onnx_runtimes.generation.Generation` ends a row (end-of-text, a
stop string in the decoded text, or ``max_new_tokens``), and its text is the same: the decoded tokens, cut before the
first stop string. Its updates carry text chunks as :mod:`gpt2_onnx_runtimes.streaming` releases them (whole characters,
nothing that could still grow into a stop string); they join to the final text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from gpt2_onnx.errors import Gpt2OnnxError, InvalidInputError
from gpt2_onnx_runtimes.streaming import held_back
from gpt2_onnx_runtimes.token_selection import MAX_LOGPROBS, SamplingParams, TokenLogprobs, choose_token, token_logprobs
from gpt2_onnx_runtimes.tokenizer import IncrementalDecoder, TextTokenizer

__all__ = ["ChoiceUpdate", "CompletionSpec", "FinishReason", "RequestFailed", "Sink", "Update"]

FinishReason = Literal["eos", "stop", "length"]


@dataclass(frozen=True)
class CompletionSpec:
    """One prompt to complete ``len(seeds)`` times (choice i samples with ``seeds[i]``; greedy ignores them)."""

    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    seeds: tuple[int, ...] = (0,)
    stop: tuple[str, ...] = ()  # left out of the text; their tokens stay in token_ids, as in Generation
    logprobs: int | None = None  # None: none; k: the chosen token's and the k most likely tokens' log-probabilities
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise InvalidInputError("the prompt is empty; give at least one token")
        if self.max_new_tokens < 1:
            raise InvalidInputError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if not self.seeds:
            raise InvalidInputError("at least one choice is needed (n >= 1)")
        if any(not 0 <= seed < 2**63 for seed in self.seeds):
            raise InvalidInputError("seeds must lie in [0, 2**63)")
        if any(not stop for stop in self.stop):
            raise InvalidInputError("stop strings must not be empty")
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_LOGPROBS:
            raise InvalidInputError(f"logprobs must lie in 0..{MAX_LOGPROBS}, got {self.logprobs}")

    @property
    def choices(self) -> int:
        return len(self.seeds)


@dataclass(frozen=True)
class ChoiceUpdate:
    """One step of one choice: the token chosen, the text it released (possibly empty) and, on the choice's last
    update, why it ended and its whole text."""

    choice: int
    token_id: int
    text: str
    logprobs: TokenLogprobs | None = None
    finish_reason: FinishReason | None = None
    final_text: str | None = None  # the choice's text (what the chunks join to), on its last update


@dataclass(frozen=True)
class RequestFailed:
    """The request ended without finishing (the engine failed running it); nothing follows."""

    error: Gpt2OnnxError


Update = ChoiceUpdate | RequestFailed
Sink = Callable[[Update], None]  # called on the engine's thread; must return quickly and not raise


def _stop_index(text: str, stops: Sequence[str]) -> int | None:
    found = [index for index in (text.find(stop) for stop in stops) if index >= 0]
    return min(found) if found else None


class ChoiceText:
    """A choice's text: the final text as Generation computes it, and the chunks released as tokens arrive."""

    def __init__(self, tokenizer: TextTokenizer, stops: tuple[str, ...]) -> None:
        self._tokenizer, self._stops = tokenizer, stops
        self._decoder = IncrementalDecoder(tokenizer)
        self._decoded = ""  # everything the decoder has released
        self._emitted = 0  # characters of it already released as chunks

    def stop_cut(self, generated: Sequence[int]) -> str | None:
        """The text cut before the first stop string, when one has appeared."""
        if not self._stops:
            return None
        text = self._tokenizer.decode(generated)
        cut = _stop_index(text, self._stops)
        return None if cut is None else text[:cut]

    def push(self, token: int) -> str:
        """The chunk ``token`` releases (stop strings' possible beginnings held back)."""
        self._decoded += self._decoder.push(token)
        ready = len(self._decoded) - held_back(self._decoded, self._stops)
        if ready <= self._emitted:
            return ""
        chunk = self._decoded[self._emitted : ready]
        self._emitted = ready
        return chunk

    def finish(self, token: int, final: str) -> str:
        """The last chunk, ``token`` included, so that the chunks join to ``final`` (the choice's text, cut before
        a stop string), as :func:`gpt2_onnx_runtimes.streaming.stream_text` ends."""
        self._decoded += self._decoder.push(token) + self._decoder.flush()
        released = self._decoded[: self._emitted]
        tail = final[self._emitted :] if final.startswith(released) else self._decoded[self._emitted :]
        self._emitted = len(self._decoded)
        return tail


class Choice:
    """One row of the running batch."""

    def __init__(self, spec: CompletionSpec, index: int, sink: Sink, tokenizer: TextTokenizer, eos: int | None) -> None:
        self.spec, self.index, self.sink = spec, index, sink
        self.generator = np.random.default_rng(spec.seeds[index])
        self.generated: list[int] = []
        self.finish: FinishReason | None = None
        self._eos = None if spec.ignore_eos else eos
        self._history = list(spec.prompt_ids)
        self._text = ChoiceText(tokenizer, spec.stop)
        self._tokenizer = tokenizer

    def advance(self, logits: np.ndarray) -> ChoiceUpdate:
        """Choose the next token from this row's logits (V,) and account for it."""
        token = choose_token(logits, self._history, self.spec.sampling, self.generator)
        logprobs = None if self.spec.logprobs is None else token_logprobs(logits, token, self.spec.logprobs)
        self.generated.append(token)  # the end-of-text token too, as Generation returns it
        self._history.append(token)
        cut = None
        if self._eos is not None and token == self._eos:
            self.finish = "eos"
        elif (cut := self._text.stop_cut(self.generated)) is not None:
            self.finish = "stop"
        elif len(self.generated) >= self.spec.max_new_tokens:
            self.finish = "length"
        if self.finish is None:
            return ChoiceUpdate(self.index, token, self._text.push(token), logprobs)
        final = cut if cut is not None else self._tokenizer.decode(self.generated)
        return ChoiceUpdate(self.index, token, self._text.finish(token, final), logprobs, self.finish, final)
