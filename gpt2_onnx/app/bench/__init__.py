"""``gpt2-onnx bench``: an export folder against PyTorch eager on the same checkpoint, measured in one run.

Each system runs in its own worker process (so one's memory never counts against the other's) and the parent
interleaves their measurements, task by task, so that both see the same machine load:

    parent (runner.py) ──JSON lines──► worker "onnx"  (gpt2_onnx_runtimes.bench_system, no torch)
                       ──JSON lines──► worker "eager" (gpt2_onnx_exporters.eager_system, torch)
                       ──JSON lines──► worker of SystemSpec.factory, in SystemSpec.python's environment
                                       (a peer runtime, e.g. benchmarks/optimum_system.py)

``settings`` holds what to measure, ``protocol`` what a system offers, ``report`` the statistics and table.
"""

from gpt2_onnx_core.bench_settings import BenchSettings

__all__ = ["BenchSettings"]
