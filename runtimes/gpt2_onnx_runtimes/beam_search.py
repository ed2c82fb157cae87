"""Beam search bookkeeping in numpy, equivalent to transformers' ``GenerationMixin._beam_search`` (5.x).

For B prompts with K beams each, one :meth:`BeamScorer.step` per decode step takes the (B·K, V) processed
log-probabilities of every beam's next token and decides which K continuations each prompt keeps. What it does,
as transformers does it:

- Candidates are each beam's cumulative score plus each next token's log-probability; at the first step only
  beam 0's count (all beams hold the same prompt). Each prompt keeps its best ``max(2, 1 + n_eos) · K``.
- A candidate "hits" when its token is an end-of-text id or it reaches ``max_new_tokens``. Hits among the best K
  become finished hypotheses scored ``sum(log p) / length ** length_penalty`` (length counts the new tokens,
  end-of-text included); each prompt keeps its K best finished ones. The best K candidates that did not hit run on.
- A prompt stops taking hypotheses once it has K finished and either ``early_stopping`` is True, or no running beam
  can beat its worst finished one: the best running score divided by ``length ** length_penalty``, where length is
  the current one (``early_stopping`` False, or "never" with length_penalty <= 0) or ``max_new_tokens`` ("never"
  with length_penalty > 0), is not above it.
- The search ends when every prompt has stopped or every candidate hits; each prompt returns its finished
  hypotheses, best first.

transformers keeps these states in fixed-size tensors with -1e9 standing for "not there"; here they are explicit
(lists of finished hypotheses, a boolean per prompt). Ties between equal scores, which transformers' ``topk``
orders as its kernel does, are broken here by the lower beam, then token index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpt2_onnx_runtimes.options import EarlyStopping

__all__ = ["BeamConfig", "BeamScorer", "Hypothesis"]

_NOT_FULL = -1.0e9  # transformers' worst finished score while a prompt has fewer than K: any running beam beats it


@dataclass(frozen=True)
class BeamConfig:
    num_beams: int
    max_new_tokens: int
    length_penalty: float = 1.0
    early_stopping: EarlyStopping = False
    eos_token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Hypothesis:
    """A finished beam: its new tokens, each one's log-probability, and its length-penalised score."""

    tokens: tuple[int, ...]
    token_logprobs: tuple[float, ...]
    score: float


def _best(flat: np.ndarray, count: int) -> np.ndarray:
    """Per row, the indices of the ``count`` largest values, largest first; ties: lower index first. (B, count)"""
    part = np.argpartition(flat, -count, axis=-1)[:, -count:]  # (B, count), unordered (5× faster than on -flat)
    values = np.take_along_axis(flat, part, axis=-1)
    order = np.lexsort((part, -values), axis=-1)
    return np.take_along_axis(part, order, axis=-1)


class BeamScorer:
    """The beam search state of ``batch`` prompts; drive it with :meth:`step` until :attr:`done`."""

    def __init__(self, batch: int, config: BeamConfig) -> None:
        self.batch, self.config = batch, config
        k = config.num_beams
        self.keep = max(2, 1 + len(config.eos_token_ids)) * k  # candidates kept per prompt and step
        self.running_tokens: list[list[int]] = [[] for _ in range(batch * k)]  # (B·K) rows, prompt-major
        self.running_logprobs: list[list[float]] = [[] for _ in range(batch * k)]
        self.running_scores = np.zeros((batch, k), dtype=np.float64)  # cumulative log-probabilities
        self.finished: list[list[Hypothesis]] = [[] for _ in range(batch)]  # best first, at most K each
        self.stopped = np.zeros(batch, dtype=bool)  # a prompt takes no more finished hypotheses
        self.generated = 0  # tokens each running beam holds
        self.done = False

    def step(self, log_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Advance by one token. ``log_probs``: (B·K, V) processed log-probabilities of each running beam's next
        token. Returns the beam each new running beam continues, (B, K) indices in 0..K-1, and its token, (B, K)."""
        if self.done:
            raise RuntimeError("the beam search is over")
        b, k = self.batch, self.config.num_beams
        vocab = log_probs.shape[-1]
        per_beam = log_probs.reshape(b, k, vocab)
        totals = per_beam + self.running_scores[:, :, None]  # (B, K, V)
        if self.generated == 0:
            totals[:, 1:] = -np.inf  # every beam holds the prompt: only beam 0's continuations count
        keep = min(self.keep, k * vocab)
        top = _best(totals.reshape(b, k * vocab), keep)  # (B, keep)
        scores = np.take_along_axis(totals.reshape(b, k * vocab), top, axis=-1)
        beams, tokens = top // vocab, top % vocab  # (B, keep) each
        token_lp = per_beam[np.arange(b)[:, None], beams, tokens]  # (B, keep)
        length = self.generated + 1
        hits = np.isin(tokens, self.config.eos_token_ids) | (length >= self.config.max_new_tokens)
        self._finish(beams, tokens, token_lp, scores, hits, length)
        parents, chosen = self._run_on(beams, tokens, token_lp, scores, hits)
        self.generated = length
        self._update_stopped(length)
        self.done = bool(self.stopped.all() or hits.all())
        return parents, chosen

    def _hypothesis(self, prompt: int, beam: int, token: int, logprob: float, score: float, length: int) -> Hypothesis:
        row = prompt * self.config.num_beams + beam
        penalised = score / (length**self.config.length_penalty)
        return Hypothesis((*self.running_tokens[row], token), (*self.running_logprobs[row], logprob), float(penalised))

    def _finish(
        self,
        beams: np.ndarray,
        tokens: np.ndarray,
        token_lp: np.ndarray,
        scores: np.ndarray,
        hits: np.ndarray,
        length: int,
    ) -> None:
        """Hits among each prompt's best K candidates join its finished hypotheses (the best K are kept)."""
        k = self.config.num_beams
        for prompt in range(self.batch):
            if self.stopped[prompt]:
                continue
            new = [
                self._hypothesis(
                    prompt,
                    int(beams[prompt, j]),
                    int(tokens[prompt, j]),
                    float(token_lp[prompt, j]),
                    float(scores[prompt, j]),
                    length,
                )
                for j in range(k)
                if hits[prompt, j]
            ]
            if new:
                merged = self.finished[prompt] + new
                self.finished[prompt] = sorted(merged, key=lambda h: -h.score)[:k]

    def _run_on(
        self, beams: np.ndarray, tokens: np.ndarray, token_lp: np.ndarray, scores: np.ndarray, hits: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each prompt's K best candidates that did not hit become its running beams."""
        k = self.config.num_beams
        # Stable order by "hit" puts non-hits first and keeps score order within each group (all hit: at the end).
        order = np.argsort(hits, axis=-1, kind="stable")[:, :k]  # (B, K)
        parents = np.take_along_axis(beams, order, axis=-1)
        chosen = np.take_along_axis(tokens, order, axis=-1)
        lps = np.take_along_axis(token_lp, order, axis=-1)
        self.running_scores = np.take_along_axis(scores, order, axis=-1)
        old_tokens, old_lps = self.running_tokens, self.running_logprobs
        self.running_tokens, self.running_logprobs = [], []
        for prompt in range(self.batch):
            for j in range(k):
                row = prompt * k + int(parents[prompt, j])
                self.running_tokens.append([*old_tokens[row], int(chosen[prompt, j])])
                self.running_logprobs.append([*old_lps[row], float(lps[prompt, j])])
        return parents, chosen

    def _update_stopped(self, length: int) -> None:
        config = self.config
        never = config.early_stopping == "never" and config.length_penalty > 0
        best_length = config.max_new_tokens if never else length
        for prompt in range(self.batch):
            full = len(self.finished[prompt]) >= config.num_beams
            if self.stopped[prompt] or (full and config.early_stopping is True):
                self.stopped[prompt] = True
                continue
            best_possible = self.running_scores[prompt, 0] / (best_length**config.length_penalty)
            worst = min(h.score for h in self.finished[prompt]) if full else _NOT_FULL
            self.stopped[prompt] = not best_possible > worst

    def results(self, count: int) -> list[list[Hypothesis]]:
        """Each prompt's ``count`` best finished hypotheses, best first (once :attr:`done`)."""
        if not self.done:
            raise RuntimeError("the beam search is still running")
        short = [p for p, found in enumerate(self.finished) if len(found) < count]
        if short:
            raise RuntimeError(f"beam search ended with fewer than {count} finished hypotheses for prompt {short[0]}")
        return [found[:count] for found in self.finished]
