"""The PyTorch side of ``bench``: the source checkpoint run by transformers in eager mode, the baseline.

The loop is what ``generate(do_sample=False)`` does without its per-step processors: one forward over the
prompt with ``logits_to_keep=1``, then one forward per token over transformers' own KV cache
(``DynamicCache``). It is the fastest plain eager path, so ratios against it are not flattered by
``generate``'s overhead.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from gpt2_onnx_core.bench_protocol import GenerationTiming
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_core.config import RANDOM_WEIGHTS_SEED
from gpt2_onnx_exporters.greedy_loop import greedy_loop
from gpt2_onnx_exporters.source import load_source

__all__ = ["EagerSystem"]


class EagerSystem:
    """``model`` (folder, hub id or random:NAME) with transformers' ``attention`` kind on ``device``."""

    def __init__(self, model: str, seed: int, threads: int, device: str, attention: str) -> None:
        self.spec, self.seed, self.threads = model, seed, threads
        self.device, self.attention = torch.device(device), attention
        self._model: torch.nn.Module | None = None

    @classmethod
    def from_spec(cls, spec: SystemSpec, settings: BenchSettings) -> EagerSystem:
        """The bench worker's factory (gpt2_onnx.app.bench.worker.FACTORIES)."""
        if spec.model is None:
            raise ValueError(f"the eager system '{spec.label}' names no model")
        device = "cuda" if settings.provider == "cuda" else "cpu"
        seed = RANDOM_WEIGHTS_SEED if spec.seed is None else spec.seed
        return cls(spec.model, seed, settings.threads, device, settings.attention)

    @property
    def model(self) -> torch.nn.Module:
        if self._model is None:
            raise RuntimeError("EagerSystem used before load()")
        return self._model

    def load(self) -> None:
        torch.set_num_threads(self.threads)
        model = load_source(self.spec, self.seed).model  # eager attention: the parity reference's choice
        model.set_attn_implementation(self.attention)
        self._model = model.eval()
        self._model.to(self.device)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @torch.inference_mode()
    def prefill(self, input_ids: np.ndarray) -> float:
        ids = torch.from_numpy(input_ids).to(self.device)  # (B, T)
        mask = torch.ones_like(ids)
        self._sync()
        start = time.perf_counter()
        self.model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
        self._sync()
        return time.perf_counter() - start

    def greedy(self, input_ids: np.ndarray, new_tokens: int) -> tuple[list[list[int]], list[float], float]:
        """The chosen tokens (B, new_tokens), the moment each step's were on the host, and the start."""
        return greedy_loop(self.model, input_ids, new_tokens, self.device, self._sync, logits_to_keep=1)

    def generate(self, input_ids: np.ndarray, new_tokens: int) -> GenerationTiming:
        _, marks, start = self.greedy(input_ids, new_tokens)
        return GenerationTiming.from_marks(start, marks)
