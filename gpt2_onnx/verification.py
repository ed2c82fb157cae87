"""``gpt2-onnx verify``: the full parity suite plus file integrity and golden vectors, as a report to ship.

Every check runs; the report then lists every failure with its figures. It records what was compared, the
tolerances and their basis, versions, provider, hardware and the manifest's hashes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpt2_onnx.config import ModelDims
from gpt2_onnx.dependencies import require_pytorch_side
from gpt2_onnx.environment import describe_environment
from gpt2_onnx.errors import ManifestError, SourceMismatchError
from gpt2_onnx.hashing import sha256_file
from gpt2_onnx.integrity import IntegrityCheck
from gpt2_onnx.manifest import Manifest, read_manifest
from gpt2_onnx.parity import ParityReport
from gpt2_onnx.progress import StageReporter, Stages
from gpt2_onnx.tolerances import Tolerance, tolerance_for
from gpt2_onnx.wording import plural

__all__ = ["FileCheck", "VerifyOptions", "VerifyReport", "check_dimensions", "check_files", "verify_export"]

VERIFY_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Hello",
    "In a shocking finding, scientists discovered a herd of unicorns living in a remote, previously unexplored valley",
    "Once upon a time",
    "The meaning of life is",
    "ONNX Runtime",
    "A long time ago in a galaxy far, far away",
    "import numpy as np",
)


@dataclass(frozen=True)
class VerifyOptions:
    folder: Path
    model: str | None = None  # the source model; default: the manifest's
    provider: str = "cpu"
    steps: int = 32  # decode steps compared (teacher-forced and free-running)
    batch_size: int = 4  # rows of the left-padded batch
    threads: int | None = None


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
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))

    @property
    def ok(self) -> bool:
        return self.parity.ok and all(f.ok for f in self.files)

    def failures(self) -> list[str]:
        lines = [c.describe() for c in self.parity.failures]
        for check in self.files:
            if not check.ok:
                found = check.actual_sha256 or "missing"
                lines.append(f"file {check.name}: sha256 {found} != manifest {check.expected_sha256}")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "result": "pass" if self.ok else "fail",
            "folder": self.folder,
            "source": self.source,
            "provider": self.provider,
            "precision": self.precision,
            "generation_layout": self.generation_layout,
            "tolerance": self.tolerance.to_json(),
            "failures": self.failures(),
            "comparisons": [c.to_json() for c in self.parity.comparisons],
            "files": [{"name": f.name, "sha256": f.expected_sha256, "ok": f.ok} for f in self.files],
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


def _source_spec(manifest: Manifest, override: str | None) -> tuple[str, int]:
    source = override or str(manifest.model.get("source") or "")
    seed = manifest.model.get("seed")
    return source, int(seed) if isinstance(seed, int) else 0


def verify_export(options: VerifyOptions, report: StageReporter | None = None) -> VerifyReport:
    """Run every check of an export folder against its source model; never stops at the first failure."""
    manifest = read_manifest(options.folder)
    require_pytorch_side("verify (it runs the source model)")  # before the imports below, which need it

    from exporters.reference import ReferenceModel
    from exporters.source import load_source
    from gpt2_onnx.checks import ParitySuite
    from runtimes.golden_check import check_golden
    from runtimes.session import LoadedExport, RuntimeOptions
    from runtimes.tokenizer import TextTokenizer

    stages = Stages(report)
    with stages.stage("check files"):
        files = check_files(options.folder, manifest)
    source_spec, seed = _source_spec(manifest, options.model)
    with stages.stage("load source model"):
        source = load_source(source_spec, seed=seed, revision=manifest.model.get("revision"))
    check_dimensions(source.dims, manifest.dims, source_spec)
    with stages.stage("load export"):
        runtime = RuntimeOptions(
            provider=options.provider,  # type: ignore[arg-type]
            intra_op_threads=options.threads,
            integrity=IntegrityCheck(sha256=False),  # hashed above, reported beside the parity figures
        )
        # The folder's two graphs as shipped, and the layout generation runs (merged, where the runtime has it).
        loaded = LoadedExport.load(options.folder, replace(runtime, layout="split"))
        generation = LoadedExport.load(options.folder, runtime)
    tolerance = tolerance_for(manifest.precision)
    suite = ParitySuite(loaded, ReferenceModel(source.model), tolerance, ParityReport(), generation)
    tokenizer = TextTokenizer(options.folder / "tokenizer.json")
    longest = manifest.dims.n_positions - options.steps - 1
    prompts = [tuple(tokenizer.encode(text)[:longest]) for text in VERIFY_TEXTS]
    main = prompts[0]
    with stages.stage(f"prefill and {plural(options.steps, 'decode step')}"):
        suite.prefill_and_decode_chain(main, options.steps)
        suite.decode_with_empty_past(main)
    with stages.stage("past lengths"):
        n = manifest.dims.n_positions
        suite.past_lengths(main, sorted({0, 1, 4, n // 2, n - 1}))
        suite.past_lengths(main, [4], new=3)
    batch = [prompts[i % len(prompts)] for i in range(options.batch_size)]
    with stages.stage(f"padded batch of {len(batch)}"):
        suite.padded_batch(batch, steps=min(options.steps, 8))
    with stages.stage("free-running greedy"):
        suite.free_running_greedy(batch, options.steps)
    with stages.stage("golden vectors"):
        for comparison in check_golden(loaded).comparisons:
            suite.report.add(comparison)
        if generation.layout != loaded.layout:
            for comparison in check_golden(generation).comparisons:
                suite.report.add(replace(comparison, check=f"{comparison.check}, {generation.layout} layout"))
    return VerifyReport(
        folder=str(options.folder),
        source=source_spec + (f" (seed {seed})" if source_spec.startswith("random:") else ""),
        provider=next(iter(loaded.providers().values()))[0],
        precision=manifest.precision,
        tolerance=tolerance,
        parity=suite.report,
        files=files,
        environment=describe_environment(options.provider),
        timings=dict(stages.timings),
        generation_layout=generation.layout,
    )
