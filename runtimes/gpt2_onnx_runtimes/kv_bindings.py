"""The in-place KV cache's IO bindings, kept per loaded export (:class:`KeptBindings`) so that a generation handed a
pooled buffer it was bound to before binds nothing again (:class:`gpt2_onnx_runtimes.kv_cache.KvCacheRunner`).
Serve's running batch keeps one :class:`KeptBinding` of its own while its rows and window stay
(:class:`gpt2_onnx_runtimes.batch_cache.RunningBatch`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort

    from gpt2_onnx_runtimes.kv_buffers import SharedKvBuffers

__all__ = ["BindingKey", "KeptBinding", "KeptBindings", "binding_key"]

# The session, then what the bound tensors are: the buffer's address and its per-tensor size (where tensor i
# starts), the batch and the capacity (their shape, (B, nh, C, hs)) and the dtype.
BindingKey = tuple[int, int, int, int, int, str]


@dataclass(frozen=True)
class KeptBinding:
    """An in-place cache's binding for one session and one set of cache tensors, and the logits buffer (B, 1, V) it
    writes."""

    session: ort.InferenceSession
    batch: int
    binding: ort.IOBinding
    logits: np.ndarray


def binding_key(session: ort.InferenceSession, buffers: SharedKvBuffers) -> BindingKey:
    """What a binding of ``buffers`` for ``session`` points at and how it shapes it."""
    dtype = np.dtype(buffers.dtype).str
    return (id(session), buffers.address, buffers.size, buffers.batch, buffers.capacity, dtype)


class KeptBindings:
    """The in-place cache's bindings of one loaded export by :func:`binding_key`, the latest ``keep`` only. A
    binding found here points at the tensors its key names: the pool hands a buffer to one generation at a time, so
    no two runners use one binding at once."""

    def __init__(self, keep: int = 8) -> None:
        self._keep = keep
        self._kept: dict[BindingKey, KeptBinding] = {}
        self._lock = threading.Lock()  # generations on several threads share one loaded export

    def get(self, key: BindingKey) -> KeptBinding | None:
        with self._lock:
            return self._kept.get(key)

    def put(self, key: BindingKey, kept: KeptBinding) -> KeptBinding:
        with self._lock:
            self._kept[key] = kept
            while len(self._kept) > self._keep:
                self._kept.pop(next(iter(self._kept)))
        return kept

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)
