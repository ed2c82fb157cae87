"""A completions request run on the batching engine, seen from asyncio, and its answer in OpenAI's shapes.

The engine calls each request's sink on its own thread; the sink hands every update to the event loop that
waits for it (``call_soon_threadsafe``), so request handlers never block the loop and the engine never waits for
a client. Leaving :meth:`CompletionRun.updates` early (a timeout, a client gone) cancels the request's rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpt2_onnx_runtimes.batch_requests import ChoiceUpdate, CompletionSpec, RequestFailed, Update
from gpt2_onnx_runtimes.batching import BatchEngine, Ticket
from gpt2_onnx_runtimes.decoding import TopLogprobs, best_ranks
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = ["ChoiceAnswer", "CompletionRun", "TokenEntry", "best_answers", "finish_word", "logprobs_body"]

TokenEntry = tuple[float, TopLogprobs]  # a token's log-probability and its alternatives

_FINISH_WORDS = {"eos": "stop", "stop": "stop", "length": "length"}  # OpenAI names an end-of-text "stop" too


def finish_word(reason: str | None) -> str | None:
    return None if reason is None else _FINISH_WORDS[reason]


class CompletionRun:
    """The specs of one request (one per prompt), submitted together; their updates in arrival order."""

    def __init__(self, engine: BatchEngine, specs: Sequence[CompletionSpec]) -> None:
        loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[int, Update]] = asyncio.Queue()
        self._open = sum(spec.choices for spec in specs)
        self._tickets: list[Ticket] = []
        for spec in specs:  # refused as a whole: nothing checked late
            engine.check(spec)
        try:
            for number, spec in enumerate(specs):
                self._tickets.append(engine.submit(spec, self._sink(loop, number)))
        except BaseException:
            self.cancel()
            raise

    def _sink(self, loop: asyncio.AbstractEventLoop, number: int) -> Any:
        def sink(update: Update) -> None:
            loop.call_soon_threadsafe(self._queue.put_nowait, (number, update))

        return sink

    async def updates(self, deadline: float) -> AsyncIterator[tuple[int, ChoiceUpdate]]:
        """Each choice update with its prompt's number, until every choice has finished; a failed request raises
        its error, and ``asyncio.TimeoutError`` comes once the loop's clock passes ``deadline``."""
        loop = asyncio.get_running_loop()
        try:
            while self._open:
                number, update = await asyncio.wait_for(self._queue.get(), max(0.0, deadline - loop.time()))
                if isinstance(update, RequestFailed):
                    raise update.error
                if update.finish_reason is not None:
                    self._open -= 1
                yield number, update
        finally:
            if self._open:
                self.cancel()

    def cancel(self) -> None:
        for ticket in self._tickets:
            ticket.cancel()


@dataclass
class ChoiceAnswer:
    """One choice of the answer, gathered from its updates."""

    index: int
    prefix: str = ""  # the prompt, with echo
    chunks: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenEntry] = field(default_factory=list)
    finish_reason: str | None = None
    final_text: str | None = None

    def add(self, update: ChoiceUpdate) -> None:
        self.chunks.append(update.text)
        self.token_ids.append(update.token_id)
        self.logprobs.append((update.logprob, update.top_logprobs or ()))
        if update.finish_reason is not None:
            self.finish_reason, self.final_text = update.finish_reason, update.final_text

    @property
    def text(self) -> str:
        body = self.final_text if self.final_text is not None else "".join(self.chunks)
        return self.prefix + body

    def body(self, tokenizer: TextTokenizer, with_logprobs: bool) -> dict[str, Any]:
        logprobs = logprobs_body(tokenizer, self.token_ids, self.logprobs, len(self.prefix)) if with_logprobs else None
        return {
            "text": self.text,
            "index": self.index,
            "logprobs": logprobs,
            "finish_reason": finish_word(self.finish_reason),
        }


def best_answers(answers: Sequence[ChoiceAnswer], count: int) -> list[ChoiceAnswer]:
    """The ``count`` answers ``best_of`` returns (the core's rule), best first; all of them, in order, when they
    are ``count``."""
    if len(answers) == count:
        return list(answers)
    return [answers[place] for place in best_ranks([[lp for lp, _ in a.logprobs] for a in answers], count)]


def logprobs_body(
    tokenizer: TextTokenizer, token_ids: Sequence[int], logprobs: Sequence[TokenEntry], offset: int
) -> dict[str, Any]:
    """OpenAI's completions logprobs: each token's text, log-probability, top alternatives and text offset."""
    tokens = [tokenizer.decode([token]) for token in token_ids]
    offsets = []
    for text in tokens:
        offsets.append(offset)
        offset += len(text)
    top = []
    for token, (logprob, alternatives_ids) in zip(tokens, logprobs, strict=True):
        alternatives = {tokenizer.decode([t]): value for t, value in alternatives_ids}
        alternatives.setdefault(token, logprob)  # the chosen token is always listed
        top.append(alternatives)
    return {
        "tokens": tokens,
        "token_logprobs": [logprob for logprob, _ in logprobs],
        "top_logprobs": top,
        "text_offset": offsets,
    }
