"""What the commands show, in one place: stage lines and progress on stderr, sizes, and JSON on stdout.

stdout carries a command's result (text, a table, or JSON with ``--json``); stderr carries progress and messages, so
``gpt2-onnx run out --json > results.jsonl`` keeps only the results in the file.
"""

from __future__ import annotations

import json
from typing import Any

import click

__all__ = ["StageDisplay", "echo_json", "megabytes", "progress"]


class StageDisplay:
    """Shows each stage on one line of stderr: its name when it starts, its time when it ends."""

    def __init__(self) -> None:
        self.line_open = False

    def __call__(self, name: str, event: str, elapsed: float) -> None:
        if event == "start":
            click.echo(f"  {name:<28}", nl=False, err=True)
            self.line_open = True
        else:
            click.echo(f"{elapsed:7.1f} s", err=True)
            self.line_open = False

    def close_line(self) -> None:
        """End a stage line cut short by an error, so the error message starts a line of its own."""
        if self.line_open:
            click.echo("", err=True)
            self.line_open = False


def progress(message: str) -> None:
    """One progress line on stderr, indented as the stage lines are."""
    click.echo(f"  {message}", err=True)


def megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def echo_json(data: Any, lines: bool = False) -> None:
    """``--json``'s output on stdout: an indented document, or (``lines``) one compact object per line (JSON lines),
    non-ASCII text kept as it is."""
    if lines:
        click.echo(json.dumps(data, ensure_ascii=False))
    else:
        click.echo(json.dumps(data, indent=2))
