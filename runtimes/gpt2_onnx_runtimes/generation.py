"""Text generation: one prefill, then a decode loop over the KV cache; greedy unless sampling is asked for (beam
search runs through :mod:`gpt2_onnx_runtimes.beam_generation`; :func:`gpt2_onnx_runtimes.generate.generate_ids`
picks).

Batches are left-padded; every row's tokens equal what that prompt gives alone (greedy exactly; sampling too,
since each row draws from its own generator, seeded by :func:`gpt2_onnx_runtimes.decoding.row_seed`). The token
choice, the end rule and the seeding rule are :mod:`gpt2_onnx_runtimes.decoding`'s, which serve's batching engine
runs too. Several sequences of one prompt share one prefill: the prompt's cache rows are copied into one row per
sequence; with ``best_of`` the best ``num_return_sequences`` of them are returned.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.interrupts import raise_if_interrupted
from gpt2_onnx_runtimes.decoding import EndRule, TokenChooser, best_sequences, new_rows, seed_of
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.prompt_checks import check_prompts, special_tokens
from gpt2_onnx_runtimes.results import FinishReason, GenerationResult, step_timings
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = ["FinishReason", "Generation", "GenerationOptions", "GenerationResult", "StepEvent"]


@dataclass(frozen=True)
class StepEvent:
    """Tokens chosen at one step: ``tokens[i]`` for row i, or None where that row had already finished. Rows are
    prompt-major: row ``i · num_return_sequences + j`` is prompt i's sequence j."""

    step: int
    tokens: list[int | None]


class Generation:
    """One batched greedy or sampled generation, run lazily: iterate :meth:`steps` (or call :meth:`run`), then
    read :meth:`results`.

    Not shared between threads; the loaded sessions underneath are.
    """

    def __init__(
        self,
        loaded: LoadedExport,
        prompts: Sequence[Sequence[int]],
        options: GenerationOptions,
        tokenizer: TextTokenizer | None = None,
    ) -> None:
        if options.num_beams > 1:
            raise InvalidInputError("beam search chooses its tokens at the end, so it cannot stream: use generate")
        check_prompts(loaded, prompts, options)
        if options.stop and tokenizer is None:
            raise InvalidInputError("stop strings need the tokenizer (generate from text, not ids)")
        self._loaded, self._options, self._tokenizer = loaded, options, tokenizer
        self._eos, self._pad = special_tokens(loaded, options)
        self._prompts = [[int(t) for t in p] for p in prompts]
        self._rows = new_rows(self._prompts, options, seed_of(options))
        self._timings = {"prefill_s": 0.0, "total_s": 0.0}
        self._step_times: list[float] = []
        self._done = False

    def run(self) -> list[GenerationResult]:
        for _ in self.steps():
            pass
        return self.results()

    def steps(self) -> Iterator[StepEvent]:
        """Run the generation, yielding the tokens chosen at each step."""
        if self._done:
            raise RuntimeError("a Generation runs once")
        self._done = True
        rows, pad, options = self._rows, self._pad, self._options
        ids, mask = left_pad(self._prompts, pad)  # (P, T): each prompt once
        choose, end = TokenChooser(options, self._eos), EndRule(options, self._eos, self._tokenizer)
        runner = KvCacheRunner(self._loaded, capacity=ids.shape[1] + options.max_new_tokens, max_batch=len(rows))
        start = time.perf_counter()
        logits = runner.prefill(ids, mask, position_ids(mask))  # (P, V)
        if len(rows) > len(self._prompts):  # several sequences per prompt: one cache row each, from one prefill
            copies = np.repeat(np.arange(len(self._prompts)), options.sequences_drawn)  # (B,)
            runner.reorder(copies)
            logits, mask = logits[copies], mask[copies]  # (B, V), (B, T)
        self._timings["prefill_s"] = time.perf_counter() - start
        next_pos = mask.sum(axis=1, keepdims=True)  # (B, 1): each row's next position
        for step in range(options.max_new_tokens):
            raise_if_interrupted()  # an interrupt that something swallowed still ends the generation
            chosen, logprobs, _ = choose(logits, rows)  # (B,), (B,)
            event: list[int | None] = []
            for row, token, logprob in zip(rows, chosen.tolist(), logprobs.tolist(), strict=True):
                event.append(None if row.finish else token)
                if not row.finish:
                    end.advance(row, token, logprob)
            self._timings["total_s"] = time.perf_counter() - start
            yield StepEvent(step, event)
            if all(r.finish for r in rows):
                break
            step_start = time.perf_counter()
            fed = np.where([r.finish is None for r in rows], chosen, pad)[:, None].astype(np.int64)  # (B, 1)
            mask = np.concatenate([mask, np.ones((len(rows), 1), dtype=np.int64)], axis=1)  # (B, P + 1)
            logits = runner.decode(fed, mask, next_pos)  # (B, V)
            next_pos = next_pos + 1
            self._step_times.append(time.perf_counter() - step_start)

    def row_finished(self, row: int) -> bool:
        return self._rows[row].finish is not None

    def results(self) -> list[GenerationResult]:
        """The results so far (complete once :meth:`steps` is exhausted), one per returned sequence, prompt-major
        (with ``best_of``, each prompt's best ``num_return_sequences``, best first)."""
        timings = step_timings(self._timings["prefill_s"], self._timings["total_s"], self._step_times)
        results = [row.result(self._tokenizer, timings) for row in self._rows]
        drawn, returned = self._options.sequences_drawn, self._options.num_return_sequences
        if drawn == returned:
            return results
        return [r for i in range(0, len(results), drawn) for r in best_sequences(results[i : i + drawn], returned)]
