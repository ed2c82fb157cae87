"""``gpt2-onnx serve`` as a test runs it: a child process on a free loopback port, ready once /health answers, and
stopped the way a user or a service manager stops it (SIGINT or SIGTERM, perhaps a second one during the shutdown),
then by PID: every process it started is ended, and nothing else."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx2
import psutil

READY_TIMEOUT_S = 180.0  # Ray's start, the replicas' loading and the first health answer, on a busy 2-core box
STOP_TIMEOUT_S = 60.0
REPLICA_PREFIX = "ray::ServeReplica"  # the process title Ray gives a Serve replica
READY_LINE = "Press Ctrl-C to stop."  # what serve prints once the application is running


def cpu_seconds(process: psutil.Process) -> float | None:
    """User + system CPU seconds of ``process`` so far; None once it has gone."""
    try:
        times = process.cpu_times()
    except psutil.Error:
        return None
    return float(times.user + times.system)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_command(export: Path | str) -> list[str]:
    return [sys.executable, "-m", "gpt2_onnx", "serve", str(export)]


def clean_environment() -> dict[str, str]:
    """This environment without gpt2-onnx's and Ray's own variables (a test sets the ones it means)."""
    return {key: value for key, value in os.environ.items() if not key.startswith(("GPT2_ONNX_", "RAY_"))}


class ServeProcess:
    """One server: :meth:`start`, then :attr:`url`; :meth:`stop` always (a fixture's teardown)."""

    def __init__(
        self, export: Path | str, logs: Path, *args: str, port: int | None = None, env: dict[str, str] | None = None
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._command = [*serve_command(export), "--port", str(self.port), *args]
        self._env = env or {}
        self._logs = logs
        self._process: subprocess.Popen[bytes] | None = None
        self._seen: dict[int, psutil.Process] = {}  # every descendant seen, to end any left behind
        self.left_running: list[int] = []

    def start(self) -> ServeProcess:
        env = {**clean_environment(), **self._env}
        self._logs.mkdir(parents=True, exist_ok=True)
        with open(self._logs / "stdout.txt", "wb") as out, open(self._logs / "stderr.txt", "wb") as err:
            self._process = subprocess.Popen(
                self._command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise AssertionError(f"serve exited with {self._process.returncode}: {self.stderr()[-3000:]}")
            if READY_LINE in self.stdout() and self.healthy():
                self.descendants()
                return
            time.sleep(0.5)
        raise AssertionError(f"serve not ready after {READY_TIMEOUT_S} s: {self.stderr()[-3000:]}")

    @property
    def pid(self) -> int:
        assert self._process is not None, "not started"
        return self._process.pid

    def healthy(self) -> bool:
        try:
            return httpx2.get(f"{self.url}/health", timeout=5).status_code == 200
        except httpx2.HTTPError:
            return False

    def stderr(self) -> str:
        return (self._logs / "stderr.txt").read_text(errors="replace")

    def stdout(self) -> str:
        return (self._logs / "stdout.txt").read_text(errors="replace")

    def descendants(self) -> list[psutil.Process]:
        """The server's processes now (Ray's own, its workers, the replicas), remembered for :meth:`stop`."""
        assert self._process is not None
        try:
            found = psutil.Process(self._process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        for process in found:
            self._seen.setdefault(process.pid, process)
        return found

    def replica_pids(self) -> list[int]:
        pids = []
        for process in self.descendants():
            try:
                if process.name().startswith(REPLICA_PREFIX) or " ".join(process.cmdline()).startswith(REPLICA_PREFIX):
                    pids.append(process.pid)
            except psutil.Error:
                continue
        return pids

    def listening(self) -> list[tuple[str, str, int]]:
        """Every socket the server's processes (the command itself, Ray's, the replicas) listen on: (process name,
        address, port)."""
        assert self._process is not None
        found = []
        for process in [psutil.Process(self._process.pid), *self.descendants()]:
            try:
                name = process.name()
                connections = process.net_connections(kind="inet")
            except psutil.Error:
                continue
            for connection in connections:
                if connection.status == psutil.CONN_LISTEN:
                    found.append((name, str(connection.laddr.ip), int(connection.laddr.port)))
        return found

    def stop(self, signals: Sequence[int] = (signal.SIGINT,)) -> int | None:
        """Send the first of ``signals`` (Ctrl-C by default) and wait; each further one is sent once the server has
        stopped answering (its shutdown under way) while the command still runs. Then SIGKILL to the process and
        each remembered descendant still running. :attr:`left_running` lists the descendants that outlived the
        command's own shutdown by 15 s; :attr:`sent_during_shutdown` the further signals sent before it ended."""
        self.sent_during_shutdown: list[int] = []
        if self._process is None:
            return None
        self.descendants()
        if self._process.poll() is None:
            self._process.send_signal(signals[0])
            self._signal_during_shutdown(signals[1:])
            try:
                self._process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        _, alive = psutil.wait_procs(list(self._seen.values()), timeout=15)
        self.left_running = [process.pid for process in alive]
        for process in alive:
            try:
                if process.is_running():  # the same process (psutil compares its start time), not a reused PID
                    process.kill()
            except psutil.Error:
                continue
        return self._process.returncode

    def _signal_during_shutdown(self, signals: Sequence[int]) -> None:
        assert self._process is not None
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while signals and self.healthy() and time.monotonic() < deadline and self._process.poll() is None:
            time.sleep(0.05)
        for signum in signals:
            if self._process.poll() is None:
                self._process.send_signal(signum)
                self.sent_during_shutdown.append(signum)
