"""``gpt2-onnx run``: generate text from an export folder with ONNX Runtime."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpt2_onnx.cli.display import echo_json
from gpt2_onnx.cli.integrity import fingerprint_options, integrity_option
from gpt2_onnx.cli.options import json_option, provider_option, refuse_given, threads_option, verbose_option
from gpt2_onnx.errors import InvalidInputError
from gpt2_onnx.manifest import Manifest, read_manifest
from gpt2_onnx.wording import plural

if TYPE_CHECKING:
    from gpt2_onnx.app.generate import GenerationOptions, GenerationResult, Gpt2Onnx

__all__ = ["run"]

FINISH_WORDS = {
    "eos": "stopped at the end-of-text token",
    "stop": "stopped at a stop string",
    "length": "stopped at the length limit (--max-new-tokens)",
}
REAL_CHECKPOINT_HINT = "gpt2-onnx export --model openai-community/gpt2 -o gpt2-onnx-out (needs the Hub or its cache)"


@dataclass(frozen=True)
class Prompt:
    text: str
    index: int  # 0-based, among all prompts
    line: int | None = None  # 1-based line of the --prompts file


def _read_prompt_file(prompts_file: str) -> list[Prompt]:
    try:
        text = sys.stdin.read() if prompts_file == "-" else Path(prompts_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(
            f"cannot read prompts file '{prompts_file}': {getattr(exc, 'strerror', None) or exc}"
        ) from exc
    lines = text.splitlines()
    blank = [number for number, line in enumerate(lines, start=1) if not line.strip()]
    if blank:  # never dropped silently: a blank line would shift every later result against the file
        where = ", ".join(map(str, blank[:5])) + (" …" if len(blank) > 5 else "")
        found = f"a blank line (line {where})" if len(blank) == 1 else f"blank lines (lines {where})"
        raise InvalidInputError(
            f"prompts file '{prompts_file}' has {found}; each line is one prompt: remove blank lines"
        )
    if not lines:
        raise InvalidInputError(f"prompts file '{prompts_file}' holds no prompt")
    return [Prompt(line, index, index + 1) for index, line in enumerate(lines)]


def _read_prompts(prompt: tuple[str, ...], prompts_file: str | None) -> list[Prompt]:
    if prompt and prompts_file:
        raise InvalidInputError("give prompts with -p or with --prompts, not both")
    if prompts_file is not None:
        return _read_prompt_file(prompts_file)
    if not prompt and sys.stdin.isatty():
        raise InvalidInputError("no prompt: pass -p TEXT, --prompts FILE, or pipe text into stdin")
    texts = list(prompt) if prompt else [sys.stdin.read().rstrip("\n")]
    for index, text in enumerate(texts):
        if not text.strip():
            raise InvalidInputError(f"prompt {index} is empty")
    return [Prompt(text, index) for index, text in enumerate(texts)]


def _batches(items: list[Prompt], size: int) -> Iterator[list[Prompt]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _summary(result: GenerationResult) -> str:
    t = result.timings
    return (
        f"[{plural(len(result.token_ids), 'token')}, {FINISH_WORDS[result.finish_reason]}; "
        f"prefill {t['prefill_ms']:.1f} ms, decode {t['decode_ms_per_token']:.1f} ms/token]"
    )


def _json_line(result: GenerationResult, prompt: Prompt) -> dict[str, object]:
    where = {"index": prompt.index, **({"line": prompt.line} if prompt.line is not None else {})}
    return {**where, **result.to_json()}


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


def _refuse_ignored_options(ctx: click.Context, sample: bool) -> None:
    """No option is silently ignored: each that would have no effect here is refused (exit 2)."""
    if not sample:
        refuse_given(
            ctx, ["temperature", "top_k", "top_p", "seed"], "only with --sample (greedy decoding ignores {it})"
        )
    if ctx.params.get("as_json"):
        refuse_given(ctx, ["no_stream"], "only without --json (JSON lines are never streamed)")


def _random_weights_note(manifest: Manifest) -> None:
    source = str(manifest.model.get("source") or "")
    if source.startswith("random:"):
        seed = manifest.model.get("seed")
        click.echo(
            f"Note: this export holds random weights ({source}, seed {seed}), so its text is noise; for real text "
            f"export a checkpoint: {REAL_CHECKPOINT_HINT}",
            err=True,
        )


@click.command()
@click.argument("folder", type=click.Path(path_type=Path))
@click.option(
    "-p",
    "--prompt",
    multiple=True,
    help="Prompt text (repeatable). Without -p or --prompts, stdin is the prompt.",
)
@click.option(
    "--prompts",
    "prompts_file",
    default=None,
    help="File with one prompt per line ('-' for stdin); blank lines are refused. JSON lines carry each prompt's "
    "index and line.",
)
@click.option("-n", "--max-new-tokens", type=int, default=50, show_default=True)
@click.option("--sample", is_flag=True, help="Sample instead of greedy decoding (transformers' do_sample).")
@click.option("--temperature", type=float, default=1.0, show_default=True, help="With --sample only.")
@click.option("--top-k", type=int, default=0, show_default=True, help="With --sample: keep the k most likely (0: all).")
@click.option("--top-p", type=float, default=1.0, show_default=True, help="With --sample: nucleus mass, in (0, 1].")
@click.option("--repetition-penalty", type=float, default=1.0, show_default=True)
@click.option("--seed", type=int, default=None, help="With --sample: same seed, same text.")
@click.option("--stop", multiple=True, help="Stop when this text appears (repeatable); it is left out of the output.")
@click.option("--ignore-eos", is_flag=True, help="Keep generating past the end-of-text token.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Prompts generated together (left-padded); above 1, each text is printed when complete.",
)
@json_option("Print one JSON object per prompt and line on stdout (JSON lines) instead of the text.")
@provider_option("ONNX Runtime execution provider; never silently replaced by another.")
@threads_option("each ONNX Runtime session")
@click.option("--no-stream", is_flag=True, help="Print each prompt's text when it is complete.")
@click.option(
    "--layout",
    type=click.Choice(["auto", "merged", "split"]),
    default="auto",
    show_default=True,
    help="Sessions: merged = one session over a generation graph built from decode.onnx (weights prepacked once, "
    "one thread pool; onnxruntime >= 1.21); split = the folder's two graphs as shipped (fp32 on the CPU: weights "
    "mapped once, not prepacked); auto = merged where the runtime has it.",
)
@integrity_option
@verbose_option
@click.pass_context
def run(
    ctx: click.Context,
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
    layout: str,
    no_sha256_check: bool,
) -> None:
    """Generate text from an export FOLDER with ONNX Runtime.

    \b
    Examples:
      gpt2-onnx run out -p "The meaning of life is" --max-new-tokens 40
      gpt2-onnx run out -p "Hello" --provider cuda --sample --temperature 0.8 --top-p 0.95 --seed 7
      gpt2-onnx run out --prompts prompts.txt --batch-size 8 --json > results.jsonl
      echo "Once upon a time" | gpt2-onnx run out
    """
    from gpt2_onnx.app.generate import GenerationOptions, load_for_generation

    manifest = read_manifest(folder)
    _refuse_ignored_options(ctx, sample)
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
    model = load_for_generation(
        folder,
        provider,  # type: ignore[arg-type]  # click.Choice admits only the providers' names
        threads,
        layout,  # type: ignore[arg-type]  # likewise the layouts'
        fingerprint_options(no_sha256_check),
    )
    _random_weights_note(manifest)
    _generate_all(model, prompts, options, batch_size, as_json, stream=not (as_json or no_stream or batch_size > 1))


def _generate_all(
    model: Gpt2Onnx, prompts: list[Prompt], options: GenerationOptions, batch_size: int, as_json: bool, stream: bool
) -> None:
    for batch in _batches(prompts, batch_size):
        if stream:
            _stream_one(model, batch[0].text, options)
            continue
        for result, item in zip(model.generate([p.text for p in batch], options), batch, strict=True):
            if as_json:
                echo_json(_json_line(result, item), lines=True)
            else:
                click.echo(f"{result.prompt}{result.text}")
                click.echo(_summary(result), err=True)
