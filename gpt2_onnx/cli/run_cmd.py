"""``gpt2-onnx run``: generate text from an export folder with ONNX Runtime."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from gpt2_onnx.cli.generation_flags import FLAGS, generation_flags, given_options, refuse_unread_flags
from gpt2_onnx.cli.options import provider_option
from gpt2_onnx.errors import InvalidInputError

if TYPE_CHECKING:
    from runtimes.api import Gpt2Onnx
    from runtimes.generation import GenerationOptions, GenerationResult
    from runtimes.generation_defaults import ResolvedOptions
    from runtimes.providers import ProviderName

__all__ = ["run"]


def _read_prompts(prompt: tuple[str, ...], prompts_file: str | None) -> list[str]:
    if prompt and prompts_file:
        raise InvalidInputError("give prompts with -p or with --prompts, not both")
    if prompt:
        return list(prompt)
    if prompts_file is not None:
        try:
            text = sys.stdin.read() if prompts_file == "-" else Path(prompts_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(
                f"cannot read prompts file '{prompts_file}': {getattr(exc, 'strerror', None) or exc}"
            ) from exc
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            raise InvalidInputError(f"prompts file '{prompts_file}' holds no prompt")
        return lines
    if sys.stdin.isatty():
        raise InvalidInputError("no prompt: pass -p TEXT, --prompts FILE, or pipe text into stdin")
    text = sys.stdin.read().rstrip("\n")
    return [text]


def _batches(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _summary(result: GenerationResult, several: bool) -> str:
    t = result.timings
    rank = f"sequence {result.sequence}, score {result.score:.4f}; " if several else ""
    return (
        f"[{rank}{len(result.token_ids)} tokens, {result.finish_reason}; prefill {t['prefill_ms']:.1f} ms, "
        f"decode {t['decode_ms_per_token']:.1f} ms/token]"
    )


def _stream_one(model: Gpt2Onnx, prompt: str, options: GenerationOptions) -> None:
    """Print the prompt, then the continuation chunk by chunk; an interrupt leaves what was printed, flushed."""
    stream = model.stream(prompt, options)  # validates before anything is printed
    click.echo(prompt, nl=False)
    try:
        for chunk in stream:
            click.echo(chunk, nl=False)
            sys.stdout.flush()
    finally:
        click.echo("")
        sys.stdout.flush()
    click.echo(_summary(stream.result, several=False), err=True)


class _RunCommand(click.Command):
    """``run``, whose ``--help`` after a FOLDER also lists that export's generation defaults."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["run.args"] = list(args)  # --help is handled while parsing: keep what it may need
        return super().parse_args(ctx, args)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        folder = next((Path(a) for a in ctx.meta.get("run.args", []) if (Path(a) / "manifest.json").is_file()), None)
        if folder is None:
            return
        from runtimes.generation_defaults import CheckpointDefaults

        try:
            defaults = CheckpointDefaults.read(folder)
        except InvalidInputError as exc:
            formatter.write_paragraph()
            formatter.write_text(f"{folder}: {exc}")
            return
        formatter.write_paragraph()
        formatter.write_text(f"Defaults of {folder} (its generation_config.json): {_describe(defaults.values)}")
        for key, why in defaults.not_applied.items():
            formatter.write_text(f"  not applied: {key} {why}")


def _describe(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{FLAGS.get(name, name)} {value}" for name, value in values.items()) or "none"


def _resolve(model: Gpt2Onnx, given: dict[str, Any]) -> ResolvedOptions:
    """The options to run with: the checkpoint's defaults under the flags given; flags that the mode would not
    read are refused, and the checkpoint's values used or left out are stated on stderr."""
    defaults = model.checkpoint_defaults.values
    sampling = bool(given.get("do_sample", defaults.get("do_sample", False)))
    refuse_unread_flags(given, sampling, int(given.get("num_beams", defaults.get("num_beams", 1))))
    resolved = model.resolve_options(**given)
    used = {name: getattr(resolved.options, name) for name in resolved.from_checkpoint()}
    if used:
        click.echo(f"Using the checkpoint's generation defaults: {_describe(used)}", err=True)
    for name, why in {**resolved.unused, **resolved.not_applied}.items():
        click.echo(f"Note: the checkpoint's generation_config.json {name} is left out ({why})", err=True)
    return resolved


def _json_line(result: GenerationResult, resolved: ResolvedOptions) -> str:
    return json.dumps({**result.to_json(), **resolved.to_json()}, ensure_ascii=False)


@click.command(cls=_RunCommand)
@click.argument("folder", type=click.Path(path_type=Path))
@click.option(
    "-p",
    "--prompt",
    multiple=True,
    help="Prompt text (repeatable). Without -p or --prompts, stdin is the prompt.",
)
@click.option("--prompts", "prompts_file", default=None, help="File with one prompt per line ('-' for stdin).")
@generation_flags
@click.option("--stop", multiple=True, help="Stop when this text appears (repeatable); it is left out of the output.")
@click.option("--ignore-eos", is_flag=True, help="Keep generating past the end-of-text token.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Prompts generated together (left-padded).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object per returned sequence and line: index (the prompt), sequence (0.., best first), "
    "token_ids, text, score, token_logprobs, and the options used.",
)
@provider_option("ONNX Runtime execution provider; never silently replaced by another.")
@click.option(
    "--threads",
    type=click.IntRange(min=0),
    default=None,
    help="Intra-op threads (0 or unset: ONNX Runtime's default).",
)
@click.option("--no-stream", is_flag=True, help="Print each prompt's text when it is complete.")
@click.option(
    "--prepack-weights",
    is_flag=True,
    help="fp32 on the CPU: let ONNX Runtime prepack each session's weights instead of sharing one map of the file "
    "(faster, batched runs most; about 2.8× the weights in memory instead of 1.2×).",
)
def run(
    folder: Path,
    prompt: tuple[str, ...],
    prompts_file: str | None,
    stop: tuple[str, ...],
    ignore_eos: bool,
    batch_size: int,
    as_json: bool,
    provider: str,
    threads: int | None,
    no_stream: bool,
    prepack_weights: bool,
    **flags: Any,
) -> None:
    """Generate text from an export FOLDER with ONNX Runtime: greedy, sampled (--sample) or by beam search
    (--num-beams). An option left out takes the checkpoint's value (the export's generation_config.json), else
    the default shown; 'run FOLDER --help' lists that folder's.

    \b
    Examples:
      gpt2-onnx run out -p "The meaning of life is" --max-new-tokens 40
      gpt2-onnx run out -p "Hello" --provider cuda --sample --temperature 0.8 --top-p 0.95 --seed 7
      gpt2-onnx run out -p "Hello" --num-beams 4 --num-return-sequences 2 --no-repeat-ngram-size 2
      gpt2-onnx run out --prompts prompts.txt --batch-size 8 --json > results.jsonl
      echo "Once upon a time" | gpt2-onnx run out
    """
    from runtimes.api import Gpt2Onnx
    from runtimes.session import RuntimeOptions

    prompts = _read_prompts(prompt, prompts_file)
    for index, text in enumerate(prompts):
        if not text.strip():
            raise InvalidInputError(f"prompt {index} is empty")
    chosen = cast("ProviderName", provider)  # click.Choice admits only these names
    runtime = RuntimeOptions(provider=chosen, intra_op_threads=threads, share_weights=not prepack_weights)
    model = Gpt2Onnx.load(folder, options=runtime)
    given = given_options(flags, model.encode)
    given.update({"stop": stop} if stop else {})
    given.update({"ignore_eos": True} if ignore_eos else {})
    resolved = _resolve(model, given)
    options = resolved.options
    several = options.num_return_sequences > 1
    stream = not (as_json or no_stream or batch_size > 1 or several or options.num_beams > 1)
    offset = 0
    for batch in _batches(prompts, batch_size):
        if stream:
            _stream_one(model, batch[0], options)
            continue
        for result in model.generate(batch, options):
            result = replace(result, index=offset + result.index)
            if as_json:
                click.echo(_json_line(result, resolved))
            else:
                click.echo(f"{result.prompt}{result.text}")
                click.echo(_summary(result, several), err=True)
        offset += len(batch)
