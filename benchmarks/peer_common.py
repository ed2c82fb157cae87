"""What the peer systems (benchmarks/{openvino,llama_cpp,ctranslate2}_system.py) share: the batch-1 guard, the
timing of a greedy run, and the files a folder holds. numpy and this checkout's torch-free core only, so that every
peer's venv imports it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import numpy as np

from gpt2_onnx_core.bench_protocol import GenerationTiming

__all__ = ["Greedy", "GreedyPeer", "GreedyRun", "context_positions", "files_of", "single_prompt", "timing_of"]

# (the chosen tokens (B, new_tokens), the moment each step's were on the host, the start): as OptimumSystem.greedy
GreedyRun = tuple[list[list[int]], list[float], float]


class Greedy(Protocol):
    def greedy(self, input_ids: np.ndarray, new_tokens: int) -> GreedyRun: ...


def context_positions(needed: int, trained: int, least: int = 512, step: int = 256) -> int:
    """The positions of a peer's fixed context (llama.cpp's ``n_ctx``) for a bench whose longest sequence is
    ``needed``: rounded up to a multiple of ``step`` (llama.cpp pads its context so anyway), at least ``least`` (the
    side-by-side's context before it had longer prompts), at most ``trained``, the model's own positions (0: not
    known). A bench that needs more than the model holds is refused."""
    if trained > 0 and needed > trained:
        raise ValueError(f"the bench needs {needed} positions, the model holds {trained}")
    size = max(least, -(-needed // step) * step)
    return min(size, trained) if trained > 0 else size


def single_prompt(input_ids: np.ndarray, peer: str) -> list[int]:
    """The one prompt of a batch-1 run (B = 1, T) as ints; the peers are measured at batch 1 only."""
    if input_ids.ndim != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"the {peer} system runs batch 1 only, got input ids of shape {tuple(input_ids.shape)}")
    return [int(token) for token in input_ids[0]]


def timing_of(system: Greedy, input_ids: np.ndarray, new_tokens: int) -> GenerationTiming:
    """A greedy run timed from the prompt going in, one mark per chosen token; all ``new_tokens`` must come."""
    rows, marks, start = system.greedy(input_ids, new_tokens)
    if len(marks) != new_tokens or any(len(row) != new_tokens for row in rows):
        raise RuntimeError(f"asked for {new_tokens} tokens, got {len(marks)} (did the runtime stop at end-of-text?)")
    return GenerationTiming.from_marks(start, marks)


class GreedyPeer:
    """A peer measured through its greedy runs alone: its prefill is a one-token generation (the prompt's forward
    and the first choice: the peers' APIs offer no less), its generation the marks of :meth:`greedy`."""

    def greedy(self, input_ids: np.ndarray, new_tokens: int) -> GreedyRun:
        raise NotImplementedError

    def prefill(self, input_ids: np.ndarray) -> float:
        return timing_of(self, input_ids, 1).first_token_s

    def generate(self, input_ids: np.ndarray, new_tokens: int) -> GenerationTiming:
        return timing_of(self, input_ids, new_tokens)


def files_of(folder: Path, model_files: Iterable[Path]) -> dict[str, int]:
    """Bytes: the model's files (graph and weights, what a deployment ships) and the whole folder."""
    return {
        "model_files": sum(path.stat().st_size for path in model_files),
        "folder": sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()),
    }
