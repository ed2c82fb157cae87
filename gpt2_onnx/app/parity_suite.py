"""The parity suite: an export run by ONNX Runtime against its source model run by transformers.

Every check adds comparisons to one :class:`~gpt2_onnx_core.parity.ParityReport`; nothing stops at the first failure.
``export`` runs a short suite before it commits a folder; ``verify`` runs the full one. Where the tolerance has an
:class:`~gpt2_onnx_core.tolerances.ArithmeticRule` (fp32), every reference forward also runs in float64, logits and KV
are compared with that exact result, and each tensor's limit follows from the float32 source's own distance from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_core.names import (
    ATTENTION_MASK,
    DECODE,
    INPUT_IDS,
    LOGITS,
    POSITION_IDS,
    PREFILL,
    past_names,
    present_names,
)
from gpt2_onnx_core.parity import ParityReport, arithmetic_limit, compare_logits, compare_tensors, compare_tokens
from gpt2_onnx_core.tolerances import Tolerance
from gpt2_onnx_core.wording import plural
from gpt2_onnx_exporters.reference import ReferenceModel, ReferenceOutputs
from gpt2_onnx_runtimes.generate import generate_ids
from gpt2_onnx_runtimes.generation import GenerationOptions
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["ParitySuite"]

Feeds = dict[str, np.ndarray]


def _feeds(ids: np.ndarray, mask: np.ndarray, positions: np.ndarray, past: Feeds | None = None) -> Feeds:
    return {INPUT_IDS: ids, ATTENTION_MASK: mask, POSITION_IDS: positions, **(past or {})}


@dataclass
class ParitySuite:
    """Runs checks of ``loaded`` (ONNX Runtime) against ``reference`` (transformers) into ``report``."""

    loaded: LoadedExport  # the folder's own graphs (LoadedExport.run)
    reference: ReferenceModel
    tolerance: Tolerance
    report: ParityReport
    generation: LoadedExport | None = None  # what generation runs (the merged layout); default: ``loaded``

    @property
    def _n_layer(self) -> int:
        return self.loaded.manifest.dims.n_layer

    @property
    def _exact(self) -> bool:
        """Whether reference forwards also run in float64: the fp32 rule compares with that."""
        return self.tolerance.arithmetic is not None

    def _forward(self, ids: np.ndarray, mask: np.ndarray, positions: np.ndarray) -> ReferenceOutputs:
        return self.reference.forward(ids, mask, positions, exact=self._exact)

    def _logits(self, check: str, actual: np.ndarray, ref: ReferenceOutputs, span: slice) -> None:
        """The export's logits ``actual`` against the reference's at positions ``span``."""
        t = self.tolerance
        expected = ref.logits[:, span]
        atol, source_error = t.logits_atol, None
        if t.arithmetic is not None and ref.exact is not None:
            exact = ref.exact.logits[:, span]
            source_error, atol = arithmetic_limit(t.arithmetic, expected, exact)
            expected = exact
        comparison = compare_logits(
            check, actual, expected, atol, t.min_top1, t.max_kl, near_tie=t.near_tie, source_error=source_error
        )
        self.report.add(comparison)

    def _kv(self, check: str, outputs: Feeds, ref: ReferenceOutputs, span: slice) -> None:
        rule = self.tolerance.arithmetic
        exact = ref.exact.cache() if rule is not None and ref.exact is not None else None
        for index, (name, expected) in enumerate(zip(present_names(self._n_layer), ref.cache(), strict=True)):
            expected = expected[:, :, span]
            atol, source_error = self.tolerance.kv_atol, None
            if rule is not None and exact is not None:
                source_error, atol = arithmetic_limit(rule, expected, exact[index][:, :, span])
                expected = exact[index][:, :, span]
            self.report.add(compare_tensors(check, name, outputs[name], expected, atol, source_error))

    def _as_past(self, outputs: Feeds) -> Feeds:
        names = zip(past_names(self._n_layer), present_names(self._n_layer), strict=True)
        return {past: outputs[present] for past, present in names}

    def prefill_and_decode_chain(self, prompt: Sequence[int], steps: int) -> None:
        """Prefill (logits, every present), then ``steps`` chained decode steps teacher-forced with transformers'
        greedy tokens (each step's logits, the final presents), and the greedy tokens those logits choose."""
        ids, mask = left_pad([prompt], 0)  # (1, T)
        greedy = self.reference.greedy(ids, mask, steps + 1, eos_token_id=None)  # (1, steps + 1)
        full = np.concatenate([ids, greedy[:, :steps]], axis=1)  # (1, T + steps)
        ref = self._forward(full, np.ones_like(full), position_ids(np.ones_like(full)))
        t = ids.shape[1]
        out = self.loaded.run(PREFILL, _feeds(ids, mask, position_ids(mask)))
        last_only = out[LOGITS].shape[1] != t
        self._logits("prefill", out[LOGITS], ref, slice(t - 1, t) if last_only else slice(0, t))
        self._kv("prefill", out, ref, slice(0, t))
        chosen = [int(out[LOGITS][0, -1].argmax())]
        for step in range(steps):
            mask = np.ones((1, t + step + 1), dtype=np.int64)  # (1, P + 1)
            step_ids = greedy[:, step : step + 1]  # teacher-forced: the reference's token
            out = self.loaded.run(DECODE, _feeds(step_ids, mask, position_ids(mask)[:, -1:], self._as_past(out)))
            self._logits(f"decode step {step + 1}", out[LOGITS], ref, slice(t + step, t + step + 1))
            chosen.append(int(out[LOGITS][0, -1].argmax()))
        if steps:
            self._kv(f"decode step {steps}", out, ref, slice(0, t + steps))
        self._greedy(f"teacher-forced greedy, {plural(steps + 1, 'token')}", np.array([chosen]), greedy)

    def _greedy(self, check: str, actual: np.ndarray, expected: np.ndarray, first_row: int = 0) -> None:
        self.report.add(compare_tokens(check, actual, expected, first_row, judged=self.tolerance.greedy_exact))

    def decode_with_empty_past(self, prompt: Sequence[int]) -> None:
        """decode.onnx alone, with a past of length 0, over a whole prompt: the merged-graph use."""
        ids, mask = left_pad([prompt], 0)
        dims = self.loaded.manifest.dims
        empty = np.zeros((1, dims.n_head, 0, dims.head_dim), dtype=np.float32)  # (1, nh, 0, hs)
        past = dict.fromkeys(past_names(dims.n_layer), empty)
        out = self.loaded.run(DECODE, _feeds(ids, mask, position_ids(mask), past))
        ref = self._forward(ids, mask, position_ids(mask))
        self._logits("decode, empty past", out[LOGITS], ref, slice(None))
        self._kv("decode, empty past", out, ref, slice(None))

    def past_lengths(self, tokens: Sequence[int], lengths: Sequence[int], new: int = 1) -> None:
        """decode.onnx fed a past of each length (taken from the reference) plus ``new`` tokens."""
        for past in lengths:
            sequence = np.array([[tokens[i % len(tokens)] for i in range(past + new)]], dtype=np.int64)  # (1, P+N)
            ones = np.ones_like(sequence)
            ref = self._forward(sequence, ones, position_ids(ones))
            cache = {
                name: np.ascontiguousarray(tensor[:, :, :past])  # (1, nh, P, hs)
                for name, tensor in zip(past_names(self._n_layer), ref.cache(), strict=True)
            }
            out = self.loaded.run(DECODE, _feeds(sequence[:, past:], ones, position_ids(ones)[:, past:], cache))
            self._logits(f"past {past} + {new} new", out[LOGITS], ref, slice(past, None))
            self._kv(f"past {past} + {new} new", out, ref, slice(None))

    def padded_batch(self, prompts: Sequence[Sequence[int]], steps: int) -> None:
        """A left-padded batch of prompts of different lengths, prefill then ``steps`` greedy decode steps: each
        row's logits equal that prompt run alone through the reference."""
        ids, mask = left_pad(prompts, 0)  # (B, T)
        outputs = [self.loaded.run(PREFILL, _feeds(ids, mask, position_ids(mask)))]

        def step(fed: np.ndarray, grown: np.ndarray) -> np.ndarray:
            past = self._as_past(outputs[-1])
            outputs.append(self.loaded.run(DECODE, _feeds(fed, grown, position_ids(grown)[:, -1:], past)))
            return outputs[-1][LOGITS][:, -1]  # (B, V)

        self._batch_rows("padded batch", prompts, mask, outputs[0][LOGITS][:, -1], step, steps)

    def generation_batch(self, prompts: Sequence[Sequence[int]], steps: int) -> None:
        """As :meth:`padded_batch`, through generation's own steps: the runtime's KV cache runner over
        ``generation``'s session (IO binding, its cache buffers: an int8 cache where it was loaded with one)."""
        ids, mask = left_pad(prompts, 0)  # (B, T)
        runner = KvCacheRunner(self.generation or self.loaded, capacity=ids.shape[1] + steps)
        first = runner.prefill(ids, mask, position_ids(mask))  # (B, V)

        def step(fed: np.ndarray, grown: np.ndarray) -> np.ndarray:
            return runner.decode(fed, grown, position_ids(grown)[:, -1:])  # (B, V)

        self._batch_rows("generation", prompts, mask, first, step, steps)

    def _batch_rows(
        self,
        label: str,
        prompts: Sequence[Sequence[int]],
        mask: np.ndarray,
        first: np.ndarray,
        step: Callable[[np.ndarray, np.ndarray], np.ndarray],
        steps: int,
    ) -> None:
        """Greedy ``steps`` after a left-padded batch's first logits ``first`` (B, V), each through ``step(tokens
        (B, 1), mask (B, P + 1))``; then each row's logits against that prompt and its tokens run alone through the
        reference."""
        generated: list[list[int]] = [[] for _ in prompts]
        batch_logits = [first]  # per step (B, V)
        for _ in range(steps):
            chosen = batch_logits[-1].argmax(axis=-1)  # (B,)
            for row, token in enumerate(chosen.tolist()):
                generated[row].append(int(token))
            mask = np.concatenate([mask, np.ones((len(prompts), 1), dtype=np.int64)], axis=1)  # (B, P + 1)
            batch_logits.append(step(chosen[:, None].astype(np.int64), mask))
        for row, prompt in enumerate(prompts):
            alone = np.array([[*prompt, *generated[row]]], dtype=np.int64)  # (1, T_row + steps)
            ones = np.ones_like(alone)
            ref = self._forward(alone, ones, position_ids(ones))
            chose = slice(len(prompt) - 1, None)  # (1, steps + 1, V): the positions that chose tokens
            actual = np.stack([logits[row] for logits in batch_logits])[None]  # (1, steps + 1, V)
            self._logits(f"{label} row {row} ({plural(len(prompt), 'token')})", actual, ref, chose)

    def free_running_greedy(self, prompts: Sequence[Sequence[int]], steps: int) -> None:
        """The runtime's own greedy generation (IO binding, batched, through ``generation``'s sessions) against
        transformers' ``generate``."""
        runtime = self.generation or self.loaded
        results = generate_ids(runtime, prompts, GenerationOptions(max_new_tokens=steps, ignore_eos=True))
        for row, (prompt, result) in enumerate(zip(prompts, results, strict=True)):
            ids = np.array([prompt], dtype=np.int64)
            expected = self.reference.greedy(ids, np.ones_like(ids), steps, eos_token_id=None)
            actual = np.array([result.token_ids])  # (1, steps): this batch row alone
            self._greedy(f"free-running greedy row {row}, {plural(steps, 'token')}", actual, expected, first_row=row)
