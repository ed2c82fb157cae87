"""ONNX Runtime's OpenVINO execution provider (``onnxruntime-openvino``) as a ``bench`` system: a gpt2-onnx export
folder, its own ``prefill.onnx`` and ``decode.onnx``, each in a session on ``OpenVINOExecutionProvider`` (device
CPU), greedy; the KV cache passes from step to step as ONNX Runtime OrtValues through IO binding, never through
numpy. Issue 14 asks whether this provider beats ONNX Runtime's own CPU provider on our graphs; this system
measures it in the same interleaved run as the rest (``benchmarks/peers_side_by_side.sh`` adds it when
``benchmarks/peers_install.sh`` has built the venv).

Runs in the onnxruntime-openvino venv through
``SystemSpec(factory="benchmarks.openvino_ep_system:fp32_precision" | ":cpu_defaults", folder=..., python=...)``:
``fp32_precision`` asks the provider for f32 compute (``precision=FP32``, the exact path), ``cpu_defaults`` leaves
the precision to the plugin. The provider's sessions are its own (no shared weights, no merged graph); the
onnxruntime-openvino wheel is a separate build of ONNX Runtime and cannot live beside the product's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from benchmarks.peer_common import GreedyPeer, GreedyRun, files_of, single_prompt
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_core.manifest import read_manifest
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

__all__ = ["OpenVinoEpSystem", "cpu_defaults", "fp32_precision"]

PROVIDER = "OpenVINOExecutionProvider"


class OpenVinoEpSystem(GreedyPeer):
    """An export folder's two graphs on ONNX Runtime's OpenVINO execution provider, ``settings.threads`` threads."""

    def __init__(self, spec: SystemSpec, settings: BenchSettings, precision: str | None) -> None:
        if spec.folder is None:
            raise ValueError("the OpenVINO EP system needs the export folder (SystemSpec.folder)")
        self.folder, self.threads, self.precision = Path(spec.folder), settings.threads, precision
        self.manifest = read_manifest(self.folder)
        self._sessions: dict[str, ort.InferenceSession] = {}

    def load(self) -> None:
        if PROVIDER not in ort.get_available_providers():
            raise RuntimeError(f"this onnxruntime ({ort.__version__}) has no {PROVIDER}")
        options: dict[str, str] = {"device_type": "CPU", "num_of_threads": str(self.threads)}
        if self.precision is not None:
            options["precision"] = self.precision
        for kind in (PREFILL, DECODE):
            session_options = ort.SessionOptions()
            session_options.intra_op_num_threads = self.threads
            path = self.folder / self.manifest.graphs[kind].file
            session = ort.InferenceSession(str(path), session_options, providers=[PROVIDER], provider_options=[options])
            if session.get_providers()[0] != PROVIDER:
                raise RuntimeError(f"{path.name} runs on {session.get_providers()}, not {PROVIDER}")
            self._sessions[kind] = session

    def greedy(self, input_ids: np.ndarray, new_tokens: int) -> GreedyRun:
        prompt = np.asarray([single_prompt(input_ids, "OpenVINO EP")], dtype=np.int64)  # (1, T)
        layers = self.manifest.dims.n_layer
        pasts, presents = past_names(layers), present_names(layers)
        length = prompt.shape[1]
        chosen: list[int] = []
        marks: list[float] = []
        start = time.perf_counter()
        binding = self._sessions[PREFILL].io_binding()
        feeds = {
            INPUT_IDS: prompt,
            ATTENTION_MASK: np.ones_like(prompt),
            POSITION_IDS: np.arange(length, dtype=np.int64)[None, :],
        }
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        for name in [LOGITS, *presents]:
            binding.bind_output(name, "cpu")
        self._sessions[PREFILL].run_with_iobinding(binding)
        outputs = binding.get_outputs()  # OrtValues: logits, then presents
        for step in range(new_tokens):
            logits = outputs[0].numpy()  # (1, T, V)
            token = int(logits[0, -1].argmax())
            chosen.append(token)
            marks.append(time.perf_counter())
            if step == new_tokens - 1:
                break
            position = length + step
            binding = self._sessions[DECODE].io_binding()
            binding.bind_cpu_input(INPUT_IDS, np.asarray([[token]], dtype=np.int64))
            binding.bind_cpu_input(ATTENTION_MASK, np.ones((1, position + 1), dtype=np.int64))
            binding.bind_cpu_input(POSITION_IDS, np.asarray([[position]], dtype=np.int64))
            for name, value in zip(pasts, outputs[1:], strict=True):
                binding.bind_ortvalue_input(name, value)
            for name in [LOGITS, *presents]:
                binding.bind_output(name, "cpu")
            self._sessions[DECODE].run_with_iobinding(binding)
            outputs = binding.get_outputs()
        return [chosen], marks, start

    def graph_files(self) -> dict[str, int]:
        files = [self.folder / record.file for record in self.manifest.graphs.values()]
        return files_of(self.folder, [*files, self.folder / self.manifest.weights_file])

    def describe(self) -> dict[str, Any]:
        return {"onnxruntime": ort.__version__, "provider": PROVIDER, "precision": self.precision or "plugin's"}


def fp32_precision(spec: SystemSpec, settings: BenchSettings) -> OpenVinoEpSystem:
    return OpenVinoEpSystem(spec, settings, "FP32")


def cpu_defaults(spec: SystemSpec, settings: BenchSettings) -> OpenVinoEpSystem:
    return OpenVinoEpSystem(spec, settings, None)
