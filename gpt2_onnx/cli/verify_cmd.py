"""``gpt2-onnx verify``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpt2_onnx.cli.options import provider_option, verbose_option
from gpt2_onnx.dependencies import require_pytorch_side
from gpt2_onnx.errors import ParityError
from gpt2_onnx.manifest import read_manifest
from gpt2_onnx.wording import plural

__all__ = ["verify"]


@click.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.option(
    "-m", "--model", default=None, help="Source model (folder, hub id, random:NAME); default: the manifest's."
)
@provider_option("ONNX Runtime execution provider for the export (the source model runs on the CPU).")
@click.option("--steps", type=click.IntRange(min=1), default=32, show_default=True, help="Decode steps compared.")
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=4, show_default=True, help="Rows of the padded batch."
)
@click.option("--threads", type=click.IntRange(min=0), default=None, help="ONNX Runtime intra-op threads.")
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the report as JSON ('-': stdout).",
)
@verbose_option
def verify(
    folder: Path,
    model: str | None,
    provider: str,
    steps: int,
    batch_size: int,
    threads: int | None,
    json_path: Path | None,
) -> None:
    """Measure an export's parity with its source model and fail if a tolerance is exceeded.

    First checks that every file is present with its size and sha256, and that the source model has the export's
    dimensions. Then compares prefill (logits, every present), decode chained over --steps steps (teacher-forced
    and free-running greedy), several past lengths up to the model's limit, a left-padded batch and the golden
    vectors. All checks run; the command then fails once, listing every failure with its figures.

    \b
    Examples:
      gpt2-onnx verify out
      gpt2-onnx verify out --model ./ckpt --provider cuda --steps 64 --batch-size 4 --json report.json
    """
    from gpt2_onnx.cli.export_cmd import StageDisplay
    from gpt2_onnx.report_table import render_report
    from gpt2_onnx.verify_report import VerifyOptions

    read_manifest(folder)  # a folder that is no export is refused before anything else
    require_pytorch_side("verify (it runs the source model)")  # before the application layer's import
    from gpt2_onnx.app.verify import verify_export

    display = StageDisplay()
    click.echo(f"Verifying {folder}", err=True)
    try:
        report = verify_export(VerifyOptions(folder, model, provider, steps, batch_size, threads), display)
    finally:
        display.close_line()
    as_json = json.dumps(report.to_json(), indent=2)
    to_stdout = json_path is not None and str(json_path) == "-"
    if to_stdout:
        click.echo(as_json)
    else:
        if json_path is not None:
            json_path.write_text(as_json + "\n", encoding="utf-8")
        click.echo(render_report(report))
    if not report.ok:
        where = "in the JSON report's failures" if to_stdout else "above"
        raise ParityError(f"verify failed: {plural(len(report.failures()), 'failure')}, listed {where}")
    click.echo(
        f"PASS: {plural(len(report.parity.comparisons), 'comparison')} within tolerance, all files intact", err=True
    )
