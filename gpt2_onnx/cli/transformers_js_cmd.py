"""``gpt2-onnx transformers-js``."""

from __future__ import annotations

from pathlib import Path

import click

from gpt2_onnx.cli.options import verbose_option

__all__ = ["transformers_js"]


@click.command("transformers-js")
@click.argument("exports", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Folder to create.")
@click.option("--force", is_flag=True, help="Replace an earlier folder at --output.")
@verbose_option
def transformers_js(exports: tuple[Path, ...], output: Path, force: bool) -> None:
    """Make a folder transformers.js loads (config.json, tokenizer files, generation_config.json, onnx/) from
    exports of one model, one per precision: fp32 -> onnx/model.onnx, fp16 -> model_fp16, int8 -> model_quantized
    (dtype q8), int4 -> model_q4, each with its .onnx_data. The first export's precision is the default dtype.

    \b
    Examples:
      gpt2-onnx transformers-js out-fp32 out-int4 -o gpt2-transformers-js
      # then, in JavaScript: AutoModelForCausalLM.from_pretrained('gpt2-transformers-js', {dtype: 'q4'})
    """
    from gpt2_onnx.app.transformers_js import transformers_js_folder

    made = transformers_js_folder(list(exports), output, force)
    for dtype, path in made.dtypes.items():
        click.echo(f"{dtype}: {made.folder / path}")
    click.echo(f"Wrote {made.folder}")
