"""Load on ``gpt2-onnx serve``: 1, 4 and 16 concurrent clients on loopback, beside the same requests one at a time
through ``gpt2-onnx run``.

For each export folder (GPT-2-small dimensions, ``random:gpt2`` seed 0: fp32 and int4), three systems, up at once:

    run      ``gpt2-onnx run --prompts FILE --json``: the requests one after another in one process (batch 1,
             greedy, 2 threads); its per-request timings (prefill = time to first token, total) give the figures
    serve    ``gpt2-onnx serve`` (1 replica, 2 ONNX Runtime threads): the same requests from 1, 4 and 16 client
             threads, each streaming (time to first token = the first text chunk)
    serve ×2 ``--replicas 2`` (1 thread each: the machine's 2 cores split): 4 and 16 clients

The levels interleave: each round runs every level once (the order rotating from round to round), so that load
from outside falls on all of them alike; the 1-minute load average is recorded beside each level. requests/s and
tokens/s are each round's (first request sent to last answer; run: the sum of its generation times, after a
warm-up prompt), the median over the rounds reported; latencies are per request over every round. Every text is
compared with run's (greedy).

    python benchmarks/serve_load.py --exports benchmarks/out --rounds 3 --out benchmarks/results/STAMP-serve.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.serve_process import ServeProcess  # noqa: E402  # after the path

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "he",
    "for",
    "it",
    "with",
    "as",
    "his",
    "on",
    "be",
    "at",
    "by",
    "had",
    "are",
    "but",
    "from",
    "or",
    "have",
    "an",
    "they",
    "which",
    "one",
    "you",
    "were",
    "her",
    "all",
    "she",
    "there",
    "would",
    "their",
    "we",
    "him",
    "been",
    "has",
    "when",
    "who",
    "will",
    "more",
    "no",
    "if",
    "out",
    "so",
    "said",
    "what",
    "up",
    "its",
    "about",
]
LEVELS = (1, 4, 16)
REPLICA_LEVELS = (4, 16)


def requests(count: int, max_tokens: int, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` prompts of 8..120 words (about as many tokens), greedy, ``max_tokens`` each."""
    rng = random.Random(seed)
    return [
        {"prompt": " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 120))), "max_tokens": max_tokens}
        for _ in range(count)
    ]


def percentiles(values: list[float]) -> dict[str, float]:
    return {"p50": round(float(np.percentile(values, 50)), 1), "p99": round(float(np.percentile(values, 99)), 1)}


@dataclass
class Level:
    """One system at one concurrency, its outcomes gathered over the rounds."""

    system: str
    replicas: int
    concurrency: int
    rounds: list[tuple[int, int, float]] = field(default_factory=list)  # (requests, tokens, wall s) per round
    ttft_ms: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    equal: int = 0
    loads: list[float] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        """Throughput: the median over the rounds (bursts of load from outside hit some rounds, not all)."""
        return {
            "system": self.system,
            "replicas": self.replicas,
            "concurrency": self.concurrency,
            "requests": len(self.latency_ms),
            "requests_per_s": round(float(np.median([n / wall for n, _, wall in self.rounds])), 3),
            "tokens_per_s": round(float(np.median([t / wall for _, t, wall in self.rounds])), 1),
            "requests_per_s_rounds": [round(n / wall, 3) for n, _, wall in self.rounds],
            "ttft_ms": percentiles(self.ttft_ms),
            "latency_ms": percentiles(self.latency_ms),
            "texts_equal_run": self.equal,
            "load_1min": round(float(np.mean(self.loads)), 2),
        }


def run_round(export: Path, bodies: list[dict[str, Any]], level: Level) -> list[str]:
    """The requests one at a time through ``gpt2-onnx run`` (one process; its own timings per request)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as prompts:  # a warm-up prompt first
        prompts.write("\n".join(body["prompt"] for body in [bodies[0], *bodies]) + "\n")
    command = [sys.executable, "-m", "gpt2_onnx", "run", str(export), "--prompts", prompts.name, "--json"]
    command += ["-n", str(bodies[0]["max_tokens"]), "--threads", "2"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    os.unlink(prompts.name)
    results = [json.loads(line) for line in done.stdout.splitlines()][1:]
    wall = sum(r["timings"]["total_ms"] for r in results) / 1000
    level.rounds.append((len(results), sum(len(r["token_ids"]) for r in results), wall))
    level.ttft_ms += [r["timings"]["prefill_ms"] for r in results]
    level.latency_ms += [r["timings"]["total_ms"] for r in results]
    level.loads.append(os.getloadavg()[0])
    return [r["text"] for r in results]


def stream_one(http: httpx2.Client, body: dict[str, Any]) -> tuple[float, float, str, int]:
    """One streamed completion: (time to first text, latency, text, completion tokens)."""
    payload = {"model": "bench", "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, **body}
    start = time.perf_counter()
    first, text, tokens = None, [], 0
    with http.stream("POST", "/v1/completions", json=payload) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            if "error" in chunk:
                raise RuntimeError(chunk["error"]["message"])
            if chunk["choices"]:
                if first is None and chunk["choices"][0]["text"]:
                    first = time.perf_counter() - start
                text.append(chunk["choices"][0]["text"])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
    return first or 0.0, time.perf_counter() - start, "".join(text), tokens


Answer = TypeVar("Answer")


def run_clients(
    url: str, count: int, clients: int, call: Callable[[httpx2.Client, int], Answer]
) -> tuple[list[Answer], float]:
    """Requests 0 … ``count`` - 1 once each, ``call(http, index)`` from ``clients`` threads pulling from one queue,
    each thread with its own HTTP client: the answers in request order and the round's wall seconds. A client stops
    at its first failure; the first failure is raised once every thread has stopped."""
    work: queue.Queue[int] = queue.Queue()
    for index in range(count):
        work.put(index)
    answers: dict[int, Answer] = {}
    failures: list[BaseException] = []

    def client() -> None:
        with httpx2.Client(base_url=url, timeout=600) as http:
            while True:
                try:
                    index = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    answers[index] = call(http, index)
                except Exception as exc:  # reported after the round
                    failures.append(exc)
                    return

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} of {count} requests failed; first: {failures[0]}")
    return [answers[index] for index in range(count)], wall


def serve_round(url: str, bodies: list[dict[str, Any]], level: Level, expected: list[str] | None) -> list[str]:
    """Every request once, streamed, from ``level.concurrency`` clients (:func:`run_clients`)."""
    ordered, wall = run_clients(
        url, len(bodies), level.concurrency, lambda http, index: stream_one(http, bodies[index])
    )
    level.rounds.append((len(ordered), sum(o[3] for o in ordered), wall))
    level.ttft_ms += [1000 * o[0] for o in ordered]
    level.latency_ms += [1000 * o[1] for o in ordered]
    level.loads.append(os.getloadavg()[0])
    texts = [o[2] for o in ordered]
    if expected is not None:
        level.equal += sum(a == b for a, b in zip(texts, expected, strict=True))
    return texts


def measure(export: Path, bodies: list[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    """Both servers up, then ``rounds`` rounds of every level (run first in the first round: its texts are the
    reference), the order rotating."""
    levels = [Level("run", 0, 1)]
    levels += [Level("serve", 1, c) for c in LEVELS] + [Level("serve", 2, c) for c in REPLICA_LEVELS]
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as logs:
        servers = {
            replicas: ServeProcess(
                export, Path(logs) / str(replicas), "--model-name", "bench", "--replicas", str(replicas)
            )
            for replicas in (1, 2)
        }
        try:
            for replicas, server in servers.items():
                server.start()
                serve_round(server.url, bodies[: 2 * replicas], Level("warm-up", replicas, 2 * replicas), None)
            expected = run_round(export, bodies, levels[0])
            for number in range(rounds):
                order = levels[1:] if number == 0 else levels
                shift = number % len(order)
                for level in order[shift:] + order[:shift]:
                    if level.system == "run":
                        run_round(export, bodies, level)
                    else:
                        serve_round(servers[level.replicas].url, bodies, level, expected)
                    print(
                        f"round {number + 1}: {level.system} x{level.replicas} c={level.concurrency}", file=sys.stderr
                    )
        finally:
            for server in servers.values():
                server.stop()
    rows = [level.figures() for level in levels]
    rows[0]["texts_equal_run"] = None
    return rows


def table(results: dict[str, Any]) -> str:
    lines = [
        "| export | system | replicas | clients | requests/s | tokens/s | TTFT p50 / p99 ms | latency p50 / p99 ms "
        "| texts = run's | load (1 min) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in results["runs"]:
        equal = "—" if row["texts_equal_run"] is None else f"{row['texts_equal_run']}/{row['requests']}"
        lines.append(
            f"| {row['export']} | {row['system']} | {row['replicas'] or '—'} | {row['concurrency']} "
            f"| {row['requests_per_s']:.2f} | {row['tokens_per_s']:.1f} "
            f"| {row['ttft_ms']['p50']:.0f} / {row['ttft_ms']['p99']:.0f} "
            f"| {row['latency_ms']['p50']:.0f} / {row['latency_ms']['p99']:.0f} | {equal} | {row['load_1min']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", type=Path, default=REPO / "benchmarks" / "out")
    parser.add_argument("--variants", default="fp32,int4", help="export folders under --exports")
    parser.add_argument("--requests", type=int, default=16, help="requests per level and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write (and .md beside it)")
    args = parser.parse_args()
    bodies = requests(args.requests, args.max_tokens)
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_before": os.getloadavg()},
        "settings": {k: getattr(args, k) for k in ("requests", "rounds", "max_tokens")} | {"prompt_words": "8..120"},
        "runs": [],
    }
    for variant in args.variants.split(","):
        rows = measure(args.exports / variant, bodies, args.rounds)
        results["runs"] += [{"export": variant, **row} for row in rows]
    results["machine"]["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
