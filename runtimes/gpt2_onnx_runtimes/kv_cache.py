"""Prefill and decode steps with ONNX Runtime IO binding: the KV cache never leaves the provider's device.

Each step binds the previous step's ``present.*`` as ``past_key_values.*`` directly: OrtValues that ONNX Runtime
allocated on the device (on CUDA they stay in GPU memory), or, on the CPU when the generation's length is known
(``capacity``), the runtime's own double buffers (:mod:`gpt2_onnx_runtimes.kv_buffers`), so that memory stays
fixed. Only the small token inputs go in from the host and only the logits come back to it. The same code serves
both providers and both session layouts (:class:`StepSessions`), so the CPU tests exercise the CUDA path's logic.

When the generation graph writes the cache in place (``StepSessions.in_place``) and the length is known, one
buffer per cache tensor is both the past and the present (:class:`SharedKvBuffers`): a step writes its new
positions only. Without ``capacity`` the same graph takes a past and returns a new present, as decode.onnx does.
With the int8 cache's prompt kernel (``StepSessions.prefill_float_cache``) a prompt attends over a float32 cache of
its own, held in pooled buffers while it runs, and each run's new positions come back quantized and are written into
the int8 cache (:mod:`gpt2_onnx_runtimes.prompt_attention`).
Into the shared buffers, a prompt of one row longer than ``RuntimeOptions.prefill_chunk_tokens`` runs in chunks,
each after the cache the ones before it wrote, every chunk through the prefill session (the prompt kernel's where
there is one); and the binding of the buffers, the constant inputs and a logits
buffer is made once and kept (:class:`~gpt2_onnx_runtimes.kv_bindings.KeptBindings`), so that a step binds only its
tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.names import (
    ATTENTION_MASK,
    DECODE,
    INPUT_IDS,
    LOGITS,
    POSITION_IDS,
    PREFILL,
    GraphKind,
    past_names,
    present_names,
)
from gpt2_onnx_runtimes.kv_bindings import KeptBinding, binding_key
from gpt2_onnx_runtimes.kv_buffers import KvBuffers, SharedKvBuffers
from gpt2_onnx_runtimes.kv_reorder import reorder_past
from gpt2_onnx_runtimes.ort_sessions import onnxruntime_errors
from gpt2_onnx_runtimes.prompt_attention import new_cache_names

if TYPE_CHECKING:
    import onnxruntime as ort

    from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["KvCacheRunner"]


class KvCacheRunner:
    """Runs one sequence batch: :meth:`prefill` once, then :meth:`decode` per step. Not shared between threads;
    create one per generation (the sessions underneath are shared and thread-safe).

    ``capacity``: the most positions the sequence will reach (prompt + new tokens). Given on the CPU, the cache
    lives in buffers of that size allocated once (:class:`KvBuffers`); otherwise ONNX Runtime allocates each
    step's present. ``max_batch``: the most rows the cache will hold after :meth:`reorder` (default: the
    prefill's batch).
    """

    def __init__(self, loaded: LoadedExport, capacity: int | None = None, max_batch: int | None = None) -> None:
        self._loaded = loaded
        self._steps = loaded.steps
        dims = loaded.manifest.dims
        self._dims = dims
        self._past_names = past_names(dims.n_layer)
        self._present_names = present_names(dims.n_layer)
        self._device = "cuda" if loaded.options.provider == "cuda" else "cpu"
        self._device_id = loaded.options.device_id
        self._past: list[ort.OrtValue] | None = None
        self._capacity = capacity if self._device == "cpu" else None
        self._buffers: KvBuffers | SharedKvBuffers | None = None
        self._max_batch = max_batch
        self._kept: KeptBinding | None = None
        self.past_length = 0

    @property
    def past(self) -> list[ort.OrtValue] | None:
        """The cache after the last step, in (layer, key/value) order on the provider's device: ONNX Runtime's
        OrtValues, or OrtValues over the runtime's buffers (valid until the next step)."""
        if self._buffers is not None:
            import onnxruntime as ort

            count = len(self._past_names)
            return [ort.OrtValue.ortvalue_from_numpy(self._buffers.past(i)) for i in range(count)]
        return self._past

    def past_arrays(self) -> list[np.ndarray]:
        """The cache after the last step on the host, (B, nh, P, hs) per tensor in (layer, key/value) order: views
        of the runtime's buffers where they hold it contiguously (valid until the next step), else copies."""
        if self._buffers is not None:
            return [self._buffers.past(i) for i in range(len(self._past_names))]
        if self._past is None:
            raise RuntimeError("past_arrays() before prefill()")
        return [value.numpy() for value in self._past]

    def prefill(self, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray) -> np.ndarray:
        """Run the prompt (B, T); returns the next-token logits of its last position, (B, V)."""
        empty = None
        batch = input_ids.shape[0]
        if self._capacity is not None:
            shape = (len(self._past_names), batch, self._dims.n_head, self._capacity, self._dims.head_dim)
            pool = self._loaded.kv_pool
            if self._steps.in_place:
                self._buffers = SharedKvBuffers(*shape, self._max_batch, pool, self._steps.cache_dtype)
            else:
                self._buffers = KvBuffers(*shape, self._max_batch, pool)
        elif self._steps.prefill_takes_past:  # the merged graph: decode with an empty past
            dims = self._dims
            empty = np.zeros((batch, dims.n_head, 0, dims.head_dim), dtype=self._steps.cache_dtype)  # (B, nh, 0, hs)
        chunk = self._chunk(input_ids, attention_mask)
        if self._steps.prefill_float_cache:
            return self._prefill_float(input_ids, attention_mask, position_ids, chunk)
        logits = self._run(
            PREFILL, input_ids[:, :chunk], attention_mask[:, :chunk], position_ids[:, :chunk], None, empty
        )
        self.past_length = chunk
        while self.past_length < input_ids.shape[1]:  # the rest of a long prompt, chunk by chunk, after the cache
            start, end = self.past_length, min(self.past_length + chunk, input_ids.shape[1])
            kind = PREFILL if self._steps.prefill_takes_past else DECODE  # the prompt session, where it takes a past
            logits = self._run(kind, input_ids[:, start:end], attention_mask[:, :end], position_ids[:, start:end], None)
            self.past_length = end
        return logits

    def _prefill_float(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray, chunk: int
    ) -> np.ndarray:
        """A prompt through a prefill session that attends over a float32 cache of the prompt's own and returns each
        run's new keys and values quantized (``StepSessions.prefill_float_cache``: the int8 cache's prompt kernel,
        :mod:`gpt2_onnx_runtimes.prompt_attention`): the float32 cache lives in buffers taken from the pool for the
        prompt's duration; the quantized positions go into the runtime's int8 buffers, or become the past that ONNX
        Runtime's next step reads."""
        dims, (batch, length) = self._dims, input_ids.shape
        shape = (len(self._past_names), batch, dims.n_head, length, dims.head_dim)
        prompt_cache = SharedKvBuffers(*shape, None, self._loaded.kv_pool, np.float32)  # (2L, B, nh, T, hs)
        for start in range(0, length, chunk):
            end = min(start + chunk, length)
            logits, new = self._run_float(
                prompt_cache, input_ids[:, start:end], attention_mask[:, :end], position_ids[:, start:end]
            )  # (B, V): the last run's are the prompt's
            if new is not None:  # no runtime buffers: one run, whose quantized cache ONNX Runtime holds
                self._past = new
        self.past_length = length
        return logits

    def _run_float(
        self,
        prompt_cache: SharedKvBuffers,
        input_ids: np.ndarray,
        attention_mask: np.ndarray,
        position_ids: np.ndarray,
    ) -> tuple[np.ndarray, list[ort.OrtValue] | None]:
        """One run of :meth:`_prefill_float`: the logits (B, V), and the new positions' int8 cache as ONNX Runtime's
        OrtValues where the runtime has no buffers for it (None where they were written into the buffers)."""
        batch, new = input_ids.shape
        session = self._steps.prefill
        binding = session.io_binding()
        binding.bind_output(LOGITS, "cpu")  # first: get_outputs() keeps binding order
        prompt_cache.bind_past(binding, self._past_names)  # float32 (B, nh, T, hs): the prompt so far
        prompt_cache.bind_present(binding, self._present_names, new)
        quantized = None
        names = new_cache_names(self._dims.n_layer)
        if isinstance(self._buffers, SharedKvBuffers):
            self._buffers.check_room(new)
            shape = [batch, self._dims.n_head, new, self._dims.head_dim]
            quantized = np.empty((len(names), *shape), dtype=np.int8)  # (2L, B, nh, N, hs)
            for name, tensor in zip(names, quantized, strict=True):
                binding.bind_output(name, "cpu", 0, np.int8, shape, tensor.ctypes.data)
        else:
            for name in names:
                binding.bind_output(name, "cpu")
        for name, value in self._steps.constant_inputs.items():
            binding.bind_ortvalue_input(name, value)  # the int8 cache's scales
        _bind_tokens(binding, input_ids, attention_mask, position_ids)
        with onnxruntime_errors(self._what(PREFILL)):
            session.run_with_iobinding(binding)
        prompt_cache.advance(new)
        outputs = binding.get_outputs()
        if quantized is not None and isinstance(self._buffers, SharedKvBuffers):
            self._buffers.write(quantized)
            return outputs[0].numpy()[:, -1], None  # (B, V)
        return outputs[0].numpy()[:, -1], list(outputs[-len(names) :])  # after the logits and the float32 presents

    def _chunk(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> int:
        """How many prompt tokens one prefill run takes: ``RuntimeOptions.prefill_chunk_tokens`` where the cache is
        written in place into the runtime's buffers and the prompt is one unpadded row (GroupQueryAttention takes
        several new tokens after a past in a batch of one only); else the whole prompt."""
        length, chunk = input_ids.shape[1], self._loaded.options.prefill_chunk_tokens
        in_place = isinstance(self._buffers, SharedKvBuffers)
        if chunk == 0 or length <= chunk or not in_place or input_ids.shape[0] != 1 or not attention_mask.all():
            return length
        return chunk

    def decode(self, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray) -> np.ndarray:
        """Feed new tokens (B, N) after the cached ones; returns the next-token logits of the last one, (B, V)."""
        if self._past is None and self._buffers is None:
            raise RuntimeError("decode() before prefill()")
        if self._steps.in_place and input_ids.shape[1] > 1 and input_ids.shape[0] > 1:
            raise InvalidInputError(
                "the in-place KV cache takes several new tokens after a past in a batch of one only "
                "(GroupQueryAttention's rule); feed one token per row, or load with in_place_kv 'off'"
            )
        logits = self._run(DECODE, input_ids, attention_mask, position_ids, past=self._past)
        self.past_length += input_ids.shape[1]
        return logits

    def reorder(self, rows: np.ndarray) -> None:
        """Make row r of the cache row ``rows[r]`` of the cache as it stands (beam search, between steps); the
        batch becomes ``len(rows)`` rows. The runtime's CPU buffers reorder in place in numpy; a cache in ONNX
        Runtime's OrtValues is gathered on their device (:mod:`gpt2_onnx_runtimes.kv_reorder`), never through the
        host."""
        if self._buffers is not None:
            self._buffers.reorder(rows)
        elif self._past is not None:
            if len(rows) != self._past[0].shape()[0] or not np.array_equal(rows, np.arange(len(rows))):
                self._past = reorder_past(self._past, rows, self._device, self._device_id)
        else:
            raise RuntimeError("reorder() before prefill()")

    def _run(
        self,
        kind: GraphKind,
        input_ids: np.ndarray,
        attention_mask: np.ndarray,
        position_ids: np.ndarray,
        past: list[ort.OrtValue] | None,
        empty: np.ndarray | None = None,
    ) -> np.ndarray:
        session = self._steps.session(kind)
        new = input_ids.shape[1]
        kept = self._kept_binding(session, self._buffers, new) if isinstance(self._buffers, SharedKvBuffers) else None
        binding = kept.binding if kept is not None else self._new_binding(session, kind, past, empty, new)
        _bind_tokens(binding, input_ids, attention_mask, position_ids)
        with onnxruntime_errors(self._what(kind)):
            session.run_with_iobinding(binding)
        if self._buffers is not None:
            self._buffers.advance(new)
        if kept is not None:
            return kept.logits[:, -1].copy()  # (B, V): the buffer is written again by the next step
        outputs = binding.get_outputs()
        if self._buffers is None:
            self._past = list(outputs[1:])
        return outputs[0].numpy()[:, -1]  # (B, V)

    def _kept_binding(self, session: ort.InferenceSession, buffers: SharedKvBuffers, new: int) -> KeptBinding:
        """The in-place cache's binding, made once per cache tensors (buffer, batch, capacity) and kept (by the loaded
        export's :class:`KeptBindings`, so that the next generation handed the same pooled buffer binds
        nothing): the cache buffers are the same tensors at every step (past and present alike, (B, nh, C, hs)),
        as are the constant inputs and the logits (the generation graph's are the last position's, (B, 1, V),
        however many tokens go in), so a step binds only its tokens again and reads no outputs back from ONNX
        Runtime (binding 2·L cache tensors and reading them back cost about as much host time as the rest of a
        step's host work together)."""
        buffers.check_room(new)
        kept = self._kept
        if kept is None or kept.session is not session or kept.batch != buffers.batch:
            key = binding_key(session, buffers)
            kept = self._loaded.kv_bindings.get(key)
            if kept is None or kept.session is not session:
                kept = self._loaded.kv_bindings.put(key, self._bind_kept(session, buffers, new))
            self._kept = kept
        return kept

    def _bind_kept(self, session: ort.InferenceSession, buffers: SharedKvBuffers, new: int) -> KeptBinding:
        binding = session.io_binding()
        logits = np.empty((buffers.batch, 1, self._dims.vocab_size), dtype=np.float32)  # (B, 1, V)
        binding.bind_output(LOGITS, "cpu", 0, np.float32, list(logits.shape), logits.ctypes.data)
        buffers.bind_past(binding, self._past_names)
        buffers.bind_present(binding, self._present_names, new)
        for name, value in self._steps.constant_inputs.items():
            binding.bind_ortvalue_input(name, value)  # the mapped embedding (V, d); an int8 cache's scales
        return KeptBinding(session, buffers.batch, binding, logits)

    def _new_binding(
        self,
        session: ort.InferenceSession,
        kind: GraphKind,
        past: list[ort.OrtValue] | None,
        empty: np.ndarray | None,
        new: int,
    ) -> ort.IOBinding:
        """A binding of everything but the tokens, for one run: the cache in double buffers (which swap every
        step), in ONNX Runtime's OrtValues, or an empty past."""
        binding = session.io_binding()
        binding.bind_output(LOGITS, "cpu")  # ONNX Runtime allocates them; first: get_outputs() keeps binding order
        buffers = self._buffers
        if buffers is not None:
            if kind == DECODE or self._steps.prefill_takes_past:
                buffers.bind_past(binding, self._past_names)  # (B, nh, P, hs); P = 0 in a merged prefill
        elif past is not None:
            for name, value in zip(self._past_names, past, strict=True):
                binding.bind_ortvalue_input(name, value)  # (B, nh, P, hs), already on the device
        elif empty is not None:
            for name in self._past_names:
                binding.bind_cpu_input(name, empty)  # (B, nh, 0, hs): nothing to copy
        for name, value in self._steps.constant_inputs.items():
            binding.bind_ortvalue_input(name, value)  # the mapped embedding (V, d)
        if buffers is not None:
            buffers.bind_present(binding, self._present_names, new)  # (B, nh, P + N, hs)
        else:
            for name in self._present_names:
                binding.bind_output(name, self._device, self._device_id)  # ONNX Runtime allocates on the device
        return binding

    def _what(self, kind: GraphKind) -> str:
        if self._steps.prefill_takes_past:
            return f"the generation graph ({kind})"
        return self._loaded.manifest.graphs[kind].file


def _bind_tokens(
    binding: ort.IOBinding, input_ids: np.ndarray, attention_mask: np.ndarray, position_ids: np.ndarray
) -> None:
    """Bind a run's token inputs: the new tokens (B, N), the mask over the past and them (B, P+N), their positions
    (B, N)."""
    binding.bind_cpu_input(INPUT_IDS, np.ascontiguousarray(input_ids, dtype=np.int64))  # (B, N)
    binding.bind_cpu_input(ATTENTION_MASK, np.ascontiguousarray(attention_mask, dtype=np.int64))  # (B, P+N)
    binding.bind_cpu_input(POSITION_IDS, np.ascontiguousarray(position_ids, dtype=np.int64))  # (B, N)
