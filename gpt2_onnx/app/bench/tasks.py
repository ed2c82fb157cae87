"""What every system is measured on, task by task, and how its answers are kept: the data between the bench's runner
(gpt2_onnx.app.bench.runner) and its report (gpt2_onnx.app.bench.report).

A timed prefill (and time to first token) follows a short untimed generation on the same system, as in use a
prefill follows the decode steps of the generation before it: a runtime's threads may keep spinning for a while
after a run and slow a prefill right after it, which prefills timed back to back never see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpt2_onnx_core.bench_protocol import prompt_ids
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec

__all__ = ["RawResults", "Task", "bench_tasks", "decode_context_task", "growth_base_task"]


@dataclass(frozen=True)
class Task:
    """One measurement every system makes each round."""

    name: str  # e.g. "prefill/128", "first_token/8", "decode", "batch", "decode/1000"
    command: str  # the worker command: "prefill" or "generate"
    ids: list[list[int]]  # the prompt (B, T)
    new_tokens: int = 0
    # An untimed generation the worker runs first, on the same system (its decode steps precede the timing).
    before_ids: list[list[int]] | None = None
    before_new_tokens: int = 0

    def request(self) -> dict[str, Any]:
        """The worker request for this task."""
        before = {"before": {"ids": self.before_ids, "new_tokens": self.before_new_tokens}} if self.before_ids else {}
        return {"cmd": self.command, "ids": self.ids, "new_tokens": self.new_tokens, **before}


def decode_context_task(length: int) -> str:
    """The name of the decode run after a prompt of ``length`` tokens (``BenchSettings.decode_contexts``)."""
    return f"decode/{length}"


def growth_base_task(settings: BenchSettings) -> str:
    """The decode run each growth with the context divides by: the run of as many steps after the decode prompt
    where that length is one of the contexts (``BenchSettings.growth_over_context_run``), else the decode run."""
    return decode_context_task(settings.decode_prompt_length) if settings.growth_over_context_run else "decode"


def bench_tasks(settings: BenchSettings, vocab_size: int) -> list[Task]:
    """Prefill and time-to-first-token per prompt length (each after a short generation's decode steps, as in
    use), a decode run, a batch throughput run, then a decode run after each of ``decode_contexts`` (last, so that
    the other tasks follow one another as without them)."""

    def ids(batch: int, length: int) -> list[list[int]]:
        return prompt_ids(settings.seed, batch, length, vocab_size).tolist()

    steps = settings.decode_steps_before_prefill
    before = ids(1, 8) if steps else None  # a short prompt, then ``steps`` decode steps (steps + 1 tokens)
    tasks = [Task(f"prefill/{n}", "prefill", ids(1, n), 0, before, steps + 1) for n in settings.prompt_lengths]
    tasks += [Task(f"first_token/{n}", "generate", ids(1, n), 1, before, steps + 1) for n in settings.prompt_lengths]
    tasks.append(Task("decode", "generate", ids(1, settings.decode_prompt_length), settings.new_tokens))
    tasks.append(Task("batch", "generate", ids(settings.batch_size, settings.batch_prompt_length), settings.new_tokens))
    tasks += [
        Task(decode_context_task(n), "generate", ids(1, n), settings.context_new_tokens)
        for n in settings.decode_contexts
    ]
    return tasks


@dataclass
class RawResults:
    """All answers of one system: load figures, per-task answers of the recorded rounds, memory at the end."""

    spec: SystemSpec
    load: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    end_memory: dict[str, int] = field(default_factory=dict)
