"""What an idle ``gpt2-onnx serve`` holds beside its model: each process's resident memory (the command, Ray's
services, Serve's controller and proxy, the replica) and their CPU use over 10 idle seconds.

RSS is summed per process, so pages the processes share count more than once: an upper bound.

    python benchmarks/serve_overhead.py EXPORT > benchmarks/results/STAMP-serve-overhead.txt
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.serve_process import ServeProcess  # noqa: E402  # after the path

IDLE_S = 10.0


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            continue
    return total


def main() -> None:
    export = Path(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="serve-overhead-") as logs:
        server = ServeProcess(export, Path(logs)).start()
        try:
            time.sleep(5)  # past the start's own work
            processes = [psutil.Process(server.pid), *server.descendants()]
            before = cpu_seconds(processes)
            time.sleep(IDLE_S)
            idle = cpu_seconds(processes) - before
            rows = []
            for process in processes:
                try:
                    rows.append((process.memory_info().rss, process.name()))
                except psutil.Error:
                    continue
        finally:
            server.stop()
    print(f"export: {export.name}; {len(rows)} processes")
    for rss, name in sorted(rows, reverse=True):
        print(f"{rss / 2**20:8.0f} MiB  {name}")
    print(f"{sum(r for r, _ in rows) / 2**20:8.0f} MiB  total RSS (shared pages counted per process)")
    print(f"idle CPU over {IDLE_S:.0f} s: {100 * idle / IDLE_S:.1f} % of one core")


if __name__ == "__main__":
    main()
