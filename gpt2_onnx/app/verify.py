"""``gpt2-onnx verify``: the full parity suite plus file integrity and golden vectors, as a report to ship.

Every check runs; the report then lists every failure with its figures. It records what was compared, the
tolerances and their basis, versions, provider, hardware and the manifest's hashes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from gpt2_onnx.app.environment import describe_environment
from gpt2_onnx.app.parity_suite import ParitySuite
from gpt2_onnx.app.perplexity import compare_perplexity, read_for_export
from gpt2_onnx.app.verify_report import VerifyOptions, VerifyReport, check_dimensions, check_files
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.integrity import IntegrityCheck
from gpt2_onnx_core.manifest import Manifest, read_manifest
from gpt2_onnx_core.parity import ParityReport
from gpt2_onnx_core.perplexity import PerplexityText
from gpt2_onnx_core.precisions import tolerance_for, with_int8_kv_cache
from gpt2_onnx_core.progress import StageReporter, Stages
from gpt2_onnx_core.prompts import check_prompt_ids
from gpt2_onnx_core.wording import plural
from gpt2_onnx_exporters.reference import ReferenceModel
from gpt2_onnx_exporters.source import load_source
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.golden_check import check_golden
from gpt2_onnx_runtimes.prompt_kernel import check_prompt_kernel
from gpt2_onnx_runtimes.providers import ensure_provider_loadable
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["verify_export"]


def _source_spec(manifest: Manifest, override: str | None) -> tuple[str, int]:
    source = override or str(manifest.model.get("source") or "")
    seed = manifest.model.get("seed")
    return source, int(seed) if isinstance(seed, int) else 0


def _perplexity_text(options: VerifyOptions, export: ExportFolder) -> PerplexityText | None:
    """--perplexity's text read, tokenized and windowed: every error in it before any model loads."""
    if options.perplexity is None:
        return None
    return read_for_export(options.perplexity, export, options.perplexity_window, options.perplexity_stride)


def _golden(suite: ParitySuite, loaded: LoadedExport, generation: LoadedExport) -> None:
    for comparison in check_golden(loaded).comparisons:
        suite.report.add(comparison)
    if generation.layout != loaded.layout:
        for comparison in check_golden(generation).comparisons:
            suite.report.add(replace(comparison, check=f"{comparison.check}, {generation.layout} layout"))


def _named_checks(suite: ParitySuite, suffix: str, run: Callable[[], None]) -> None:
    """Run ``run`` (checks of ``suite``), naming each comparison it adds with ``suffix`` so that the report tells
    them from the float32 cache's and the export kernel's."""
    before = len(suite.report.comparisons)
    run()
    for index in range(before, len(suite.report.comparisons)):
        comparison = suite.report.comparisons[index]
        suite.report.comparisons[index] = replace(comparison, check=f"{comparison.check}, {suffix}")


def _int8_cache_checks(suite: ParitySuite, batch: Sequence[Sequence[int]], steps: int) -> None:
    """Generation over the int8 KV cache: the padded batch's steps through the cache runner, then free-running
    greedy."""

    def run() -> None:
        suite.generation_batch(batch, steps=min(steps, 8))
        suite.free_running_greedy(batch, steps)

    _named_checks(suite, "int8 KV cache", run)


def _prompt_kernel_checks(suite: ParitySuite, main: Sequence[int], batch: Sequence[Sequence[int]], steps: int) -> None:
    """The export's prompts through the prompt kernel: the folder's graphs run through it (prefill and decode
    chained, decode from an empty past), then the generation batch and the free-running greedy run, whose prompts
    the prompt session runs and whose steps the export's own kernel does."""

    def run() -> None:
        suite.prefill_and_decode_chain(main, steps)
        suite.decode_with_empty_past(main)
        suite.generation_batch(batch, steps=min(steps, 8))
        suite.free_running_greedy(batch, steps)

    _named_checks(suite, "prompt kernel dynamic", run)


def check_before_loading(options: VerifyOptions) -> None:
    """What can be refused before any model loads: the provider (loading the source model takes seconds), an
    int8 KV cache or the prompt kernel anywhere but on the CPU, and the prompt kernel for an export without
    blocks."""
    ensure_provider_loadable(options.provider)
    if options.kv_cache != "float32" and options.provider != "cpu":
        raise InvalidInputError(f"--kv-cache {options.kv_cache} runs on the CPU provider only, not {options.provider}")
    if options.prompt_kernel != "export":
        if options.provider != "cpu":
            raise InvalidInputError(
                f"--prompt-kernel {options.prompt_kernel} runs on the CPU provider only, not {options.provider}"
            )
        check_prompt_kernel(read_manifest(options.folder), options.prompt_kernel)


def verify_export(options: VerifyOptions, report: StageReporter | None = None) -> VerifyReport:
    """Run every check of an export folder against its source model; never stops at the first failure."""
    check_before_loading(options)
    manifest = read_manifest(options.folder)
    stages = Stages(report)
    with stages.stage("check files"):
        files = check_files(options.folder, manifest)  # presence and size (else refused), then sha256 (reported)
    # The folder opened once, for the tokenizer and both sessions (its files' hashes are in ``files``).
    export = ExportFolder.checked(options.folder, manifest, IntegrityCheck(sha256=False))
    text = _perplexity_text(options, export)
    source_spec, seed = _source_spec(manifest, options.model)
    with stages.stage("load source model"):
        source = load_source(source_spec, seed=seed, revision=manifest.model.get("revision"))
    check_dimensions(source.dims, manifest.dims, source_spec)
    with stages.stage("load export"):
        runtime = RuntimeOptions(provider=options.provider, intra_op_threads=options.threads)
        # The folder's two graphs as shipped, and the layout generation runs (merged, where the runtime has it).
        loaded = LoadedExport.open(export, replace(runtime, layout="split"))
        generation = LoadedExport.open(export, runtime)
    tolerance = tolerance_for(manifest.precision)
    reference = ReferenceModel(source.model)
    suite = ParitySuite(loaded, reference, tolerance, ParityReport(), generation)
    longest = manifest.dims.n_positions - options.steps - 1
    prompts = check_prompt_ids(export.tokenizer.encode, longest)
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
        _golden(suite, loaded, generation)
    scored = loaded
    if options.prompt_kernel != "export":
        with stages.stage(f"prompt kernel {options.prompt_kernel}"):
            scored = LoadedExport.open(export, replace(runtime, layout="merged", prompt_kernel=options.prompt_kernel))
            _prompt_kernel_checks(
                ParitySuite(scored, reference, tolerance, suite.report, scored), main, batch, options.steps
            )
    if options.kv_cache == "int8":
        with stages.stage("int8 KV cache"):
            cached = replace(runtime, layout="merged", kv_cache="int8", prompt_kernel=options.prompt_kernel)
            scored = LoadedExport.open(export, cached)
            cache = ParitySuite(loaded, reference, with_int8_kv_cache(tolerance), suite.report, scored)
            _int8_cache_checks(cache, batch, options.steps)
    perplexity = None
    if text is not None:
        with stages.stage(f"perplexity over {plural(len(text.plan.windows), 'window')}"):
            perplexity = compare_perplexity(source.model, scored, text)
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
        kv_cache=options.kv_cache,
        prompt_kernel=options.prompt_kernel,
        perplexity=perplexity,
    )
