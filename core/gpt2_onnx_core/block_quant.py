"""Block-wise symmetric weight quantization in the layout of ONNX Runtime's ``MatMulNBits`` (numpy only).

A weight W of shape (N, K) (output features × input features) is cut into blocks of ``block_size`` along K; each
block gets one float32 scale and integers q in [0, 2^bits) around the default zero point z = 2^(bits-1):

    W[n, k] ≈ (q[n, k] - z) · scale[n, k // block_size]

Symmetric (no stored zero points) on purpose: ``MatMulNBits`` then needs none, and the embedding lookup, which
dequantizes gathered rows of the same table with plain ONNX ops, uses the same implicit z.

Layouts (``MatMulNBits`` inputs B and scales):

    q       uint8 (N, K / block, block · bits / 8)   4 bits: two values per byte, the first in the low nibble
    scales  float32 (N, K / block)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpt2_onnx_core.errors import ExportError

__all__ = ["BlockQuantized", "ColumnQuantized", "dequantize", "quantize_blocks", "quantize_columns", "unpack"]


@dataclass(frozen=True)
class BlockQuantized:
    """A quantized (N, K) weight in ``MatMulNBits`` layout."""

    packed: np.ndarray  # uint8 (N, K / block, block · bits / 8)
    scales: np.ndarray  # float32 (N, K / block)
    bits: int
    block_size: int

    @property
    def zero_point(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def shape(self) -> tuple[int, int]:
        """The (N, K) of the weight it stands for."""
        n, blocks, _ = self.packed.shape
        return n, blocks * self.block_size


def quantize_blocks(weight: np.ndarray, bits: int, block_size: int) -> BlockQuantized:
    """Quantize ``weight`` (N, K) float32 block-wise along K. K must be a multiple of ``block_size``."""
    if bits not in (4, 8):
        raise ExportError(f"block quantization supports 4 or 8 bits, not {bits}")
    n, k = weight.shape
    if k % block_size:
        raise ExportError(f"a weight with K = {k} cannot be cut into blocks of {block_size}")
    zero = 1 << (bits - 1)
    blocks = weight.astype(np.float32).reshape(n, k // block_size, block_size)  # (N, K/b, b)
    # z - 1 steps below zero and z - 1 above: symmetric, so -max and +max both stay representable.
    scales = np.abs(blocks).max(axis=-1) / (zero - 1)  # (N, K/b)
    scales[scales == 0] = 1.0  # an all-zero block: any scale gives q = z
    q = np.clip(np.rint(blocks / scales[..., None]) + zero, 0, 2 * zero - 1).astype(np.uint8)  # (N, K/b, b)
    if bits == 4:
        q = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)  # (N, K/b, b/2): low nibble first
    return BlockQuantized(np.ascontiguousarray(q), scales.astype(np.float32), bits, block_size)


def unpack(quantized: BlockQuantized) -> np.ndarray:
    """The integers q (N, K/b, b) as uint8, unpacked."""
    q = quantized.packed
    if quantized.bits == 4:
        q = np.stack([q & 0x0F, q >> 4], axis=-1).reshape(*q.shape[:-1], -1)  # (N, K/b, b)
    return q


def dequantize(quantized: BlockQuantized) -> np.ndarray:
    """The float32 weight (N, K) the quantized form stands for."""
    q = unpack(quantized).astype(np.float32) - quantized.zero_point  # (N, K/b, b)
    return (q * quantized.scales[..., None]).reshape(quantized.shape)


@dataclass(frozen=True)
class ColumnQuantized:
    """A (K, N) weight as int8 with one scale per output column: ``DynamicQuantizeMatMul``'s B and b_scale."""

    values: np.ndarray  # int8 (K, N), in [-127, 127]
    scales: np.ndarray  # float32 (N,)


def quantize_columns(weight: np.ndarray) -> ColumnQuantized:
    """Quantize ``weight`` (K, N) float32 symmetrically per column: W[k, n] ≈ q[k, n] · scale[n]."""
    scales = np.abs(weight).max(axis=0) / 127.0  # (N,): ±127, so -max and +max both stay representable
    scales[scales == 0] = 1.0  # an all-zero column: any scale gives q = 0
    q = np.clip(np.rint(weight / scales), -127, 127).astype(np.int8)  # (K, N)
    return ColumnQuantized(np.ascontiguousarray(q), scales.astype(np.float32))
