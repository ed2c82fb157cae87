"""llama.cpp as a ``bench`` system: a GGUF file run through llama-cpp-python's low-level API (the C API one to one),
greedy, end-of-text ignored.

Runs in the llama.cpp venv (benchmarks/peers_install.sh) through
``SystemSpec(factory="benchmarks.llama_cpp_system:LlamaCppSystem", folder=<the .gguf file>, python=...)``.

One generation: clear the context's memory (KV cache), decode the whole prompt as one batch (logits of its last
position only), then one token per decode; each token chosen by llama.cpp's greedy sampler and timed when it is on
the host. ``n_threads`` and ``n_threads_batch`` are the settings' threads; the context holds the bench's longest
sequence (``BenchSettings.longest_sequence()``: 512 positions for the default side-by-side, 1,024 with a 1,000-token
``decode_contexts`` prompt; never more than the model's ``n_ctx_train``), and ``n_batch`` = ``n_ubatch`` = that
context, so that the whole prompt is one batch; everything else is llama.cpp's default (KV cache f16, flash
attention as it decides), which ``describe()`` records with the build's CPU features.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path
from typing import Any

import llama_cpp as ll
import numpy as np

from benchmarks.peer_common import GreedyPeer, GreedyRun, context_positions, single_prompt
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec

__all__ = ["LlamaCppSystem"]


class LlamaCppSystem(GreedyPeer):
    """A GGUF model in one llama.cpp context that holds the bench's longest sequence, ``settings.threads`` threads."""

    def __init__(self, spec: SystemSpec, settings: BenchSettings) -> None:
        if spec.folder is None:
            raise ValueError("the llama.cpp system needs the GGUF file (SystemSpec.folder)")
        self.path, self.threads = Path(spec.folder), settings.threads
        self.needed = settings.longest_sequence()  # positions: prompt + new tokens of the longest task
        self._model: Any = None
        self._ctx: Any = None
        self._sampler: Any = None

    def load(self) -> None:
        ll.llama_backend_init()
        self._model = ll.llama_model_load_from_file(str(self.path).encode(), ll.llama_model_default_params())
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {self.path}")
        context = context_positions(self.needed, int(ll.llama_model_n_ctx_train(self._model)))
        params = ll.llama_context_default_params()
        params.n_ctx = params.n_batch = params.n_ubatch = context  # the whole prompt decoded as one batch
        params.n_seq_max = 1
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        self._ctx = ll.llama_init_from_model(self._model, params)
        if not self._ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self._sampler = ll.llama_sampler_init_greedy()

    def _decode(self, tokens: list[int]) -> int:
        """Run ``tokens`` after what the context holds; the greedy choice at the last position."""
        array = (ll.llama_token * len(tokens))(*tokens)
        status = ll.llama_decode(self._ctx, ll.llama_batch_get_one(array, len(tokens)))
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status}")
        return int(ll.llama_sampler_sample(self._sampler, self._ctx, -1))

    def greedy(self, input_ids: np.ndarray, new_tokens: int) -> GreedyRun:
        if self._ctx is None:
            raise RuntimeError("LlamaCppSystem used before load()")
        prompt = single_prompt(input_ids, "llama.cpp")
        ll.llama_memory_clear(ll.llama_get_memory(self._ctx), True)
        ll.llama_sampler_reset(self._sampler)
        chosen: list[int] = []
        marks: list[float] = []
        start = time.perf_counter()
        token = self._decode(prompt)
        while True:
            chosen.append(token)
            marks.append(time.perf_counter())
            if len(chosen) == new_tokens:
                break
            token = self._decode([token])
        return [chosen], marks, start

    def graph_files(self) -> dict[str, int]:
        size = self.path.stat().st_size
        return {"model_files": size, "folder": size}

    def describe(self) -> dict[str, Any]:
        """The build's libraries and CPU features, the context's settings and the model's description (its type)."""
        params = ll.llama_context_default_params()
        description = ctypes.create_string_buffer(256)
        ll.llama_model_desc(self._model, description, len(description))
        libraries = Path(ll.__file__).parent / "lib"  # where peers_install.sh put the build's libraries
        return {
            "libraries": sorted(path.name for path in libraries.glob("lib*.so.*.*")),  # their versions
            "system_info": (ll.llama_print_system_info() or b"").decode(),
            "model": description.value.decode(),
            "n_vocab": ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self._model)),
            "n_ctx": int(ll.llama_n_ctx(self._ctx)),  # the context's positions (also n_batch and n_ubatch)
            "kv_cache_types": [int(params.type_k), int(params.type_v)],  # ggml_type: 1 is f16
            "flash_attn_type": (ll.llama_flash_attn_type_name(params.flash_attn_type) or b"").decode(),
        }
