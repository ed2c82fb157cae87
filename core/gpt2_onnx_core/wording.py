"""Small wording helpers shared by messages and reports, so that counts read as English everywhere."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"1 token"``, ``"2 tokens"``; ``many`` for nouns whose plural is not ``noun + "s"``."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"
