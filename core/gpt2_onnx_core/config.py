"""Frozen configuration passed explicitly between the stages: model dimensions and export options."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from gpt2_onnx_core.errors import OptionError, UnsupportedOpsetError
from gpt2_onnx_core.precisions import (
    ACCURACY_LEVELS,
    MATMUL_KERNELS,
    MatMulKernel,
    Precision,
    Quantization,
    precision_flag,
)

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_OPSET",
    "RANDOM_PREFIX",
    "RANDOM_WEIGHTS_SEED",
    "SUPPORTED_OPSETS",
    "ExportOptions",
    "ModelDims",
    "check_opset",
]

DEFAULT_MODEL = "openai-community/gpt2"
RANDOM_PREFIX = "random:"  # random:NAME asks for seeded random weights of a published checkpoint's dimensions
RANDOM_WEIGHTS_SEED = 0  # random:NAME's seed when none is given
DEFAULT_OPSET = 17
SUPPORTED_OPSETS = range(17, 22)  # 17..21; 17 brings LayerNormalization, the oldest we need


@dataclass(frozen=True)
class ModelDims:
    """The dimensions of a GPT-2 model, as the graphs and the runtime see them."""

    n_layer: int  # transformer blocks
    n_head: int  # attention heads per block
    n_embd: int  # hidden size d
    vocab_size: int  # rows of the token embedding (= columns of the logits)
    n_positions: int  # longest sequence the position embedding covers

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def check_opset(opset: int) -> int:
    """Return ``opset`` if supported, else raise :class:`UnsupportedOpsetError`."""
    if opset not in SUPPORTED_OPSETS:
        raise UnsupportedOpsetError(
            f"opset {opset} is not supported; choose {SUPPORTED_OPSETS.start}..{SUPPORTED_OPSETS.stop - 1}"
        )
    return opset


@dataclass(frozen=True)
class ExportOptions:
    """What ``gpt2-onnx export`` was asked to do."""

    model: str = DEFAULT_MODEL  # local folder, hub id, or random:NAME
    output: Path = Path("gpt2-onnx-out")
    opset: int = DEFAULT_OPSET
    seed: int | None = None  # for random:NAME weights only (None: RANDOM_WEIGHTS_SEED); refused for a checkpoint
    tokenizer: str | None = None  # tokenizer source when the model's own is missing or unwanted
    revision: str | None = None  # hub revision (branch, tag or commit)
    all_logits: bool = False  # prefill returns logits for every position, not only the last
    simplify: bool = False  # run onnxsim on both graphs
    force: bool = False  # replace a non-empty output folder (only after the new export is complete and checked)
    check: bool = True  # compare the graphs with the source model before writing
    decode_check_steps: int = 4  # chained decode steps compared during the check
    optimize: bool = False  # ONNX Runtime contrib-op fusions (onnxscript's ort_fusions)
    precision: str = "fp32"  # a flag of gpt2_onnx_core.precisions.PRECISIONS: fp16 for CUDA, int8/int4 for the CPU
    block_size: int | None = None  # int8/int4: weights per quantization scale (None: the precision's default)
    accuracy_level: int | None = None  # int8/int4: MatMulNBits' accuracy_level (None: the precision's default)
    matmul_kernel: MatMulKernel | None = None  # int8: what multiplies the blocks' matrices (None: the precision's)

    def __post_init__(self) -> None:
        check_opset(self.opset)
        precision = precision_flag(self.precision)  # refuses an unknown one
        self._check_quantization(precision)
        if self.seed is not None and not self.model.startswith(RANDOM_PREFIX):
            raise OptionError(f"{{seed}} seeds random:NAME weights only; '{self.model}' brings its own weights", "seed")
        if self.simplify and (self.optimize or self.precision != "fp32"):
            raise OptionError(
                "{simplify} runs on plain fp32 graphs only; drop it with {optimize} or {precision}",
                "simplify",
                "optimize",
                "precision",
            )

    def _check_quantization(self, precision: Precision) -> None:
        """The quantization options: each only with a quantized precision, each within its values."""
        given = [name for name in ("block_size", "accuracy_level", "matmul_kernel") if getattr(self, name) is not None]
        if given and precision.quantization is None:
            raise OptionError(f"{{{given[0]}}} applies to {{precision}} int8 or int4 only", given[0], "precision")
        if self.block_size is not None and (self.block_size < 16 or self.block_size & (self.block_size - 1)):
            raise OptionError(f"{{block_size}} must be a power of two >= 16, got {self.block_size}", "block_size")
        if self.accuracy_level is not None and self.accuracy_level not in ACCURACY_LEVELS:
            levels = f"{ACCURACY_LEVELS.start}..{ACCURACY_LEVELS.stop - 1}"
            raise OptionError(
                f"{{accuracy_level}} must be one of {levels}, got {self.accuracy_level}", "accuracy_level"
            )
        if self.matmul_kernel is not None:
            if self.matmul_kernel not in MATMUL_KERNELS:
                raise OptionError(
                    f"{{matmul_kernel}} must be one of {', '.join(MATMUL_KERNELS)}, got '{self.matmul_kernel}'",
                    "matmul_kernel",
                )
            if (
                self.matmul_kernel == "dynamic"
                and precision.quantization is not None
                and precision.quantization.bits != 8
            ):
                raise OptionError(
                    "{matmul_kernel} dynamic needs 8-bit weights: {precision} int8", "matmul_kernel", "precision"
                )

    @property
    def precision_info(self) -> Precision:
        """Everything about the precision asked for (:mod:`gpt2_onnx_core.precisions`)."""
        return precision_flag(self.precision)

    @property
    def quantization(self) -> Quantization | None:
        """int8/int4: the precision's quantization with ``block_size`` where one was given."""
        settings = self.precision_info.quantization
        if settings is None:
            return None
        settings = settings.with_block_size(self.block_size)
        if self.accuracy_level is not None:
            settings = replace(settings, accuracy_level=self.accuracy_level)
        return settings if self.matmul_kernel is None else replace(settings, kernel=self.matmul_kernel)

    def to_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "opset": self.opset,
            "seed": self.seed,
            "tokenizer": self.tokenizer,
            "revision": self.revision,
            "all_logits": self.all_logits,
            "simplify": self.simplify,
            "optimize": self.optimize,
            "precision": self.precision,
            "block_size": self.block_size,
            "accuracy_level": self.accuracy_level,
            "matmul_kernel": self.matmul_kernel,
            "check": self.check,
        }
