"""CTranslate2 as a ``bench`` system: a ``ct2-transformers-converter`` folder run by ``ctranslate2.Generator`` on the
CPU, greedy (top-k 1), streamed token by token with ``generate_tokens`` so that the first token and every step are
timed when they reach the host.

Runs in the CTranslate2 venv (benchmarks/peers_install.sh) through
``SystemSpec(factory="benchmarks.ctranslate2_system:Ctranslate2System", folder=..., python=...)``. The compute type
is the one the folder was converted with (``compute_type="default"``); one translator replica
(``inter_threads=1``) with ``intra_threads`` = the settings' threads. CTranslate2 takes tokens as strings: the
prompt's ids are mapped through the folder's vocabulary, and the steps answer with ids. No fixed context: the cache
grows with the sequence, and ``max_length`` counts new tokens only; ``generate_tokens`` leaves ``generate_batch``'s
``max_input_length`` at its default, 1,024 tokens (a longer prompt would be cut), which the bench's prompts, within
GPT-2's 1,024 positions, never pass (``decode_contexts`` included: 1,000 + 16).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import ctranslate2
import numpy as np

from benchmarks.peer_common import GreedyPeer, GreedyRun, files_of, single_prompt
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec

__all__ = ["Ctranslate2System"]


def _vocabulary(folder: Path) -> list[str]:
    """The converter's vocabulary: vocabulary.json (a list) in recent versions, vocabulary.txt (a line each) before."""
    as_json = folder / "vocabulary.json"
    if as_json.is_file():
        tokens: list[str] = json.loads(as_json.read_text(encoding="utf-8"))
        return tokens
    return (folder / "vocabulary.txt").read_text(encoding="utf-8").split("\n")


class Ctranslate2System(GreedyPeer):
    """A CTranslate2 model folder with ``settings.threads`` intra-op threads."""

    def __init__(self, spec: SystemSpec, settings: BenchSettings) -> None:
        if spec.folder is None:
            raise ValueError("the CTranslate2 system needs the model folder (SystemSpec.folder)")
        self.folder, self.threads = Path(spec.folder), settings.threads
        self._generator: ctranslate2.Generator | None = None
        self._vocabulary: list[str] = []

    @property
    def generator(self) -> ctranslate2.Generator:
        if self._generator is None:
            raise RuntimeError("Ctranslate2System used before load()")
        return self._generator

    def load(self) -> None:
        self._vocabulary = _vocabulary(self.folder)
        self._generator = ctranslate2.Generator(
            str(self.folder), device="cpu", compute_type="default", inter_threads=1, intra_threads=self.threads
        )

    def greedy(self, input_ids: np.ndarray, new_tokens: int) -> GreedyRun:
        prompt = [self._vocabulary[token] for token in single_prompt(input_ids, "CTranslate2")]
        chosen: list[int] = []
        marks: list[float] = []
        start = time.perf_counter()
        steps = self.generator.generate_tokens(prompt, max_length=new_tokens, sampling_topk=1)
        for step in steps:
            chosen.append(int(step.token_id))
            marks.append(time.perf_counter())
            if len(chosen) == new_tokens:
                break
        steps.close()  # stops the generation thread where it stands
        return [chosen], marks, start

    def graph_files(self) -> dict[str, int]:
        return files_of(self.folder, [self.folder / "model.bin"])

    def describe(self) -> dict[str, Any]:
        """The compute type the model runs with, and the CPU compute types this build supports."""
        return {
            "compute_type": self.generator.compute_type,
            "supported_compute_types": sorted(ctranslate2.get_supported_compute_types("cpu")),
        }
