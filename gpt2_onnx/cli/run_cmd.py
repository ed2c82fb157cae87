"""``gpt2-onnx run``: generate text from an export folder with ONNX Runtime."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpt2_onnx.cli.display import echo_json
from gpt2_onnx.cli.generation_flags import FLAGS, generation_flags, given_options
from gpt2_onnx.cli.integrity import fingerprint_options, integrity_option
from gpt2_onnx.cli.options import (
    json_option,
    kv_cache_option,
    prompt_kernel_option,
    provider_option,
    refuse_given,
    single_row_head_option,
    threads_option,
    verbose_option,
)
from gpt2_onnx_core.compatibility import IN_PLACE_KV_MIN_ONNXRUNTIME
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.layouts import (
    IN_PLACE_KV_MODES,
    SESSION_LAYOUTS,
    InPlaceKv,
    KvCacheFormat,
    PromptKernel,
    SessionLayout,
)
from gpt2_onnx_core.manifest import Manifest
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_core.wording import plural

if TYPE_CHECKING:
    from gpt2_onnx.app.generate import (
        CheckpointDefaults,
        GenerationOptions,
        GenerationResult,
        Gpt2Onnx,
        ResolvedOptions,
    )

__all__ = ["run"]

FINISH_WORDS = {
    "eos": "stopped at the end-of-text token",
    "stop": "stopped at a stop string",
    "length": "stopped at the length limit (--max-new-tokens)",
}
REAL_CHECKPOINT_HINT = "gpt2-onnx export --model openai-community/gpt2 -o NEW_FOLDER (needs the Hub or its cache)"


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
    try:
        texts = list(prompt) if prompt else [sys.stdin.read().rstrip("\n")]
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"the prompt on stdin is not UTF-8 text: {exc}") from exc
    for index, text in enumerate(texts):
        if not text.strip():
            raise InvalidInputError(f"prompt {index} is empty")
    return [Prompt(text, index) for index, text in enumerate(texts)]


def _batches(items: list[Prompt], size: int) -> Iterator[list[Prompt]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _summary(result: GenerationResult, several: bool) -> str:
    t = result.timings
    rank = f"sequence {result.sequence}, score {result.score:.4f}; " if several else ""
    return (
        f"[{rank}{plural(len(result.token_ids), 'token')}, {FINISH_WORDS[result.finish_reason]}; "
        f"prefill {t['prefill_ms']:.1f} ms, decode {t['decode_ms_per_token']:.1f} ms/token]"
    )


def _json_line(result: GenerationResult, prompt: Prompt, resolved: ResolvedOptions) -> dict[str, object]:
    """The result, ``index`` counted among all prompts (``line`` too for a prompts file), and the options used."""
    where = {"index": prompt.index, **({"line": prompt.line} if prompt.line is not None else {})}
    return {**result.to_json(), **where, **resolved.to_json()}


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


def _refuse_ignored_options(ctx: click.Context) -> None:
    """No option is silently ignored: each that would have no effect here is refused (exit 2). The generation
    flags' own rules (sampling flags without sampling, beam flags without beams) are GenerationOptions'."""
    if ctx.params.get("as_json"):
        refuse_given(ctx, ["no_stream"], "only without --json (JSON lines are never streamed)")


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
        from gpt2_onnx.app.generate import CheckpointDefaults

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


def _resolve(checkpoint: CheckpointDefaults, given: dict[str, Any]) -> ResolvedOptions:
    """The options to run with: the checkpoint's defaults under the flags given; flags that the mode would not
    read are refused (by GenerationOptions), and the checkpoint's values used or left out are stated on stderr."""
    resolved = checkpoint.resolve(**given)
    used = {name: getattr(resolved.options, name) for name in resolved.from_checkpoint()}
    if used:
        click.echo(f"Using the checkpoint's generation defaults: {_describe(used)}", err=True)
    for name, why in {**resolved.unused, **resolved.not_applied}.items():
        click.echo(f"Note: the checkpoint's generation_config.json {name} is left out ({why})", err=True)
    return resolved


def _random_weights_note(manifest: Manifest) -> None:
    source = str(manifest.model.get("source") or "")
    if source.startswith("random:"):
        seed = manifest.model.get("seed")
        click.echo(
            f"Note: this export holds random weights ({source}, seed {seed}), so its text is noise; for real text "
            f"export a checkpoint: {REAL_CHECKPOINT_HINT}",
            err=True,
        )


@click.command(cls=_RunCommand)
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
@generation_flags
@click.option("--stop", multiple=True, help="Stop when this text appears (repeatable); it is left out of the output.")
@click.option("--ignore-eos", is_flag=True, help="Keep generating past the end-of-text token.")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Prompts generated together (left-padded); above 1, and with beam search or several sequences, each "
    "text is printed when complete.",
)
@json_option(
    "Print one JSON object per returned sequence and line on stdout (JSON lines) instead of the text: index (the "
    "prompt), sequence (0.., best first), token_ids, text, score, token_logprobs, and the options used."
)
@provider_option("ONNX Runtime execution provider; never silently replaced by another.")
@threads_option("each ONNX Runtime session")
@click.option("--no-stream", is_flag=True, help="Print each prompt's text when it is complete.")
@click.option(
    "--layout",
    type=click.Choice(SESSION_LAYOUTS),  # returns the very choice: the parameter is a SessionLayout
    default="auto",
    show_default=True,
    help="Sessions: merged = one session over a generation graph built from decode.onnx (weights prepacked once, "
    "one thread pool; onnxruntime >= 1.21); split = the folder's two graphs as shipped (fp32 on the CPU: weights "
    "mapped once, not prepacked); auto = merged where the runtime has it.",
)
@click.option(
    "--in-place-kv",
    type=click.Choice(IN_PLACE_KV_MODES),
    default="auto",
    show_default=True,
    help="The KV cache: on = written at each new position of one buffer (merged layout, CPU, a float32 cache; "
    f"onnxruntime >= {IN_PLACE_KV_MIN_ONNXRUNTIME}), refused where that does not apply; off = decode.onnx's own "
    "attention, which copies the whole past every step; auto = on where it applies.",
)
@kv_cache_option(
    "The KV cache's format: float32 (exact) or int8 (a quarter of the memory and bandwidth, written in place "
    "with per-channel scales measured on the export as it loads; changes the logits slightly: docs/performance.md "
    "states the perplexity change)."
)
@prompt_kernel_option()
@single_row_head_option()
@integrity_option
@verbose_option
@click.pass_context
def run(
    ctx: click.Context,
    folder: Path,
    prompt: tuple[str, ...],
    prompts_file: str | None,
    stop: tuple[str, ...],
    ignore_eos: bool,
    batch_size: int,
    as_json: bool,
    provider: ProviderName,
    threads: int | None,
    no_stream: bool,
    layout: SessionLayout,
    in_place_kv: InPlaceKv,
    kv_cache: KvCacheFormat,
    prompt_kernel: PromptKernel,
    single_row_head: bool,
    no_sha256_check: bool,
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
    from gpt2_onnx.app.generate import load_for_generation, open_export

    # opened once, before the prompts are read and the options resolved, so both are refused before the model loads
    export = open_export(folder, fingerprint_options(no_sha256_check))
    _refuse_ignored_options(ctx)
    prompts = _read_prompts(prompt, prompts_file)
    checkpoint, manifest = export.defaults, export.manifest
    given = given_options(flags, export.tokenizer.encode)
    given.update({"stop": stop} if stop else {})
    given.update({"ignore_eos": True} if ignore_eos else {})
    resolved = _resolve(checkpoint, given)
    options = resolved.options
    model = load_for_generation(
        export, provider, threads, layout, in_place_kv, kv_cache, prompt_kernel, single_row_head
    )
    whole = as_json or no_stream or batch_size > 1 or options.num_return_sequences > 1 or options.num_beams > 1
    _generate_all(model, prompts, resolved, batch_size, as_json, stream=not whole)
    _random_weights_note(manifest)  # for a run that worked: a failure stays one line


def _generate_all(
    model: Gpt2Onnx, prompts: list[Prompt], resolved: ResolvedOptions, batch_size: int, as_json: bool, stream: bool
) -> None:
    options = resolved.options
    several = options.num_return_sequences > 1
    for batch in _batches(prompts, batch_size):
        if stream:
            _stream_one(model, batch[0].text, options)
            continue
        for result in model.generate([p.text for p in batch], options):
            if as_json:
                echo_json(_json_line(result, batch[result.index], resolved), lines=True)
            else:
                click.echo(f"{result.prompt}{result.text}")
                click.echo(_summary(result, several), err=True)
