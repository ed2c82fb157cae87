"""The running batch of the batching engine: its KV cache, attention mask and positions, rows joining and leaving.

Rows are right-aligned, as left padding lays them out: every row's newest token sits in the last column, so one
decode step feeds (B, 1) tokens after a (B, nh, P, hs) past. The batch changes shape between steps:

    join   a prefilled prompt (nh, T, hs) goes in after the last row, once per choice. T <= P: in place, its
           first P - T positions zero and masked. T > P: every running row is left-padded by T - P.
    leave  finished rows go; the last rows move into their places (a copy of the moved rows only).
    trim   columns that no remaining row attends to (the padding of rows that left) are dropped, so the batch's
           length stays that of its longest row, within n_positions.

The cache lives in memory the runtime owns, in one of two layouts, as the loaded generation graph needs:

    copied    (:class:`CopiedCache`) decode.onnx's contract: a step reads the past (B, nh, P, hs) from one
              buffer and ONNX Runtime writes the present, one position longer, into the other through IO
              binding; the two swap. Every step moves the whole cache.
    in place  (:class:`InPlaceCache`) the in-place generation graph (:mod:`gpt2_onnx_runtimes.inplace_attention`):
              one buffer per cache tensor, (B, nh, C, hs) with a capacity C of more than P positions, bound as
              both the past and the present; a step writes only one position of each row. The batch is a window
              of columns that slides as rows are padded and trimmed, so neither moves the rows; they move only
              when the window reaches an end of the buffer.

Padding is zeros, never uninitialized memory: masked positions still enter the attention products.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from gpt2_onnx_core.names import ATTENTION_MASK, INPUT_IDS, LOGITS, POSITION_IDS
from gpt2_onnx_runtimes.kv_bindings import KeptBinding

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["CopiedCache", "InPlaceCache", "KvStorage", "RunningBatch"]

_HEADROOM = 1.5  # a buffer grows to this many times what a step needs, so that it is not reallocated every step
_MIN_GROWTH = 64  # and the in-place cache's capacity by at least this many positions


class KvStorage(Protocol):
    """Where the running batch's ``count`` cache tensors live; ``rows`` and ``length`` are the batch's own."""

    def view(self, rows: int, length: int) -> np.ndarray:
        """(count, rows, nh, length, hs): the past as it stands, a view valid until the batch changes."""
        ...

    def add_rows(self, rows: int, length: int, kept: int) -> None:
        """Room for ``rows`` rows of ``length`` positions, the first ``kept`` rows kept where :meth:`view` finds
        them."""
        ...

    def shift(self, rows: int, length: int, by: int) -> None:
        """Move every row's ``length`` positions ``by`` columns: right (``by`` > 0; the columns left open are
        zeroed) or left (``by`` < 0; the first ``-by`` are dropped)."""
        ...

    def before_step(self, rows: int, length: int) -> None:
        """Room for one more position after ``length``."""
        ...

    def bind(self, binding: ort.IOBinding, names: tuple[list[str], list[str]], rows: int, length: int) -> None:
        """Bind the past (``length`` positions) and the present of one decode step (``length + 1``)."""
        ...

    def binding_key(self, rows: int) -> tuple[int, ...] | None:
        """What a step's cache binding of ``rows`` rows points at while it stays valid for later steps; None where
        every step binds buffers of its own."""
        ...

    def stepped(self) -> None:
        """After a decode step: the present just written is the past."""
        ...

    def clear(self, release: bool) -> None:
        """Hold no rows; ``release``: give the memory back too (else it is kept for the rows to come)."""
        ...


class CopiedCache:
    """Two flat buffers per tensor, each holding (rows, nh, length, hs) contiguously; a step reads one and writes
    the other (see the module docstring)."""

    def __init__(self, count: int, n_head: int, head_dim: int) -> None:
        self.count, self.n_head, self.head_dim = count, n_head, head_dim
        self.clear(release=True)

    def clear(self, release: bool) -> None:
        if release:
            self._buffers = [np.zeros((self.count, 0), dtype=np.float32) for _ in range(2)]  # (count, capacity) each
        self._current = 0  # the buffer holding the past

    def _size(self, rows: int, length: int) -> int:
        return rows * self.n_head * length * self.head_dim  # floats per tensor

    def _buffer(self, which: int, rows: int, length: int, keep: int = 0) -> np.ndarray:
        """Buffer ``which`` with room for (rows, nh, length, hs) per tensor, its first ``keep`` values kept."""
        need = self._size(rows, length)
        buffer = self._buffers[which]
        if buffer.shape[1] < need:
            grown = np.empty((self.count, int(need * _HEADROOM)), dtype=np.float32)
            grown[:, :keep] = buffer[:, :keep]
            self._buffers[which] = buffer = grown
        return buffer

    def _view(self, which: int, rows: int, length: int) -> np.ndarray:
        used = self._buffers[which][:, : self._size(rows, length)]
        return used.reshape(self.count, rows, self.n_head, length, self.head_dim)

    def view(self, rows: int, length: int) -> np.ndarray:
        return self._view(self._current, rows, length)

    def add_rows(self, rows: int, length: int, kept: int) -> None:
        self._buffer(self._current, rows, length, self._size(kept, length))

    def before_step(self, rows: int, length: int) -> None:
        pass  # bind() sizes the other buffer for the present

    def shift(self, rows: int, length: int, by: int) -> None:
        """Into the other buffer, which then holds the past: one copy of the cache."""
        past = self.view(rows, length)
        self._buffer(1 - self._current, rows, length + by)
        target = self._view(1 - self._current, rows, length + by)  # (count, B, nh, P + by, hs)
        if by >= 0:
            target[:, :, :, :by] = 0
            target[:, :, :, by:] = past
        else:
            target[...] = past[:, :, :, -by:]
        self._current = 1 - self._current

    def bind(self, binding: ort.IOBinding, names: tuple[list[str], list[str]], rows: int, length: int) -> None:
        past_names, present_names = names
        past = self._buffers[self._current]
        present = self._buffer(1 - self._current, rows, length + 1)
        shape = [rows, self.n_head, length, self.head_dim]
        grown = [rows, self.n_head, length + 1, self.head_dim]
        for index, name in enumerate(past_names):
            binding.bind_input(name, "cpu", 0, np.float32, shape, past[index].ctypes.data)  # (B, nh, P, hs)
        for index, name in enumerate(present_names):
            binding.bind_output(name, "cpu", 0, np.float32, grown, present[index].ctypes.data)  # (B, nh, P + 1, hs)

    def binding_key(self, rows: int) -> tuple[int, ...] | None:
        return None  # the past and the present swap buffers, and grow, every step

    def stepped(self) -> None:
        self._current = 1 - self._current


class InPlaceCache:
    """One flat buffer per tensor holding (rows, nh, capacity, hs), rows ``nh · capacity · hs`` floats apart, and
    the batch in a window of columns ``start … start + length`` of every row. A step is bound at the window's first
    column (the buffer's address plus ``start · hs``, same strides), so the graph sees a (B, nh, C, hs) cache whose
    past is its first ``length`` columns and writes the new position after them. The window slides instead of the
    rows moving: padding the running rows for a longer newcomer takes the columns before ``start`` (zeroed), and
    trimming the padding that no row needs any more only moves ``start`` on. The rows are laid out again (into the
    other of two buffers, so the pages are reused) only when the window reaches either end: then with the capacity
    grown (by half again, up to ``max_positions``) if the batch needs it, and the window centred. Room for
    ``max_rows`` rows from the start (pages that no row has written are not resident). ``dtype``: the cache's
    elements, float32 or the int8 of ``kv_cache`` 'int8'."""

    def __init__(
        self,
        count: int,
        n_head: int,
        head_dim: int,
        max_positions: int,
        max_rows: int,
        dtype: type[np.generic] = np.float32,
    ) -> None:
        self.count, self.n_head, self.head_dim, self.max_positions = count, n_head, head_dim, max_positions
        self.max_rows, self.dtype = max_rows, dtype
        self.clear(release=True)

    def clear(self, release: bool) -> None:
        if release:
            self._flat = np.zeros((self.count, 0), dtype=self.dtype)  # (count, rows · nh · capacity · hs + slack)
            self._spare = self._flat  # the other buffer, reused by the next layout when large enough
            self.capacity = 0
        self.start = 0

    def _rows_in(self, flat: np.ndarray, capacity: int) -> int:
        """Rows that ``flat`` holds at ``capacity`` positions, its slack (one row-head of columns) kept."""
        row = self.n_head * capacity * self.head_dim
        return max(0, (flat.shape[1] - capacity * self.head_dim) // row) if row else 0

    def _tensors(self, rows: int, flat: np.ndarray | None = None, capacity: int | None = None) -> np.ndarray:
        """(count, rows, nh, capacity, hs): a view of a buffer from its first column."""
        flat = self._flat if flat is None else flat
        capacity = self.capacity if capacity is None else capacity
        used = flat[:, : rows * self.n_head * capacity * self.head_dim]
        return used.reshape(self.count, rows, self.n_head, capacity, self.head_dim)

    def view(self, rows: int, length: int) -> np.ndarray:
        return self._tensors(rows)[:, :, :, self.start : self.start + length]

    def add_rows(self, rows: int, length: int, kept: int) -> None:
        if rows > self._rows_in(self._flat, self.capacity) or self.start + length > self.capacity:
            self._lay_out(rows, length, kept, length)

    def before_step(self, rows: int, length: int) -> None:
        if self.start + length + 1 > self.capacity:
            self._lay_out(rows, length + 1, rows, length)

    def shift(self, rows: int, length: int, by: int) -> None:
        if by < 0:  # the first -by columns are dropped: the window starts later
            self.start -= by
        elif by <= self.start:  # the window starts earlier: its new first columns become padding
            self.start -= by
            self._tensors(rows)[:, :, :, self.start : self.start + by] = 0
        else:
            self._lay_out(rows, length + by, rows, length, offset=by)

    def _lay_out(self, rows: int, need: int, kept_rows: int, kept_length: int, offset: int = 0) -> None:
        """Copy the window's ``kept_rows`` rows (``kept_length`` columns) into the other buffer at column
        ``offset`` of a new window of ``need`` columns, its first ``offset`` zeroed; the capacity grown if ``need``
        does not fit with room to spare."""
        if need > self.max_positions:
            raise ValueError(f"the batch's cache holds at most {self.max_positions} positions; {need} asked for")
        capacity = self.capacity
        if need + _MIN_GROWTH // 2 > capacity:
            capacity = min(self.max_positions, max(need + _MIN_GROWTH, int(need * _HEADROOM)))
        room = max(rows, self.max_rows)
        size = (room * self.n_head + 1) * capacity * self.head_dim  # one row-head of slack: the window's offset
        target = self._spare if self._spare.shape[1] >= size and self._spare is not self._flat else None
        if target is None:
            target = np.empty((self.count, size), dtype=self.dtype)
        start = (capacity - need) // 2
        if kept_rows:
            old = self.view(kept_rows, kept_length)  # (count, kept, nh, kept_length, hs)
            new = self._tensors(kept_rows, target, capacity)  # (count, kept, nh, capacity, hs)
            new[:, :, :, start : start + offset] = 0
            new[:, :, :, start + offset : start + offset + kept_length] = old
        self._spare, self._flat = self._flat, target
        self.capacity, self.start = capacity, start

    def bind(self, binding: ort.IOBinding, names: tuple[list[str], list[str]], rows: int, length: int) -> None:
        if self.start + length + 1 > self.capacity:
            raise ValueError(
                f"the batch's cache holds {self.capacity - self.start} positions; a step needs {length + 1}"
            )
        shape = [rows, self.n_head, self.capacity, self.head_dim]
        offset = self.start * self.head_dim * self._flat.itemsize  # bytes to the window's first column
        for kind, bind in zip(names, (binding.bind_input, binding.bind_output), strict=True):
            for index, name in enumerate(kind):
                address = self._flat[index].ctypes.data + offset
                bind(name, "cpu", 0, self.dtype, shape, address)  # (B, nh, C, hs) from the window: past and present

    def binding_key(self, rows: int) -> tuple[int, ...] | None:
        """The buffer, the window's first column, the capacity and the rows: a step's binding is the same tensors
        for as long as none of them changes (a layout, a join, a leave or a trim may change them)."""
        return (self._flat.ctypes.data, self.start, self.capacity, rows)

    def stepped(self) -> None:
        pass  # the step wrote column ``start + length`` of each row in place


class RunningBatch:
    """``count`` cache tensors of (rows, n_head, length, head_dim), with the mask (rows, length) and each row's
    next position (rows,). ``in_place``: the generation graph writes the cache in place (:class:`InPlaceCache`, up
    to ``max_positions`` positions and room for ``max_rows`` rows, of ``dtype``: float32, or int8 for
    ``kv_cache`` 'int8'); otherwise it returns a new float32 present (:class:`CopiedCache`). The memory stays when
    the batch empties (the next rows reuse its pages) until :meth:`clear` is told to release it."""

    def __init__(
        self,
        count: int,
        n_head: int,
        head_dim: int,
        in_place: bool = False,
        max_positions: int = 1024,
        max_rows: int = 16,
        dtype: type[np.generic] = np.float32,
    ) -> None:
        self.count, self.n_head, self.head_dim = count, n_head, head_dim
        self.in_place = in_place
        if dtype != np.float32 and not in_place:
            raise ValueError(f"a {np.dtype(dtype).name} cache is written in place only")
        self._storage: KvStorage = (
            InPlaceCache(count, n_head, head_dim, max_positions, max_rows, dtype)
            if in_place
            else CopiedCache(count, n_head, head_dim)
        )
        self._kept: KeptBinding | None = None  # the step binding, kept while _kept_key holds (_kept_binding)
        self._kept_key: tuple[int, ...] = ()
        self.rows = 0
        self.length = 0  # P: positions in the past
        self.mask = np.zeros((0, 0), dtype=np.int64)  # (B, P)
        self.next_position = np.zeros(0, dtype=np.int64)  # (B,): real tokens so far = the next token's position

    def kv(self) -> np.ndarray:
        """The past as it stands, (count, B, nh, P, hs): a view, valid until the batch changes."""
        return self._storage.view(self.rows, self.length)

    def join(self, past: Sequence[np.ndarray], copies: int = 1) -> None:
        """Append ``copies`` rows of one prompt prefilled alone: ``past`` holds each cache tensor, (1, nh, T, hs)
        or (nh, T, hs), T real tokens; each new row gets the same past (one per choice of the request)."""
        if len(past) != self.count:
            raise ValueError(f"joining rows need {self.count} cache tensors, got {len(past)}")
        length = past[0].shape[-2]
        rows = self.rows + copies
        if length > self.length:  # the running rows are left-padded to the newcomers' length first
            grow = length - self.length
            if self.rows:
                self._storage.shift(self.rows, self.length, grow)
            self.mask = np.concatenate([np.zeros((self.rows, grow), dtype=np.int64), self.mask], axis=1)
            self.length = length
        self._storage.add_rows(rows, self.length, self.rows)
        new = self._storage.view(rows, self.length)[:, self.rows :]  # (count, copies, nh, P, hs)
        pad = self.length - length
        new[:, :, :, :pad] = 0
        for index, tensor in enumerate(past):
            new[index, :, :, pad:] = tensor.reshape(self.n_head, length, self.head_dim)  # (nh, T, hs) to every copy
        newcomers = np.concatenate([np.zeros((copies, pad), np.int64), np.ones((copies, length), np.int64)], axis=1)
        self.mask = np.concatenate([self.mask.reshape(self.rows, self.length), newcomers], axis=0)  # (B + b, P)
        self.next_position = np.concatenate([self.next_position, np.full(copies, length, dtype=np.int64)])
        self.rows = rows

    def leave(self, finished: Collection[int]) -> list[int]:
        """Remove the rows ``finished``; returns the old index of each row that remains, in its new order (the
        last rows fill the places of those that left)."""
        alive = [row not in finished for row in range(self.rows)]
        order = list(range(self.rows))
        remaining = sum(alive)
        view = self.kv()
        last = self.rows - 1
        for hole in sorted(row for row in finished if row < remaining):
            while not alive[last]:
                last -= 1
            view[:, hole] = view[:, last]  # (count, nh, P, hs): one row moves
            order[hole], alive[last] = last, False
            last -= 1
        order = order[:remaining]
        self.mask, self.next_position = self.mask[order], self.next_position[order]
        self.rows = remaining
        if remaining == 0:
            self.clear()
        return order

    def trim(self) -> None:
        """Drop the leading columns no row attends to (left by rows that left)."""
        dead = self.dead_columns()
        if dead == 0:
            return
        self._storage.shift(self.rows, self.length, -dead)
        self.mask, self.length = self.mask[:, dead:], self.length - dead

    def dead_columns(self) -> int:
        """Leading columns that no row attends to."""
        if self.rows == 0:
            return 0
        used = np.flatnonzero(self.mask.any(axis=0))
        return int(used[0]) if used.size else self.length

    def clear(self, release: bool = False) -> None:
        """Empty the batch; ``release``: its memory too."""
        self.rows = self.length = 0
        self.mask = np.zeros((0, 0), dtype=np.int64)
        self.next_position = np.zeros(0, dtype=np.int64)
        self._storage.clear(release)
        if release:
            self._kept = None  # it points into the memory let go

    def decode(
        self,
        session: ort.InferenceSession,
        tokens: np.ndarray,
        names: tuple[list[str], list[str]],
        constants: Mapping[str, ort.OrtValue],
    ) -> np.ndarray:
        """One decode step of every row: ``tokens`` (B,) fed at each row's next position after the past; returns
        the next-token logits (B, V). ``names``: the past inputs and present outputs, in (layer, key/value) order."""
        rows, length = self.rows, self.length
        self._storage.before_step(rows, length)
        mask = np.concatenate([self.mask, np.ones((rows, 1), dtype=np.int64)], axis=1)  # (B, P + 1)
        kept = self._kept_binding(session, names, constants)
        binding = kept.binding if kept is not None else self._bind(session.io_binding(), names, constants)
        binding.bind_cpu_input(INPUT_IDS, np.ascontiguousarray(tokens.reshape(rows, 1), dtype=np.int64))  # (B, 1)
        binding.bind_cpu_input(ATTENTION_MASK, mask)
        binding.bind_cpu_input(POSITION_IDS, self.next_position.reshape(rows, 1).copy())  # (B, 1)
        session.run_with_iobinding(binding)
        # (B, V); a kept buffer is written again by the next step, so it is copied
        logits = kept.logits[:, -1].copy() if kept is not None else binding.get_outputs()[0].numpy()[:, -1]
        self._storage.stepped()
        self.mask, self.length = mask, length + 1
        self.next_position = self.next_position + 1
        return logits

    def _bind(
        self,
        binding: ort.IOBinding,
        names: tuple[list[str], list[str]],
        constants: Mapping[str, ort.OrtValue],
        logits: np.ndarray | None = None,
    ) -> ort.IOBinding:
        """``binding`` with everything of a step but its tokens, mask and positions: the logits (into ``logits``
        (B, 1, V), or allocated by ONNX Runtime), the cache and the constant inputs."""
        if logits is None:
            binding.bind_output(LOGITS, "cpu")  # first: get_outputs() lists the outputs in the order bound
        else:
            binding.bind_output(LOGITS, "cpu", 0, np.float32, list(logits.shape), logits.ctypes.data)
        self._storage.bind(binding, names, self.rows, self.length)
        for name, value in constants.items():
            binding.bind_ortvalue_input(name, value)  # the mapped embedding (V, d); an int8 cache's scales
        return binding

    def _kept_binding(
        self,
        session: ort.InferenceSession,
        names: tuple[list[str], list[str]],
        constants: Mapping[str, ort.OrtValue],
    ) -> KeptBinding | None:
        """The step's binding of the cache, the constants and a logits buffer, kept while the storage's
        :meth:`~KvStorage.binding_key` stays the same (the in-place cache between joins, leaves, trims and
        layouts: most steps), so that a step binds only its tokens, mask and positions; None where each step binds
        anew (the copied cache, or a graph whose logits' vocabulary is not fixed)."""
        where = self._storage.binding_key(self.rows)
        if where is None:
            return None
        key = (id(constants), *where)  # the binding holds the session; the engine's constants live as long
        kept = self._kept
        if kept is not None and kept.session is session and self._kept_key == key:
            return kept
        vocab = _vocab_size(session)
        if vocab is None:
            return None
        logits = np.empty((self.rows, 1, vocab), dtype=np.float32)  # (B, 1, V)
        binding = self._bind(session.io_binding(), names, constants, logits)
        self._kept, self._kept_key = KeptBinding(session, self.rows, binding, logits), key
        return self._kept


def _vocab_size(session: ort.InferenceSession) -> int | None:
    """The logits' last dimension as the graph states it; None where it is not a fixed number or they are not
    float32."""
    found = next((output for output in session.get_outputs() if output.name == LOGITS), None)
    if found is None or found.type != "tensor(float)" or not found.shape:
        return None
    size = found.shape[-1]
    return size if isinstance(size, int) else None
