"""What ``verify`` reports, as data: the options it ran with, each file's hash check and every comparison, with the
tolerances and their basis, versions, provider and hardware. :mod:`gpt2_onnx.app.verify` fills it in;
:mod:`gpt2_onnx.app.report_table` renders it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import ManifestError, SourceMismatchError
from gpt2_onnx_core.hashing import sha256_file
from gpt2_onnx_core.layouts import KvCacheFormat, PromptKernel
from gpt2_onnx_core.manifest import Manifest
from gpt2_onnx_core.parity import ParityReport
from gpt2_onnx_core.perplexity import PerplexityComparison
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_core.tolerances import Tolerance
from gpt2_onnx_core.wording import plural

__all__ = ["FileCheck", "VerifyOptions", "VerifyReport", "check_dimensions", "check_files"]


@dataclass(frozen=True)
class VerifyOptions:
    folder: Path
    model: str | None = None  # the source model; default: the manifest's
    provider: ProviderName = "cpu"
    steps: int = 32  # decode steps compared (teacher-forced and free-running)
    batch_size: int = 4  # rows of the left-padded batch
    threads: int | None = None
    perplexity: Path | None = None  # a text file: source and export perplexity over the same windows
    perplexity_window: int | None = None  # tokens per window (None: the model's positions)
    perplexity_stride: int | None = None  # tokens between window starts (None: half the window)
    # int8: also generation over an int8 KV cache (its steps and greedy run; perplexity, if asked, through it)
    kv_cache: KvCacheFormat = "float32"
    # dynamic: also the export's prompts through DynamicQuantizeMatMul (the graphs' runs, the generation batch and
    # greedy run through the prompt session; the int8 cache's checks and perplexity, if asked, through it too)
    prompt_kernel: PromptKernel = "export"


@dataclass(frozen=True)
class FileCheck:
    name: str
    expected_sha256: str
    actual_sha256: str | None  # None: missing

    @property
    def ok(self) -> bool:
        return self.actual_sha256 == self.expected_sha256


@dataclass
class VerifyReport:
    folder: str
    source: str
    provider: str
    precision: str
    tolerance: Tolerance
    parity: ParityReport
    files: list[FileCheck]
    environment: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    generation_layout: str = "split"  # the session layout free-running generation was checked in
    kv_cache: str = "float32"  # the KV cache format generation was also checked with
    prompt_kernel: str = "export"  # the prompt kernel generation and the graphs were also checked with
    perplexity: PerplexityComparison | None = None  # with --perplexity
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))

    @property
    def ok(self) -> bool:
        perplexity_ok = self.perplexity is None or self.perplexity.ok
        return self.parity.ok and all(f.ok for f in self.files) and perplexity_ok

    def failures(self) -> list[str]:
        lines = [c.describe() for c in self.parity.failures]
        for check in self.files:
            if not check.ok:
                found = check.actual_sha256 or "missing"
                lines.append(f"file {check.name}: sha256 {found} != manifest {check.expected_sha256}")
        if self.perplexity is not None and not self.perplexity.ok:
            lines.append(self.perplexity.describe())
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "result": "pass" if self.ok else "fail",
            "folder": self.folder,
            "source": self.source,
            "provider": self.provider,
            "precision": self.precision,
            "generation_layout": self.generation_layout,
            "kv_cache": self.kv_cache,
            "prompt_kernel": self.prompt_kernel,
            "tolerance": self.tolerance.to_json(),
            "failures": self.failures(),
            "comparisons": [c.to_json() for c in self.parity.comparisons],
            "files": [{"name": f.name, "sha256": f.expected_sha256, "ok": f.ok} for f in self.files],
            "perplexity": None if self.perplexity is None else self.perplexity.to_json(),
            "environment": self.environment,
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
            "created": self.created,
        }


def check_files(folder: Path, manifest: Manifest) -> list[FileCheck]:
    """Every file the manifest lists: present with its size (else :class:`ManifestError` at once, naming each), then
    its sha256 (a difference is reported with the parity figures, which show what it breaks)."""
    missing, resized = [], []
    for name, record in sorted(manifest.files.items()):
        path = folder / name
        if not path.is_file():
            missing.append(name)
        elif (size := path.stat().st_size) != record.size:
            resized.append(f"{name} has {plural(size, 'byte')}, not {record.size}")
    if missing or resized:
        lacks = [f"lacks {', '.join(missing)}"] if missing else []
        raise ManifestError(
            f"'{folder}' does not match its manifest.json: {'; '.join(lacks + resized)} (nothing was compared)"
        )
    return [FileCheck(name, rec.sha256, sha256_file(folder / name)) for name, rec in sorted(manifest.files.items())]


def check_dimensions(source: ModelDims, export: ModelDims, spec: str) -> None:
    """Raise :class:`SourceMismatchError` naming every dimension in which the source model differs from the export
    (``n_layer 6 != 2``: the source's, then the export's), before any graph runs."""
    differ = [
        f"{name} {getattr(source, name)} != {getattr(export, name)}"
        for name in ("n_layer", "n_head", "n_embd", "vocab_size", "n_positions")
        if getattr(source, name) != getattr(export, name)
    ]
    if differ:
        raise SourceMismatchError(
            f"the source model '{spec}' is not the export's model: {', '.join(differ)} (source != export); "
            "pass the checkpoint it was exported from with --model"
        )
