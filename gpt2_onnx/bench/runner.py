"""Run the systems side by side: one worker process each, measurements interleaved task by task.

Round r runs every task once on every system, the systems' order rotated each round, so slow drifts of machine
load (other processes, thermal limits) fall on all systems alike. Workers wait on their pipe while another
measures, so they never compete for the CPU.

A timed prefill (and time to first token) follows a short untimed generation on the same system, as in use a
prefill follows the decode steps of the generation before it: ONNX Runtime's decode session keeps spinning its
threads for a while after a run and slows a prefill right after it, which prefills timed back to back never see.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import gpt2_onnx
from gpt2_onnx.bench.protocol import prompt_ids
from gpt2_onnx.bench.settings import BenchSettings, SystemSpec
from gpt2_onnx.errors import BenchError

__all__ = ["RawResults", "Task", "bench_tasks", "duration_text", "run_systems"]

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
# The worker's entry: this checkout's packages first on the path, whatever the environment says.
_WORKER_MAIN = "import sys; sys.path.insert(0, sys.argv[1]); from gpt2_onnx.bench.worker import main; main()"


@dataclass(frozen=True)
class Task:
    """One measurement every system makes each round."""

    name: str  # e.g. "prefill/128", "first_token/8", "decode", "batch"
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


def bench_tasks(settings: BenchSettings, vocab_size: int) -> list[Task]:
    """Prefill and time-to-first-token per prompt length (each after a short generation's decode steps, as in
    use), a decode run, and a batch throughput run."""

    def ids(batch: int, length: int) -> list[list[int]]:
        return prompt_ids(settings.seed, batch, length, vocab_size).tolist()

    steps = settings.decode_steps_before_prefill
    before = ids(1, 8) if steps else None  # a short prompt, then ``steps`` decode steps (steps + 1 tokens)
    tasks = [Task(f"prefill/{n}", "prefill", ids(1, n), 0, before, steps + 1) for n in settings.prompt_lengths]
    tasks += [Task(f"first_token/{n}", "generate", ids(1, n), 1, before, steps + 1) for n in settings.prompt_lengths]
    tasks.append(Task("decode", "generate", ids(1, settings.decode_prompt_length), settings.new_tokens))
    tasks.append(Task("batch", "generate", ids(settings.batch_size, settings.batch_prompt_length), settings.new_tokens))
    return tasks


@dataclass
class RawResults:
    """All answers of one system: load figures, per-task answers of the recorded rounds, memory at the end."""

    spec: SystemSpec
    load: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    end_memory: dict[str, int] = field(default_factory=dict)


class _Worker:
    """A worker process and its log file (the worker's stderr, shown when it fails)."""

    def __init__(self, spec: SystemSpec, settings: BenchSettings, log_file: IO[str]) -> None:
        self.spec, self._log = spec, log_file
        package_root = str(Path(gpt2_onnx.__file__).resolve().parent.parent)  # this checkout's packages
        self._process = subprocess.Popen(
            [spec.python or sys.executable, "-c", _WORKER_MAIN, package_root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
        )
        self.ready = self._exchange({"system": spec.to_json(), "settings": settings.to_json()})

    def _exchange(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None  # both are pipes
        try:
            self._process.stdin.write(json.dumps(payload) + "\n")
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            raise BenchError(f"the {self.spec.label} bench worker stopped: {self._log_tail()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise BenchError(f"{self.spec.label}: {answer['error']}")
        return answer

    def request(self, cmd: str, **fields: Any) -> dict[str, Any]:
        return self._exchange({"cmd": cmd, **fields})

    def _log_tail(self) -> str:
        self._log.flush()
        self._process.poll()
        lines = [line for line in Path(self._log.name).read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else f"exit code {self._process.returncode}"

    def close(self) -> None:
        if self._process.poll() is None:
            try:
                assert self._process.stdin is not None
                self._process.stdin.write(json.dumps({"cmd": "exit"}) + "\n")
                self._process.stdin.close()
                self._process.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._log.close()


def duration_text(seconds: float) -> str:
    """``"45 s"``, ``"3 min 05 s"``: how progress lines state time."""
    whole = max(0, round(seconds))
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


def _round_note(round_index: int, total: int, warmup: int, elapsed: list[float]) -> str:
    """``"round 3/6, about 2 min 10 s left"``; the estimate is the mean round so far times the rounds left."""
    kind = " (warm-up)" if round_index < warmup else ""
    if not elapsed:
        return f"round {round_index + 1}/{total}{kind}, time left known after this round"
    left = (total - round_index) * sum(elapsed) / len(elapsed)
    return f"round {round_index + 1}/{total}{kind}, about {duration_text(left)} left"


def _rounds(
    workers: list[_Worker],
    results: list[RawResults],
    tasks: list[Task],
    settings: BenchSettings,
    progress: Progress,
) -> None:
    total = settings.warmup + settings.repeats
    elapsed: list[float] = []
    for round_index in range(total):
        recorded = round_index >= settings.warmup
        progress(_round_note(round_index, total, settings.warmup, elapsed))
        start = time.monotonic()
        shift = round_index % len(workers)
        order = list(zip(workers, results, strict=True))
        order = order[shift:] + order[:shift]
        for task in tasks:
            for worker, result in order:
                answer = worker.request(**task.request())
                if recorded:
                    result.tasks.setdefault(task.name, []).append(answer)
        elapsed.append(time.monotonic() - start)


def run_systems(
    specs: Sequence[SystemSpec], settings: BenchSettings, vocab_size: int, progress: Progress | None = None
) -> list[RawResults]:
    """Start one worker per system, load each in turn, run the interleaved rounds, read the final memory."""
    report = progress or (lambda message: log.info("%s", message))
    tasks = bench_tasks(settings, vocab_size)
    workers: list[_Worker] = []
    results = [RawResults(spec) for spec in specs]
    first_use = prompt_ids(settings.seed, 1, 8, vocab_size).tolist()
    with tempfile.TemporaryDirectory(prefix="gpt2-onnx-bench-") as logs:
        try:
            for index, spec in enumerate(specs):
                report(f"loading {spec.label}")
                log_file = open(Path(logs) / f"worker-{index}.log", "w+")  # noqa: SIM115  # closed with the folder
                workers.append(_Worker(spec, settings, log_file))
                results[index].load = workers[-1].request("load", ids=first_use)
            _rounds(workers, results, tasks, settings, report)
            for worker, result in zip(workers, results, strict=True):
                result.end_memory = worker.request("memory")
        finally:
            for worker in workers:
                worker.close()
    return results
