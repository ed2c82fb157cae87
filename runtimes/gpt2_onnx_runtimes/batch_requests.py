"""What the batching engine keeps per request and per choice, and what it reports back.

A request is one prompt with its :class:`GenerationOptions` (converted once from whatever asked: an HTTP body,
a test); its choices are the rows :func:`gpt2_onnx_runtimes.decoding.new_rows` makes for it, each one row of the
running batch. Every token goes through the request's :class:`~gpt2_onnx_runtimes.decoding.TokenChooser` and
:class:`~gpt2_onnx_runtimes.decoding.EndRule`, the ones :class:`gpt2_onnx_runtimes.generation.Generation` runs:
the engine adds only the text chunks a stream releases (whole characters, nothing that could still grow into a
stop string; :mod:`gpt2_onnx_runtimes.streaming`'s rule), which join to the choice's final text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpt2_onnx_core.errors import Gpt2OnnxError, InvalidInputError
from gpt2_onnx_runtimes.decoding import MAX_TOP_LOGPROBS, EndRule, Row, TokenChooser, TopLogprobs
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.results import FinishReason
from gpt2_onnx_runtimes.streaming import held_back
from gpt2_onnx_runtimes.tokenizer import IncrementalDecoder, TextTokenizer

__all__ = ["Choice", "ChoiceUpdate", "CompletionSpec", "RequestFailed", "Sink", "Update"]


@dataclass(frozen=True)
class CompletionSpec:
    """One prompt to complete as ``options`` say: ``options.sequences_drawn`` choices, seeded by the core's rule
    (a missing seed: one fresh seed for the request). ``logprobs``: None, or how many alternatives each token
    reports beside its own log-probability (0 … MAX_TOP_LOGPROBS)."""

    prompt_ids: tuple[int, ...]
    options: GenerationOptions = field(default_factory=GenerationOptions)
    logprobs: int | None = None

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise InvalidInputError("the prompt is empty; give at least one token")
        if self.options.num_beams > 1:
            raise InvalidInputError("the batching engine does not run beam search (num_beams > 1)")
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise InvalidInputError(f"logprobs must lie in 0..{MAX_TOP_LOGPROBS}, got {self.logprobs}")

    @property
    def choices(self) -> int:
        return self.options.sequences_drawn

    @property
    def wants_logprobs(self) -> bool:
        """Whether its tokens' log-probabilities are needed: reported (``logprobs``), or ranking ``best_of`` draws."""
        return self.logprobs is not None or self.options.sequences_drawn > self.options.num_return_sequences


@dataclass(frozen=True)
class ChoiceUpdate:
    """One step of one choice: the token chosen, its log-probability (NaN unless the request wants them:
    :attr:`CompletionSpec.wants_logprobs`; alternatives when asked for), the text it released (possibly empty) and,
    on the choice's last update, why it ended and its whole text."""

    choice: int
    token_id: int
    text: str
    logprob: float
    top_logprobs: TopLogprobs | None = None
    finish_reason: FinishReason | None = None
    final_text: str | None = None  # the choice's text (what the chunks join to), on its last update


@dataclass(frozen=True)
class RequestFailed:
    """The request ended without finishing (the engine failed running it); nothing follows."""

    error: Gpt2OnnxError


Update = ChoiceUpdate | RequestFailed
Sink = Callable[[Update], None]  # called on the engine's thread; must return quickly and not raise


class ChoiceText:
    """The chunks a choice's tokens release as they arrive, joining to its final text."""

    def __init__(self, tokenizer: TextTokenizer, stops: tuple[str, ...]) -> None:
        self._stops = stops
        self._decoder = IncrementalDecoder(tokenizer)
        self._decoded = ""  # everything the decoder has released
        self._emitted = 0  # characters of it already released as chunks

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
    """One row of the running batch: the core's row, with its request's token choice and end rule."""

    def __init__(self, row: Row, choose: TokenChooser, end: EndRule, tokenizer: TextTokenizer, with_top: bool) -> None:
        self.row, self._choose, self._end, self._tokenizer, self._with_top = row, choose, end, tokenizer, with_top
        self._text = ChoiceText(tokenizer, end.options.stop)

    @property
    def index(self) -> int:
        return self.row.sequence

    @property
    def last_token(self) -> int:
        return self.row.generated[-1]

    def advance(self, logits: np.ndarray) -> ChoiceUpdate:
        """Choose the next token from this row's logits (V,) and account for it."""
        chosen, logprobs, tops = self._choose(logits[None, :], [self.row])  # (1,), (1,): the core takes batches
        token, logprob = int(chosen[0]), float(logprobs[0])
        self._end.advance(self.row, token, logprob, tops[0])
        top = tops[0] if self._with_top else None
        if self.row.finish is None:
            return ChoiceUpdate(self.index, token, self._text.push(token), logprob, top)
        final = self.row.text if self.row.text is not None else self._tokenizer.decode(self.row.generated)
        chunk = self._text.finish(token, final)
        return ChoiceUpdate(self.index, token, chunk, logprob, top, self.row.finish, final)
