"""The session layouts a command can ask for (``run --layout``, bench's systems), by name, without importing ONNX
Runtime: ``merged`` (one session over a generation graph built from decode.onnx), ``split`` (the folder's two
graphs as shipped) and ``auto`` (merged where the installed runtime has it). The runtime's RuntimeOptions.layout
takes exactly these names. Also the KV cache's modes (``run --in-place-kv``, RuntimeOptions.in_place_kv): ``auto``
(written in place where it applies), ``on`` (refused where it does not), ``off`` (decode.onnx's own attention, which
copies the past into a new present every step). And the KV cache's formats (``--kv-cache``, RuntimeOptions.kv_cache):
``float32`` (exact) or ``int8`` (a quarter of the memory, written in place with per-channel scales). And the
prompt's kernel (``--prompt-kernel``, RuntimeOptions.prompt_kernel): ``export`` (the graph's own) or ``dynamic``
(an int8 or int4 export's projections through DynamicQuantizeMatMul for prompts; see
gpt2_onnx_runtimes.prompt_kernel)."""

from __future__ import annotations

from typing import Literal, get_args

from gpt2_onnx_core.errors import OptionError

__all__ = [
    "IN_PLACE_KV_MODES",
    "KV_CACHE_FORMATS",
    "PROMPT_KERNELS",
    "SESSION_LAYOUTS",
    "InPlaceKv",
    "KvCacheFormat",
    "PromptKernel",
    "SessionLayout",
    "kv_cache_format",
    "prompt_kernel",
    "session_layout",
]

SessionLayout = Literal["auto", "merged", "split"]
SESSION_LAYOUTS: tuple[SessionLayout, ...] = get_args(SessionLayout)
InPlaceKv = Literal["auto", "on", "off"]
IN_PLACE_KV_MODES: tuple[InPlaceKv, ...] = get_args(InPlaceKv)
KvCacheFormat = Literal["float32", "int8"]
KV_CACHE_FORMATS: tuple[KvCacheFormat, ...] = get_args(KvCacheFormat)
PromptKernel = Literal["export", "dynamic"]
PROMPT_KERNELS: tuple[PromptKernel, ...] = get_args(PromptKernel)


def session_layout(value: str) -> SessionLayout:
    """``value`` as a :data:`SessionLayout`; :class:`OptionError` naming the choices for any other string."""
    for name in SESSION_LAYOUTS:
        if value == name:
            return name
    raise OptionError(f"{{layout}} must be one of {', '.join(SESSION_LAYOUTS)}, got '{value}'", "layout")


def kv_cache_format(value: str) -> KvCacheFormat:
    """``value`` as a :data:`KvCacheFormat`; :class:`OptionError` naming the choices for any other string."""
    for name in KV_CACHE_FORMATS:
        if value == name:
            return name
    raise OptionError(f"{{kv_cache}} must be one of {', '.join(KV_CACHE_FORMATS)}, got '{value}'", "kv_cache")


def prompt_kernel(value: str) -> PromptKernel:
    """``value`` as a :data:`PromptKernel`; :class:`OptionError` naming the choices for any other string."""
    for name in PROMPT_KERNELS:
        if value == name:
            return name
    raise OptionError(f"{{prompt_kernel}} must be one of {', '.join(PROMPT_KERNELS)}, got '{value}'", "prompt_kernel")
