"""The fixed scales of an int8 KV cache (``kv_cache`` 'int8'), measured on the export itself when it loads.

GroupQueryAttention quantizes each key and value it writes with a scale per layer, head and channel that must be
known before the first token (the cache is written one position at a time, so a scale cannot follow the data).
They are measured here by the session that will generate: the int8-cache generation graph also returns each
layer's new keys and values before quantization (:func:`~gpt2_onnx_runtimes.inplace_attention.probe_names`: its
packed projection, whose key and value columns are taken here, or its keys and its values), and a
calibration text runs through it in chunks of :data:`CHUNK` tokens from an empty past, each chunk at its own
positions, so that together they cover every position the model has (GPT-2 adds a learned position embedding to
its input, and the keys' ranges move with the position). Then per channel:

    scale[l, h, c] = max(margin · max_t |x[l, h, t, c]|, floor[l]) / 127        x: layer l's new keys or values

The probes of layer l > 0 depend on the attention of the layers before it, which reads their int8 cache: so a first
pass over the text's first :data:`ROUGH_TOKENS` with placeholder scales gives rough scales, and the measuring runs
use those, as generation will use the final ones. ``margin`` leaves headroom for text whose keys and values reach
further than the calibration text's (beyond it a value is clipped to ±127); ``floor`` (a small fraction of the
layer's largest) keeps a channel that stayed near zero on the calibration text from a scale that would clip
everything it later sees. The default text (``kv_calibration.txt`` beside this module, written for this project)
mixes narrative, dialogue, technical prose, numbers, a list and Python code; a deployment may calibrate on its own
text instead (``RuntimeOptions.kv_calibration``). It costs (ROUGH_TOKENS + n_positions) / CHUNK prefills of CHUNK
tokens at load (GPT-2-small: 3 s on 2 AVX2 cores; CHUNK 64 against 256: 0.5 s faster and 28 MiB less peak RSS), and
no second session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.names import ATTENTION_MASK, INPUT_IDS, POSITION_IDS, past_names
from gpt2_onnx_runtimes.inplace_attention import CacheScales
from gpt2_onnx_runtimes.ort_sessions import onnxruntime_errors

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["CHUNK", "DEFAULT_MARGIN", "calibration_ids", "default_calibration_text", "measure_cache_scales"]

CHUNK = 64  # calibration tokens per run: one run's activations, and so the arena at load, stay small
ROUGH_TOKENS = 256  # the first pass (placeholder scales) measures this many tokens, CHUNK at a time
DEFAULT_MARGIN = 1.25  # headroom over the calibration text's largest magnitude
_FLOOR = 0.02  # a channel's scale is at least this fraction of its layer's largest
_INT8_MAX = 127.0
_MIN_TOKENS = 64  # a calibration text shorter than this measures too little of the model's range


def default_calibration_text() -> str:
    """The text shipped with the runtime for calibrating an int8 cache."""
    return resources.files("gpt2_onnx_runtimes").joinpath("kv_calibration.txt").read_text(encoding="utf-8")


def calibration_ids(encode: Callable[[str], Sequence[int]], text: str, n_positions: int) -> np.ndarray:
    """``text`` tokenized and repeated to exactly ``n_positions`` tokens, (1, n_positions) int64."""
    ids = list(encode(text))
    if len(ids) < _MIN_TOKENS:
        raise InvalidInputError(
            f"the int8 KV cache's calibration text has {len(ids)} tokens; it needs at least {_MIN_TOKENS}"
        )
    repeats = -(-n_positions // len(ids))
    return np.asarray([(ids * repeats)[:n_positions]], dtype=np.int64)  # (1, n_positions)


@dataclass(frozen=True)
class _Probe:
    """The int8-cache generation session and what every calibration run binds besides the chunk and the scales:
    its probe outputs, the model's dimensions and the constant inputs (the mapped embedding)."""

    session: ort.InferenceSession
    probes: Sequence[str]
    dims: ModelDims
    constants: Mapping[str, ort.OrtValue]

    def run(self, scales: CacheScales, ids: np.ndarray, start: int) -> list[np.ndarray]:
        """One chunk ``ids`` (1, S) at positions ``start`` … from an empty past over an int8 cache of ``scales``:
        each layer's new keys and values (1, S, d) in (layer, key/value) order (a packed probe's key and value
        columns)."""
        dims = self.dims
        binding = self.session.io_binding()
        binding.bind_cpu_input(INPUT_IDS, ids)
        binding.bind_cpu_input(ATTENTION_MASK, np.ones_like(ids))  # (1, S)
        binding.bind_cpu_input(POSITION_IDS, np.arange(start, start + ids.shape[1], dtype=np.int64)[None])  # (1, S)
        empty = np.zeros((1, dims.n_head, 0, dims.head_dim), dtype=np.int8)  # (1, nh, 0, hs)
        for name in past_names(dims.n_layer):
            binding.bind_cpu_input(name, empty)
        for name, value in scales.feeds().items():
            binding.bind_cpu_input(name, value)  # (1, nh, 1, hs)
        for name, constant in self.constants.items():
            binding.bind_ortvalue_input(name, constant)  # the mapped embedding
        for name in self.probes:
            binding.bind_output(name, "cpu")
        with onnxruntime_errors("the generation graph (calibrating the int8 KV cache)"):
            self.session.run_with_iobinding(binding)
        width, found = dims.n_embd, []
        for value in binding.get_outputs():
            probe = value.numpy()  # (1, S, 3d): a layer's packed projection; (1, S, d): its keys or its values
            packed = probe.shape[-1] == 3 * width
            found += [probe[..., width : 2 * width], probe[..., 2 * width :]] if packed else [probe]
        if len(found) != 2 * dims.n_layer:
            raise InvalidInputError(f"the probes gave {len(found)} keys and values for {dims.n_layer} layers")
        return found

    def largest(self, scales: CacheScales, ids: np.ndarray) -> np.ndarray:
        """Each layer's largest |key| and |value| per head and channel over ``ids`` in chunks: (2·L, nh, hs)."""
        dims = self.dims
        largest = np.zeros((2 * dims.n_layer, dims.n_head, dims.head_dim), dtype=np.float32)  # (2·L, nh, hs)
        for start in range(0, ids.shape[1], CHUNK):
            chunk = np.ascontiguousarray(ids[:, start : start + CHUNK])  # (1, S)
            for index, values in enumerate(self.run(scales, chunk, start)):  # (1, S, d) each
                heads = np.abs(values[0]).reshape(-1, dims.n_head, dims.head_dim)  # (S, nh, hs)
                np.maximum(largest[index], heads.max(axis=0), out=largest[index])
        return largest


def measure_cache_scales(
    session: ort.InferenceSession,
    probes: Sequence[str],
    dims: ModelDims,
    ids: np.ndarray,
    constants: Mapping[str, ort.OrtValue] | None = None,
    margin: float = DEFAULT_MARGIN,
) -> CacheScales:
    """Run ``ids`` (1, T) through the int8-cache generation graph's ``session`` chunk by chunk and derive every
    layer's key and value scales from its ``probes`` (see the module docstring); ``constants``: inputs bound on
    every run (the mapped embedding)."""
    if margin < 1:
        raise InvalidInputError(f"the calibration margin must be >= 1, got {margin}")
    if not dims.n_layer <= len(probes) <= 2 * dims.n_layer:  # a packed projection, or keys and values, per layer
        raise InvalidInputError(f"{len(probes)} probes for {dims.n_layer} layers' keys and values")
    probe = _Probe(session, probes, dims, constants or {})
    rough = _scales(
        probe.largest(_placeholder((dims.n_layer, dims.n_head, dims.head_dim)), ids[:, :ROUGH_TOKENS]), margin
    )
    return _scales(probe.largest(rough, ids), margin)


def _placeholder(shape: tuple[int, int, int]) -> CacheScales:
    ones = np.ones(shape, dtype=np.float32)
    return CacheScales(key=ones, value=ones)


def _scales(largest: np.ndarray, margin: float) -> CacheScales:
    """Scales from the largest magnitudes (2·L, nh, hs), keys and values interleaved."""
    floor = _FLOOR * largest.max(axis=(1, 2), keepdims=True)  # (2·L, 1, 1)
    scales = (np.maximum(margin * largest, floor) / _INT8_MAX).astype(np.float32)  # (2·L, nh, hs)
    if not np.all(np.isfinite(scales) & (scales > 0)):
        raise InvalidInputError("the calibration run produced keys or values that are all zero or not finite")
    return CacheScales(key=scales[0::2], value=scales[1::2])  # (L, nh, hs) each
