"""``run``'s generation options: the flags, what each means, and the options a user actually gave.

Every flag defaults to "not given" (None), so that the export's ``generation_config.json`` can supply the value
(see :mod:`gpt2_onnx_runtimes.generation_defaults`), else GenerationOptions' own default, which each help text
shows, read from GenerationOptions when the help is rendered (:class:`GenerationFlag`).
Which flags a mode reads is GenerationOptions' rule alone: a flag the chosen mode would ignore is refused there, and
the command line names it by its flag (:class:`~gpt2_onnx_core.errors.OptionError`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from gpt2_onnx_core.errors import InvalidInputError

__all__ = ["FLAGS", "generation_flags", "given_options"]

F = TypeVar("F", bound=Callable[..., Any])

# API name → the flag that sets it (parameters of the same name on the command).
FLAGS: dict[str, str] = {
    "max_new_tokens": "--max-new-tokens",
    "do_sample": "--sample",
    "temperature": "--temperature",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "min_p": "--min-p",
    "seed": "--seed",
    "repetition_penalty": "--repetition-penalty",
    "num_beams": "--num-beams",
    "length_penalty": "--length-penalty",
    "early_stopping": "--early-stopping",
    "num_return_sequences": "--num-return-sequences",
    "no_repeat_ngram_size": "--no-repeat-ngram-size",
    "min_new_tokens": "--min-new-tokens",
    "forced_eos_token_id": "--forced-eos-token-id",
    "presence_penalty": "--presence-penalty",
    "frequency_penalty": "--frequency-penalty",
    "logit_bias": "--logit-bias",
    "best_of": "--best-of",
}


_EARLY_STOPPING: dict[str, bool | str] = {"true": True, "false": False, "never": "never"}


def _early_stopping(value: str | None) -> bool | str | None:
    return None if value is None else _EARLY_STOPPING[value]


class GenerationFlag(click.Option):
    """A generation flag whose help ends with "[default: the checkpoint's, else X]", X being GenerationOptions'
    own default for the field, looked up when the help is rendered: the CLI's import loads no adapter."""

    def get_help_extra(self, ctx: click.Context) -> click.types.OptionHelpExtra:
        from gpt2_onnx.app.option_defaults import GENERATION_DEFAULTS  # the options module alone: quick

        extra = super().get_help_extra(ctx)
        default = GENERATION_DEFAULTS.get(self.name or "")
        if default is not None and default != ():
            extra["default"] = f"the checkpoint's, else {self._spelled(default)}"
        return extra

    def _spelled(self, default: object) -> str:
        """``default`` as the command line spells it: a --x/--y switch by its flag's name, a choice by its word."""
        if self.is_bool_flag and self.secondary_opts:
            return (self.opts if default else self.secondary_opts)[0].lstrip("-")
        if self.name == "early_stopping":
            return next(word for word, value in _EARLY_STOPPING.items() if value == default)
        return str(default)


def _flag(*names: str, **attrs: Any) -> Callable[[F], F]:
    return click.option(*names, cls=GenerationFlag, **attrs)


def _id_list(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> list[tuple[int, ...]]:
    sequences = []
    for value in values:
        try:
            sequences.append(tuple(int(part) for part in value.split(",")))
        except ValueError:
            raise click.BadParameter(f"'{value}' is not comma-separated token ids (e.g. 11,262)") from None
    return sequences


def _logit_bias(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> dict[int, float]:
    bias: dict[int, float] = {}
    for value in values:
        token, _, number = value.partition("=")
        try:
            bias[int(token)] = float(number)
        except ValueError:
            raise click.BadParameter(f"'{value}' is not TOKEN_ID=BIAS (e.g. 50256=-100)") from None
    return bias


_OPTIONS: list[Callable[[F], F]] = [
    _flag("-n", "--max-new-tokens", type=int, default=None, help="New tokens at most."),
    _flag(
        "--sample/--greedy",
        "do_sample",
        default=None,
        help="Sample (transformers' do_sample) or decode greedily.",
    ),
    _flag("--temperature", type=float, default=None, help="Sampling only."),
    _flag("--top-k", type=int, default=None, help="Sampling: keep the k most likely (0: all)."),
    _flag("--top-p", type=float, default=None, help="Sampling: nucleus mass, in (0, 1]."),
    _flag(
        "--min-p",
        type=float,
        default=None,
        help="Sampling: drop tokens below min-p × the top one's probability.",
    ),
    _flag("--seed", type=int, default=None, help="Sampling: same seed, same text."),
    _flag("--repetition-penalty", type=float, default=None, help="Any mode; 1 is off."),
    _flag(
        "--num-beams",
        type=click.IntRange(min=1),
        default=None,
        help="Beam search with this many beams (1: off).",
    ),
    _flag(
        "--length-penalty",
        type=float,
        default=None,
        help="Beam search: a finished beam scores sum(log p) / length ** this.",
    ),
    _flag(
        "--early-stopping",
        type=click.Choice(["true", "false", "never"]),
        default=None,
        help="Beam search: stop at num-beams finished (true), when none can improve (false, a heuristic), or "
        "never before that is certain (never), as transformers.",
    ),
    _flag(
        "--num-return-sequences",
        type=click.IntRange(min=1),
        default=None,
        help="Sequences per prompt, best first (beam search: at most --num-beams; sampling: any).",
    ),
    _flag(
        "--no-repeat-ngram-size",
        type=click.IntRange(min=0),
        default=None,
        help="No n-gram of this many tokens twice (prompt included; 0: off).",
    ),
    _flag(
        "--min-new-tokens",
        type=click.IntRange(min=0),
        default=None,
        help="No end-of-text before this many new tokens.",
    ),
    _flag(
        "--bad-word",
        "bad_words",
        multiple=True,
        help="Never produce this text's tokens (repeatable; encoded as "
        "written, so mid-sentence words usually need their leading space: ' word').",
    ),
    _flag(
        "--bad-word-ids",
        "bad_word_ids",
        multiple=True,
        callback=_id_list,
        help="Never produce these token ids in this order (repeatable; comma-separated, e.g. 11,262).",
    ),
    _flag(
        "--forced-eos-token-id",
        type=int,
        multiple=True,
        help="The last token allowed (the --max-new-tokens-th) is "
        "this one (repeatable: one of these; GPT-2's end-of-text is 50256).",
    ),
    _flag(
        "--presence-penalty",
        type=float,
        default=None,
        help="OpenAI's: minus this from each token generated once or more (-2..2).",
    ),
    _flag(
        "--frequency-penalty",
        type=float,
        default=None,
        help="OpenAI's: minus this × each token's count so far (-2..2).",
    ),
    _flag(
        "--logit-bias",
        multiple=True,
        callback=_logit_bias,
        help="OpenAI's: TOKEN_ID=BIAS added to that token's logit (repeatable; -100..100).",
    ),
    _flag(
        "--best-of",
        type=click.IntRange(min=1),
        default=None,
        help="Sampling: draw this many per prompt, keep the --num-return-sequences with the best log-probability "
        "per token (OpenAI's best_of).",
    ),
]


def generation_flags(command: F) -> F:
    """Add the generation flags to ``command`` (in the order above)."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def given_options(params: Mapping[str, Any], encode: Callable[[str], list[int]]) -> dict[str, Any]:
    """The GenerationOptions fields the user gave (flags left out are absent)."""
    given = {name: params[name] for name in FLAGS if name in params and params[name] not in (None, (), {})}
    if "early_stopping" in given:
        given["early_stopping"] = _early_stopping(given["early_stopping"])
    if "forced_eos_token_id" in given:
        given["forced_eos_token_id"] = tuple(given["forced_eos_token_id"])
    words = [tuple(encode(text)) for text in params.get("bad_words", ())] + list(params.get("bad_word_ids", ()))
    if any(not word for word in words):
        raise InvalidInputError("--bad-word needs text that encodes to at least one token")
    if words:
        given["bad_words_ids"] = tuple(words)
    return given
