"""Prefill and decode steps with ONNX Runtime IO binding: the KV cache never leaves the provider's device.

Each step binds the previous step's ``present.*`` OrtValues as ``past_key_values.*`` directly (on CUDA they stay in
GPU memory; on the CPU no numpy copy is made). Only the small token inputs go in from the host and only the logits
come back to it. The same code serves both providers, so the CPU tests exercise the CUDA path's logic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpt2_onnx.names import (
    ATTENTION_MASK,
    DECODE,
    INPUT_IDS,
    KV_KINDS,
    LOGITS,
    POSITION_IDS,
    PREFILL,
    GraphKind,
    past_name,
    present_name,
)
from runtimes.session import onnxruntime_errors

if TYPE_CHECKING:
    import onnxruntime as ort

    from runtimes.session import LoadedExport

__all__ = ["KvCacheRunner"]


class KvCacheRunner:
    """Runs one sequence batch: :meth:`prefill` once, then :meth:`decode` per step. Not shared between threads;
    create one per generation (the sessions underneath are shared and thread-safe)."""

    def __init__(self, loaded: LoadedExport) -> None:
        self._loaded = loaded
        dims = loaded.manifest.dims
        self._past_names = [past_name(i, kv) for i in range(dims.n_layer) for kv in KV_KINDS]
        self._present_names = [present_name(i, kv) for i in range(dims.n_layer) for kv in KV_KINDS]
        self._device = "cuda" if loaded.options.provider == "cuda" else "cpu"
        self._device_id = loaded.options.device_id
        self._past: list[ort.OrtValue] | None = None
        self.past_length = 0

    @property
    def past(self) -> list[ort.OrtValue] | None:
        """The cache after the last step: OrtValues in (layer, key/value) order, on the provider's device."""
        return self._past

    def prefill(self, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray) -> np.ndarray:
        """Run the prompt; returns prefill's logits, (B, 1, V) (or (B, T, V) for --all-logits exports)."""
        logits = self._run(PREFILL, input_ids, attention_mask, position_ids, past=None)
        self.past_length = input_ids.shape[1]
        return logits

    def decode(self, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray) -> np.ndarray:
        """Feed new tokens (B, N) after the cached ones; returns logits (B, N, V)."""
        if self._past is None:
            raise RuntimeError("decode() before prefill()")
        logits = self._run(DECODE, input_ids, attention_mask, position_ids, past=self._past)
        self.past_length += input_ids.shape[1]
        return logits

    def _run(
        self,
        kind: GraphKind,
        input_ids: np.ndarray,
        attention_mask: np.ndarray,
        position_ids: np.ndarray,
        past: list[ort.OrtValue] | None,
    ) -> np.ndarray:
        session = self._loaded.sessions[kind]
        binding = session.io_binding()
        binding.bind_cpu_input(INPUT_IDS, np.ascontiguousarray(input_ids, dtype=np.int64))  # (B, N)
        binding.bind_cpu_input(ATTENTION_MASK, np.ascontiguousarray(attention_mask, dtype=np.int64))  # (B, P+N)
        binding.bind_cpu_input(POSITION_IDS, np.ascontiguousarray(position_ids, dtype=np.int64))  # (B, N)
        if past is not None:
            for name, value in zip(self._past_names, past, strict=True):
                binding.bind_ortvalue_input(name, value)  # (B, nh, P, hs), already on the device
        binding.bind_output(LOGITS, "cpu")  # the one output the host needs
        for name in self._present_names:
            binding.bind_output(name, self._device, self._device_id)  # ONNX Runtime allocates on the device
        with onnxruntime_errors(self._loaded.manifest.graphs[kind].file):
            session.run_with_iobinding(binding)
        outputs = binding.get_outputs()
        self._past = list(outputs[1:])
        return outputs[0].numpy()
