"""How much the command line logs: warnings and our own errors by default, everything with ``--verbose``."""

from __future__ import annotations

import logging
import os

__all__ = ["configure_logging"]

_NOISY_LOGGERS = (
    "transformers",
    "torch",
    "torch.onnx",
    "onnxscript",
    "onnx_ir",
    "huggingface_hub",
    "onnxruntime",
)
# Variables transformers and huggingface_hub read when they are imported (later, lazily) to keep their progress bars
# and advisory notes about their own internals off the terminal.
_QUIET_ENVIRONMENT = {
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}
_set_by_us: list[str] = []  # the variables above that this process set (not the user)


def configure_logging(verbose: bool) -> None:
    """Set the log level and the libraries' chatter. Called by the group for its own ``--verbose`` and again by a
    subcommand's ``--verbose`` (``gpt2-onnx run out -v``), which undoes the quieting."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(logging.INFO if verbose else logging.WARNING)
    for name in _NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.ERROR)
    if verbose:
        while _set_by_us:
            os.environ.pop(_set_by_us.pop(), None)
        return
    for key, value in _QUIET_ENVIRONMENT.items():
        if key not in os.environ:
            os.environ[key] = value
            _set_by_us.append(key)
