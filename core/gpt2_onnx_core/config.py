"""Frozen configuration passed explicitly between the stages: model dimensions and export options."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpt2_onnx_core.errors import OptionError, UnsupportedOpsetError
from gpt2_onnx_core.precisions import Precision, Quantization, precision_flag

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

    def __post_init__(self) -> None:
        check_opset(self.opset)
        precision = precision_flag(self.precision)  # refuses an unknown one
        if self.block_size is not None:
            if precision.quantization is None:
                raise OptionError("{block_size} applies to {precision} int8 or int4 only", "block_size", "precision")
            if self.block_size < 16 or self.block_size & (self.block_size - 1):
                raise OptionError(f"{{block_size}} must be a power of two >= 16, got {self.block_size}", "block_size")
        if self.seed is not None and not self.model.startswith(RANDOM_PREFIX):
            raise OptionError(f"{{seed}} seeds random:NAME weights only; '{self.model}' brings its own weights", "seed")
        if self.simplify and (self.optimize or self.precision != "fp32"):
            raise OptionError(
                "{simplify} runs on plain fp32 graphs only; drop it with {optimize} or {precision}",
                "simplify",
                "optimize",
                "precision",
            )

    @property
    def precision_info(self) -> Precision:
        """Everything about the precision asked for (:mod:`gpt2_onnx_core.precisions`)."""
        return precision_flag(self.precision)

    @property
    def quantization(self) -> Quantization | None:
        """int8/int4: the precision's quantization with ``block_size`` where one was given."""
        settings = self.precision_info.quantization
        return None if settings is None else settings.with_block_size(self.block_size)

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
            "check": self.check,
        }
