"""Text generation: one prefill, then a decode loop over the KV cache; greedy unless sampling is asked for.

Batches are left-padded; every row's tokens equal what that prompt gives alone (greedy exactly; sampling too,
since each row draws from its own generator seeded with the same seed).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from gpt2_onnx.batching import left_pad, position_ids
from gpt2_onnx.errors import InvalidInputError, OptionError
from gpt2_onnx.interrupts import raise_if_interrupted
from gpt2_onnx.wording import plural
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.sampling import apply_repetition_penalty, greedy, sample
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.tokenizer import TextTokenizer
from gpt2_onnx_runtimes.validation import validate_token_ids

__all__ = [
    "SAMPLING_ONLY",
    "FinishReason",
    "Generation",
    "GenerationOptions",
    "GenerationResult",
    "StepEvent",
    "generate_ids",
]

FinishReason = Literal["eos", "stop", "length"]
# Options that only sampling reads, with their neutral values: set to anything else without do_sample, refused.
SAMPLING_ONLY: dict[str, object] = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": None}


@dataclass(frozen=True)
class GenerationOptions:
    """How to generate. Greedy unless ``do_sample`` (as transformers' ``do_sample``)."""

    max_new_tokens: int = 50
    do_sample: bool = False
    temperature: float = 1.0  # sampling only (refused otherwise); > 0
    top_k: int = 0  # sampling only; 0 keeps every token
    top_p: float = 1.0  # sampling only; in (0, 1]
    repetition_penalty: float = 1.0  # > 0; 1 is off; applies to greedy too, as in transformers
    seed: int | None = None  # sampling only: same seed, same prompt → same text
    stop: tuple[str, ...] = ()  # stop when the generated text contains one of these (left out of the text)
    ignore_eos: bool = False  # keep going past the end-of-text token

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise OptionError(f"{{max_new_tokens}} must be >= 1, got {self.max_new_tokens}", "max_new_tokens")
        if self.do_sample and not self.temperature > 0:
            raise OptionError(f"{{temperature}} must be > 0 when sampling, got {self.temperature}", "temperature")
        if not 0 < self.top_p <= 1:
            raise OptionError(f"{{top_p}} must lie in (0, 1], got {self.top_p}", "top_p")
        if self.top_k < 0:
            raise OptionError(f"{{top_k}} must be >= 0 (0 disables it), got {self.top_k}", "top_k")
        if not self.repetition_penalty > 0:
            raise OptionError(
                f"{{repetition_penalty}} must be > 0, got {self.repetition_penalty}", "repetition_penalty"
            )
        if any(not s for s in self.stop):
            raise OptionError("{stop} strings must not be empty", "stop")
        if not self.do_sample:
            given = [name for name, neutral in SAMPLING_ONLY.items() if getattr(self, name) != neutral]
            if given:  # greedy decoding would ignore them: refused rather than silently dropped
                names = " and ".join("{" + name + "}" for name in given)
                verb, them = ("applies", "it") if len(given) == 1 else ("apply", "them")
                raise OptionError(
                    f"{names} {verb} only when sampling: pass {{do_sample}} too, or leave {them} out",
                    *given,
                    "do_sample",
                )


@dataclass(frozen=True)
class GenerationResult:
    """One prompt's outcome. ``token_ids`` holds the new tokens only; ``text`` their decoded text (a stop string,
    when one ended generation, is left out of ``text`` but its tokens stay in ``token_ids``)."""

    prompt: str | None
    prompt_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "prompt": self.prompt,
            "prompt_ids": self.prompt_ids,
            "token_ids": self.token_ids,
            "text": self.text,
            "finish_reason": self.finish_reason,
            "timings": self.timings,
        }


@dataclass(frozen=True)
class StepEvent:
    """Tokens chosen at one step: ``tokens[i]`` for row i, or None where that row had already finished."""

    step: int
    tokens: list[int | None]


@dataclass
class _Row:
    prompt_ids: list[int]
    generated: list[int] = field(default_factory=list)
    finish: FinishReason | None = None
    text: str | None = None  # set when a stop string cut it


def _check_lengths(prompts: Sequence[Sequence[int]], options: GenerationOptions, n_positions: int) -> None:
    if not prompts:
        raise InvalidInputError("no prompts given")
    for index, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise InvalidInputError(f"prompt {index} is empty; give at least one token")
        if len(prompt) + options.max_new_tokens > n_positions:
            raise OptionError(
                f"prompt {index} has {plural(len(prompt), 'token')}; with {{max_new_tokens}} "
                f"{options.max_new_tokens} that exceeds the model's {n_positions} positions",
                "max_new_tokens",
            )


def _stop_cut(text: str, stops: Sequence[str]) -> int | None:
    cuts = [index for index in (text.find(s) for s in stops) if index >= 0]
    return min(cuts) if cuts else None


class _Selector:
    """Chooses next tokens for a batch under the options (processors in transformers' order)."""

    def __init__(self, options: GenerationOptions, rows: int) -> None:
        self.options = options
        seed = options.seed if options.seed is not None else int(np.random.default_rng().integers(2**63))
        self.generators = [np.random.default_rng(seed) for _ in range(rows)]

    def __call__(self, logits: np.ndarray, rows: list[_Row]) -> np.ndarray:
        opts = self.options
        logits = apply_repetition_penalty(logits, [r.prompt_ids + r.generated for r in rows], opts.repetition_penalty)
        if not opts.do_sample:
            return greedy(logits)
        return sample(logits, opts.temperature, opts.top_k, opts.top_p, self.generators)


class Generation:
    """One batched generation, run lazily: iterate :meth:`steps` (or call :meth:`run`), then read :meth:`results`.

    Not shared between threads; the loaded sessions underneath are.
    """

    def __init__(
        self,
        loaded: LoadedExport,
        prompts: Sequence[Sequence[int]],
        options: GenerationOptions,
        tokenizer: TextTokenizer | None = None,
    ) -> None:
        dims, tokens = loaded.manifest.dims, loaded.manifest.tokens
        _check_lengths(prompts, options, dims.n_positions)
        if options.stop and tokenizer is None:
            raise InvalidInputError("stop strings need the tokenizer (generate from text, not ids)")
        self._loaded, self._options, self._tokenizer = loaded, options, tokenizer
        self._eos = None if options.ignore_eos else tokens.get("eos_token_id")
        self._pad = int(tokens.get("pad_token_id") or tokens.get("eos_token_id") or 0)
        self._rows = [_Row([int(t) for t in p]) for p in prompts]
        for index, row in enumerate(self._rows):
            validate_token_ids(np.asarray(row.prompt_ids), dims.vocab_size, f"prompt {index}")
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
        ids, mask = left_pad([r.prompt_ids for r in rows], pad)  # (B, T)
        selector = _Selector(options, len(rows))
        runner = KvCacheRunner(self._loaded, capacity=ids.shape[1] + options.max_new_tokens)
        start = time.perf_counter()
        logits = runner.prefill(ids, mask, position_ids(mask))  # (B, V)
        self._timings["prefill_s"] = time.perf_counter() - start
        next_pos = mask.sum(axis=1, keepdims=True)  # (B, 1): each row's next position
        for step in range(options.max_new_tokens):
            raise_if_interrupted()  # an interrupt that something swallowed still ends the generation
            chosen = selector(logits, rows)  # (B,)
            event: list[int | None] = []
            for row, token in zip(rows, chosen.tolist(), strict=True):
                event.append(None if row.finish else token)
                if not row.finish:
                    _advance(row, token, self._eos, options, self._tokenizer)
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
        """The results so far (complete once :meth:`steps` is exhausted)."""
        return [_result(row, self._tokenizer, self._timings, self._step_times) for row in self._rows]


def generate_ids(
    loaded: LoadedExport,
    prompts: Sequence[Sequence[int]],
    options: GenerationOptions,
    tokenizer: TextTokenizer | None = None,
) -> list[GenerationResult]:
    """Generate for a batch of token-id prompts (left-padded together). Stop strings need ``tokenizer``."""
    return Generation(loaded, prompts, options, tokenizer).run()


def _advance(
    row: _Row, token: int, eos: int | None, options: GenerationOptions, tokenizer: TextTokenizer | None
) -> None:
    row.generated.append(token)  # the end-of-text token too, as transformers returns it
    if eos is not None and token == eos:
        row.finish = "eos"
        return
    if options.stop and tokenizer is not None:
        text = tokenizer.decode(row.generated)
        cut = _stop_cut(text, options.stop)
        if cut is not None:
            row.finish, row.text = "stop", text[:cut]
            return
    if len(row.generated) >= options.max_new_tokens:
        row.finish = "length"


def _result(
    row: _Row, tokenizer: TextTokenizer | None, timings: dict[str, float], step_times: list[float]
) -> GenerationResult:
    text = row.text if row.text is not None else (tokenizer.decode(row.generated) if tokenizer else "")
    decode_ms = 1000 * float(np.median(step_times)) if step_times else 0.0
    timings = {
        "prefill_ms": round(1000 * timings["prefill_s"], 3),
        "decode_ms_per_token": round(decode_ms, 3),  # median over the batch's decode steps
        "total_ms": round(1000 * timings["total_s"], 3),
    }
    return GenerationResult(None, row.prompt_ids, row.generated, text, row.finish or "length", timings)
