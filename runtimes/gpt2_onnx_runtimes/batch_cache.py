"""The running batch of the batching engine: its KV cache, attention mask and positions, rows joining and leaving.

Rows are right-aligned, as left padding lays them out: every row's newest token sits in the last column, so one
decode step feeds (B, 1) tokens after a (B, nh, P, hs) past. Like :mod:`gpt2_onnx_runtimes.kv_buffers`, each cache
tensor has two flat buffers owned by the runtime: a step reads the past from one and ONNX Runtime writes the
present, one position longer, into the other through IO binding. Unlike it, the batch changes shape between steps:

    join   a prefilled prompt (b, nh, T, hs) goes in after the last row. T <= P: in place, its first P - T
           positions zero and masked. T > P: every running row is left-padded by T - P (one copy of the cache).
    leave  finished rows go; the last rows move into their places (a copy of the moved rows only).
    trim   columns that no remaining row attends to (the padding of rows that left) are dropped, so the batch's
           length stays that of its longest row, within n_positions.

Padding is zeros, never uninitialized memory: masked positions still enter the attention products.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

import numpy as np

from gpt2_onnx_core.names import ATTENTION_MASK, INPUT_IDS, LOGITS, POSITION_IDS

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["RunningBatch"]

_HEADROOM = 1.5  # a buffer grows to this many times what a step needs, so that it is not reallocated every step


class RunningBatch:
    """``count`` cache tensors of (rows, n_head, length, head_dim) float32, with the mask (rows, length) and each
    row's next position (rows,)."""

    def __init__(self, count: int, n_head: int, head_dim: int) -> None:
        self.count, self.n_head, self.head_dim = count, n_head, head_dim
        self.rows = 0
        self.length = 0  # P: positions in the past
        self.mask = np.zeros((0, 0), dtype=np.int64)  # (B, P)
        self.next_position = np.zeros(0, dtype=np.int64)  # (B,): real tokens so far = the next token's position
        self._buffers = [np.zeros((count, 0), dtype=np.float32) for _ in range(2)]  # (count, capacity) each
        self._current = 0  # the buffer holding the past

    def _block(self, length: int) -> int:
        return self.n_head * length * self.head_dim  # one row of one tensor

    def _reserve(self, which: int, rows: int, length: int, keep: int = 0) -> np.ndarray:
        """Buffer ``which`` with room for (rows, nh, length, hs) per tensor, its first ``keep`` values kept."""
        need = rows * self._block(length)
        buffer = self._buffers[which]
        if buffer.shape[1] < need:
            grown = np.empty((self.count, int(need * _HEADROOM)), dtype=np.float32)
            grown[:, :keep] = buffer[:, :keep]
            self._buffers[which] = buffer = grown
        return buffer

    def _view(self, which: int, rows: int, length: int) -> np.ndarray:
        """(count, rows, nh, length, hs): a view of buffer ``which``."""
        used = self._buffers[which][:, : rows * self._block(length)]
        return used.reshape(self.count, rows, self.n_head, length, self.head_dim)

    def kv(self) -> np.ndarray:
        """The past as it stands, (count, B, nh, P, hs): a view, valid until the batch changes."""
        return self._view(self._current, self.rows, self.length)

    def join(self, kv: np.ndarray) -> None:
        """Append rows whose prompts were prefilled alone: ``kv`` (count, b, nh, T, hs), T real tokens each."""
        added, length = kv.shape[1], kv.shape[3]
        rows = self.rows + added
        if length <= self.length:
            keep = self.rows * self._block(self.length)
            self._reserve(self._current, rows, self.length, keep)
            new = self._view(self._current, rows, self.length)[:, self.rows :]  # (count, b, nh, P, hs)
            new[:, :, :, : self.length - length] = 0
            new[:, :, :, self.length - length :] = kv
            pad = self.length - length
        else:  # the running rows are left-padded to the newcomers' length
            grow = length - self.length
            self._reserve(1 - self._current, rows, length)
            target = self._view(1 - self._current, rows, length)  # (count, B + b, nh, T, hs)
            target[:, : self.rows, :, :grow] = 0
            target[:, : self.rows, :, grow:] = self.kv()
            target[:, self.rows :] = kv
            self._current = 1 - self._current
            self.mask = np.concatenate([np.zeros((self.rows, grow), dtype=np.int64), self.mask], axis=1)
            self.length, pad = length, 0
        newcomers = np.concatenate([np.zeros((added, pad), np.int64), np.ones((added, length), np.int64)], axis=1)
        self.mask = np.concatenate([self.mask, newcomers], axis=0)  # (B + b, P)
        self.next_position = np.concatenate([self.next_position, np.full(added, length, dtype=np.int64)])
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
        length = self.length - dead
        self._reserve(1 - self._current, self.rows, length)
        self._view(1 - self._current, self.rows, length)[...] = self.kv()[:, :, :, dead:]
        self._current = 1 - self._current
        self.mask, self.length = self.mask[:, dead:], length

    def dead_columns(self) -> int:
        """Leading columns that no row attends to."""
        if self.rows == 0:
            return 0
        used = np.flatnonzero(self.mask.any(axis=0))
        return int(used[0]) if used.size else self.length

    def clear(self) -> None:
        """Empty the batch and release its buffers."""
        self.rows = self.length = 0
        self.mask = np.zeros((0, 0), dtype=np.int64)
        self.next_position = np.zeros(0, dtype=np.int64)
        self._buffers = [np.zeros((self.count, 0), dtype=np.float32) for _ in range(2)]
        self._current = 0

    def decode(
        self,
        session: ort.InferenceSession,
        tokens: np.ndarray,
        names: tuple[list[str], list[str]],
        constants: Mapping[str, ort.OrtValue],
    ) -> np.ndarray:
        """One decode step of every row: ``tokens`` (B,) fed at each row's next position after the past; returns
        the next-token logits (B, V). ``names``: the past inputs and present outputs, in (layer, key/value) order."""
        past_names, present_names = names
        rows, length = self.rows, self.length
        mask = np.concatenate([self.mask, np.ones((rows, 1), dtype=np.int64)], axis=1)  # (B, P + 1)
        binding = session.io_binding()
        binding.bind_cpu_input(INPUT_IDS, np.ascontiguousarray(tokens.reshape(rows, 1), dtype=np.int64))  # (B, 1)
        binding.bind_cpu_input(ATTENTION_MASK, mask)
        binding.bind_cpu_input(POSITION_IDS, self.next_position.reshape(rows, 1).copy())  # (B, 1)
        past = self._buffers[self._current]
        present = self._reserve(1 - self._current, rows, length + 1)
        shape, grown = [rows, self.n_head, length, self.head_dim], [rows, self.n_head, length + 1, self.head_dim]
        for index, name in enumerate(past_names):
            binding.bind_input(name, "cpu", 0, np.float32, shape, past[index].ctypes.data)  # (B, nh, P, hs)
        for name, value in constants.items():
            binding.bind_ortvalue_input(name, value)  # the mapped embedding (V, d)
        binding.bind_output(LOGITS, "cpu")
        for index, name in enumerate(present_names):
            binding.bind_output(name, "cpu", 0, np.float32, grown, present[index].ctypes.data)  # (B, nh, P + 1, hs)
        session.run_with_iobinding(binding)
        logits = binding.get_outputs()[0].numpy()[:, -1]  # (B, V)
        self._current = 1 - self._current
        self.mask, self.length = mask, length + 1
        self.next_position = self.next_position + 1
        return logits
