"""``gpt2-onnx export``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpt2_onnx.app.dependencies import require_pytorch_side
from gpt2_onnx.app.output_folder import check_output_path
from gpt2_onnx.cli.display import StageDisplay, megabytes
from gpt2_onnx.cli.options import field_defaults, verbose_option
from gpt2_onnx_core.config import RANDOM_WEIGHTS_SEED, SUPPORTED_OPSETS, ExportOptions
from gpt2_onnx_core.interrupts import ignore_interrupts
from gpt2_onnx_core.precisions import MATMUL_KERNELS, PRECISIONS, MatMulKernel

if TYPE_CHECKING:
    from gpt2_onnx.app.export import ExportResult

__all__ = ["export"]

_DEFAULTS = field_defaults(ExportOptions)
# Each quantized precision's own block size, from the precision table: "int8 128, int4 32".
_BLOCK_SIZES = ", ".join(
    f"{precision.flag} {precision.quantization.block_size}" for precision in PRECISIONS if precision.quantization
)


@click.command()
@click.option(
    "-m",
    "--model",
    default=_DEFAULTS["model"],
    show_default=True,
    help="Local folder, Hugging Face Hub id, or random:NAME "
    "(gpt2, gpt2-medium, gpt2-large, gpt2-xl, distilgpt2, tiny).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=_DEFAULTS["output"],
    show_default=True,
    help="Export folder to create.",
)
@click.option(
    "--opset",
    type=int,
    default=_DEFAULTS["opset"],
    show_default=True,
    help=f"ONNX opset ({SUPPORTED_OPSETS.start}..{SUPPORTED_OPSETS.stop - 1}).",
)
@click.option(
    "--weights-seed",
    "seed",
    type=int,
    default=None,
    help=f"Seed of random:NAME weights (default {RANDOM_WEIGHTS_SEED}); a checkpoint has its own.",
)
@click.option(
    "--tokenizer",
    default=None,
    help="Tokenizer source if not the model's: folder, hub id, or packaged:gpt2 (offline GPT-2 BPE).",
)
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit) of a hub id.")
@click.option(
    "--all-logits",
    is_flag=True,
    help="Prefill returns logits for every position (scoring), not only the last.",
)
@click.option(
    "--simplify",
    is_flag=True,
    help="Run onnxsim on both graphs (the tie and the shared weights file are kept).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an earlier export in the output folder (a folder holding a gpt2-onnx export and nothing else), "
    "once the new export is complete and checked.",
)
@click.option(
    "--optimize",
    is_flag=True,
    help="Fuse for ONNX Runtime: SkipLayerNormalization, MultiHeadAttention (onnxscript's ort_fusions); "
    "measured slower on the CPU provider (see benchmarks/), meant for CUDA.",
)
@click.option(
    "--precision",
    type=click.Choice([precision.flag for precision in PRECISIONS]),
    default=_DEFAULTS["precision"],
    show_default=True,
    help="Weights and compute: " + "; ".join(f"{precision.flag}, {precision.help}" for precision in PRECISIONS) + ".",
)
@click.option(
    "--block-size",
    type=int,
    default=None,
    help=f"int8/int4: weights per quantization scale (default: {_BLOCK_SIZES}; larger is faster, coarser).",
)
@click.option(
    "--accuracy-level",
    type=int,
    default=None,
    help="int8/int4: MatMulNBits' accuracy_level, 0..4 (default 4: int8 activations, VNNI kernels; 0/1: float32 "
    "activations; 2 fp16 and 3 bf16 fall back to 1 on CPUs without such kernels).",
)
@click.option(
    "--matmul-kernel",
    type=click.Choice(list(MATMUL_KERNELS)),
    default=None,
    help="int8/int4: what multiplies the blocks' matrices: matmulnbits (MatMulNBits over the weight blocks; the "
    "default) or dynamic (int8 only: int8 weights per output column, activations quantized per tensor at run time by "
    "DynamicQuantizeMatMul; faster prompts, slower decode steps on the CPU).",
)
@click.option("--no-check", is_flag=True, help="Skip the parity check against the source model (not recommended).")
@verbose_option
def export(
    model: str,
    output: Path,
    opset: int,
    seed: int | None,
    tokenizer: str | None,
    revision: str | None,
    all_logits: bool,
    simplify: bool,
    force: bool,
    optimize: bool,
    precision: str,
    block_size: int | None,
    accuracy_level: int | None,
    matmul_kernel: MatMulKernel | None,
    no_check: bool,
) -> None:
    """Export a GPT-2 checkpoint to prefill.onnx + decode.onnx sharing one weights file.

    \b
    Examples:
      gpt2-onnx export --opset 17 -o gpt2-onnx-out                 # openai-community/gpt2 from the Hub
      gpt2-onnx export --model ./my-finetuned-gpt2 -o out
      gpt2-onnx export --model random:gpt2 --weights-seed 0 -o out  # offline
      gpt2-onnx export --model random:gpt2 --precision int4 -o out-int4
    """
    output = output.expanduser()  # '~' quoted past the shell still means the home folder, never a folder named '~'
    options = ExportOptions(
        model=model,
        output=output,
        opset=opset,
        seed=seed,
        tokenizer=tokenizer,
        revision=revision,
        all_logits=all_logits,
        simplify=simplify,
        force=force,
        check=not no_check,
        optimize=optimize,
        precision=precision,
        block_size=block_size,
        accuracy_level=accuracy_level,
        matmul_kernel=matmul_kernel,
    )
    check_output_path(output, force)  # one line, before the model loads (export_model checks it again)
    require_pytorch_side("export")  # before the application layer's import, which needs it
    from gpt2_onnx.app.export import export_model

    click.echo(f"Exporting {model} to {output} (opset {opset})", err=True)
    display = StageDisplay()
    try:
        result = export_model(options, display)
    finally:
        display.close_line()
    interrupted = result.interrupted_after_commit
    try:
        _print_result(result)
    except KeyboardInterrupt:  # the export is on disk, complete: say so rather than "Interrupted."
        interrupted = True
    if interrupted:
        ignore_interrupts()  # the command is done and its status (0) set: nothing may change it now
        click.echo(
            f"Interrupted after the export was complete: {result.folder} is written and checked, and kept.", err=True
        )


def _print_result(result: ExportResult) -> None:
    manifest = result.manifest
    weights = manifest.files[manifest.weights_file].size
    click.echo(
        f"Wrote {result.folder}: {', '.join(r.file for r in manifest.graphs.values())} + {manifest.weights_file} "
        f"({megabytes(weights)}; graphs and weights {megabytes(manifest.graph_and_weight_bytes)}, "
        f"{manifest.graph_and_weight_bytes / manifest.model['parameter_bytes']:.4f}× the source model's parameter "
        "bytes)"
    )
    if result.report is not None:
        click.echo(f"Parity with the source model: {result.report.summary()}")
