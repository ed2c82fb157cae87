"""``gpt2-onnx bench``: export folders against PyTorch eager on the same checkpoint, in one run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpt2_onnx.cli.display import echo_json, progress
from gpt2_onnx.cli.options import (
    field_defaults,
    help_with,
    json_option,
    perplexity_options,
    provider_option,
    refuse_given,
    refuse_window_without_text,
    threads_option,
    verbose_option,
)
from gpt2_onnx_core.bench_settings import BenchSettings, with_growth_base
from gpt2_onnx_core.errors import OptionError
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_core.wording import plural

if TYPE_CHECKING:
    from gpt2_onnx.app.bench.report import BenchReport

__all__ = ["bench"]

_DEFAULTS = field_defaults(BenchSettings)  # each option's default is the setting's own


def _lengths(text: str, name: str) -> tuple[int, ...]:
    """``"8,128"`` → (8, 128); the option ``name`` (a BenchSettings field) in the one-line error otherwise."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise OptionError(f"{{{name}}} takes comma-separated integers, got '{text}'", name) from exc


@click.command()
@help_with(**_DEFAULTS)
@click.argument("folders", nargs=-1, required=True, type=click.Path(path_type=Path))
@threads_option("every system measured, ONNX Runtime and torch alike", default=_DEFAULTS["threads"])
@click.option(
    "--prompt-lengths",
    default=",".join(map(str, _DEFAULTS["prompt_lengths"])),
    show_default=True,
    help="Prompt lengths for prefill latency and time to first token.",
)
@click.option(
    "--decode-prompt-length",
    type=click.IntRange(min=1),
    default=_DEFAULTS["decode_prompt_length"],
    show_default=True,
    help="Prompt before the timed decode steps.",
)
@click.option(
    "--decode-contexts",
    default="",
    metavar="LENGTHS",
    help="Also time decode ms/token after prompts of these lengths (comma-separated, e.g. 512,1000): one more run "
    "per length, and one after --decode-prompt-length of as many tokens, which each length's growth row divides by.",
)
@click.option(
    "--context-new-tokens",
    type=click.IntRange(min=2),
    default=_DEFAULTS["context_new_tokens"],
    show_default=True,
    help="Tokens per --decode-contexts run.",
)
@click.option(
    "-n",
    "--new-tokens",
    type=click.IntRange(min=2),
    default=_DEFAULTS["new_tokens"],
    show_default=True,
    help="Tokens per decode run.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=_DEFAULTS["batch_size"],
    show_default=True,
    help="Rows of the throughput run.",
)
@click.option(
    "--batch-prompt-length", type=click.IntRange(min=1), default=_DEFAULTS["batch_prompt_length"], show_default=True
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=_DEFAULTS["repeats"],
    show_default=True,
    help="Recorded rounds (interleaved across systems).",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=_DEFAULTS["warmup"],
    show_default=True,
    help="Unrecorded rounds first.",
)
@click.option(
    "--prompt-seed",
    "seed",
    type=int,
    default=_DEFAULTS["seed"],
    show_default=True,
    help="Seed of the random prompt token ids.",
)
@provider_option("ONNX Runtime provider; torch runs on the matching device.")
@click.option(
    "-m",
    "--model",
    default=None,
    help="Checkpoint of the eager baseline (default: the first folder's manifest source).",
)
@click.option(
    "--weights-seed",
    "model_seed",
    type=int,
    default=None,
    help="Seed of a random:NAME baseline's weights (default: the manifest's).",
)
@click.option(
    "--attention",
    type=click.Choice(["sdpa", "eager"]),
    default=_DEFAULTS["attention"],
    show_default=True,
    help="transformers attention of the baseline.",
)
@click.option("--no-eager", is_flag=True, help="Measure the export folders only, without the PyTorch baseline.")
@click.option(
    "--unshared",
    is_flag=True,
    help="Also measure each float32 folder in the split layout: its two graphs as shipped, weights prepacked per "
    "session by ONNX Runtime (more memory).",
)
@click.option(
    "--int8-kv",
    is_flag=True,
    help="Also measure each folder with an int8 KV cache (--kv-cache int8 of run and serve: merged layout, written "
    "in place; CPU only), labelled +kv-int8.",
)
@click.option(
    "--prompt-dynamic",
    is_flag=True,
    help="Also measure each int8 or int4 folder with its prompts through DynamicQuantizeMatMul (--prompt-kernel "
    "dynamic of run and serve: merged layout, CPU only; more memory), labelled +prompt-dynamic.",
)
@click.option(
    "--decode-before-prefill",
    "decode_steps_before_prefill",
    type=click.IntRange(min=0),
    default=_DEFAULTS["decode_steps_before_prefill"],
    show_default=True,
    help="Untimed decode steps each system runs right before each timed prefill, as a prefill follows the "
    "previous generation's decode steps in use (0: prefills back to back).",
)
@perplexity_options("every system (measured after the timed rounds)")
@json_option("Print the full report as JSON on stdout instead of the table.")
@verbose_option
@click.pass_context
def bench(
    ctx: click.Context,
    folders: tuple[Path, ...],
    threads: int,
    prompt_lengths: str,
    decode_prompt_length: int,
    decode_contexts: str,
    context_new_tokens: int,
    new_tokens: int,
    batch_size: int,
    batch_prompt_length: int,
    repeats: int,
    warmup: int,
    seed: int,
    provider: ProviderName,
    model: str | None,
    model_seed: int | None,
    attention: str,
    no_eager: bool,
    unshared: bool,
    int8_kv: bool,
    prompt_dynamic: bool,
    decode_steps_before_prefill: int,
    perplexity: Path | None,
    perplexity_window: int | None,
    perplexity_stride: int | None,
    as_json: bool,
) -> None:
    """Measure export FOLDERS against PyTorch eager on the same checkpoint: prefill latency, time to first
    token, decode ms/token, batch tokens/s, memory and files. Each system runs in its own process; rounds
    interleave. On 2 cores the defaults take about 1.5 minutes for GPT-2-small beside PyTorch eager, 2.5 with a
    second folder; progress on stderr estimates the time left.

    \b
    Examples:
      gpt2-onnx bench out    # batch 1, {threads} threads, prompt {decode_prompt_length}, {new_tokens} new tokens
      gpt2-onnx bench out out-int4 --repeats 11 --json > bench.json
      gpt2-onnx bench out --no-eager --threads 4
      gpt2-onnx bench out --decode-contexts 512,1000   # decode ms/token after longer prompts too
      gpt2-onnx bench out out-int8 out-int4 --perplexity heldout.txt   # perplexity per system beside the speed
    """
    from gpt2_onnx.app.bench.run import bench_exports
    from gpt2_onnx_core.perplexity import PerplexityRequest

    refuse_window_without_text(ctx, perplexity)
    if no_eager:
        refuse_given(
            ctx, ["model", "model_seed", "attention"], "to the PyTorch eager baseline, and --no-eager drops it"
        )
    contexts = _lengths(decode_contexts, "decode_contexts")
    if not contexts:
        refuse_given(ctx, ["context_new_tokens"], "only with --decode-contexts (the runs {it} sizes)")
    settings = BenchSettings(
        threads=threads,
        prompt_lengths=_lengths(prompt_lengths, "prompt_lengths"),
        decode_prompt_length=decode_prompt_length,
        decode_contexts=with_growth_base(contexts, decode_prompt_length),
        context_new_tokens=context_new_tokens,
        new_tokens=new_tokens,
        batch_size=batch_size,
        batch_prompt_length=batch_prompt_length,
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        provider=provider,
        attention=attention,
        decode_steps_before_prefill=decode_steps_before_prefill,
    )
    report = bench_exports(
        list(folders), settings, eager=not no_eager, model=model, model_seed=model_seed, unshared=unshared,
        int8_kv=int8_kv, prompt_dynamic=prompt_dynamic, progress=progress,
        perplexity=None if perplexity is None else PerplexityRequest(perplexity, perplexity_window, perplexity_stride),
    )  # fmt: skip
    if as_json:
        return echo_json(report.to_json())
    _print_table(report)


def _print_table(report: BenchReport) -> None:
    from gpt2_onnx.app.bench.table import render_table

    settings, machine = report.settings, report.machine
    contexts = (
        f"; decode also after {', '.join(map(str, settings.decode_contexts))} tokens "
        f"({plural(settings.context_new_tokens, 'new token')} each)"
        if settings.decode_contexts
        else ""
    )
    click.echo(
        f"batch 1 (throughput: batch {settings.batch_size}), {settings.threads} threads, {settings.provider}; "
        f"{plural(settings.repeats, 'round')} after {plural(settings.warmup, 'warm-up')}; {machine['cpu']} "
        f"({plural(machine['cpu_count'], 'core')}), "
        f"load {machine['load_average']} → {machine['load_average_after']}{contexts}"
    )
    click.echo(render_table(report))
