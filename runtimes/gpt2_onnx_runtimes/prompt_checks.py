"""The one check of a prompt, whoever gives it: the Python API (``generate``, ``generate_ids``, ``stream``),
``gpt2-onnx run`` (``-p``, ``--prompts``, stdin) and the server's completions (text or token ids).

A prompt is text that the tokenizer can take (a ``str`` with no lone surrogate: ``"\\ud83d"`` from JSON, or the
``surrogateescape`` of bytes that are not UTF-8 in a command line) or a sequence of token ids: Python integers
(not bools, not floats) within the vocabulary. Anything else is an :class:`InvalidInputError` naming the prompt,
the position and the value, never a tokenizer's TypeError or NumPy's OverflowError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from gpt2_onnx_core.errors import InvalidInputError, OptionError
from gpt2_onnx_core.wording import plural

if TYPE_CHECKING:
    from gpt2_onnx_runtimes.options import GenerationOptions
    from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["check_prompt_ids", "check_prompt_text", "check_prompts", "check_token_ids", "special_tokens"]

_SURROGATES = range(0xD800, 0xE000)
_SHOWN = 40  # characters of an offending value quoted in a message


def check_prompt_text(text: object, what: str) -> str:
    """``text`` if it is a ``str`` the tokenizer can encode; else :class:`InvalidInputError` naming ``what``."""
    if not isinstance(text, str):
        raise InvalidInputError(f"{what} is a {type(text).__name__}, not text")
    for position, character in enumerate(text):
        if ord(character) in _SURROGATES:
            raise InvalidInputError(
                f"{what} is not valid Unicode: a lone surrogate U+{ord(character):04X} at character {position} "
                "(text that is not UTF-8, or half of an escaped surrogate pair)"
            )
    return text


def check_token_ids(ids: object, vocab_size: int, what: str) -> tuple[int, ...]:
    """``ids`` as a tuple if every item is an integer in [0, vocab_size); else one line naming the first that is
    not (negative, too large, a float, a bool, a string)."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
        raise InvalidInputError(f"{what} must be a sequence of token ids, got {type(ids).__name__}")
    for position, item in enumerate(ids):
        shown = repr(item)[:_SHOWN]
        if not _is_integer(item):
            raise InvalidInputError(
                f"{what} holds {shown} at position {position}: token ids are integers in [0, {vocab_size})"
            )
        if not 0 <= int(item) < vocab_size:
            raise InvalidInputError(f"{what} holds token id {shown} at position {position}, outside [0, {vocab_size})")
    return tuple(int(item) for item in ids)


def check_prompt_ids(ids: object, vocab_size: int, what: str) -> tuple[int, ...]:
    """A prompt's token ids: :func:`check_token_ids`, and at least one."""
    checked = check_token_ids(ids, vocab_size, what)
    if not checked:
        raise InvalidInputError(f"{what} is empty; give at least one token")
    return checked


def _is_integer(item: object) -> bool:
    """A Python or NumPy integer; bools are not token ids."""
    if isinstance(item, bool):
        return False
    return isinstance(item, int | np.integer)


def check_prompts(loaded: LoadedExport, prompts: Sequence[Sequence[int]], options: GenerationOptions) -> None:
    """Refuse prompts and token-id options that the model cannot take (one line each)."""
    dims = loaded.manifest.dims
    if not prompts:
        raise InvalidInputError("no prompts given")
    for index, prompt in enumerate(prompts):
        check_prompt_ids(prompt, dims.vocab_size, f"prompt {index}")
        if len(prompt) + options.max_new_tokens > dims.n_positions:
            raise OptionError(
                f"prompt {index} has {plural(len(prompt), 'token')}; with {{max_new_tokens}} "
                f"{options.max_new_tokens} that exceeds the model's {dims.n_positions} positions",
                "max_new_tokens",
            )
    for seq in options.bad_words_ids:
        check_token_ids(seq, dims.vocab_size, "bad_words_ids")
    check_token_ids(options.forced_eos_token_id, dims.vocab_size, "forced_eos_token_id")
    check_token_ids([token for token, _ in options.logit_bias], dims.vocab_size, "logit_bias")


def special_tokens(loaded: LoadedExport, options: GenerationOptions) -> tuple[tuple[int, ...], int]:
    """The end-of-text ids generation stops at (none with ``ignore_eos``) and the id that pads batches."""
    tokens = loaded.manifest.tokens
    eos = tokens.get("eos_token_id")
    if options.min_new_tokens > 0 and eos is None:
        raise OptionError("{min_new_tokens} needs an end-of-text token, and the manifest names none", "min_new_tokens")
    eos_ids = () if options.ignore_eos or eos is None else (int(eos),)
    return eos_ids, int(tokens.get("pad_token_id") or tokens.get("eos_token_id") or 0)
