"""``gpt2-onnx serve`` beside llama.cpp's own server (``llama-server``: parallel slots, continuous batching) on the
same requests from the same concurrent clients, one checkpoint converted by each tool (issue 25).

For each pair (our fp32 export and llama.cpp's f32 GGUF; our int4 export and its q4_0 GGUF) both servers are up at
once on loopback, and the rounds alternate between them (the order swapping every round), so that load from
outside falls on both alike:

    gpt2-onnx  ``gpt2-onnx serve EXPORT`` (one replica; its defaults: 2 ONNX Runtime threads, 16 rows per batch)
    llama.cpp  ``llama-server -m GGUF -np 16 -c 16·CTX -t 2 -tb 2`` (16 slots of CTX positions, continuous batching
               as it does by default); its prompt cache is off (``cache_prompt: false`` in every request, host-memory
               cache ``--cache-ram 0``): the rounds repeat the prompts, and reusing a slot's earlier prompt would
               skip prefills that ours runs

Each round sends every request once from ``--clients`` threads pulling from one queue: OpenAI ``/v1/completions``,
greedy (temperature 0), ``max_tokens`` each, not streamed (the clients' own work stays small beside the servers'
on 2 cores; a streamed answer costs the client a parse per token). tokens/s: the completion tokens both servers
report (``usage``) over the round's wall time, first request sent to last answer; the median over the rounds. Texts
are compared between the two (greedy on the same weights: equal until the two engines' rounding parts them).

    python benchmarks/serve_peers.py --llama-server .ci-cache/peers/llama-build/bin/llama-server \\
        --pair fp32 benchmarks/out/peers/gpt2-onnx-fp32 benchmarks/out/peers/gguf/f32.gguf \\
        --pair int4 benchmarks/out/peers/gpt2-onnx-int4 benchmarks/out/peers/gguf/q4_0.gguf \\
        --out benchmarks/results/STAMP-serve-peers.json

``benchmarks/serve_peers.sh`` builds llama.cpp and the files first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.serve_load import percentiles, requests, run_clients  # noqa: E402  # after the path
from benchmarks.serve_process import ServeProcess, free_port  # noqa: E402
from gpt2_onnx.app.environment import describe_environment  # noqa: E402

READY_TIMEOUT_S = 120.0
PORT_TRIES = 3
SLOT_POSITIONS = 256  # llama-server's positions per slot: the longest prompt (~160 tokens) and 32 new ones fit


class Server(Protocol):
    url: str

    def start(self) -> Any: ...

    def stop(self) -> Any: ...


class PortTaken(Exception):
    """llama-server could not bind its port."""


class LlamaServer:
    """``llama-server`` in a process group of its own on a free loopback port; :meth:`stop` ends that group only."""

    def __init__(self, binary: Path, gguf: Path, logs: Path, slots: int, threads: int) -> None:
        self._binary, self._gguf, self._slots, self._threads = binary, gguf, slots, threads
        self._logs = logs
        self._process: subprocess.Popen[bytes] | None = None
        self._listen_on(free_port())

    def _listen_on(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        slots, threads = self._slots, self._threads
        self._command = [
            str(self._binary), "-m", str(self._gguf), "--host", "127.0.0.1", "--port", str(self.port),
            "-np", str(slots), "-c", str(slots * SLOT_POSITIONS), "-t", str(threads), "-tb", str(threads),
            "--cache-ram", "0", "--no-webui",
        ]  # fmt: skip

    @property
    def command(self) -> list[str]:
        return self._command

    def start(self) -> LlamaServer:
        """Start it; a port taken since it was chosen (Ray's processes, started beside it, bind ports of their own)
        is replaced by another, up to ``PORT_TRIES`` times."""
        for _ in range(PORT_TRIES - 1):
            try:
                return self._start()
            except PortTaken:
                self._listen_on(free_port())
        return self._start()

    def _start(self) -> LlamaServer:
        self._logs.mkdir(parents=True, exist_ok=True)
        with open(self._logs / "llama-server.txt", "wb") as out:
            self._process = subprocess.Popen(
                self._command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = (self._logs / "llama-server.txt").read_text(errors="replace")[-3000:]
                if "couldn't bind" in tail:
                    raise PortTaken(self.port)
                raise RuntimeError(f"llama-server exited with {self._process.returncode}: {tail}")
            try:
                if httpx2.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return self
            except httpx2.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama-server not ready after {READY_TIMEOUT_S} s")

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        os.killpg(self._process.pid, signal.SIGTERM)  # the group this process leads: only what we started
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(10)


@dataclass
class Outcomes:
    """One server's answers over the rounds."""

    system: str
    rounds: list[tuple[int, int, float]] = field(default_factory=list)  # (requests, completion tokens, wall s)
    latency_ms: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # the last round's, in request order
    loads: list[float] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "requests": sum(n for n, _, _ in self.rounds),
            "requests_per_s": round(float(np.median([n / wall for n, _, wall in self.rounds])), 3),
            "tokens_per_s": round(float(np.median([t / wall for _, t, wall in self.rounds])), 1),
            "tokens_per_s_rounds": [round(t / wall, 1) for _, t, wall in self.rounds],
            "latency_ms": percentiles(self.latency_ms),
            "load_1min": round(float(np.mean(self.loads)), 2),
        }


def complete(http: httpx2.Client, body: dict[str, Any], extra: dict[str, Any]) -> tuple[float, str, int]:
    """One completion, not streamed: (latency s, text, completion tokens)."""
    start = time.perf_counter()
    response = http.post("/v1/completions", json={"model": "bench", "temperature": 0, **body, **extra})
    response.raise_for_status()
    answer = response.json()
    return time.perf_counter() - start, answer["choices"][0]["text"], int(answer["usage"]["completion_tokens"])


def one_round(url: str, bodies: list[dict[str, Any]], clients: int, extra: dict[str, Any], into: Outcomes) -> None:
    """Every request once, from ``clients`` clients (:func:`benchmarks.serve_load.run_clients`)."""
    try:
        ordered, wall = run_clients(url, len(bodies), clients, lambda http, index: complete(http, bodies[index], extra))
    except RuntimeError as exc:
        raise RuntimeError(f"{into.system}: {exc}") from exc
    into.rounds.append((len(ordered), sum(a[2] for a in ordered), wall))
    into.latency_ms += [1000 * a[0] for a in ordered]
    into.texts = [a[1] for a in ordered]
    into.loads.append(os.getloadavg()[0])


# What each server is sent beside the OpenAI fields: llama-server's prompt cache off (see the module docstring).
EXTRA = {"gpt2-onnx": {}, "llama.cpp": {"cache_prompt": False}}
# A server's first round of requests it has not seen is slower than the next: after a warm-up of 16 requests, ours
# answered its first timed round below 0.97x the next two rounds' mean in 44 of 52 starts (median 0.91x; int4,
# serve_options runs of 2026-12-05); after a whole round, much less (docs/serving.md). So a warm-up is a whole round
# unless asked otherwise; runs before 2026-12-05 used 16.
WARM_UP_HELP = "requests in the warm-up round before the timed ones [all of a round's]; runs before 2026-12-05 used 16"
EARLIER_WARM_UP = 16  # the warm-up's requests in runs whose settings do not say (before 2026-12-05)


def warm_up_requests(settings: dict[str, Any]) -> int:
    """The requests a run's warm-up round sent, from its settings (runs before 2026-12-05 do not record it)."""
    return int(settings.get("warm_up") or EARLIER_WARM_UP)


def measure_pair(
    servers: dict[str, Server], bodies: list[dict[str, Any]], clients: int, rounds: int, warm_up: int | None = None
) -> list[Outcomes]:
    """Both servers up, a warm-up round each (the first ``warm_up`` requests; all of them when None), then
    ``rounds`` rounds alternating, the order swapping each round."""
    outcomes = {name: Outcomes(name) for name in servers}
    try:
        for server in servers.values():
            server.start()
        for name, server in servers.items():
            one_round(server.url, bodies[:warm_up], clients, EXTRA[name], Outcomes("warm-up"))
        names = list(servers)
        for number in range(rounds):
            for name in names if number % 2 == 0 else names[::-1]:
                time.sleep(1.0)  # the other server's threads go idle
                one_round(servers[name].url, bodies, clients, EXTRA[name], outcomes[name])
                print(f"round {number + 1}/{rounds}: {name} done", file=sys.stderr, flush=True)
    finally:
        for server in servers.values():
            server.stop()
    return list(outcomes.values())


def table(results: dict[str, Any]) -> str:
    lines = [
        "| weights | server | clients | requests/s | tokens/s (rounds) | × llama-server tokens/s "
        "| latency p50 / p99 ms | texts equal | load (1 min) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for pair in results["pairs"]:
        peer = next(row for row in pair["servers"] if row["system"] == "llama.cpp")
        for row in pair["servers"]:
            rounds = ", ".join(f"{t:.0f}" for t in row["tokens_per_s_rounds"])
            lines.append(
                f"| {pair['name']} | {row['system']} | {results['settings']['clients']} | {row['requests_per_s']:.2f} "
                f"| {row['tokens_per_s']:.1f} ({rounds}) | {row['tokens_per_s'] / peer['tokens_per_s']:.2f} "
                f"| {row['latency_ms']['p50']:.0f} / {row['latency_ms']['p99']:.0f} "
                f"| {pair['texts_equal']}/{len(pair['texts'])} | {row['load_1min']} |"
            )
    m, st = results["machine"], results["settings"]
    lines += [
        "",
        f"{st['requests']} requests per round (prompts of {st['prompt_words']} words, greedy, {st['max_tokens']} "
        f"tokens at most), {st['clients']} client threads, {st['rounds']} rounds after a warm-up round of "
        f"{warm_up_requests(st)} requests, the two servers alternating; tokens/s: the completion tokens the "
        "servers report over each round's wall time, the median "
        "over rounds. gpt2-onnx: `gpt2-onnx serve` defaults (1 replica, 2 threads sleeping while they wait, 16 "
        "rows). llama.cpp: "
        f"`{' '.join(st['llama_server_command'])}` ({m['llama_server_version']}), `cache_prompt: false` per request. "
        "Texts equal: the last round's texts, ours against llama.cpp's (int4 and q4_0 quantize differently). "
        f"Machine: {m['cpu']}, {m['cpus']} cores, {m['platform']}; load average {m['load_before'][0]:.2f} before, "
        f"{m['load_after'][0]:.2f} after; onnxruntime {m['onnxruntime']}.",
    ]
    return "\n".join(lines) + "\n"


def machine_now() -> dict[str, Any]:
    """The serving benchmarks' machine description: CPU, cores, platform, ONNX Runtime's version and the load
    average now (``load_before``; a run adds ``load_after`` when it ends)."""
    environment = describe_environment()
    libraries = environment["libraries"]
    return {
        "cpu": environment["cpu"],
        "cpus": environment["cpu_count"],
        "platform": environment["platform"],
        "load_before": os.getloadavg(),
        "onnxruntime": libraries.get("onnxruntime") or libraries.get("onnxruntime-gpu"),
    }


def llama_version(binary: Path) -> str:
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False)
    line = next((x for x in (done.stdout + done.stderr).splitlines() if x.startswith("version:")), "version: ?")
    return "llama.cpp " + line.split(":", 1)[1].strip()


def serve_options(options: list[str]) -> list[str]:
    """``OPTION=VALUE`` words as ``gpt2-onnx serve`` options: ``kv-cache=int8`` → ``--kv-cache int8``."""
    found = []
    for option in options:
        name, sep, value = option.partition("=")
        if not sep or not name:
            raise SystemExit(f"serve_peers: '{option}' is not OPTION=VALUE")
        found += [f"--{name}", value]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-server", type=Path, required=True)
    parser.add_argument(
        "--pair", nargs="+", action="append", metavar="NAME EXPORT GGUF [OPTION=VALUE]", required=True,
        help="our export folder and llama.cpp's GGUF of the same checkpoint; OPTION=VALUE: a gpt2-onnx serve option "
        "(kv-cache=int8 becomes --kv-cache int8)",
    )  # fmt: skip
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=48, help="requests per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--warm-up", type=int, help=WARM_UP_HELP)
    parser.add_argument("--threads", type=int, default=2, help="llama-server's -t and -tb")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write (and .md beside it)")
    args = parser.parse_args()
    bodies = requests(args.requests, args.max_tokens)
    args.warm_up = args.warm_up or args.requests
    results: dict[str, Any] = {
        "machine": machine_now() | {"llama_server_version": llama_version(args.llama_server)},
        "settings": {k: getattr(args, k) for k in ("clients", "requests", "rounds", "max_tokens", "threads", "warm_up")}
        | {"prompt_words": "8..120", "slot_positions": SLOT_POSITIONS},
        "pairs": [],
    }
    with tempfile.TemporaryDirectory(prefix="serve-peers-") as logs:
        for pair in args.pair:
            if len(pair) < 3:
                parser.error(f"--pair needs NAME EXPORT GGUF [OPTION=VALUE ...], got {pair}")
            name, export, gguf, *options = pair
            folder = Path(logs) / re.sub(r"[^A-Za-z0-9]+", "-", name)
            llama = LlamaServer(args.llama_server, Path(gguf), folder, args.clients, args.threads)
            ours = ServeProcess(Path(export), folder / "ours", "--model-name", "bench", *serve_options(options))
            results["settings"]["llama_server_command"] = [Path(a).name if "/" in a else a for a in llama.command]
            servers: dict[str, Server] = {"gpt2-onnx": ours, "llama.cpp": llama}
            found = measure_pair(servers, bodies, args.clients, args.rounds, args.warm_up)
            texts = {outcome.system: outcome.texts for outcome in found}
            equal = sum(a == b for a, b in zip(texts["gpt2-onnx"], texts["llama.cpp"], strict=True))
            results["pairs"].append(
                {
                    "name": name,
                    "servers": [outcome.figures() for outcome in found],
                    "texts_equal": equal,
                    "texts": texts["gpt2-onnx"],
                }
            )
    results["machine"]["load_after"] = os.getloadavg()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table(results))
    print(table(results))


if __name__ == "__main__":
    main()
