"""The one check of a prompt, whoever gives it: the Python API (``generate``, ``generate_ids``, ``stream``),
``gpt2-onnx run`` (``-p``, ``--prompts``, stdin) and the server's completions (text or token ids).

A prompt is text that the tokenizer can take (a ``str`` with no lone surrogate: ``"\\ud83d"`` from JSON, or the
``surrogateescape`` of bytes that are not UTF-8 in a command line) or a sequence of token ids: Python integers
(not bools, not floats) within the vocabulary. Anything else is an :class:`InvalidInputError` naming the prompt,
the position and the value, never a tokenizer's TypeError or NumPy's OverflowError.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpt2_onnx.errors import InvalidInputError

__all__ = ["check_prompt_ids", "check_prompt_text", "check_token_ids"]

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
