"""What a generation returns: one :class:`GenerationResult` per prompt and returned sequence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = ["FinishReason", "GenerationResult", "step_timings"]

FinishReason = Literal["eos", "stop", "length"]


@dataclass(frozen=True)
class GenerationResult:
    """One returned sequence. ``token_ids`` holds the new tokens only; ``text`` their decoded text (a stop string,
    when one ended generation, is left out of ``text`` but its tokens stay in ``token_ids``).

    ``index`` is the prompt's place in the batch and ``sequence`` the sequence's rank among that prompt's
    (0 … num_return_sequences − 1, best first for beam search). ``token_logprobs[i]`` is the log-probability of
    ``token_ids[i]`` in the distribution it was chosen from: greedy, the log-softmax of the processed logits;
    sampling, of the processed and warped logits; beam search, the processed log-probability that beam search
    adds up (as transformers' ``compute_transition_scores`` gives it). ``score``: beam search, transformers'
    ``sequences_scores`` (the sum of ``token_logprobs`` over ``len(token_ids) ** length_penalty``); greedy and
    sampling, the sum of ``token_logprobs``.
    """

    prompt: str | None
    prompt_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    timings: dict[str, float] = field(default_factory=dict)
    index: int = 0
    sequence: int = 0
    token_logprobs: list[float] = field(default_factory=list)
    score: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "sequence": self.sequence,
            "prompt": self.prompt,
            "prompt_ids": self.prompt_ids,
            "token_ids": self.token_ids,
            "text": self.text,
            "score": self.score,
            "token_logprobs": self.token_logprobs,
            "finish_reason": self.finish_reason,
            "timings": self.timings,
        }


def step_timings(prefill_s: float, total_s: float, step_times: Sequence[float]) -> dict[str, float]:
    """The timings every result carries, in milliseconds."""
    decode_ms = 1000 * float(np.median(step_times)) if step_times else 0.0
    return {
        "prefill_ms": round(1000 * prefill_s, 3),
        "decode_ms_per_token": round(decode_ms, 3),  # median over the batch's decode steps
        "total_ms": round(1000 * total_s, 3),
    }
