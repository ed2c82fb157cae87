"""The session layouts a command can ask for (``run --layout``, bench's systems), by name, without importing ONNX
Runtime: ``merged`` (one session over a generation graph built from decode.onnx), ``split`` (the folder's two
graphs as shipped) and ``auto`` (merged where the installed runtime has it). The runtime's RuntimeOptions.layout
takes exactly these names."""

from __future__ import annotations

from typing import Literal, get_args

from gpt2_onnx_core.errors import OptionError

__all__ = ["SESSION_LAYOUTS", "SessionLayout", "session_layout"]

SessionLayout = Literal["auto", "merged", "split"]
SESSION_LAYOUTS: tuple[SessionLayout, ...] = get_args(SessionLayout)


def session_layout(value: str) -> SessionLayout:
    """``value`` as a :data:`SessionLayout`; :class:`OptionError` naming the choices for any other string."""
    for name in SESSION_LAYOUTS:
        if value == name:
            return name
    raise OptionError(f"{{layout}} must be one of {', '.join(SESSION_LAYOUTS)}, got '{value}'", "layout")
