"""Optimum-ONNX as a ``bench`` system: an ``optimum-cli export onnx --task text-generation-with-past`` folder run by
``optimum.onnxruntime.ORTModelForCausalLM`` on ONNX Runtime's CPU provider.

Runs in Optimum's own virtual environment (it pins transformers < 4.58, we need 5.x), started by the bench runner
through ``SystemSpec(factory="benchmarks.optimum_system:OptimumSystem", python=<that venv's python>)``; only
``gpt2_onnx``'s torch-free core is imported from this checkout.

The loop is the eager baseline's (exporters/eager_system.py): one forward over the prompt, then one forward per
token with the ``past_key_values`` the previous one returned, greedy on the last position. That is Optimum's
model-level API without ``generate()``'s per-step processors, so Optimum is measured at its fastest too. Its
single graph has no ``logits_to_keep``: the prompt's forward computes logits at every position.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from optimum.onnxruntime import ORTModelForCausalLM

from gpt2_onnx_core.bench_protocol import GenerationTiming
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_exporters.greedy_loop import greedy_loop

__all__ = ["OptimumSystem"]

_GRAPH_SUFFIXES = (".onnx", ".onnx_data", ".onnx.data")  # the graph and, above 2 GiB, its external weights


class OptimumSystem:
    """An Optimum export folder on ONNX Runtime with ``settings.threads`` intra-op threads (and torch's)."""

    def __init__(self, spec: SystemSpec, settings: BenchSettings) -> None:
        if spec.folder is None:
            raise ValueError("the Optimum system needs the export folder (SystemSpec.folder)")
        if settings.provider != "cpu":
            raise ValueError("the Optimum venv holds the CPU build of onnxruntime only")
        self.folder, self.threads = Path(spec.folder), settings.threads
        self._model: ORTModelForCausalLM | None = None

    @property
    def model(self) -> ORTModelForCausalLM:
        if self._model is None:
            raise RuntimeError("OptimumSystem used before load()")
        return self._model

    def load(self) -> None:
        torch.set_num_threads(self.threads)  # Optimum builds position ids and masks with torch
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1  # as ours (gpt2_onnx_runtimes.bench_system); sequential execution uses none
        self._model = ORTModelForCausalLM.from_pretrained(
            self.folder,
            provider="CPUExecutionProvider",
            session_options=options,
            use_cache=True,
            use_io_binding=False,  # Optimum's default on the CPU
        )

    @torch.inference_mode()
    def prefill(self, input_ids: np.ndarray) -> float:
        ids = torch.from_numpy(input_ids)  # (B, T)
        mask = torch.ones_like(ids)
        start = time.perf_counter()
        self.model(input_ids=ids, attention_mask=mask, use_cache=True)
        return time.perf_counter() - start

    def greedy(self, input_ids: np.ndarray, new_tokens: int) -> tuple[list[list[int]], list[float], float]:
        """The chosen tokens (B, new_tokens), the moment each step's were on the host, and the start."""
        return greedy_loop(self.model, input_ids, new_tokens)

    def generate(self, input_ids: np.ndarray, new_tokens: int) -> GenerationTiming:
        _, marks, start = self.greedy(input_ids, new_tokens)
        return GenerationTiming.from_marks(start, marks)

    def graph_files(self) -> dict[str, Any]:
        """Bytes: the graph with any external weights, and the whole folder (tokenizer and configs too). The weight
        bytes are left to the caller (the same checkpoint as ours)."""
        files = [p for p in self.folder.iterdir() if p.is_file()]
        return {
            "model_files": sum(p.stat().st_size for p in files if p.name.endswith(_GRAPH_SUFFIXES)),
            "folder": sum(p.stat().st_size for p in files),
        }
