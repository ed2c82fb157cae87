"""Beam search over the KV cache: every prompt's beams advance together, one decode run per step.

    prefill (P prompts, left-padded) ─► cache rows 0..P-1
    step 0:  scorer picks K continuations of each prompt ─► cache rows expanded to P·K (row p·K + k ← p)
    step t:  decode (P·K, 1) ─► log-softmax ─► processors ─► scorer ─► cache rows reordered by parent beam

The prompt's cache is computed once, then copied into one row per beam. Between steps the cache is reordered on its
device (:meth:`gpt2_onnx_runtimes.kv_cache.KvCacheRunner.reorder`): on the CPU inside the runtime's own buffers, on
CUDA by a Gather graph on the OrtValues. Each beam's processors see its own history (prompt + its tokens). The
bookkeeping is :class:`gpt2_onnx_runtimes.beam_search.BeamScorer`, transformers' beam search in numpy.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.interrupts import raise_if_interrupted
from gpt2_onnx_runtimes.beam_search import BeamConfig, BeamScorer, Hypothesis
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.processors import RowHistory, log_softmax, logits_processors
from gpt2_onnx_runtimes.prompt_checks import check_prompts, special_tokens
from gpt2_onnx_runtimes.results import GenerationResult, step_timings
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = ["BeamSearch"]


class BeamSearch:
    """One batched beam search (``options.num_beams`` > 1); :meth:`run` returns ``num_return_sequences`` results
    per prompt, prompt-major, best first. Not shared between threads; the loaded sessions underneath are."""

    def __init__(
        self,
        loaded: LoadedExport,
        prompts: Sequence[Sequence[int]],
        options: GenerationOptions,
        tokenizer: TextTokenizer | None = None,
    ) -> None:
        if options.num_beams < 2:
            raise InvalidInputError(f"beam search needs num_beams >= 2, got {options.num_beams}")
        check_prompts(loaded, prompts, options)
        self._loaded, self._options, self._tokenizer = loaded, options, tokenizer
        self._eos, self._pad = special_tokens(loaded, options)
        self._prompts = [[int(t) for t in p] for p in prompts]
        config = BeamConfig(
            options.num_beams, options.max_new_tokens, options.length_penalty, options.early_stopping, self._eos
        )
        self.scorer = BeamScorer(len(self._prompts), config)
        self._processors = logits_processors(options, self._eos)
        self._step_times: list[float] = []

    def run(self) -> list[GenerationResult]:
        options, scorer = self._options, self.scorer
        beams, count = options.num_beams, len(self._prompts)
        ids, mask = left_pad(self._prompts, self._pad)  # (P, T)
        runner = KvCacheRunner(self._loaded, capacity=ids.shape[1] + options.max_new_tokens, max_batch=count * beams)
        start = time.perf_counter()
        logits = np.repeat(runner.prefill(ids, mask, position_ids(mask)), beams, axis=0)  # (P·K, V)
        prefill_s = time.perf_counter() - start
        mask = np.repeat(mask, beams, axis=0)  # (P·K, T): every beam of a prompt shares its padding
        next_pos = mask.sum(axis=1, keepdims=True)  # (P·K, 1)
        offsets = np.arange(count)[:, None] * beams  # (P, 1): a prompt's first row
        while not scorer.done:
            raise_if_interrupted()  # an interrupt that something swallowed still ends the generation
            histories = self._histories() if len(self._processors) else []  # processors alone read them
            log_probs = self._processors(log_softmax(logits), histories)  # (P·K, V)
            parents, tokens = scorer.step(log_probs)  # (P, K) each
            if scorer.done:
                break
            step_start = time.perf_counter()
            first = scorer.generated == 1  # the cache still holds one row per prompt
            rows = np.repeat(np.arange(count), beams) if first else (offsets + parents).reshape(-1)  # (P·K,)
            runner.reorder(rows)
            mask = np.concatenate([mask, np.ones((len(mask), 1), dtype=np.int64)], axis=1)  # (P·K, S + 1)
            logits = runner.decode(tokens.reshape(-1, 1).astype(np.int64), mask, next_pos)  # (P·K, V)
            next_pos = next_pos + 1
            self._step_times.append(time.perf_counter() - step_start)
        timings = step_timings(prefill_s, time.perf_counter() - start, self._step_times)
        found = scorer.results(options.num_return_sequences)
        return [
            self._result(index, rank, hypothesis, timings)
            for index, hypotheses in enumerate(found)
            for rank, hypothesis in enumerate(hypotheses)
        ]

    def _histories(self) -> list[RowHistory]:
        beams = self._options.num_beams
        return [
            RowHistory(self._prompts[row // beams] + tokens, len(self._prompts[row // beams]))
            for row, tokens in enumerate(self.scorer.running_tokens)
        ]

    def _result(self, index: int, rank: int, found: Hypothesis, timings: dict[str, float]) -> GenerationResult:
        tokens = list(found.tokens)
        text = self._tokenizer.decode(tokens) if self._tokenizer is not None else ""
        return GenerationResult(
            prompt=None,
            prompt_ids=self._prompts[index],
            token_ids=tokens,
            text=text,
            finish_reason="eos" if tokens and tokens[-1] in self._eos else "length",
            timings=dict(timings),
            index=index,
            sequence=rank,
            token_logprobs=list(found.token_logprobs),
            score=found.score,
        )
