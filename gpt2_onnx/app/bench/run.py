"""Plan a benchmark from export folders: read their manifests, pick the eager baseline, run, summarize."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpt2_onnx.app.bench.environment import load_average, machine_info
from gpt2_onnx.app.bench.report import BenchReport, summarize
from gpt2_onnx.app.bench.runner import Progress, run_systems
from gpt2_onnx.app.bench.tasks import RawResults
from gpt2_onnx.app.dependencies import require_pytorch_side
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_core.config import RANDOM_PREFIX, RANDOM_WEIGHTS_SEED
from gpt2_onnx_core.errors import InvalidInputError, OptionError
from gpt2_onnx_core.manifest import Manifest, read_manifest
from gpt2_onnx_core.perplexity import PerplexityRequest
from gpt2_onnx_core.precisions import precision_named
from gpt2_onnx_runtimes.prompt_kernel import prompt_kernel_applies

__all__ = ["bench_exports", "measure", "system_specs"]


def _labels(folders: Sequence[Path]) -> list[str]:
    names = [folder.name or str(folder) for folder in folders]
    return names if len(set(names)) == len(names) else [str(folder) for folder in folders]


def _baseline(manifest: Manifest, folder: Path, model: str | None, model_seed: int | None) -> SystemSpec:
    source = model or manifest.model.get("source")
    if not source:
        raise InvalidInputError(f"{folder}'s manifest names no source model; pass --model for the eager baseline")
    if model_seed is not None and not str(source).startswith(RANDOM_PREFIX):
        raise OptionError(
            f"{{model_seed}} seeds a random:NAME baseline only; the baseline '{source}' brings its own weights",
            "model_seed",
        )
    chosen_seed = model_seed if model_seed is not None else manifest.model.get("seed")
    return SystemSpec(
        "eager",
        "pytorch-eager",
        model=str(source),
        seed=RANDOM_WEIGHTS_SEED if chosen_seed is None else int(chosen_seed),
    )


def _check_unshared(manifests: Sequence[Manifest], settings: BenchSettings) -> None:
    """``unshared`` adds each float32 folder loaded by ONNX Runtime itself: refused where it would add nothing."""
    if settings.provider != "cpu":
        raise OptionError("{unshared} applies on the CPU only (CUDA sessions copy their weights anyway)", "unshared")
    if not any(precision_named(manifest.precision).float32 for manifest in manifests):
        raise OptionError("{unshared} measures fp32 folders again, and none is fp32 (the others prepack)", "unshared")


def system_specs(
    folders: Sequence[Path],
    manifests: Sequence[Manifest],
    eager: bool,
    model: str | None,
    model_seed: int | None,
    unshared: bool = False,
    int8_kv: bool = False,
    prompt_dynamic: bool = False,
) -> list[SystemSpec]:
    """The eager baseline (the first folder's source unless ``model`` is given), then each folder; with
    ``unshared`` each float32 folder again in the split layout, with ``int8_kv`` each folder again over an int8 KV
    cache, with ``prompt_dynamic`` each int8 or int4 folder with MatMulNBits projections again with its prompts
    through DynamicQuantizeMatMul."""
    specs = [
        SystemSpec("onnx", label, folder=str(folder)) for label, folder in zip(_labels(folders), folders, strict=True)
    ]
    if unshared:  # each float32 folder again as its two graphs, loaded by ONNX Runtime itself (prepacked per session)
        specs += [
            SystemSpec("onnx", f"{spec.label}+split", folder=spec.folder, layout="split", share_weights=False)
            for spec, manifest in zip(specs, manifests, strict=True)
            if precision_named(manifest.precision).float32
        ]
    if int8_kv:  # each folder again, its KV cache int8 (the merged layout writes it in place)
        specs += [
            SystemSpec("onnx", f"{label}+kv-int8", folder=str(folder), layout="merged", kv_cache="int8")
            for label, folder in zip(_labels(folders), folders, strict=True)
        ]
    if prompt_dynamic:  # each block-quantized folder again, its prompts through DynamicQuantizeMatMul
        specs += [
            SystemSpec("onnx", f"{label}+prompt-dynamic", folder=str(folder), layout="merged", prompt_kernel="dynamic")
            for label, folder, manifest in zip(_labels(folders), folders, manifests, strict=True)
            if prompt_kernel_applies(manifest)
        ]
    if not eager:
        return specs
    return [_baseline(manifests[0], folders[0], model, model_seed), *specs]


def _check_comparable(folders: Sequence[Path], manifests: Sequence[Manifest], settings: BenchSettings) -> None:
    first = manifests[0]
    for folder, manifest in zip(folders, manifests, strict=True):
        if manifest.dims != first.dims:
            raise InvalidInputError(f"{folder} has other model dimensions than {folders[0]}; bench compares one model")
        if settings.longest_sequence() > manifest.dims.n_positions:
            raise InvalidInputError(
                f"the bench needs {settings.longest_sequence()} positions but {folder}'s model has "
                f"{manifest.dims.n_positions}; use shorter prompts or fewer new tokens"
            )


def bench_exports(
    folders: Sequence[Path],
    settings: BenchSettings,
    *,
    eager: bool = True,
    model: str | None = None,
    model_seed: int | None = None,
    unshared: bool = False,
    int8_kv: bool = False,
    prompt_dynamic: bool = False,
    progress: Progress | None = None,
    perplexity: PerplexityRequest | None = None,
) -> BenchReport:
    """Measure each export folder (and PyTorch eager on the source checkpoint unless ``eager`` is False); with
    ``perplexity``, each system's perplexity of that text too, once the timed rounds are over."""
    if not folders:
        raise InvalidInputError("bench needs at least one export folder")
    manifests = [read_manifest(Path(folder)) for folder in folders]
    _check_comparable(folders, manifests, settings)
    if unshared:
        _check_unshared(manifests, settings)
    if eager:
        require_pytorch_side("the PyTorch eager baseline (leave it out with --no-eager)")
    if int8_kv and settings.provider != "cpu":
        raise OptionError(
            "{int8_kv} applies on the CPU only (the int8 cache is written in place in host memory)", "int8_kv"
        )
    if prompt_dynamic and settings.provider != "cpu":
        raise OptionError("{prompt_dynamic} applies on the CPU only (DynamicQuantizeMatMul)", "prompt_dynamic")
    if prompt_dynamic and not any(prompt_kernel_applies(manifest) for manifest in manifests):
        raise OptionError(
            "{prompt_dynamic} needs an int8 or int4 folder with MatMulNBits projections", "prompt_dynamic"
        )
    specs = system_specs(folders, manifests, eager, model, model_seed, unshared, int8_kv, prompt_dynamic)
    if perplexity is None:
        return measure(specs, settings, manifests[0], progress)[0]
    # ONNX Runtime in this process only where perplexity is asked for
    from gpt2_onnx.app.bench import perplexity as bench_perplexity

    exports = bench_perplexity.open_exports(folders, manifests)  # each folder once, before any model loads
    text = bench_perplexity.read_text_for(perplexity, exports[str(folders[0])])
    report = measure(specs, settings, manifests[0], progress)[0]
    found = bench_perplexity.measure_perplexity(specs, settings, text, exports)
    return bench_perplexity.add_perplexity(report, text, found)


def measure(
    specs: Sequence[SystemSpec], settings: BenchSettings, manifest: Manifest, progress: Progress | None = None
) -> tuple[BenchReport, list[RawResults]]:
    """Run ``specs`` (the baseline first, if any) on the model ``manifest`` describes, with the machine and its load
    before and after; the report, and the raw answers for figures the report does not make."""
    machine = machine_info(settings.provider)
    raws = run_systems(specs, settings, manifest.dims.vocab_size, progress)
    machine["load_average_after"] = load_average()
    parameter_bytes = int(manifest.model.get("parameter_bytes") or manifest.files[manifest.weights_file].size)
    return summarize(raws, settings, machine, parameter_bytes), raws
