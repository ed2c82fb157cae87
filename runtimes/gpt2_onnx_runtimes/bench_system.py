"""The ONNX Runtime side of ``bench``: an export folder measured through the code paths ``run`` uses:
:class:`~gpt2_onnx_runtimes.kv_cache.KvCacheRunner` for prefill, :class:`~gpt2_onnx_runtimes.generation.Generation`
for tokens."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from gpt2_onnx_core.batching import position_ids
from gpt2_onnx_core.bench_protocol import GenerationTiming
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_core.layouts import KvCacheFormat, PromptKernel, SessionLayout
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_runtimes.generation import Generation, GenerationOptions
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["OnnxSystem"]


class OnnxSystem:
    """An export folder on ONNX Runtime with ``threads`` intra-op threads."""

    def __init__(
        self,
        folder: Path,
        threads: int,
        provider: ProviderName,
        layout: SessionLayout = "auto",
        share_weights: bool = True,
        session_config: Mapping[str, str] | None = None,
        kv_cache: KvCacheFormat = "float32",
        prompt_kernel: PromptKernel = "export",
    ) -> None:
        self.options = RuntimeOptions(
            provider=provider,
            intra_op_threads=threads,
            inter_op_threads=1,
            layout=layout,
            share_weights=share_weights,
            session_config=dict(session_config or {}),
            kv_cache=kv_cache,
            prompt_kernel=prompt_kernel,
        )
        self.folder = folder
        self._loaded: LoadedExport | None = None

    @classmethod
    def from_spec(cls, spec: SystemSpec, settings: BenchSettings) -> OnnxSystem:
        """The bench worker's factory (gpt2_onnx.app.bench.worker.FACTORIES)."""
        if spec.folder is None:
            raise ValueError(f"the onnx system '{spec.label}' names no export folder")
        return cls(
            Path(spec.folder),
            settings.threads,
            settings.provider,
            spec.layout,
            spec.share_weights,
            spec.session_config,
            spec.kv_cache,
            spec.prompt_kernel,
        )

    @property
    def loaded(self) -> LoadedExport:
        if self._loaded is None:
            raise RuntimeError("OnnxSystem used before load()")
        return self._loaded

    def load(self) -> None:
        self._loaded = LoadedExport.load(self.folder, self.options)

    def prefill(self, input_ids: np.ndarray) -> float:
        mask = np.ones_like(input_ids)  # (B, T): equal-length prompts, no padding
        positions = position_ids(mask)
        runner = KvCacheRunner(self.loaded)
        start = time.perf_counter()
        runner.prefill(input_ids, mask, positions)
        return time.perf_counter() - start

    def generate(self, input_ids: np.ndarray, new_tokens: int) -> GenerationTiming:
        options = GenerationOptions(max_new_tokens=new_tokens, ignore_eos=True)
        generation = Generation(self.loaded, input_ids.tolist(), options)
        marks: list[float] = []
        start = time.perf_counter()
        for _ in generation.steps():
            marks.append(time.perf_counter())  # one mark per chosen token
        return GenerationTiming.from_marks(start, marks)

    def graph_files(self) -> dict[str, int]:
        """Bytes: the graphs with their weights file, the whole folder, and the weights themselves (the
        tensors' bytes, as the manifest states them) that the other two are measured against."""
        manifest = self.loaded.manifest
        weight_bytes = manifest.export.get("weight_bytes") or manifest.model.get("parameter_bytes") or 0
        return {
            "model_files": manifest.graph_and_weight_bytes,
            "folder": sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file()),
            "weight_bytes": int(weight_bytes),
        }
