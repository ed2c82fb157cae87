"""Logits processors and warpers on numpy arrays, with transformers' semantics and in its order.

Each is a frozen dataclass called as ``processor(scores, rows) -> scores``: ``scores`` is (R, V), one row of
next-token scores per sequence, and ``rows[i]`` (:class:`RowHistory`) is what row i has seen: its prompt's tokens
and those generated after them, without padding. A processor never changes its input; it returns a new array or
the input itself when it has nothing to do.

Reuse per row: every processor treats each row on its own, so applying a chain to an (R, V) block equals applying
it to each row alone. A server whose requests carry their own options builds one chain per request
(:func:`logits_processors`) and runs it on that request's rows, ``chain(scores[i : i + 1], [rows[i]])``; a sampled
row then draws with its own ``numpy.random.Generator`` (:func:`runtimes.sampling.draw`).

The order is transformers' ``GenerationMixin._get_logits_processor`` (5.x) for the processors supported here:

    repetition_penalty → no_repeat_ngram_size → bad_words_ids → min_new_tokens → forced_eos_token_id
    then, when sampling only (transformers' former "warpers"): temperature → top_k → top_p → min_p

OpenAI's completions options, which transformers lacks, come first, on the model's logits as OpenAI defines
them: ``logit_bias`` added, then ``presence_penalty`` and ``frequency_penalty`` subtracted
(``logit[j] − count[j] · frequency_penalty − (count[j] > 0) · presence_penalty``, ``count[j]`` the times token j
was generated so far; the prompt does not count).

Greedy decoding applies the processors to the logits and takes the argmax; sampling applies processors and warpers
and draws from their softmax; beam search applies the processors to the log-softmax of the logits (as
transformers does) and never the warpers (beam sampling is not supported).

Differences from transformers, all at left padding only: transformers' n-gram and bad-word matching see a padded
row's pad tokens as part of its history; here a row's history never holds padding, so every row of a padded batch
behaves as it does alone. The two can differ only when a row's last generated tokens contain the pad token (which
is GPT-2's end-of-text token, so only when generation continues past it, ``ignore_eos``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from gpt2_onnx_runtimes.options import GenerationOptions

__all__ = [
    "ForcedEos",
    "LogitBias",
    "LogitsProcessor",
    "MinNewTokens",
    "MinP",
    "NoBadWords",
    "NoRepeatNGram",
    "PresenceFrequencyPenalty",
    "ProcessorChain",
    "RepetitionPenalty",
    "RowHistory",
    "Temperature",
    "TopK",
    "TopP",
    "chosen_logprobs",
    "log_softmax",
    "logits_processors",
    "logsumexp",
    "sampling_warpers",
    "softmax",
]


@dataclass(frozen=True)
class RowHistory:
    """What one row has seen: its prompt's tokens, then the tokens generated after them (no padding)."""

    tokens: Sequence[int]
    prompt_length: int

    @property
    def new_tokens(self) -> int:
        """Tokens generated so far."""
        return len(self.tokens) - self.prompt_length


class LogitsProcessor(Protocol):
    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray: ...


def _floating(scores: np.ndarray) -> np.ndarray:
    return scores if np.issubdtype(scores.dtype, np.floating) else scores.astype(np.float32)


def logsumexp(scores: np.ndarray) -> np.ndarray:
    """(R, V) → (R, 1) float64: exponentials in the scores' own precision, their sum in float64."""
    scores = _floating(scores)
    top = scores.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):  # a row of -inf only gives NaN, as torch's does
        total = np.exp(scores - top).sum(axis=-1, keepdims=True, dtype=np.float64)
    return top.astype(np.float64) + np.log(total)


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax in the scores' precision (float32 logits stay float32, as in torch)."""
    scores = _floating(scores)
    with np.errstate(invalid="ignore"):
        exp = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True, dtype=np.float64).astype(exp.dtype)


def log_softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in the scores' precision (beam search's per-token scores, as transformers')."""
    scores = _floating(scores)
    return scores - logsumexp(scores).astype(scores.dtype)


def chosen_logprobs(scores: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """(R, V) scores, (R,) ids → (R,) float64 log-softmax of each row's id, without a pass over the whole
    log-softmax."""
    picked = np.take_along_axis(scores, chosen[:, None], axis=-1).astype(np.float64)  # (R, 1)
    return (picked - logsumexp(scores))[:, 0]


def _mask_rows(scores: np.ndarray, banned: Sequence[Sequence[int] | np.ndarray]) -> np.ndarray:
    """``scores`` with ``banned[i]``'s token ids set to -inf in row i (a copy, only when something is banned)."""
    if not any(len(ids) for ids in banned):
        return scores
    out = scores.copy()
    for row, ids in enumerate(banned):
        if len(ids):
            out[row, np.asarray(ids, dtype=np.int64)] = -np.inf
    return out


@dataclass(frozen=True)
class LogitBias:
    """OpenAI's ``logit_bias``: each (token id, bias) pair's bias is added to that token's score in every row."""

    bias: tuple[tuple[int, float], ...]

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        if not self.bias:
            return scores
        ids = np.asarray([token for token, _ in self.bias], dtype=np.int64)  # (K,)
        values = np.asarray([bias for _, bias in self.bias], dtype=scores.dtype)  # (K,)
        out = _floating(scores).copy()
        out[:, ids] += values
        return out


@dataclass(frozen=True)
class PresenceFrequencyPenalty:
    """OpenAI's ``presence_penalty`` and ``frequency_penalty``: a token generated ``c`` times so far (the prompt
    not counted) loses ``c · frequency + (c > 0) · presence`` from its score."""

    presence: float
    frequency: float

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        if self.presence == 0 and self.frequency == 0:
            return scores
        out = _floating(scores).copy()
        for row, history in enumerate(rows):
            new = np.asarray(history.tokens[history.prompt_length :], dtype=np.int64)
            if new.size:
                ids, counts = np.unique(new, return_counts=True)  # (U,), (U,)
                out[row, ids] -= (counts * self.frequency + self.presence).astype(out.dtype)
        return out


@dataclass(frozen=True)
class RepetitionPenalty:
    """transformers' ``RepetitionPenaltyLogitsProcessor``: each token seen (prompt or generated, once however
    often) has its score divided by ``penalty`` where it is >= 0 and multiplied by it where it is negative."""

    penalty: float

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        if self.penalty == 1.0:
            return scores
        out = scores.copy()
        for row, history in enumerate(rows):
            ids = np.unique(np.asarray(history.tokens, dtype=np.int64))
            values = out[row, ids]
            out[row, ids] = np.where(values < 0, values * self.penalty, values / self.penalty)
        return out


@dataclass(frozen=True)
class NoRepeatNGram:
    """transformers' ``NoRepeatNGramLogitsProcessor``: no n-gram of ``size`` tokens occurs twice in a row's
    history (prompt included). The tokens that would complete an n-gram already seen get -inf."""

    size: int

    def banned(self, tokens: Sequence[int]) -> np.ndarray:
        """The ids that would repeat an n-gram after ``tokens``."""
        if self.size <= 0 or len(tokens) < self.size:
            return np.empty(0, dtype=np.int64)
        seq = np.asarray(tokens, dtype=np.int64)
        windows = np.lib.stride_tricks.sliding_window_view(seq, self.size)  # (L - n + 1, n)
        prefix = seq[len(seq) + 1 - self.size :]  # (n - 1,): what the next token would extend
        matches = (windows[:, :-1] == prefix).all(axis=1)
        return windows[matches, -1]

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        return _mask_rows(scores, [self.banned(history.tokens) for history in rows])


@dataclass(frozen=True)
class NoBadWords:
    """transformers' ``NoBadWordsLogitsProcessor``: none of the token sequences ``bad_words_ids`` is produced. A
    one-token sequence is banned always; a longer one's last token is banned where the row ends with the rest of
    it. A sequence that is exactly an end-of-text token is dropped, as transformers drops it."""

    bad_words_ids: tuple[tuple[int, ...], ...]
    eos_token_ids: tuple[int, ...] = ()
    _single: tuple[int, ...] = field(init=False, repr=False)
    _longer: tuple[tuple[int, ...], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        kept = [seq for seq in self.bad_words_ids if not (len(seq) == 1 and seq[0] in self.eos_token_ids)]
        object.__setattr__(self, "_single", tuple(seq[0] for seq in kept if len(seq) == 1))
        object.__setattr__(self, "_longer", tuple(seq for seq in kept if len(seq) > 1))

    def banned(self, tokens: Sequence[int]) -> list[int]:
        ids = list(self._single)
        for seq in self._longer:
            prefix = seq[:-1]
            if len(prefix) <= len(tokens) and tuple(tokens[len(tokens) - len(prefix) :]) == prefix:
                ids.append(seq[-1])
        return ids

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        return _mask_rows(scores, [self.banned(history.tokens) for history in rows])


@dataclass(frozen=True)
class MinNewTokens:
    """transformers' ``MinNewTokensLengthLogitsProcessor``: no end-of-text before ``min_new_tokens`` new tokens."""

    min_new_tokens: int
    eos_token_ids: tuple[int, ...]

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        early = [self.eos_token_ids if h.new_tokens < self.min_new_tokens else () for h in rows]
        return _mask_rows(scores, early)


@dataclass(frozen=True)
class ForcedEos:
    """transformers' ``ForcedEOSTokenLogitsProcessor``: the last token allowed (the ``max_new_tokens``-th) is
    end-of-text: every other score is -inf, the end-of-text ids' 0."""

    max_new_tokens: int
    eos_token_ids: tuple[int, ...]

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        last = [row for row, h in enumerate(rows) if h.new_tokens == self.max_new_tokens - 1]
        if not last:
            return scores
        out = scores.copy()
        out[last] = -np.inf
        out[np.ix_(last, list(self.eos_token_ids))] = 0.0
        return out


@dataclass(frozen=True)
class Temperature:
    """transformers' ``TemperatureLogitsWarper``: scores divided by ``temperature`` (> 0)."""

    temperature: float

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        return scores if self.temperature == 1.0 else scores / np.asarray(self.temperature, dtype=scores.dtype)


@dataclass(frozen=True)
class TopK:
    """transformers' ``TopKLogitsWarper``: scores below the k-th largest become -inf (ties with it stay)."""

    top_k: int
    min_tokens_to_keep: int = 1

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        k = min(max(self.top_k, self.min_tokens_to_keep), scores.shape[-1])
        if self.top_k <= 0 or k >= scores.shape[-1]:
            return scores
        kth = np.partition(scores, -k, axis=-1)[:, -k][:, None]  # (R, 1)
        return np.where(scores < kth, -np.inf, scores).astype(scores.dtype, copy=False)


@dataclass(frozen=True)
class TopP:
    """transformers' ``TopPLogitsWarper``: sorted from least to most likely, the tokens whose cumulative probability
    stays <= 1 - top_p become -inf; the ``min_tokens_to_keep`` most likely always stay."""

    top_p: float
    min_tokens_to_keep: int = 1

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        if self.top_p >= 1.0:
            return scores
        order = np.argsort(scores, axis=-1, kind="stable")  # (R, V), least likely first
        cumulative = np.cumsum(softmax(np.take_along_axis(scores, order, axis=-1)), axis=-1)
        remove_sorted = cumulative <= 1 - self.top_p
        remove_sorted[:, -self.min_tokens_to_keep :] = False
        remove = np.zeros_like(remove_sorted)
        np.put_along_axis(remove, order, remove_sorted, axis=-1)
        return np.where(remove, -np.inf, scores).astype(scores.dtype, copy=False)


@dataclass(frozen=True)
class MinP:
    """transformers' ``MinPLogitsWarper``: tokens less likely than ``min_p`` × the most likely token's probability
    become -inf; the ``min_tokens_to_keep`` most likely always stay."""

    min_p: float
    min_tokens_to_keep: int = 1

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        probs = softmax(scores)  # (R, V)
        remove = probs < self.min_p * probs.max(axis=-1, keepdims=True)
        keep = np.argsort(-probs, axis=-1, kind="stable")[:, : self.min_tokens_to_keep]
        np.put_along_axis(remove, keep, False, axis=-1)
        return np.where(remove, -np.inf, scores).astype(scores.dtype, copy=False)


@dataclass(frozen=True)
class ProcessorChain:
    """Processors applied in order; empty is the identity."""

    processors: tuple[LogitsProcessor, ...] = ()

    def __call__(self, scores: np.ndarray, rows: Sequence[RowHistory]) -> np.ndarray:
        for processor in self.processors:
            scores = processor(scores, rows)
        return scores

    def __len__(self) -> int:
        return len(self.processors)


def logits_processors(options: GenerationOptions, eos_token_ids: tuple[int, ...]) -> ProcessorChain:
    """The processors ``options`` ask for, in transformers' order (every mode). ``eos_token_ids``: the end-of-text
    ids generation stops at (none when it ignores them), which ``min_new_tokens`` holds back."""
    chain: list[LogitsProcessor] = []
    if options.logit_bias:
        chain.append(LogitBias(options.logit_bias))
    if options.presence_penalty != 0 or options.frequency_penalty != 0:
        chain.append(PresenceFrequencyPenalty(options.presence_penalty, options.frequency_penalty))
    if options.repetition_penalty != 1.0:
        chain.append(RepetitionPenalty(options.repetition_penalty))
    if options.no_repeat_ngram_size > 0:
        chain.append(NoRepeatNGram(options.no_repeat_ngram_size))
    if options.bad_words_ids:
        chain.append(NoBadWords(options.bad_words_ids, eos_token_ids))
    if options.min_new_tokens > 0 and eos_token_ids:
        chain.append(MinNewTokens(options.min_new_tokens, eos_token_ids))
    if options.forced_eos_token_id:
        chain.append(ForcedEos(options.max_new_tokens, options.forced_eos_token_id))
    return ProcessorChain(tuple(chain))


def sampling_warpers(options: GenerationOptions, min_tokens_to_keep: int = 1) -> ProcessorChain:
    """The warpers sampling applies after the processors, in transformers' order (none unless ``do_sample``)."""
    if not options.do_sample:
        return ProcessorChain()
    chain: list[LogitsProcessor] = []
    if options.temperature != 1.0:
        chain.append(Temperature(options.temperature))
    if options.top_k != 0:
        chain.append(TopK(options.top_k, min_tokens_to_keep))
    if options.top_p < 1.0:
        chain.append(TopP(options.top_p, min_tokens_to_keep))
    if options.min_p > 0:
        chain.append(MinP(options.min_p, min_tokens_to_keep))
    return ProcessorChain(tuple(chain))
