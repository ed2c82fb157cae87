"""Run the systems side by side: one worker process each, measurements interleaved task by task.

Round r runs every task once on every system, the systems' order rotated each round, so slow drifts of machine
load (other processes, thermal limits) fall on all systems alike. Workers wait on their pipe while another
measures, so they never compete for the CPU; before each timed request the runner pauses ``settle_s``, so that
the threads the previous system left spinning (ONNX Runtime's intra-op pools, OpenMP, TBB) have gone idle, which
otherwise slow the next system's first run.
The tasks and the answers kept are gpt2_onnx.app.bench.tasks'; each worker is gpt2_onnx.app.bench.worker.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from gpt2_onnx.app.bench.tasks import RawResults, Task, bench_tasks
from gpt2_onnx.app.import_roots import import_roots
from gpt2_onnx_core import errors
from gpt2_onnx_core.bench_protocol import prompt_ids
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_core.errors import BenchError, Gpt2OnnxError

__all__ = ["Progress", "duration_text", "run_systems"]

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
# The worker's entry: this checkout's packages first on the path, whatever the environment says.
_WORKER_MAIN = (
    "import os, sys; sys.path[:0] = sys.argv[1].split(os.pathsep); from gpt2_onnx.app.bench.worker import main; main()"
)


def _worker_error(name: object, message: str) -> Gpt2OnnxError:
    """The worker's own error class again (ManifestError, ProviderUnavailableError…: exit 2, 3 as everywhere),
    else BenchError (exit 1)."""
    found = getattr(errors, str(name), None) if name else None
    if isinstance(found, type) and issubclass(found, Gpt2OnnxError) and not issubclass(found, errors.OptionError):
        return found(message)
    return BenchError(message)


class _Worker:
    """A worker process and its log file (the worker's stderr, shown when it fails)."""

    def __init__(self, spec: SystemSpec, settings: BenchSettings, log_file: IO[str]) -> None:
        self.spec, self._log = spec, log_file
        roots = os.pathsep.join(import_roots())  # this installation's packages, whatever the environment has
        self._process = subprocess.Popen(
            [spec.python or sys.executable, "-c", _WORKER_MAIN, roots],
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
            raise _worker_error(answer.get("error_class"), f"{self.spec.label}: {answer['error']}")
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
                time.sleep(settings.settle_s)
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
