"""What a benchmarked system offers the worker: load, one timed prefill, one timed generation (numpy only)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["BenchSystem", "GenerationTiming", "prompt_ids"]


@dataclass(frozen=True)
class GenerationTiming:
    """One greedy generation, timed from the moment the prompt goes in."""

    first_token_s: float  # prefill plus choosing the first token: the time to first token
    step_s: list[float]  # each further token: one decode step plus choosing it
    total_s: float

    @classmethod
    def from_marks(cls, start: float, marks: Sequence[float]) -> GenerationTiming:
        """From ``perf_counter`` readings: ``start`` when the prompt went in, then one mark per chosen token."""
        steps = [b - a for a, b in itertools.pairwise(marks)]
        return cls(marks[0] - start, steps, marks[-1] - start)

    def to_json(self) -> dict[str, object]:
        return {"first_token_s": self.first_token_s, "step_s": self.step_s, "total_s": self.total_s}


class BenchSystem(Protocol):
    """A model runtime under measurement. Every method but ``load`` runs a batch of equal-length prompts."""

    def load(self) -> None:
        """Load the model (sessions, weights); the worker measures memory around it."""

    def prefill(self, input_ids: np.ndarray) -> float:
        """Seconds for one forward over the prompt (B, T), giving the next-token logits and the KV cache."""
        ...

    def generate(self, input_ids: np.ndarray, new_tokens: int) -> GenerationTiming:
        """Greedy generation of ``new_tokens`` tokens (end-of-text ignored) after the prompt (B, T)."""
        ...


def prompt_ids(seed: int, batch: int, length: int, vocab_size: int) -> np.ndarray:
    """Seeded random token ids (B, T) int64: every system sees the same prompts."""
    rng = np.random.default_rng([seed, batch, length])
    return rng.integers(0, vocab_size, size=(batch, length), dtype=np.int64)
