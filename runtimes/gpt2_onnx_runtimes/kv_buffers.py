"""KV-cache memory owned by the runtime on the CPU: two buffers per cache tensor, sized once per generation.

Each decode step reads the past (B, nh, P, hs) and writes the present (B, nh, P + N, hs), a new contiguous tensor
(the graph concatenates). Left to ONNX Runtime, every step allocates a present one position longer than the last;
its arena keeps the chunks, so memory creeps up with every token and stays there, well beyond the cache itself
(measured in benchmarks/results/). Here each cache tensor has two flat buffers of ``capacity`` positions: a
step reads the past from one and ONNX Runtime writes the present into the other (IO binding to the buffer's
address, with the exact shape), then the two swap. Memory is fixed at 2 × the cache at full length.

    step k:   past  ← buffer[k % 2][: B·nh·P·hs]        present → buffer[(k+1) % 2][: B·nh·(P+N)·hs]

Beam search reorders the cache's rows between steps (:meth:`KvBuffers.reorder`): row r of the next past is row
``rows[r]`` of this one. When at most half the rows change, they are copied in place (each twice: out, then back);
otherwise, or for a new batch size (the prompts' rows expanded to one per beam after the prefill), every row is
gathered once into the other buffer, which then holds the past. Rows are contiguous (nh·P·hs floats each), so
either is one numpy copy per cache tensor.

The memory itself is kept per loaded model (:class:`BufferPool`): a generation takes two arrays at least as large
as it needs and gives them back when its buffers are dropped, so the next request reuses pages already mapped
instead of faulting fresh ones in during its prefill (a large ``np.empty`` is a new mapping each time, and each
first write to a page costs a fault and the kernel's zeroing). Nothing is zero-filled: the graph reads only the
past positions that a step has written, and reads them under the attention mask.

The in-place generation graph (:class:`SharedKvBuffers`) needs neither the second buffer nor the swap: past and
present are one (B, nh, capacity, hs) buffer, and a step writes only its new positions.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["BufferPool", "KvBuffers", "SharedKvBuffers"]


class BufferPool:
    """Free arrays kept for reuse, shared by every generation of one loaded model; thread-safe.

    :meth:`take` hands out the smallest free array of at least ``size`` elements of a dtype (float32; int8 for an
    int8 cache), or allocates one (the larger free one dropped, so the pool grows rather than piling up);
    :meth:`give` returns it. At most ``keep`` arrays stay free (two per concurrent generation are in use while it
    runs)."""

    def __init__(self, keep: int = 4) -> None:
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()
        self._keep = keep

    def take(self, size: int, dtype: type[np.generic] = np.float32) -> np.ndarray:
        with self._lock:
            # Free arrays are kept largest first (give), so the last one of at least `size` floats is the smallest
            # that fits. Taken out by position: list.remove would compare arrays with ==, element by element (a
            # ValueError for two arrays of different sizes, seen when concurrent generations left several free).
            kind = [index for index, array in enumerate(self._free) if array.dtype == dtype]
            fitting = [index for index in kind if self._free[index].size >= size]
            if fitting:
                return self._free.pop(fitting[-1])
            if kind:  # none large enough: drop the smallest so the pool grows instead of piling up
                self._free.pop(kind[-1])
        return np.empty(size, dtype=dtype)

    def give(self, arrays: list[np.ndarray]) -> None:
        with self._lock:
            self._free.extend(arrays)
            self._free.sort(key=lambda a: a.nbytes, reverse=True)
            del self._free[self._keep :]

    def clear(self) -> None:
        with self._lock:
            self._free.clear()

    @property
    def free_floats(self) -> int:
        """Free float32 elements (what a float32 cache can take)."""
        with self._lock:
            return sum(a.size for a in self._free if a.dtype == np.float32)


class _PooledCache:
    """What both cache kinds hold: ``count`` cache tensors of up to (max_batch, n_head, capacity, head_dim) in
    ``copies`` flat arrays taken from ``pool`` (a private one when none is given) and given back to it once this
    object is dropped, and the past's length."""

    def __init__(
        self,
        count: int,
        batch: int,
        n_head: int,
        capacity: int,
        head_dim: int,
        max_batch: int | None,
        pool: BufferPool | None,
        dtype: type[np.generic],
        copies: int,
    ) -> None:
        self.batch, self.n_head, self.capacity, self.head_dim = batch, n_head, capacity, head_dim
        self.max_batch = max(batch, max_batch or batch)
        self.dtype = dtype
        self.size = size = self.max_batch * n_head * capacity * head_dim  # elements per cache tensor
        if pool is None:
            pool = BufferPool(keep=0)
        flats = [pool.take(count * size, dtype) for _ in range(copies)]  # at least count·B·nh·C·hs elements each
        self._buffers = [flat[: count * size].reshape(count, size) for flat in flats]  # (count, B·nh·C·hs) each
        weakref.finalize(self, pool.give, flats)  # back to the pool once this generation drops its buffers
        self.length = 0  # positions in the past


class KvBuffers(_PooledCache):
    """``count`` cache tensors of up to (batch, n_head, capacity, head_dim) float32, double-buffered; room for
    ``max_batch`` rows (default ``batch``) when :meth:`reorder` will grow the batch."""

    def __init__(
        self,
        count: int,
        batch: int,
        n_head: int,
        capacity: int,
        head_dim: int,
        max_batch: int | None = None,
        pool: BufferPool | None = None,
    ) -> None:
        super().__init__(count, batch, n_head, capacity, head_dim, max_batch, pool, np.float32, copies=2)
        self._current = 0  # the buffer holding the past

    def shape(self, length: int) -> list[int]:
        return [self.batch, self.n_head, length, self.head_dim]

    def _check(self, length: int) -> None:
        if length > self.capacity:
            raise ValueError(f"the KV cache holds {self.capacity} positions; {length} asked for")

    def bind_past(self, binding: ort.IOBinding, names: list[str]) -> None:
        """Bind the past (``self.length`` positions; 0 for a prefill) as the inputs ``names``."""
        buffer = self._buffers[self._current]
        for index, name in enumerate(names):
            binding.bind_input(name, "cpu", 0, np.float32, self.shape(self.length), buffer[index].ctypes.data)

    def bind_present(self, binding: ort.IOBinding, names: list[str], new: int) -> None:
        """Bind the outputs ``names`` to the other buffer, sized for ``new`` more positions."""
        length = self.length + new
        self._check(length)
        buffer = self._buffers[1 - self._current]
        for index, name in enumerate(names):
            binding.bind_output(name, "cpu", 0, np.float32, self.shape(length), buffer[index].ctypes.data)

    def advance(self, new: int) -> None:
        """After a run: the present just written becomes the past."""
        self._current = 1 - self._current
        self.length += new

    def reorder(self, rows: np.ndarray) -> None:
        """Make row r of the past row ``rows[r]`` of the past as it stands (``len(rows)`` rows from now on)."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) > self.max_batch or (rows.size and (rows.min() < 0 or rows.max() >= self.batch)):
            raise ValueError(f"cannot reorder {self.batch} cache rows into {rows.tolist()} (room for {self.max_batch})")
        width = self.n_head * self.length * self.head_dim  # floats per row
        current = self._buffers[self._current]
        if len(rows) == self.batch:
            moved = np.flatnonzero(rows != np.arange(self.batch))
            if 2 * moved.size <= self.batch:  # cheaper than gathering every row (or nothing to do)
                self._move_in_place(current, rows, moved, width)
                return
        other = self._buffers[1 - self._current]
        for source, target in zip(current, other, strict=True):
            np.take(
                source[: self.batch * width].reshape(self.batch, width),
                rows,
                axis=0,
                out=target[: len(rows) * width].reshape(len(rows), width),
                mode="clip",  # rows are checked above; "raise" would copy through a temporary buffer
            )
        self._current, self.batch = 1 - self._current, len(rows)

    def _move_in_place(self, current: np.ndarray, rows: np.ndarray, moved: np.ndarray, width: int) -> None:
        if not moved.size:
            return
        for tensor in current:
            view = tensor[: self.batch * width].reshape(self.batch, width)
            view[moved] = view[rows[moved]]  # the right side is a copy: overlapping moves are safe

    def past(self, index: int) -> np.ndarray:
        """Cache tensor ``index`` as it stands, (B, nh, P, hs): a view, valid until the next step."""
        flat = self._buffers[self._current][index, : self.batch * self.n_head * self.length * self.head_dim]
        return flat.reshape(self.shape(self.length))


class SharedKvBuffers(_PooledCache):
    """``count`` cache tensors of (batch, n_head, capacity, head_dim) for the in-place generation graph
    (:mod:`gpt2_onnx_runtimes.inplace_attention`): one buffer each, bound as both the past and the present, so a
    step writes only its new positions (columns ``length`` … ``length + new - 1`` of every row and head) and no
    present is ever copied. Half the memory of :class:`KvBuffers` in float32; an eighth in int8 (``dtype``, the
    cache of ``kv_cache`` 'int8').

    Rows are ``n_head · capacity · head_dim`` elements apart, whatever the length; columns past ``length`` hold
    whatever the memory held (never read: the graph reads the first ``length + new`` of each row).
    """

    def __init__(
        self,
        count: int,
        batch: int,
        n_head: int,
        capacity: int,
        head_dim: int,
        max_batch: int | None = None,
        pool: BufferPool | None = None,
        dtype: type[np.generic] = np.float32,
    ) -> None:
        super().__init__(count, batch, n_head, capacity, head_dim, max_batch, pool, dtype, copies=1)
        self._buffer = self._buffers[0]  # (count, B·nh·C·hs)
        self.address = self._buffer.ctypes.data  # what a kept binding of these tensors points at

    def _tensors(self, batch: int) -> np.ndarray:
        """(count, batch, nh, C, hs): a view of the buffer."""
        used = self._buffer[:, : batch * self.n_head * self.capacity * self.head_dim]
        return used.reshape(-1, batch, self.n_head, self.capacity, self.head_dim)

    def _bind(self, bind: Callable[..., None], names: list[str]) -> None:
        shape = [self.batch, self.n_head, self.capacity, self.head_dim]
        for index, name in enumerate(names):
            bind(name, "cpu", 0, self.dtype, shape, self._buffer[index].ctypes.data)

    def bind_past(self, binding: ort.IOBinding, names: list[str]) -> None:
        """Bind the buffers (B, nh, C, hs) as the inputs ``names``: the first ``length`` columns are the past."""
        self._bind(binding.bind_input, names)

    def bind_present(self, binding: ort.IOBinding, names: list[str], new: int) -> None:
        """Bind the same buffers as the outputs ``names``: the step writes columns ``length`` … ``length + new - 1``."""
        self.check_room(new)
        self._bind(binding.bind_output, names)

    def check_room(self, new: int) -> None:
        """Raise ValueError unless ``new`` more positions fit (before every step, whether bound again or not)."""
        if self.length + new > self.capacity:
            raise ValueError(f"the KV cache holds {self.capacity} positions; {self.length + new} asked for")

    def advance(self, new: int) -> None:
        """After a run: the positions just written join the past."""
        self.length += new

    def write(self, values: np.ndarray) -> None:
        """Write ``values``, (count, B, nh, N, hs), as the next N positions of every row and head, and advance:
        what a session that returns its new positions instead of writing them in place computed."""
        count, batch, _, new, _ = values.shape
        self.check_room(new)
        if count != self._buffer.shape[0] or batch != self.batch:
            held = f"{self._buffer.shape[0]} tensors of {self.batch} rows"
            raise ValueError(f"{count} tensors of {batch} rows given to a cache of {held}")
        self._tensors(self.batch)[:, :, :, self.length : self.length + new] = values
        self.advance(new)

    def reorder(self, rows: np.ndarray) -> None:
        """Make row r of the past row ``rows[r]`` of the past as it stands (``len(rows)`` rows from now on); only
        the past's columns move."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) > self.max_batch or (rows.size and (rows.min() < 0 or rows.max() >= self.batch)):
            raise ValueError(f"cannot reorder {self.batch} cache rows into {rows.tolist()} (room for {self.max_batch})")
        if len(rows) == self.batch and np.array_equal(rows, np.arange(self.batch)):
            return
        past = self._tensors(self.batch)[:, :, :, : self.length]  # (count, B, nh, P, hs)
        moved = past[:, rows]  # (count, R, nh, P, hs): a copy, so that rows may move onto each other
        self._tensors(len(rows))[:, :, :, : self.length] = moved
        self.batch = len(rows)

    def past(self, index: int) -> np.ndarray:
        """Cache tensor ``index`` as it stands, (B, nh, P, hs): a contiguous copy."""
        return np.ascontiguousarray(self._tensors(self.batch)[index, :, :, : self.length])
