"""Streaming text from a generation: chunks as tokens arrive, whole characters only, never past a stop string."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from gpt2_onnx_runtimes.generation import Generation, GenerationResult
from gpt2_onnx_runtimes.tokenizer import IncrementalDecoder, TextTokenizer

__all__ = ["TextStream", "held_back", "stream_text"]


def held_back(text: str, stops: Sequence[str]) -> int:
    """Length of the longest end of ``text`` that could still grow into a stop string."""
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:size]):
                longest = size
                break
    return longest


def stream_text(generation: Generation, tokenizer: TextTokenizer, stops: Sequence[str], row: int = 0) -> Iterator[str]:
    """Yield ``row``'s text as ``generation`` runs; the chunks join to the result's ``text``."""
    decoder = IncrementalDecoder(tokenizer)
    decoded = ""  # everything the decoder has released
    emitted = 0  # characters of ``decoded`` already yielded
    for event in generation.steps():
        token = event.tokens[row]
        if token is None:
            continue
        decoded += decoder.push(token)
        if generation.row_finished(row) and (result := generation.results()[row]).finish_reason == "stop":
            if len(result.text) > emitted:
                yield result.text[emitted:]
            return
        ready = len(decoded) - held_back(decoded, stops)
        if ready > emitted:
            yield decoded[emitted:ready]
            emitted = ready
    decoded += decoder.flush()
    final = generation.results()[row].text
    tail = final[emitted:] if final.startswith(decoded[:emitted]) else decoded[emitted:]
    if tail:
        yield tail


class TextStream:
    """An iterable of text chunks for one prompt; :attr:`result` holds the full result once iteration ends."""

    def __init__(
        self,
        generation: Generation,
        tokenizer: TextTokenizer,
        stops: Sequence[str],
        prompt: str | None = None,
    ) -> None:
        self._generation = generation
        self._chunks = stream_text(generation, tokenizer, stops)
        self._prompt = prompt

    def __iter__(self) -> Iterator[str]:
        return self._chunks

    @property
    def result(self) -> GenerationResult:
        """The result so far (complete once the stream is exhausted)."""
        return replace(self._generation.results()[0], prompt=self._prompt)
