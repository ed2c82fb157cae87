"""The generation core: a row's state, the token choice, the end rule and the seeding rule, used by every way of
generating one token at a time: :class:`gpt2_onnx_runtimes.generation.Generation` (``gpt2-onnx run``,
``Gpt2Onnx.generate`` and ``stream``) and the batching engine behind ``gpt2-onnx serve``
(:mod:`gpt2_onnx_runtimes.batching`). What differs between them is only how the logits of a row are computed
(one left-padded batch, or a running batch that rows join and leave); given the same logits, they choose the same
tokens, with the same log-probabilities, and end for the same reason.

    seeding   row j of a prompt (0 … sequences_drawn − 1) draws from ``default_rng(seed)`` for j = 0 and
              ``default_rng([seed, j])`` after; a missing seed becomes one fresh random seed per prompt batch
    choice    processors, then (sampling) warpers, built once from one GenerationOptions; greedy takes the
              argmax, sampling one draw from the row's own generator
    logprob   the chosen token's log-softmax in the distribution it was chosen from (processed, and warped when
              sampling); the ``top`` alternatives come from the same distribution (tokens filtered out left out)
    end       end-of-text (unless ignored) → "eos"; else a stop string in the decoded text → "stop" (the text cut
              before it, its tokens kept); else ``max_new_tokens`` new tokens → "length"
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.processors import RowHistory, chosen_logprobs, log_softmax, logits_processors, sampling_warpers
from gpt2_onnx_runtimes.results import FinishReason, GenerationResult
from gpt2_onnx_runtimes.sampling import draw, greedy
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = [
    "MAX_TOP_LOGPROBS",
    "EndRule",
    "Row",
    "TokenChooser",
    "TopLogprobs",
    "best_ranks",
    "best_sequences",
    "new_rows",
    "row_seed",
    "seed_of",
]

MAX_TOP_LOGPROBS = 20  # most alternatives reported per token
TopLogprobs = tuple[tuple[int, float], ...]  # (token id, log-probability), most likely first


def seed_of(options: GenerationOptions) -> int:
    """The seed a generation draws with: the options', else a fresh random one."""
    return options.seed if options.seed is not None else int(np.random.default_rng().integers(2**63))


def row_seed(seed: int, sequence: int) -> int | list[int]:
    """The seed of a prompt's sequence ``sequence``: ``seed`` itself for the first, ``[seed, sequence]`` after."""
    return seed if sequence == 0 else [seed, sequence]


@dataclass
class Row:
    """One sequence being generated: its prompt, its generator and what it has produced."""

    prompt_ids: list[int]
    index: int  # the prompt's place in the batch (or request)
    sequence: int  # among the prompt's drawn sequences
    generator: np.random.Generator
    generated: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[TopLogprobs] = field(default_factory=list)
    finish: FinishReason | None = None
    text: str | None = None  # set when a stop string cut it

    def history(self) -> RowHistory:
        return RowHistory(self.prompt_ids + self.generated, len(self.prompt_ids))

    def result(self, tokenizer: TextTokenizer | None, timings: dict[str, float]) -> GenerationResult:
        text = self.text if self.text is not None else (tokenizer.decode(self.generated) if tokenizer else "")
        return GenerationResult(
            prompt=None,
            prompt_ids=self.prompt_ids,
            token_ids=self.generated,
            text=text,
            finish_reason=self.finish or "length",
            timings=dict(timings),
            index=self.index,
            sequence=self.sequence,
            token_logprobs=self.logprobs,
            score=float(sum(self.logprobs)),
        )


def new_rows(prompts: Sequence[Sequence[int]], options: GenerationOptions, seed: int) -> list[Row]:
    """The rows of a generation, prompt-major: ``options.sequences_drawn`` per prompt, seeded by :func:`row_seed`."""
    return [
        Row([int(t) for t in prompt], index, j, np.random.default_rng(row_seed(seed, j)))
        for index, prompt in enumerate(prompts)
        for j in range(options.sequences_drawn)
    ]


class TokenChooser:
    """Chooses next tokens under one GenerationOptions: processors, then warpers when sampling (transformers'
    order), then the argmax or a draw from each row's generator. ``logprobs`` False: the chosen tokens'
    log-probabilities are not computed (NaN), for a caller that reports none and ranks no draws (a pass over the
    whole vocabulary per token: about 0.06 ms for GPT-2's)."""

    def __init__(
        self, options: GenerationOptions, eos_ids: tuple[int, ...], top: int = 0, logprobs: bool = True
    ) -> None:
        self.options, self.top, self.logprobs = options, top, logprobs
        self.processors = logits_processors(options, eos_ids)
        self.warpers = sampling_warpers(options)

    def __call__(self, logits: np.ndarray, rows: Sequence[Row]) -> tuple[np.ndarray, np.ndarray, list[TopLogprobs]]:
        """(B, V) logits → (B,) chosen ids, (B,) their log-probabilities (NaN unless ``logprobs``) and, per row,
        the ``top`` alternatives."""
        histories = [row.history() for row in rows]
        scores = self.warpers(self.processors(logits, histories), histories)  # (B, V)
        chosen = draw(scores, [row.generator for row in rows]) if self.options.do_sample else greedy(scores)
        logprobs = chosen_logprobs(scores, chosen) if self.logprobs else np.full(len(rows), np.nan)  # (B,)
        tops: list[TopLogprobs] = _top_logprobs(scores, self.top) if self.top > 0 else [() for _ in rows]
        return chosen, logprobs, tops


def _top_logprobs(scores: np.ndarray, top: int) -> list[TopLogprobs]:
    """The ``top`` most likely tokens of each row of (B, V) scores with their log-softmax; -inf ones left out."""
    logprobs = log_softmax(scores).astype(np.float64)  # (B, V)
    k = min(top, scores.shape[-1])
    picked = np.argpartition(-logprobs, k - 1, axis=-1)[:, :k]  # (B, k), unordered
    out = []
    for row, ids in enumerate(picked):
        ordered = ids[np.argsort(-logprobs[row, ids], kind="stable")]
        out.append(tuple((int(t), float(logprobs[row, t])) for t in ordered if np.isfinite(logprobs[row, t])))
    return out


class EndRule:
    """Accounts for a chosen token and decides whether its row ends (see the module docstring)."""

    def __init__(self, options: GenerationOptions, eos_ids: tuple[int, ...], tokenizer: TextTokenizer | None) -> None:
        self.options, self.eos_ids, self.tokenizer = options, eos_ids, tokenizer

    def advance(self, row: Row, token: int, logprob: float, top: TopLogprobs = ()) -> None:
        row.generated.append(token)  # the end-of-text token too, as transformers returns it
        row.logprobs.append(logprob)
        row.top_logprobs.append(top)
        if token in self.eos_ids:
            row.finish = "eos"
            return
        stops = self.options.stop
        if stops and self.tokenizer is not None:
            text = self.tokenizer.decode(row.generated)
            cuts = [index for index in (text.find(s) for s in stops) if index >= 0]
            if cuts:
                row.finish, row.text = "stop", text[: min(cuts)]
                return
        if len(row.generated) >= self.options.max_new_tokens:
            row.finish = "length"


def best_ranks(token_logprobs: Sequence[Sequence[float]], count: int) -> list[int]:
    """OpenAI's ``best_of`` choice among one prompt's drawn sequences (given by their tokens' log-probabilities):
    the places of the ``count`` with the highest log-probability per token, best first (ties keep drawing order)."""

    def per_token(place: int) -> float:
        return float(sum(token_logprobs[place])) / max(1, len(token_logprobs[place]))

    return sorted(range(len(token_logprobs)), key=lambda place: (-per_token(place), place))[:count]


def best_sequences(results: Sequence[GenerationResult], count: int) -> list[GenerationResult]:
    """:func:`best_ranks` over results, renumbered 0 … count − 1."""
    ranks = best_ranks([result.token_logprobs for result in results], count)
    return [replace(results[place], sequence=rank) for rank, place in enumerate(ranks)]
