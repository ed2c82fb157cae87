"""Iteration-level batching: requests join the running decode batch at the next step and leave when they finish.

One engine owns one loaded export and one running batch (:class:`gpt2_onnx_runtimes.batch_cache.RunningBatch`). Each
iteration of its loop:

    1. drops cancelled requests (waiting ones, and the rows of running ones);
    2. admits waiting requests in arrival order while rows are free (``max_rows``) and the prefill budget lasts
       (``max_prefill_tokens``, at least one prompt): each prompt is prefilled alone (batch 1, no padding, the
       same run as ``gpt2-onnx run``), every choice draws its first token from those logits, and the prompt's KV
       rows, one per unfinished choice, join the batch (the shorter side left-padded, masks extended);
    3. runs one decode step of every row: each row's last token at its own next position;
    4. chooses each row's next token (its own sampling, generator, stop strings, logprobs), reports it, and lets
       finished rows leave (the batch compacted, padding no row needs any more trimmed).

So a request's tokens are the ones it gets alone: every choice runs the generation core
(:mod:`gpt2_onnx_runtimes.decoding`: token choice, end rule, seeding) that ``gpt2-onnx run`` runs, on logits
equal to its own up to the floating-point rounding that batching and padding may shift (as in any batched run).
The engine is Python and ONNX Runtime only: no torch and no web framework; :meth:`submit` may be called from any
thread, the loop runs on one of its own (:meth:`start`) or is driven step by step (:meth:`step`) by tests.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpt2_onnx_core.batching import position_ids
from gpt2_onnx_core.errors import Gpt2OnnxError, InferenceError, InvalidInputError, ServerBusyError
from gpt2_onnx_core.names import KV_KINDS, past_name, present_name
from gpt2_onnx_core.serve_limits import MAX_BATCH_ROWS, MAX_WAITING
from gpt2_onnx_runtimes.batch_cache import RunningBatch
from gpt2_onnx_runtimes.batch_requests import Choice, ChoiceUpdate, CompletionSpec, RequestFailed, Sink, Update
from gpt2_onnx_runtimes.decoding import EndRule, TokenChooser, new_rows, seed_of
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.generation_defaults import CheckpointDefaults
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.ort_sessions import onnxruntime_errors
from gpt2_onnx_runtimes.prompt_checks import check_prompts, special_tokens
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = ["BatchEngine", "EngineOptions", "EngineStats", "Ticket"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineOptions:
    """Limits of one engine."""

    max_rows: int = MAX_BATCH_ROWS  # rows (choices) decoded together
    max_waiting: int = MAX_WAITING  # requests waiting for rows; one more is refused at once (ServerBusyError)
    max_prefill_tokens: int = 2048  # prompt tokens prefilled between two decode steps (one prompt at least)
    trim_columns: int = 16  # leading padding columns no row needs that make the batch drop them

    def __post_init__(self) -> None:
        for name in ("max_rows", "max_prefill_tokens", "trim_columns"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_waiting < 0:
            raise InvalidInputError(f"max_waiting must be >= 0, got {self.max_waiting}")


@dataclass(frozen=True)
class EngineStats:
    waiting: int  # requests not admitted yet
    running: int  # requests with rows in the batch
    rows: int  # rows in the batch
    length: int  # positions in the batch's past


class Ticket:
    """A submitted request; :meth:`cancel` ends it at the engine's next step (its sink hears nothing more)."""

    def __init__(self, number: int, spec: CompletionSpec, sink: Sink) -> None:
        self.number, self.spec, self.sink = number, spec, sink
        self.seed = seed_of(spec.options)  # the request's choices are seeded from it by the core's rule
        self._cancelled = threading.Event()
        self.open_choices = spec.choices

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


@dataclass(frozen=True)
class _Prefilled:
    """A request whose prompt was prefilled: its choices that go on, and the runner holding the prompt's cache."""

    ticket: Ticket
    choices: list[Choice]
    runner: KvCacheRunner


class BatchEngine:
    """Batches the requests submitted to it over one loaded export (see the module docstring)."""

    def __init__(
        self,
        loaded: LoadedExport,
        tokenizer: TextTokenizer,
        options: EngineOptions | None = None,
        defaults: CheckpointDefaults | None = None,
    ) -> None:
        self.loaded, self.tokenizer = loaded, tokenizer
        self.defaults = defaults or CheckpointDefaults()  # the export's generation_config.json, for its callers
        self.options = options or EngineOptions()
        dims = loaded.manifest.dims
        self.dims = dims
        layers = range(dims.n_layer)
        self._names = (
            [past_name(i, kv) for i in layers for kv in KV_KINDS],
            [present_name(i, kv) for i in layers for kv in KV_KINDS],
        )
        steps = loaded.steps
        self._batch = RunningBatch(
            2 * dims.n_layer,
            dims.n_head,
            dims.head_dim,
            steps.in_place,
            dims.n_positions,
            self.options.max_rows,
            steps.cache_dtype,
        )
        self._rows: list[tuple[Ticket, Choice]] = []  # row i of the batch: its request and choice
        self._waiting: deque[Ticket] = deque()
        self._running: set[Ticket] = set()
        self._condition = threading.Condition()
        self._numbers = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._closed = False

    @classmethod
    def load(
        cls, folder: str | Path, runtime: RuntimeOptions | None = None, options: EngineOptions | None = None
    ) -> BatchEngine:
        """Open an export folder (checked once: :class:`ExportFolder`) and load it into a new engine."""
        runtime = runtime or RuntimeOptions()
        export = ExportFolder.open(folder, runtime.integrity)
        return cls(LoadedExport.open(export, runtime), export.tokenizer, options, export.defaults)

    def check(self, spec: CompletionSpec) -> None:
        """Refuse a request the engine could never run (InvalidInputError naming the limit): the prompt and
        options as generation checks them, and more choices than the batch holds."""
        check_prompts(self.loaded, [spec.prompt_ids], spec.options)
        special_tokens(self.loaded, spec.options)
        if spec.choices > self.options.max_rows:
            raise InvalidInputError(f"n is {spec.choices}; this server decodes at most {self.options.max_rows}")

    def submit(self, spec: CompletionSpec, sink: Sink) -> Ticket:
        """Queue a request; its updates go to ``sink``. Raises ServerBusyError when ``max_waiting`` wait already."""
        self.check(spec)
        with self._condition:
            if self._closed:
                raise ServerBusyError("the server is shutting down")
            if len(self._waiting) >= self.options.max_waiting:  # cancelled requests hold no place
                self._waiting = deque(ticket for ticket in self._waiting if not ticket.cancelled)
            if len(self._waiting) >= self.options.max_waiting:
                raise ServerBusyError(f"the server is busy: {len(self._waiting)} requests wait already")
            ticket = Ticket(next(self._numbers), spec, sink)
            self._waiting.append(ticket)
            self._condition.notify()
        return ticket

    def stats(self) -> EngineStats:
        with self._condition:
            waiting = sum(not ticket.cancelled for ticket in self._waiting)
        return EngineStats(waiting, len(self._running), self._batch.rows, self._batch.length)

    def step(self) -> bool:
        """One iteration (drop cancelled, admit, decode, release); returns whether work remains."""
        self._drop_cancelled()
        prefilled = [done for ticket in self._admit() if (done := self._prefill(ticket)) is not None]
        for done in sorted(prefilled, key=lambda done: -done.runner.past_length):
            self._join(done)  # longest first: the shorter are padded as they join, the running rows never are
        if self._rows:
            try:
                self._decode()
            except Exception as exc:  # a failed step fails every running request; the engine goes on
                self._fail_running(exc)
        with self._condition:
            return bool(self._rows or self._waiting)

    def _drop_cancelled(self) -> None:
        with self._condition:
            if any(ticket.cancelled for ticket in self._waiting):
                self._waiting = deque(ticket for ticket in self._waiting if not ticket.cancelled)
        gone = [row for row, (ticket, _) in enumerate(self._rows) if ticket.cancelled]
        if gone:
            self._running -= {self._rows[row][0] for row in gone}
            self._leave(gone)

    def _admit(self) -> list[Ticket]:
        """Waiting requests that fit now, in arrival order."""
        admitted: list[Ticket] = []
        free = self.options.max_rows - self._batch.rows
        budget = self.options.max_prefill_tokens
        with self._condition:
            while self._waiting:
                spec = self._waiting[0].spec
                if spec.choices > free or (admitted and len(spec.prompt_ids) > budget):
                    break
                admitted.append(self._waiting.popleft())
                free -= spec.choices
                budget -= len(spec.prompt_ids)
        return admitted

    def _prefill(self, ticket: Ticket) -> _Prefilled | None:
        """Prefill ``ticket``'s prompt alone and choose every choice's first token; returns what joins the batch
        (the unfinished choices and the prompt's cache), None when nothing does."""
        spec = ticket.spec
        ids = np.asarray([spec.prompt_ids], dtype=np.int64)  # (1, T)
        mask = np.ones_like(ids)  # (1, T)
        try:
            runner = KvCacheRunner(self.loaded, capacity=ids.shape[1])
            logits = runner.prefill(ids, mask, position_ids(mask))[0]  # (V,)
            eos, _ = special_tokens(self.loaded, spec.options)
            choose = TokenChooser(spec.options, eos, top=spec.logprobs or 0, logprobs=spec.wants_logprobs)
            end = EndRule(spec.options, eos, self.tokenizer)
            rows = new_rows([spec.prompt_ids], spec.options, ticket.seed)
            with_top = spec.logprobs is not None
            choices = [Choice(row, choose, end, self.tokenizer, with_top) for row in rows]
            joining = [choice for choice in choices if self._report(ticket, choice.advance(logits))]
        except Exception as exc:  # this request fails; the running batch is untouched
            self._fail(ticket, exc)
            return None
        return _Prefilled(ticket, joining, runner) if joining and not ticket.cancelled else None

    def _join(self, done: _Prefilled) -> None:
        """The prefilled prompt's rows join the batch, one per unfinished choice."""
        try:
            self._batch.join(done.runner.past_arrays(), len(done.choices))  # (1, nh, T, hs) each
        except Exception as exc:  # this request fails; the running batch is untouched
            self._fail(done.ticket, exc)
            return
        self._rows += [(done.ticket, choice) for choice in done.choices]
        self._running.add(done.ticket)

    def _decode(self) -> None:
        batch = self._batch
        if batch.length + 1 > self.dims.n_positions:  # padding no row needs would push the step past the positions
            batch.trim()
        tokens = np.asarray([choice.last_token for _, choice in self._rows], dtype=np.int64)  # (B,)
        session = self.loaded.steps.decode
        with onnxruntime_errors("the batched decode step"):
            logits = batch.decode(session, tokens, self._names, self.loaded.steps.constant_inputs)  # (B, V)
        finished = []
        for row, (ticket, choice) in enumerate(self._rows):
            if not self._report(ticket, choice.advance(logits[row])):  # (V,): this row's logits
                finished.append(row)
        if finished:
            self._leave(finished)

    def _report(self, ticket: Ticket, update: ChoiceUpdate) -> bool:
        """Hand ``update`` to the request's sink; returns whether the choice goes on."""
        self._send(ticket, update)
        if update.finish_reason is None:
            return True
        ticket.open_choices -= 1
        if ticket.open_choices == 0:
            self._running.discard(ticket)
        return False

    def _send(self, ticket: Ticket, update: Update) -> None:
        if ticket.cancelled:
            return
        try:
            ticket.sink(update)
        except Exception:  # a sink must not raise; if it does, its request ends and the others go on
            log.exception("request %d: its sink failed; cancelling it", ticket.number)
            ticket.cancel()

    def _leave(self, rows: list[int]) -> None:
        order = self._batch.leave(set(rows))
        self._rows = [self._rows[old] for old in order]
        if self._batch.dead_columns() >= self.options.trim_columns:
            self._batch.trim()  # the padding that only the rows that left needed

    def _fail(self, ticket: Ticket, exc: BaseException) -> None:
        error = exc if isinstance(exc, Gpt2OnnxError) else InferenceError(f"generation failed: {exc}")
        log.warning("request %d failed: %s", ticket.number, error)
        self._send(ticket, RequestFailed(error))
        ticket.cancel()
        self._running.discard(ticket)

    def _fail_running(self, exc: BaseException) -> None:
        for ticket in list(self._running):
            self._fail(ticket, exc)
        self._rows = []
        self._batch.clear()

    @property
    def alive(self) -> bool:
        """Whether the loop started by :meth:`start` still runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Run the loop on a thread of its own until :meth:`close`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="gpt2-onnx-batching", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._condition:
                while not self._closed and not (self._waiting or self._rows):
                    self._condition.wait()
                if self._closed:
                    return
            try:
                self.step()
            except Exception as exc:  # a bug in a step: its requests fail, the loop (and the replica) goes on
                log.exception("the batching loop's step failed")
                self._fail_running(exc)

    def close(self) -> None:
        """Stop the loop; requests still waiting or running fail with ServerBusyError."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()
            waiting, self._waiting = list(self._waiting), deque()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for ticket in waiting + list(self._running):
            self._fail(ticket, ServerBusyError("the server is shutting down"))
        self._rows = []
        self._batch.clear(release=True)
