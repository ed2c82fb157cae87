"""Text ↔ token ids with the export folder's ``tokenizer.json`` (the ``tokenizers`` library; no transformers)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpt2_onnx_core.errors import ManifestError

__all__ = ["IncrementalDecoder", "TextTokenizer"]

REPLACEMENT = "\ufffd"  # what a byte-level decoder yields for an incomplete UTF-8 sequence


class TextTokenizer:
    """Encodes prompts and decodes generated ids (special tokens such as <|endoftext|> are left out)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        if not path.is_file():
            raise ManifestError(f"'{path.parent}' lacks {path.name}")
        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises plain Exception for malformed files
            raise ManifestError(f"{path} is not a valid tokenizer file: {exc}") from exc

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=True))

    def token_id(self, token: str) -> int | None:
        found = self._tokenizer.token_to_id(token)
        return None if found is None else int(found)


class IncrementalDecoder:
    """Turns a stream of token ids into text chunks, holding back bytes of a character split across tokens.

    GPT-2's byte-level BPE can split one UTF-8 character (an emoji, a CJK character) over several tokens; decoding
    such a prefix yields U+FFFD. Only text that decodes completely is emitted; the window of ids decoded each time
    stays a few tokens long (the prefix/read offsets that vLLM and text-generation-inference use).
    """

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = []
        self._prefix = 0  # start of the window decoded for context
        self._read = 0  # ids before this have been emitted

    def push(self, token_id: int) -> str:
        """Add one id; return the text it completes (possibly empty)."""
        self._ids.append(token_id)
        before = self._tokenizer.decode(self._ids[self._prefix : self._read])
        after = self._tokenizer.decode(self._ids[self._prefix :])
        if len(after) > len(before) and not after.endswith(REPLACEMENT):
            self._prefix, self._read = self._read, len(self._ids)
            return after[len(before) :]
        return ""

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character comes out as U+FFFD)."""
        before = self._tokenizer.decode(self._ids[self._prefix : self._read])
        after = self._tokenizer.decode(self._ids[self._prefix :])
        self._prefix = self._read = len(self._ids)
        return after[len(before) :]
