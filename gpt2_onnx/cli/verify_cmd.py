"""``gpt2-onnx verify``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpt2_onnx.app.dependencies import require_pytorch_side
from gpt2_onnx.app.verify_report import VerifyOptions
from gpt2_onnx.cli.display import StageDisplay, echo_json
from gpt2_onnx.cli.options import (
    field_defaults,
    help_with,
    json_option,
    kv_cache_option,
    perplexity_options,
    prompt_kernel_option,
    provider_option,
    refuse_window_without_text,
    threads_option,
    verbose_option,
)
from gpt2_onnx_core.errors import OutputPathError, ParityError
from gpt2_onnx_core.layouts import KvCacheFormat, PromptKernel
from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.precisions import PRECISIONS
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_core.wording import plural

__all__ = ["verify"]

_DEFAULTS = field_defaults(VerifyOptions)  # each option's default is the report options' own


def _perplexity_limits() -> str:
    """Each precision's perplexity limit, as the help states them: "fp32 0.01 %, fp16 1 %, ..."."""
    limits = ((precision.flag, precision.perplexity.max_relative) for precision in PRECISIONS)
    return ", ".join(f"{flag} {limit * 100:g} %" for flag, limit in limits if limit is not None)


@click.command()
@help_with(perplexity_limits=_perplexity_limits())
@click.argument("folder", type=click.Path(path_type=Path))
@click.option(
    "-m", "--model", default=None, help="Source model (folder, hub id, random:NAME); default: the manifest's."
)
@provider_option("ONNX Runtime execution provider for the export (the source model runs on the CPU).")
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=_DEFAULTS["steps"],
    show_default=True,
    help="Decode steps compared.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=_DEFAULTS["batch_size"],
    show_default=True,
    help="Rows of the padded batch.",
)
@threads_option("each ONNX Runtime session")
@json_option(
    "Print the report as JSON on stdout instead of the table (versions, provider, hardware, the manifest's hashes, "
    "every comparison)."
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the JSON report to this file, whatever the verdict (--json prints it on stdout).",
)
@kv_cache_option(
    "int8: also check generation over an int8 KV cache (run/serve --kv-cache int8), judged by the precision's "
    "limits plus the cache's; with --perplexity, the export's perplexity is scored through it."
)
@prompt_kernel_option(
    "dynamic: also check the export with its prompts through DynamicQuantizeMatMul (run/serve --prompt-kernel "
    "dynamic; int8 and int4 exports): the graphs' runs, the generation batch and greedy run, judged by the "
    "precision's limits; with --kv-cache int8 the cache's checks, and with --perplexity the score, run through it."
)
@perplexity_options("the source model and the export")
@verbose_option
@click.pass_context
def verify(
    ctx: click.Context,
    folder: Path,
    model: str | None,
    provider: ProviderName,
    steps: int,
    batch_size: int,
    threads: int | None,
    as_json: bool,
    report_path: Path | None,
    perplexity: Path | None,
    perplexity_window: int | None,
    perplexity_stride: int | None,
    kv_cache: KvCacheFormat,
    prompt_kernel: PromptKernel,
) -> None:
    """Measure an export's parity with its source model and fail if a tolerance is exceeded.

    First checks that every file is present with its size and sha256, and that the source model has the export's
    dimensions. Then compares prefill (logits, every present), decode chained over --steps steps (teacher-forced
    and free-running greedy), several past lengths up to the model's limit, a left-padded batch and the golden
    vectors. All checks run; the command then fails once, listing every failure with its figures.

    With --perplexity, both models also score the same sliding windows of a text (Hugging Face's perplexity
    recipe): both perplexities and their difference are reported, and a relative change beyond the precision's
    limit ({perplexity_limits}) fails verify like any other check.

    \b
    Examples:
      gpt2-onnx verify out
      gpt2-onnx verify out --model ./ckpt --provider cuda --steps 64 --batch-size 4 --report report.json
      gpt2-onnx verify out --json > report.json
      gpt2-onnx verify out --perplexity heldout.txt --perplexity-window 512 --perplexity-stride 256
      gpt2-onnx verify out --kv-cache int8 --perplexity heldout.txt
      gpt2-onnx verify out-int4 --prompt-kernel dynamic
    """
    from gpt2_onnx.app.report_table import render_report

    read_manifest(folder)  # a folder that is no export is refused before anything else
    refuse_window_without_text(ctx, perplexity)
    if report_path is not None:
        _check_report_path(report_path)  # before minutes of work
    require_pytorch_side("verify (it runs the source model)")  # before the application layer's import
    from gpt2_onnx.app.verify import check_before_loading, verify_export

    options = VerifyOptions(
        folder,
        model,
        provider,
        steps,
        batch_size,
        threads,
        perplexity,
        perplexity_window,
        perplexity_stride,
        kv_cache,
        prompt_kernel,
    )
    check_before_loading(options)  # one line, before the source model loads
    display = StageDisplay()
    click.echo(f"Verifying {folder}", err=True)
    try:
        report = verify_export(options, display)
    finally:
        display.close_line()
    if report_path is not None:
        _write_report(report_path, report.to_json())
    if as_json:
        echo_json(report.to_json())
    else:
        click.echo(render_report(report))
    if not report.ok:
        where = "in the JSON report's failures" if as_json else "above"
        raise ParityError(f"verify failed: {plural(len(report.failures()), 'failure')}, listed {where}")
    perplexity_note = "" if report.perplexity is None else ", perplexity within its limit"
    click.echo(
        f"PASS: {plural(len(report.parity.comparisons), 'comparison')} within tolerance, all files intact"
        f"{perplexity_note}",
        err=True,
    )


def _check_report_path(path: Path) -> None:
    if str(path) == "-":
        raise OutputPathError("--report takes a file name; --json prints the report on stdout")
    if not path.parent.is_dir():
        raise OutputPathError(f"cannot write the report to '{path}': the folder '{path.parent}' does not exist")


def _write_report(path: Path, data: object) -> None:
    try:
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise OutputPathError(f"cannot write the report to '{path}': {exc.strerror or exc}") from exc
