"""Options several commands share, defined once so that each word means one thing on every command, and the rule
that no option is silently ignored.

Options are read from the command line only; the one exception is ``--provider``, which also reads
``GPT2_ONNX_PROVIDER`` (a machine's provider is a property of the machine, set once in its environment)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.layouts import KV_CACHE_FORMATS, PROMPT_KERNELS
from gpt2_onnx_core.providers import PROVIDER_NAMES

__all__ = [
    "PROVIDER_CHOICES",
    "PROVIDER_VARIABLE",
    "VERBOSE_KEY",
    "field_defaults",
    "flag_names",
    "help_with",
    "json_option",
    "perplexity_options",
    "provider_option",
    "refuse_given",
    "refuse_window_without_text",
    "single_row_head_option",
    "threads_option",
    "verbose_option",
    "was_given",
]

PROVIDER_VARIABLE = "GPT2_ONNX_PROVIDER"  # the one option read from the environment
VERBOSE_KEY = "gpt2_onnx.verbose"  # in the root context's meta: --verbose was given after COMMAND
PROVIDER_CHOICES = PROVIDER_NAMES  # click.Choice returns the very choice: a command's parameter is a ProviderName
# Python API names that the command line spells otherwise (the rest are a flag's own name: max_new_tokens is
# --max-new-tokens). Used to name flags, not parameters, in library errors shown by the CLI.
API_FLAGS = {"do_sample": "--sample", "intra_op_threads": "--threads", "bad_words_ids": "--bad-word/--bad-word-ids"}

F = TypeVar("F", bound=Callable[..., Any])


def field_defaults(settings: type) -> dict[str, Any]:
    """The field defaults of the frozen dataclass ``settings`` (the one place each is written), by field name: a
    command's options take theirs from it, so that ``--help`` shows the default the library applies."""
    return {field.name: field.default for field in fields(settings) if field.default is not MISSING}


def help_with(**values: object) -> Callable[[F], F]:
    """Fill the ``{name}`` fields of a command's docstring (its ``--help``) with ``values``: a default or a limit
    the help states comes from where it is defined. Apply it below ``@click.command()``."""

    def decorate(command: F) -> F:
        command.__doc__ = (command.__doc__ or "").format(**values)
        return command

    return decorate


def provider_option(help_text: str) -> Callable[[F], F]:
    """``--provider cpu|cuda``, also read from GPT2_ONNX_PROVIDER."""
    return click.option(
        "--provider",
        type=click.Choice(PROVIDER_CHOICES),
        default="cpu",
        show_default=True,
        envvar=PROVIDER_VARIABLE,
        show_envvar=True,
        help=help_text,
    )


def kv_cache_option(help_text: str) -> Callable[[F], F]:
    """``--kv-cache float32|int8``: the KV cache's format (RuntimeOptions.kv_cache) on run, serve and verify."""
    return click.option(
        "--kv-cache", type=click.Choice(KV_CACHE_FORMATS), default="float32", show_default=True, help=help_text
    )


PROMPT_KERNEL_HELP = (
    "What multiplies a prompt's projections: export = the export's own kernel; dynamic = for an int8 or int4 "
    "export, prompts through ONNX Runtime's DynamicQuantizeMatMul over int8 weights requantized at load (about "
    "twice as fast a prompt on the CPU; more memory: the int8 weights besides the export's; decode steps keep the "
    "export's kernel; docs/performance.md states the speed, memory and perplexity change). Merged layout, CPU."
)


def prompt_kernel_option(help_text: str = PROMPT_KERNEL_HELP) -> Callable[[F], F]:
    """``--prompt-kernel export|dynamic``: what multiplies a prompt's projections (RuntimeOptions.prompt_kernel) on
    run, serve and verify."""
    return click.option(
        "--prompt-kernel", type=click.Choice(PROMPT_KERNELS), default="export", show_default=True, help=help_text
    )


SINGLE_ROW_HEAD_HELP = (
    "A batch of one row multiplies a transposed copy of the tied head's table, made at load, which ONNX Runtime's "
    "single-row kernel reads faster (fp32 exports, merged layout, CPU; about 7 % of a GPT-2-small decode step). "
    "A process that also runs larger batches (serve, --batch-size, beams) holds the copy besides the table: "
    "vocabulary x width x 4 bytes more (154 MB for GPT-2). --no-single-row-head keeps the table alone."
)


def single_row_head_option() -> Callable[[F], F]:
    """``--single-row-head/--no-single-row-head`` (RuntimeOptions.single_row_head) on run and serve."""
    return click.option(
        "--single-row-head/--no-single-row-head",
        default=True,  # RuntimeOptions.single_row_head's (the CLI imports no runtime until a command runs)
        show_default=True,
        help=SINGLE_ROW_HEAD_HELP,
    )


def threads_option(applies_to: str, default: int | None = None) -> Callable[[F], F]:
    """``--threads N``: intra-op threads, on every command. Without a ``default`` (run, verify) 0 or no value
    leaves the count to ONNX Runtime; with one (bench, which compares systems at one count) it is at least 1."""
    if default is None:
        return click.option(
            "--threads",
            type=click.IntRange(min=0),
            default=None,
            help=f"Intra-op threads of {applies_to} (0 or unset: ONNX Runtime's default).",
        )
    return click.option(
        "--threads",
        type=click.IntRange(min=1),
        default=default,
        show_default=True,
        help=f"Intra-op threads of {applies_to}.",
    )


def json_option(help_text: str) -> Callable[[F], F]:
    """``--json``: on every command a flag (parameter ``as_json``) that prints the result as JSON on stdout instead
    of text; a file to write is another option's (``verify --report PATH``)."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def perplexity_options(models: str) -> Callable[[F], F]:
    """``--perplexity TEXT_FILE`` with ``--perplexity-window N`` and ``--perplexity-stride N`` (parameters
    ``perplexity``, ``perplexity_window``, ``perplexity_stride``); the file is checked by the library, which says
    in one line what is wrong with it."""
    text = click.option(
        "--perplexity",
        "perplexity",
        metavar="TEXT_FILE",
        type=click.Path(path_type=Path, dir_okay=True),
        default=None,
        help=f"Also measure the perplexity of {models} over the same sliding windows of this UTF-8 text.",
    )
    window = click.option(
        "--perplexity-window",
        type=int,
        default=None,
        help="Tokens per perplexity window (default: the model's positions, 1,024 for GPT-2).",
    )
    stride = click.option(
        "--perplexity-stride",
        type=int,
        default=None,
        help="Tokens between the starts of perplexity windows; each window scores only the tokens the previous "
        "one did not (default: half the window).",
    )

    def decorate(command: F) -> F:
        return text(window(stride(command)))

    return decorate


def refuse_window_without_text(ctx: click.Context, text: Path | None) -> None:
    """--perplexity-window and --perplexity-stride only with --perplexity."""
    if text is None:
        refuse_given(ctx, ["perplexity_window", "perplexity_stride"], "only with --perplexity (no text, no windows)")


def _verbose(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        from gpt2_onnx.cli.logs import configure_logging

        ctx.find_root().meta[VERBOSE_KEY] = True
        configure_logging(verbose=True)


def verbose_option(command: F) -> F:
    """``-v/--verbose`` on a subcommand too (``gpt2-onnx run out -v``), as on the group."""
    option = click.option(
        "-v",
        "--verbose",
        is_flag=True,
        expose_value=False,
        callback=_verbose,
        help="Log progress details and show tracebacks of internal errors.",
    )
    return option(command)


def flag_names(command: click.Command) -> dict[str, str]:
    """Each parameter's Python name → how the command line spells it (``--max-new-tokens``, ``FOLDER``)."""
    names: dict[str, str] = dict(API_FLAGS)
    for param in command.params:
        if param.name is None:
            continue
        if isinstance(param, click.Option):
            long = [opt for opt in param.opts if opt.startswith("--")]
            names[param.name] = long[0] if long else param.opts[0]
        else:
            names[param.name] = param.name.upper()
    return names


def was_given(ctx: click.Context, name: str) -> bool:
    """True when the user set option ``name`` (on the command line or through its environment variable), not
    when it holds its default."""
    return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def refuse_given(ctx: click.Context, names: Sequence[str], rule: str, spelled: Mapping[str, str] | None = None) -> None:
    """Refuse (exit 2) the options among ``names`` that the user gave where they would have no effect.

    ``rule`` completes the sentence after the options, e.g. ``"only with --sample (greedy decoding ignores {it})"``;
    ``{it}`` becomes "it" or "them"."""
    given = [name for name in names if was_given(ctx, name)]
    if not given:
        return
    spelling = spelled or flag_names(ctx.command)
    flags = " and ".join(spelling.get(name, name) for name in given)
    verb, it = ("applies", "it") if len(given) == 1 else ("apply", "them")
    raise InvalidInputError(f"{flags} {verb} {rule.replace('{it}', it)}")
