"""How an export's ONNX Runtime sessions are made: :class:`RuntimeOptions`, and the layout they resolve to on the
installed ONNX Runtime (:func:`resolve_layout`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gpt2_onnx_core import compatibility
from gpt2_onnx_core.errors import InvalidInputError, RuntimeVersionError
from gpt2_onnx_core.integrity import IntegrityCheck
from gpt2_onnx_core.layouts import (
    IN_PLACE_KV_MODES,
    KV_CACHE_FORMATS,
    PROMPT_KERNELS,
    SESSION_LAYOUTS,
    InPlaceKv,
    KvCacheFormat,
    PromptKernel,
    SessionLayout,
)
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_core.versions import version_tuple

__all__ = ["InPlaceKv", "KvCacheFormat", "PromptKernel", "RuntimeOptions", "SessionLayout", "resolve_layout"]

_OPT_LEVELS = ("disable", "basic", "extended", "all")
_LAYOUTS = SESSION_LAYOUTS
_IN_PLACE = IN_PLACE_KV_MODES


@dataclass(frozen=True)
class RuntimeOptions:
    """How sessions are created."""

    provider: ProviderName = "cpu"
    intra_op_threads: int | None = None  # None: ONNX Runtime's default (one per physical core)
    inter_op_threads: int | None = None
    graph_optimization: Literal["disable", "basic", "extended", "all"] = "all"
    device_id: int = 0  # CUDA device
    session_config: Mapping[str, str] = field(default_factory=dict)  # extra SessionOptions config entries
    log_severity: int = 3  # ONNX Runtime's own log level: 0 verbose … 3 error, 4 fatal
    layout: SessionLayout = "auto"  # merged: one session for every step; split: the folder's two graphs
    # split layout, CPU, fp32: map the weights file once and give both sessions its tensors, prepacking off (see
    # shared_weights). False: ONNX Runtime loads each session's weights itself (prepacked copies per session).
    share_weights: bool = True
    # Every file hashed against the manifest's sha256 before the sessions exist (gpt2_onnx_core.integrity).
    integrity: IntegrityCheck = field(default_factory=IntegrityCheck)
    # The KV cache written in place (gpt2_onnx_runtimes.inplace_attention): the generation graph's attention is
    # GroupQueryAttention over one fixed-capacity buffer per cache tensor, so a decode step writes its new position
    # instead of copying the whole past. auto: where it applies (merged layout, CPU, a float32 cache: fp32, int8,
    # int4 and --optimize graphs, onnxruntime >= IN_PLACE_KV_MIN_ONNXRUNTIME); on: refuse where it does not;
    # off: decode.onnx's own attention, which concatenates the past into a new present every step.
    in_place_kv: InPlaceKv = "auto"
    # The cache's format. float32: exact. int8: a quarter of the bytes, quantized per layer, head and channel with
    # scales measured on the export when it loads (gpt2_onnx_runtimes.kv_scales); it needs the in-place cache, so
    # the merged layout on the CPU, and changes the logits (its perplexity change is in docs/performance.md).
    kv_cache: KvCacheFormat = "float32"
    # int8 cache only: the text its scales are measured on (None: the runtime's own calibration text).
    kv_calibration: str | None = None
    # The in-place cache only: a prompt of one row longer than this runs in chunks of this many tokens, each after
    # the cache the chunks before it wrote, so that one run's activations (attention over the chunk's positions,
    # the MLP) stay those of a chunk however long the prompt; the logits equal a whole-prompt run's. 0: one run.
    # None: 256 tokens with a float32 cache, 128 with the int8 one (:attr:`prefill_chunk_tokens`).
    prefill_chunk: int | None = None
    # What multiplies a prompt's projections. export: the graph's own kernel for every run. dynamic: in an int8 or
    # int4 export, a prompt's runs (every chunk of a long one) go through a second session whose MatMulNBits
    # projections are DynamicQuantizeMatMul over int8 weights requantized per column when the export loads (ONNX
    # Runtime's u8s8 QGEMM, about twice as fast on a prompt), while decode steps keep the export's kernel; with the
    # int8 cache, that session attends over a float32 cache of the prompt's own (gpt2_onnx_runtimes.
    # prompt_attention). It costs the int8 weights' memory besides the export's and changes a prompt's logits
    # (gpt2_onnx_runtimes.prompt_kernel); merged layout, CPU only.
    prompt_kernel: PromptKernel = "export"
    # Merged layout, CPU, a float32 export with a tied head: a batch of one row multiplies a transposed copy of the
    # tied table, made at load, which MLAS's single-row kernel reads faster (gpt2_onnx_runtimes.generation_graph:
    # 1.4 ms of a 19.8 ms GPT-2-small step, results/20261203T052935Z-single-row-head); batches keep reading the
    # table itself. The copy replaces the table's pages that the head would read, so a process that runs only
    # batches of one holds as much memory as without it; one that also runs larger batches (a server, beams) holds
    # both, the table's size more.
    single_row_head: bool = True

    def __post_init__(self) -> None:
        if self.graph_optimization not in _OPT_LEVELS:
            raise InvalidInputError(f"graph_optimization must be one of {', '.join(_OPT_LEVELS)}")
        if self.layout not in _LAYOUTS:
            raise InvalidInputError(f"layout must be one of {', '.join(_LAYOUTS)}, got '{self.layout}'")
        if self.in_place_kv not in _IN_PLACE:
            raise InvalidInputError(f"in_place_kv must be one of {', '.join(_IN_PLACE)}, got '{self.in_place_kv}'")
        if self.kv_cache not in KV_CACHE_FORMATS:
            raise InvalidInputError(f"kv_cache must be one of {', '.join(KV_CACHE_FORMATS)}, got '{self.kv_cache}'")
        if self.kv_cache == "int8" and self.in_place_kv == "off":
            raise InvalidInputError(
                "kv_cache 'int8' is written in place only; it cannot be used with in_place_kv 'off'"
            )
        if self.prompt_kernel not in PROMPT_KERNELS:
            raise InvalidInputError(
                f"prompt_kernel must be one of {', '.join(PROMPT_KERNELS)}, got '{self.prompt_kernel}'"
            )
        if self.prompt_kernel == "dynamic" and (self.layout == "split" or self.provider != "cpu"):
            raise InvalidInputError(
                "prompt_kernel 'dynamic' runs in the merged layout on the CPU provider only "
                f"(layout '{self.layout}', provider '{self.provider}')"
            )
        if self.prefill_chunk is not None and self.prefill_chunk < 0:
            raise InvalidInputError(
                f"prefill_chunk must be >= 0 (0: the whole prompt in one run), got {self.prefill_chunk}"
            )
        for name in ("intra_op_threads", "inter_op_threads"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidInputError(f"{name} must be >= 0 (0: ONNX Runtime's default), got {value}")

    @property
    def prefill_chunk_tokens(self) -> int:
        """The prompt tokens one prefill run takes (0: all). Unless set, 256 with a float32 cache and 128 with the
        int8 one: on GPT-2-small with a 1,000-token prompt (AMD EPYC, AVX-512, 2 threads; benchmarks/results/
        20261202T182732Z-prefill-chunk), 128 against 256 took 0.86-0.94x the time to first token over the int8
        cache for int4 and int8 weights (1.04x for fp32) and 17-20 MiB less peak RSS, while with a float32 cache
        it took 0.93-1.07x the time for 7-11 MiB less."""
        if self.prefill_chunk is not None:
            return self.prefill_chunk
        return 128 if self.kv_cache == "int8" else 256


def resolve_layout(options: RuntimeOptions) -> Literal["merged", "split"]:
    """The layout ``options`` ask for on the installed ONNX Runtime (``auto``: merged where it can load it)."""
    import onnxruntime as ort

    minimum = compatibility.MERGED_LAYOUT_MIN_ONNXRUNTIME  # read at each call: the matrix lifts it in its checks
    supported = version_tuple(ort.__version__) >= version_tuple(minimum)
    if options.layout == "split" or (options.layout == "auto" and not supported):
        return "split"
    if not supported:
        raise RuntimeVersionError(
            f"the merged layout needs onnxruntime >= {minimum}, but {ort.__version__} is installed; "
            "upgrade onnxruntime or use layout 'split'"
        )
    return "merged"
