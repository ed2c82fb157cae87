"""Load on ``gpt2-onnx serve``: 1, 4 and 16 concurrent clients on loopback, beside the same requests one at a time
through ``gpt2-onnx run``.

For each export folder (GPT-2-small dimensions, ``random:gpt2`` seed 0: fp32 and int4):

    run      ``gpt2-onnx run --prompts FILE --json``: the requests one after another in one process (batch 1,
             greedy); its per-request timings (prefill = time to first token, total) give the figures
    serve    ``gpt2-onnx serve`` (1 replica, 2 ONNX Runtime threads): after a warm-up, the same requests from 1, 4
             and 16 client threads, each streaming (time to first token = the first text chunk)
    serve ×2 ``--replicas 2`` (1 thread each, the machine's 2 cores split): 4 and 16 clients

Each level sends every request once; requests/s and tokens/s are over the level's wall time (first request sent
to last answer), latencies are per request. Every text is compared with run's (greedy: they should be equal).

    python benchmarks/serve_load.py --exports benchmarks/out --out benchmarks/results/STAMP-serve.json
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
from pathlib import Path
from typing import Any

import httpx2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.serve_process import ServeProcess  # noqa: E402  # after the path

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


def run_baseline(export: Path, bodies: list[dict[str, Any]], threads: int) -> tuple[dict[str, Any], list[str]]:
    """The requests one at a time through ``gpt2-onnx run`` (one process; its own timings per request)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as prompts:
        prompts.write("\n".join(body["prompt"] for body in bodies) + "\n")
    command = [sys.executable, "-m", "gpt2_onnx", "run", str(export), "--prompts", prompts.name, "--json"]
    command += ["-n", str(bodies[0]["max_tokens"]), "--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    os.unlink(prompts.name)
    results = [json.loads(line) for line in done.stdout.splitlines()]
    total_s = sum(r["timings"]["total_ms"] for r in results) / 1000
    tokens = sum(len(r["token_ids"]) for r in results)
    figures = {
        "system": "run",
        "replicas": 0,
        "concurrency": 1,
        "requests": len(results),
        "requests_per_s": round(len(results) / total_s, 3),
        "tokens_per_s": round(tokens / total_s, 1),
        "ttft_ms": percentiles([r["timings"]["prefill_ms"] for r in results]),
        "latency_ms": percentiles([r["timings"]["total_ms"] for r in results]),
    }
    return figures, [r["text"] for r in results]


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


def load_level(url: str, bodies: list[dict[str, Any]], clients: int) -> tuple[dict[str, Any], list[str]]:
    """Every request once, from ``clients`` threads pulling from one queue."""
    work: queue.Queue[int] = queue.Queue()
    for index in range(len(bodies)):
        work.put(index)
    outcomes: dict[int, tuple[float, float, str, int]] = {}

    def client() -> None:
        with httpx2.Client(base_url=url, timeout=600) as http:
            while True:
                try:
                    index = work.get_nowait()
                except queue.Empty:
                    return
                outcomes[index] = stream_one(http, bodies[index])

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    ordered = [outcomes[i] for i in range(len(bodies))]
    figures = {
        "system": "serve",
        "concurrency": clients,
        "requests": len(bodies),
        "requests_per_s": round(len(bodies) / wall, 3),
        "tokens_per_s": round(sum(o[3] for o in ordered) / wall, 1),
        "ttft_ms": percentiles([1000 * o[0] for o in ordered]),
        "latency_ms": percentiles([1000 * o[1] for o in ordered]),
    }
    return figures, [o[2] for o in ordered]


def serve_levels(
    export: Path, bodies: list[dict[str, Any]], replicas: int, levels: tuple[int, ...], expected: list[str]
) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as logs:
        server = ServeProcess(export, Path(logs), "--model-name", "bench", "--replicas", str(replicas))
        try:
            server.start()
            load_level(server.url, bodies[: 2 * replicas], 2 * replicas)  # warm-up: every replica's first runs
            rows = []
            for clients in levels:
                figures, texts = load_level(server.url, bodies, clients)
                figures["replicas"] = replicas
                figures["texts_equal_run"] = sum(a == b for a, b in zip(texts, expected, strict=True))
                rows.append(figures)
                print(json.dumps(figures), file=sys.stderr)
            return rows
        finally:
            server.stop()


def table(results: dict[str, Any]) -> str:
    lines = [
        "| export | system | replicas | clients | requests/s | tokens/s | TTFT p50 / p99 ms | latency p50 / p99 ms "
        "| texts = run's |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in results["runs"]:
        equal = f"{row['texts_equal_run']}/{row['requests']}" if "texts_equal_run" in row else "—"
        lines.append(
            f"| {row['export']} | {row['system']} | {row['replicas'] or '—'} | {row['concurrency']} "
            f"| {row['requests_per_s']:.2f} | {row['tokens_per_s']:.1f} "
            f"| {row['ttft_ms']['p50']:.0f} / {row['ttft_ms']['p99']:.0f} "
            f"| {row['latency_ms']['p50']:.0f} / {row['latency_ms']['p99']:.0f} | {equal} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", type=Path, default=REPO / "benchmarks" / "out")
    parser.add_argument("--variants", default="fp32,int4", help="export folders under --exports")
    parser.add_argument("--requests", type=int, default=32, help="requests per level")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write (and .md beside it)")
    args = parser.parse_args()
    bodies = requests(args.requests, args.max_tokens)
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_before": os.getloadavg()},
        "settings": {"requests": args.requests, "max_tokens": args.max_tokens, "prompt_words": "8..120"},
        "runs": [],
    }
    for variant in args.variants.split(","):
        export = args.exports / variant
        baseline, expected = run_baseline(export, bodies, threads=os.cpu_count() or 1)
        rows = [baseline]
        rows += serve_levels(export, bodies, 1, LEVELS, expected)
        rows += serve_levels(export, bodies, 2, REPLICA_LEVELS, expected)
        results["runs"] += [{"export": variant, **row} for row in rows]
    results["machine"]["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
