"""Every fact about a precision, in one table: its flag and manifest name, parity tolerances, how its golden vectors
are made and how closely a consumer must reproduce them, the oldest ONNX Runtime that runs it, its perplexity limit
and its weight quantization. Adding a precision is one entry in :data:`PRECISIONS`.

    flag  name     weights                                 golden vectors from   min onnxruntime
    fp32  float32  float32                                 the source model      the opset's
    fp16  float16  float16 (float32 inputs and outputs)    the export itself     1.15.0
    int8  int8     8-bit blocks, MatMulNBits               the export itself     1.22.0
    int4  int4     4-bit blocks, MatMulNBits               the export itself     1.17.0
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from gpt2_onnx_core.errors import ExportError, InvalidInputError, ManifestError
from gpt2_onnx_core.tolerances import ArithmeticRule, PerplexityLimit, Tolerance

__all__ = [
    "ACCURACY_LEVELS",
    "FP32",
    "MATMUL_KERNELS",
    "PRECISIONS",
    "MatMulKernel",
    "Precision",
    "Quantization",
    "int8_kv_cache_perplexity",
    "precision_flag",
    "precision_named",
    "tolerance_for",
    "with_int8_kv_cache",
]


MatMulKernel = Literal["matmulnbits", "dynamic"]
MATMUL_KERNELS: tuple[MatMulKernel, ...] = ("matmulnbits", "dynamic")
ACCURACY_LEVELS = range(5)  # MatMulNBits' accuracy_level: 0 unset, 1 fp32, 2 fp16, 3 bf16, 4 int8 activations


@dataclass(frozen=True)
class Quantization:
    """Weight quantization of the matrices and the tied table.

    The tied table (embedding and head) is always cut into blocks and read by ``MatMulNBits``; the blocks' matrices
    by the ``kernel``:

        matmulnbits  MatMulNBits over the same blocks; accuracy_level 4 quantizes the activations to int8 per block
        dynamic      8 bits only: int8 weights with one scale per output column, DynamicQuantizeMatMul quantizing
                     the activations to uint8 per tensor at run time (MLAS's integer GEMM, VNNI where the CPU has it)
    """

    bits: int  # 4 or 8
    block_size: int  # values per scale along K, at most (smaller where K needs it: see block_for)
    accuracy_level: int  # MatMulNBits: 0 unset (fp32 activations), 4 = int8 activations (VNNI/AMX kernels)
    kernel: MatMulKernel = "matmulnbits"  # what multiplies the blocks' matrices

    def block_for(self, k: int) -> int:
        """The largest power of two ≤ ``block_size`` (and ≥ 16, MatMulNBits' least) that divides ``k``."""
        block = self.block_size
        while block >= 16 and k % block:
            block //= 2
        if block < 16:
            raise ExportError(f"no block size of 16 or more divides K = {k}; cannot quantize that weight")
        return block

    def with_block_size(self, block_size: int | None) -> Quantization:
        return self if block_size is None else replace(self, block_size=block_size)


@dataclass(frozen=True)
class Precision:
    """One precision an export can have."""

    flag: str  # --precision's value
    name: str  # manifest.json's "precision" (float32 graphs compute in float32, and so on)
    help: str  # what it is for, one phrase
    tolerance: Tolerance  # parity against the source model
    golden_from: Literal["source", "export"]  # whose greedy tokens and logits golden.json holds
    # how closely a consumer's runtime must reproduce golden.json's logits; None: per case, from the tolerance's
    # arithmetic rule (fp32: golden.json holds the float64 source's logits and each case's limit)
    golden_logits_atol: float | None
    min_onnxruntime: str  # the oldest release whose CPU provider runs it (the opset may need a newer one)
    perplexity: PerplexityLimit  # how far verify --perplexity lets the export's perplexity move from the source's
    quantization: Quantization | None = None  # weight-only block quantization, int8/int4

    @property
    def float32(self) -> bool:
        """float32 weights: the one precision whose matrices ONNX Runtime can read unpacked from a map."""
        return self.name == "float32"


# Reduced precisions' tolerances: measured with `gpt2-onnx verify` (8 prompts, 32 decode steps, CPU, ONNX Runtime
# 1.31, AMD EPYC) on seeded random weights (GPT-2-small and tiny dimensions) and on the trained checkpoint
# checkpoints/pydocs-tiny (4 layers, 64 wide, logits within ±18). Random weights give near-flat next-token
# distributions, where the argmax flips on tiny logit changes; trained weights are peakier: top-1 agrees more, KL
# and |Δlogits| grow (int8 KL 1.0e-3 trained against 1.4e-4 random GPT-2 small; int4 0.036 against 0.016). The
# int8 and int4 limits below are set from the trained checkpoint's figures (docs/verification.md, "Reduced
# precisions").
#
# Golden tolerances: a reduced precision's golden.json holds the export's own outputs, and its logits tolerance covers
# other kernels: fp16 CUDA's, whose accumulation order differs most; MatMulNBits' (accuracy level 4 quantizes
# activations), whose single-row decode and multi-row prompt paths already differ on one CPU. The measurements are
# in docs/deploying.md ("golden.json"); tiny models differ by < 1e-5.
#
# Minimum runtimes: measured by scripts/ort_matrix.py --all (docs/compatibility.md).
#
# Perplexity limits, on |ppl(export) / ppl(source) − 1|: measured by benchmarks/perplexity.py on the trained
# checkpoints/pydocs-tiny over its held-out text (13,066 tokens, windows of 1,024, stride 512; ONNX Runtime 1.31 CPU
# provider, AMD EPYC; benchmarks/results/*-perplexity.json, docs/performance.md). The quantized limits are the
# project's aims (int8 within 1 % of the source model, int4 within 5 %), not the measured change plus headroom: a
# perplexity change is judged by what a user can accept, the logits by the arithmetic (the tolerances above).
#
# fp32: judged against the source model run in float64 (gpt2_onnx_core.tolerances.ArithmeticRule). Measured by
# benchmarks/fp32_rule.py on AMD EPYC (AVX-512, no AMX), ONNX Runtime 1.31.1, torch 2.13, 1,024 positions, both
# session layouts, 2 to 12 layers, 64 to 768 wide, logits ×1 to ×100 (max |logit| 1.2 to 323), the trained-scale
# presets and a trained checkpoint: the export's max |Δ| from float64 was 0.44 to 1.28 × the float32 source's own,
# at 1.7e-7 to 7.3e-7 of the largest |value|. docs/verification.md has the table and the reasoning for other CPUs.
FP32_RULE = ArithmeticRule(factor=4.0, floor=1e-6)
FP32_BASIS = (
    "fp32 against the source model in float64: measured (AMD EPYC, 1,024 positions, both layouts, 2-12 layers, "
    "64-768 wide, max |logit| 1.2 to 323) the export's error 0.44-1.28 × the float32 source's own and at most "
    "7.3e-7 of the largest value; factor 4 and a floor of 1e-6 × the largest value leave 3× for other CPUs' "
    "kernels (Intel Xeon: its AVX-512 fp32 kernels; AMX does not serve fp32) and thread counts"
)
FP32 = Precision(
    flag="fp32",
    name="float32",
    help="float32 weights and compute (exact)",
    tolerance=Tolerance(
        logits_atol=None,
        kv_atol=None,
        min_top1=1.0,
        max_kl=1e-6,
        greedy_exact=True,
        basis=FP32_BASIS,
        arithmetic=FP32_RULE,
    ),
    golden_from="source",
    golden_logits_atol=None,
    min_onnxruntime="1.15.0",
    perplexity=PerplexityLimit(
        1e-4,
        "fp32 against fp32, the same arithmetic in another order: measured relative change 9e-9 (pydocs-tiny, "
        "held-out text), 3e-9 (tiny models); 1e-4 leaves room for other CPUs, thread counts and larger models",
    ),
)
PRECISIONS: tuple[Precision, ...] = (
    FP32,
    Precision(
        flag="fp16",
        name="float16",
        help="float16 weights and compute for CUDA, float32 inputs and outputs",
        tolerance=Tolerance(
            logits_atol=2e-2,
            kv_atol=2e-2,
            min_top1=0.9,
            max_kl=1e-4,
            greedy_exact=False,
            basis=(
                "fp16 weights and compute, float32 I/O, on the CPU provider: measured max |Δlogits| 2.3e-3, |ΔKV| "
                "1.9e-3, top-1 100 %, max KL 1.1e-7, 8 of 8 greedy runs exact (GPT-2 small); limits ~10× for CUDA's "
                "accumulation order and peakier real weights; top-1 leaves out near ties (top two within 2 × the "
                "logits limit); greedy divergence reported, not judged"
            ),
            near_tie=4e-2,
        ),
        golden_from="export",
        golden_logits_atol=5e-2,
        min_onnxruntime="1.15.0",
        perplexity=PerplexityLimit(
            1e-2,
            "float16 weights and compute: measured relative change 1.4e-5 (pydocs-tiny, CPU provider); 1 % allows "
            "for CUDA's accumulation order and larger models",
        ),
    ),
    Precision(
        flag="int8",
        name="int8",
        help="8-bit weight blocks (MatMulNBits) for the CPU",
        tolerance=Tolerance(
            logits_atol=None,
            kv_atol=None,
            min_top1=0.9,
            max_kl=5e-3,
            greedy_exact=False,
            basis=(
                "int8 weights (block 128, symmetric), int8 activations in MatMulNBits: measured on the trained "
                "checkpoint (pydocs-tiny) max KL 1.0e-3 (median 1.3e-4), max |Δlogits| 0.26 (reported only), top-1 "
                "100 % of the positions whose top two lie more than 0.15 apart (10 of 77 left out), 5 of 5 greedy runs "
                "exact for 32 steps; on random weights max KL 1.4e-4 (GPT-2 small), 2.9e-6 (tiny), top-1 flips only "
                "between logits 0.022 apart. Limits: KL 5× the trained maximum, top-1 ≥ 90 % beyond near ties of "
                "0.15 (an absolute gap: a random tiny model's logits lie within ±1)"
            ),
            near_tie=0.15,
        ),
        golden_from="export",
        golden_logits_atol=0.1,
        min_onnxruntime="1.22.0",  # 8-bit MatMulNBits: 1.21.1 fails
        perplexity=PerplexityLimit(
            1e-2,
            "the aim for 8-bit weights, within 1 % of the source model: measured -2.3e-4 (pydocs-tiny, block 128, "
            "accuracy level 4)",
        ),
        # kernel: MatMulNBits stays the default. `--matmul-kernel dynamic` (DynamicQuantizeMatMul) takes 0.54× its
        # time for a 128-token prompt's projections and 0.80× for the whole prefill, but 1.38× per decode step
        # (benchmarks/results/20261202T014845Z-kernels.md, 20261202T021245Z-kernel-modes.md; AMD EPYC, shared),
        # and a generation of more than a few tokens spends more in its steps than in its prompt. Accuracy level 4
        # measured faster than 0 at every size there; 0 for 8 bits falls back to dequantizing per call.
        quantization=Quantization(bits=8, block_size=128, accuracy_level=4),
    ),
    Precision(
        flag="int4",
        name="int4",
        help="4-bit weight blocks (MatMulNBits) for the CPU",
        tolerance=Tolerance(
            logits_atol=None,
            kv_atol=None,
            min_top1=0.0,
            max_kl=0.1,
            greedy_exact=False,
            basis=(
                "int4 weights (block 32, symmetric), int8 activations in MatMulNBits: measured on the trained "
                "checkpoint (pydocs-tiny) max KL 0.036 (median 0.016), top-1 95.5 % on average with single positions "
                "flipping, max |Δlogits| 1.8, free-running greedy splitting at steps 0 to 17; on random weights max "
                "KL 0.016 (GPT-2 small; 0.023 with --block-size 128), 4e-4 (tiny). Limit: KL about 3× the trained "
                "maximum; top-1 and greedy divergence reported, not judged"
            ),
        ),
        golden_from="export",
        golden_logits_atol=0.1,
        min_onnxruntime="1.17.0",  # 4-bit MatMulNBits
        perplexity=PerplexityLimit(
            5e-2,
            "the aim for 4-bit weights, within 5 % of the source model: measured +1.2e-2 (pydocs-tiny, block 32, "
            "accuracy level 4; +6e-3 with --block-size 16)",
        ),
        # block 32: quality first (GPT-2-small is small enough to feel int4); --block-size 128 trades for speed:
        # GPT-2-small's prompt 0.59-0.77× and decode step 0.78× the time, 25 MiB less RSS (same results), for
        # perplexity +1.49 % against +1.23 % on pydocs-tiny (whose 64-wide matrices cap its blocks at 64)
        quantization=Quantization(bits=4, block_size=32, accuracy_level=4),
    ),
)


def precision_flag(flag: str) -> Precision:
    """The precision of ``--precision flag``; :class:`InvalidInputError` naming the choices otherwise."""
    for precision in PRECISIONS:
        if precision.flag == flag:
            return precision
    raise InvalidInputError(f"precision '{flag}' is not one of {', '.join(p.flag for p in PRECISIONS)}")


def precision_named(name: str) -> Precision:
    """The precision a manifest names; :class:`ManifestError` for one this release does not know."""
    for precision in PRECISIONS:
        if precision.name == name:
            return precision
    raise ManifestError(f"precision '{name}' is not one this gpt2-onnx knows ({', '.join(p.name for p in PRECISIONS)})")


# The int8 KV cache (run, serve and verify --kv-cache int8; RuntimeOptions.kv_cache): keys and values kept as int8
# with a fixed scale per layer, head and channel measured at load (gpt2_onnx_runtimes.kv_scales). Its error adds to
# the weights' own, so generation over it is judged by the precision's limits loosened by these. Measured on the
# trained checkpoint (pydocs-tiny, fp32 weights, ONNX Runtime 1.31, AMD EPYC): teacher-forced steps of a padded
# batch (8 prompts of the held-out text, 64 steps) against the float32 cache max KL 1.6e-4 (median 3.4e-7), top-1
# 100 %, max |Δlogits| 0.08 of logits within ±20; perplexity over the held-out text -2.6e-4 relative (fp32),
# -4.5e-4 (int8 weights, against their own -2.5e-4), +1.20 % (int4, against +1.23 %) (benchmarks/results/
# *-perplexity.md).
INT8_KV_CACHE_KL = 5e-3  # added to the precision's KL limit
INT8_KV_CACHE_NEAR_TIE = 0.15  # top-1 leaves out positions whose top two lie closer (as int8 weights)
INT8_KV_CACHE_PERPLEXITY = 1e-2  # added to the precision's perplexity limit: the aim of 8-bit weights
INT8_KV_CACHE_BASIS = (
    "int8 KV cache (per-channel scales measured at load): KL limit + 5e-3 (trained checkpoint measured 1.6e-4 "
    "against the float32 cache), top-1 ≥ 90 % beyond near ties of 0.15, logits and KV not judged by an absolute limit, "
    "greedy divergence reported"
)


def with_int8_kv_cache(tolerance: Tolerance) -> Tolerance:
    """A precision's parity limits for generation over an int8 KV cache: the cache's error added to its own."""
    return replace(
        tolerance,
        logits_atol=None,
        kv_atol=None,
        arithmetic=None,
        greedy_exact=False,
        min_top1=min(tolerance.min_top1, 0.9),
        max_kl=(tolerance.max_kl or 0.0) + INT8_KV_CACHE_KL,
        near_tie=max(tolerance.near_tie, INT8_KV_CACHE_NEAR_TIE),
        basis=f"{tolerance.basis}; with the {INT8_KV_CACHE_BASIS}",
    )


def int8_kv_cache_perplexity(limit: PerplexityLimit) -> PerplexityLimit:
    """A precision's perplexity limit for scoring over an int8 KV cache: the cache's aim added to its own."""
    if limit.max_relative is None:
        return limit
    return PerplexityLimit(
        limit.max_relative + INT8_KV_CACHE_PERPLEXITY,
        f"{limit.basis}; plus 1 % for the int8 KV cache (measured -2.6e-4 on the trained checkpoint)",
    )


def tolerance_for(name: str) -> Tolerance:
    """The parity tolerances of the precision a manifest names."""
    return precision_named(name).tolerance
