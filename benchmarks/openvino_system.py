"""OpenVINO GenAI as a ``bench`` system: an ``optimum-cli export openvino --task text-generation-with-past`` folder
run by ``openvino_genai.LLMPipeline`` on the CPU device, fed token ids, greedy, end-of-text ignored.

Runs in the OpenVINO venv (benchmarks/peers_install.sh) through
``SystemSpec(factory="benchmarks.openvino_system:forced_f32" | ":cpu_defaults", folder=..., python=...)``:

- ``forced_f32``: f32 compute and an f32 KV cache (``INFERENCE_PRECISION_HINT`` and ``KV_CACHE_PRECISION``), the
  exact path to set beside ours;
- ``cpu_defaults``: what the CPU plugin chooses itself (bf16 compute where the CPU has AMX, a u8 KV cache).

Both: ``INFERENCE_NUM_THREADS`` = the settings' threads, one stream, and prefix caching off (otherwise a repeated
prompt, as every round's is, is served from the cache and its prefill is not measured). Passing a scheduler config
replaces LLMPipeline's own (whose batch of tokens is unlimited) with ``SchedulerConfig``'s defaults, which cut a prompt
longer than ``max_num_batched_tokens`` (256) into several forwards: that limit is raised to the bench's longest
sequence where it is longer (``decode_contexts`` prompts of 512 or 1,000 tokens), so that every prompt is one
forward, as without a scheduler config; the default side-by-side (128 + 64) keeps the default. The KV cache grows as
needed (``cache_size`` and ``num_kv_blocks`` 0). Each token is timed when the pipeline hands it to the streamer (on
the host); ``describe()`` states what the plugin resolved.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov
import openvino_genai as ov_genai

from benchmarks.peer_common import GreedyPeer, GreedyRun, files_of, single_prompt
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec

__all__ = ["OpenVinoSystem", "cpu_defaults", "forced_f32"]

_F32 = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}


class _Marks(ov_genai.StreamerBase):
    """Records each streamed token and the moment it arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[int] = []
        self.marks: list[float] = []

    def write(self, token: int | list[int]) -> ov_genai.StreamingStatus:
        now = time.perf_counter()
        for one in [token] if isinstance(token, int) else token:
            self.tokens.append(int(one))
            self.marks.append(now)
        return ov_genai.StreamingStatus.RUNNING

    def end(self) -> None:
        pass


class OpenVinoSystem(GreedyPeer):
    """An OpenVINO IR folder on the CPU with ``threads`` inference threads and ``properties`` on top; ``positions``:
    the longest sequence it will run (prompt and new tokens), so that every prompt goes in as one forward."""

    def __init__(self, folder: Path, threads: int, properties: dict[str, str], positions: int) -> None:
        self.folder, self.threads, self.extra, self.positions = folder, threads, properties, positions
        self._pipe: ov_genai.LLMPipeline | None = None

    @property
    def properties(self) -> dict[str, Any]:
        return {"INFERENCE_NUM_THREADS": self.threads, "NUM_STREAMS": 1, **self.extra}

    @property
    def pipe(self) -> ov_genai.LLMPipeline:
        if self._pipe is None:
            raise RuntimeError("OpenVinoSystem used before load()")
        return self._pipe

    def load(self) -> None:
        scheduler = ov_genai.SchedulerConfig()
        scheduler.enable_prefix_caching = False
        # a longer prompt than this would be cut into several forwards (see the module's docstring)
        scheduler.max_num_batched_tokens = max(scheduler.max_num_batched_tokens, self.positions)
        self._pipe = ov_genai.LLMPipeline(str(self.folder), "CPU", scheduler_config=scheduler, **self.properties)

    def _config(self, new_tokens: int) -> ov_genai.GenerationConfig:
        config = ov_genai.GenerationConfig()
        config.max_new_tokens = new_tokens
        config.do_sample = False
        config.ignore_eos = True
        return config

    def greedy(self, input_ids: np.ndarray, new_tokens: int) -> GreedyRun:
        prompt = np.asarray([single_prompt(input_ids, "OpenVINO")], dtype=np.int64)  # (1, T)
        inputs = ov_genai.TokenizedInputs(ov.Tensor(prompt), ov.Tensor(np.ones_like(prompt)))
        streamer = _Marks()
        start = time.perf_counter()
        result = self.pipe.generate(inputs, self._config(new_tokens), streamer)
        tokens = [int(t) for t in result.tokens[0]]
        if tokens != streamer.tokens:
            raise RuntimeError("OpenVINO streamed other tokens than it returned")
        return [tokens], streamer.marks, start

    def graph_files(self) -> dict[str, int]:
        return files_of(self.folder, self.folder.glob("openvino_model.*"))

    def describe(self) -> dict[str, Any]:
        """The properties asked for and the CPU plugin's defaults for the two precisions."""
        core = ov.Core()
        defaults = {name: _text(core.get_property("CPU", name)) for name in _F32}
        return {"asked": {k: str(v) for k, v in self.properties.items()}, "cpu_defaults": defaults}


def _text(value: Any) -> str:
    """A property's value as OpenVINO writes it ("bf16", not "<Type: 'bfloat16'>")."""
    to_string = getattr(value, "to_string", None)
    return str(to_string()) if callable(to_string) else str(value)


def _folder(spec: SystemSpec) -> Path:
    if spec.folder is None:
        raise ValueError("the OpenVINO system needs the IR folder (SystemSpec.folder)")
    return Path(spec.folder)


def forced_f32(spec: SystemSpec, settings: BenchSettings) -> OpenVinoSystem:
    """f32 compute and KV cache, whatever the CPU offers."""
    return OpenVinoSystem(_folder(spec), settings.threads, dict(_F32), settings.longest_sequence())


def cpu_defaults(spec: SystemSpec, settings: BenchSettings) -> OpenVinoSystem:
    """The CPU plugin's own precision choices."""
    return OpenVinoSystem(_folder(spec), settings.threads, {}, settings.longest_sequence())
