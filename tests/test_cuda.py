"""GPU checks: run only where ONNX Runtime's CUDA provider really works (skipped elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from tests.conftest import cuda_works

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not cuda_works(), reason="no working CUDA provider here")]


def test_cuda_greedy_equals_cpu(tiny_export: Path) -> None:
    options = GenerationOptions(max_new_tokens=16, ignore_eos=True)
    cpu = Gpt2Onnx.load(tiny_export, provider="cpu").generate(["Hello", "The quick brown fox"], options)
    gpu = Gpt2Onnx.load(tiny_export, provider="cuda")
    assert all(providers[0] == "CUDAExecutionProvider" for providers in gpu.providers.values())
    assert [r.token_ids for r in gpu.generate(["Hello", "The quick brown fox"], options)] == [r.token_ids for r in cpu]


def test_cuda_kv_cache_stays_on_the_device(tiny_export: Path) -> None:
    import numpy as np

    model = Gpt2Onnx.load(tiny_export, provider="cuda")
    runner = KvCacheRunner(model._loaded)
    ids = np.array([[464, 2068]], dtype=np.int64)
    runner.prefill(ids, np.ones_like(ids), np.arange(2)[None])
    runner.decode(np.array([[11]]), np.ones((1, 3), dtype=np.int64), np.array([[2]]))
    assert runner.past is not None and all(v.device_name().lower() == "cuda" for v in runner.past)
