"""What an idle ``gpt2-onnx serve`` holds beside its model: each process's resident memory (the command, Ray's
services, Serve's controller and proxy, the replica) and CPU use over 10 idle seconds, and how long the command
takes to start (until it answers) and to stop (Ctrl-C until it has exited).

RSS is summed per process, so pages the processes share count more than once: an upper bound. Arguments of the
form ``NAME=VALUE`` after the export are environment variables for the server (Ray's and Serve's own settings).

    python benchmarks/serve_overhead.py EXPORT [NAME=VALUE ...] > benchmarks/results/STAMP-serve-overhead.txt
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.serve_process import ServeProcess, cpu_seconds  # noqa: E402  # after the path

IDLE_S = 10.0


def main() -> None:
    export = Path(sys.argv[1])
    env = dict(word.split("=", 1) for word in sys.argv[2:])
    with tempfile.TemporaryDirectory(prefix="serve-overhead-") as logs:
        started = time.perf_counter()
        server = ServeProcess(export, Path(logs), env=env).start()
        start_s = time.perf_counter() - started
        try:
            time.sleep(5)  # past the start's own work
            processes = [psutil.Process(server.pid), *server.descendants()]
            before = [cpu_seconds(process) or 0.0 for process in processes]
            time.sleep(IDLE_S)
            idle = [(cpu_seconds(process) or was) - was for process, was in zip(processes, before, strict=True)]
            rows = []
            for process, cpu in zip(processes, idle, strict=True):
                try:
                    rows.append((process.memory_info().rss, cpu, process.name()))
                except psutil.Error:
                    continue
        finally:
            stopping = time.perf_counter()
            server.stop()
            stop_s = time.perf_counter() - stopping
    settings = " ".join(f"{name}={value}" for name, value in env.items()) or "no settings"
    print(f"export: {export.name}; {settings}; {len(rows)} processes")
    for rss, cpu, name in sorted(rows, reverse=True):
        print(f"{rss / 2**20:8.0f} MiB  {100 * cpu / IDLE_S:5.1f} % of a core  {name}")
    print(f"{sum(r for r, _, _ in rows) / 2**20:8.0f} MiB  total RSS (shared pages counted per process)")
    print(f"idle CPU over {IDLE_S:.0f} s: {100 * sum(idle) / IDLE_S:.1f} % of one core")
    print(f"start {start_s:.1f} s (until /health answers), stop {stop_s:.1f} s (Ctrl-C until the command exited)")


if __name__ == "__main__":
    main()
