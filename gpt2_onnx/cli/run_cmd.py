"""``gpt2-onnx run``: generate text from an export folder with ONNX Runtime."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from gpt2_onnx.cli.options import provider_option
from gpt2_onnx.errors import InvalidInputError

if TYPE_CHECKING:
    from runtimes.api import Gpt2Onnx
    from runtimes.generation import GenerationOptions, GenerationResult
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


def _summary(result: GenerationResult) -> str:
    t = result.timings
    return (
        f"[{len(result.token_ids)} tokens, {result.finish_reason}; prefill {t['prefill_ms']:.1f} ms, "
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
    click.echo(_summary(stream.result), err=True)


@click.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.option(
    "-p",
    "--prompt",
    multiple=True,
    help="Prompt text (repeatable). Without -p or --prompts, stdin is the prompt.",
)
@click.option("--prompts", "prompts_file", default=None, help="File with one prompt per line ('-' for stdin).")
@click.option("-n", "--max-new-tokens", type=int, default=50, show_default=True)
@click.option("--sample", is_flag=True, help="Sample instead of greedy decoding (transformers' do_sample).")
@click.option("--temperature", type=float, default=1.0, show_default=True)
@click.option("--top-k", type=int, default=0, show_default=True, help="Keep the k most likely tokens (0: all).")
@click.option("--top-p", type=float, default=1.0, show_default=True, help="Nucleus sampling mass, in (0, 1].")
@click.option("--repetition-penalty", type=float, default=1.0, show_default=True)
@click.option("--seed", type=int, default=None, help="Seed for sampling: same seed, same text.")
@click.option("--stop", multiple=True, help="Stop when this text appears (repeatable); it is left out of the output.")
@click.option("--ignore-eos", is_flag=True, help="Keep generating past the end-of-text token.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Prompts generated together (left-padded).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per prompt and line.")
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
    max_new_tokens: int,
    sample: bool,
    temperature: float,
    top_k: int,
    top_p: float,
    repetition_penalty: float,
    seed: int | None,
    stop: tuple[str, ...],
    ignore_eos: bool,
    batch_size: int,
    as_json: bool,
    provider: str,
    threads: int | None,
    no_stream: bool,
    prepack_weights: bool,
) -> None:
    """Generate text from an export FOLDER with ONNX Runtime.

    \b
    Examples:
      gpt2-onnx run out -p "The meaning of life is" --max-new-tokens 40
      gpt2-onnx run out -p "Hello" --provider cuda --sample --temperature 0.8 --top-p 0.95 --seed 7
      gpt2-onnx run out --prompts prompts.txt --batch-size 8 --json > results.jsonl
      echo "Once upon a time" | gpt2-onnx run out
    """
    from runtimes.api import Gpt2Onnx
    from runtimes.generation import GenerationOptions
    from runtimes.session import RuntimeOptions

    options = GenerationOptions(
        max_new_tokens=max_new_tokens,
        do_sample=sample,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        repetition_penalty=repetition_penalty,
        seed=seed,
        stop=stop,
        ignore_eos=ignore_eos,
    )
    prompts = _read_prompts(prompt, prompts_file)
    for index, text in enumerate(prompts):
        if not text.strip():
            raise InvalidInputError(f"prompt {index} is empty")
    chosen = cast("ProviderName", provider)  # click.Choice admits only these names
    runtime = RuntimeOptions(provider=chosen, intra_op_threads=threads, share_weights=not prepack_weights)
    model = Gpt2Onnx.load(folder, options=runtime)
    stream = not (as_json or no_stream or batch_size > 1)
    for batch in _batches(prompts, batch_size):
        if stream:
            _stream_one(model, batch[0], options)
            continue
        for result in model.generate(batch, options):
            if as_json:
                click.echo(json.dumps(result.to_json(), ensure_ascii=False))
            else:
                click.echo(f"{result.prompt}{result.text}")
                click.echo(_summary(result), err=True)
