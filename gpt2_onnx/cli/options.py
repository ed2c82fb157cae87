"""Options several commands share, defined once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["PROVIDER_CHOICES", "provider_option"]

PROVIDER_CHOICES = ("cpu", "cuda")  # runtimes.providers.PROVIDERS' names; the CLI stays free of onnxruntime imports

F = TypeVar("F", bound=Callable[..., Any])


def provider_option(help_text: str) -> Callable[[F], F]:
    """``--provider cpu|cuda``, also read from GPT2_ONNX_PROVIDER."""
    return click.option(
        "--provider",
        type=click.Choice(PROVIDER_CHOICES),
        default="cpu",
        show_default=True,
        envvar="GPT2_ONNX_PROVIDER",
        help=help_text,
    )
