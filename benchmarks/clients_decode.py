"""The C++ and .NET clients' decode loops side by side on the committed fixtures: host time per token, prefill, and
the .NET client's managed bytes allocated per token, in one interleaved run.

Each client has a benchmark program on its own library (clients/cpp: ``gpt2_onnx_decode_bench``; clients/dotnet:
``gpt2-onnx-dotnet-bench``) that opens an export once, warms up, then times rounds of one prefill of a fixed prompt
(``ids[i] = (i * 7919 + 13) % vocab``) and a greedy decode of exactly ``--new`` tokens through the library's own
generation path, and prints one JSON object (``--json``). This script runs the two programs one after the other, a
process each, the order swapping from pair to pair, on each fixture, and pairs each .NET process with the C++ process
beside it: the ratio of a pair is the .NET median ÷ the C++ median of that pair's rounds. Standard library only, so
it runs on a machine without the Python side (the .NET machine).

    python3 benchmarks/clients_decode.py                       # both fixtures, 5 pairs
    python3 benchmarks/clients_decode.py --pairs 3 --new 32    # shorter
    # writes benchmarks/results/<stamp>-clients-decode.{json,md}

Build the programs first: ``clients/cpp/ci.sh`` (or its cmake build) and ``dotnet build -c Release`` of
clients/dotnet's benchmark project. ``--first`` and ``--second`` (``LABEL=COMMAND``) put any two programs of that
contract side by side, e.g. one client's build before and after a change:

    python3 benchmarks/clients_decode.py --first "C++ before=/tmp/before/gpt2_onnx_decode_bench" \
        --second "C++ after=clients/cpp/build/gpt2_onnx_decode_bench" --suffix -cpp-lean-step
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
RESULTS = REPO / "benchmarks" / "results"
DEFAULT_CPP = REPO / "clients" / "cpp" / "build" / "gpt2_onnx_decode_bench"
DEFAULT_DOTNET = (
    REPO / "clients" / "dotnet" / "bench" / "Gpt2Onnx.Bench" / "bin" / "Release" / "net10.0" / "gpt2-onnx-dotnet-bench"
)
TARGET_RATIO = 1.2  # issue 49: the C# host's time per token within 1.2× the C++ client's
TARGET_BYTES = 1024  # issue 49: steady-state decode allocates at most 1 KB of managed memory per token


@dataclass(frozen=True)
class Settings:
    """What every benchmark process is asked to do."""

    prompt: int  # prompt tokens
    new: int  # decode steps a round
    rounds: int  # timed rounds a process
    warmup: int  # untimed rounds a process, after opening the export
    threads: int  # ONNX Runtime intra-op threads

    def arguments(self) -> list[str]:
        return [
            "--prompt", str(self.prompt), "--new", str(self.new), "--rounds", str(self.rounds),
            "--warmup", str(self.warmup), "--threads", str(self.threads), "--json",
        ]  # fmt: skip


def labelled(text: str) -> tuple[str, list[str]]:
    """``LABEL=COMMAND`` → (label, the command's words)."""
    label, sep, command = text.partition("=")
    if not sep or not label or not command.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not LABEL=COMMAND")
    return label, shlex.split(command)


def run_client(command: list[str], folder: Path, settings: Settings) -> dict[str, Any]:
    """One benchmark process on ``folder``; its JSON object (the last stdout line that parses as one)."""
    done = subprocess.run([*command, str(folder), *settings.arguments()], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"clients_decode: {shlex.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            found: dict[str, Any] = json.loads(line)
            return found
    raise SystemExit(f"clients_decode: {shlex.join(command)} printed no JSON object")


def pair_order(labels: tuple[str, str], index: int) -> tuple[str, str]:
    """The programs' order in pair ``index``: swapped every other pair, so that drift hits both alike."""
    return labels if index % 2 == 0 else (labels[1], labels[0])


def summarize(pairs: list[dict[str, dict[str, Any]]], labels: tuple[str, str]) -> dict[str, Any]:
    """One fixture's figures from its pairs ({label: that process's JSON}): each program's medians over every round
    (a whole generation is a round's prefill + its tokens: what a program does before the first step, such as
    preparing buffers, counts there), the second ÷ first ratio of each pair's medians, and the managed bytes
    allocated per token (the largest round's) of each program that reports them."""
    first, second = labels
    decode = {c: [x for p in pairs for x in p[c]["decode_ms_per_token"]] for c in labels}
    prefill = {c: [x for p in pairs for x in p[c]["prefill_ms"]] for c in labels}
    whole = {
        c: [
            pre + run["new_tokens"] * per_token
            for run in (p[c] for p in pairs)
            for pre, per_token in zip(run["prefill_ms"], run["decode_ms_per_token"], strict=True)
        ]
        for c in labels
    }
    ratios = [
        statistics.median(p[second]["decode_ms_per_token"]) / statistics.median(p[first]["decode_ms_per_token"])
        for p in pairs
    ]
    allocated = {c: [x for p in pairs for x in (p[c].get("allocated_bytes_per_token") or [])] for c in labels}
    rss = {c: max((p[c].get("peak_rss_mib") or 0.0) for p in pairs) or None for c in labels}
    return {
        "decode_ms_per_token": {c: statistics.median(decode[c]) for c in labels},
        "prefill_ms": {c: statistics.median(prefill[c]) for c in labels},
        "generation_ms": {c: statistics.median(whole[c]) for c in labels},
        "ratios": ratios,
        "ratio": statistics.median(ratios),
        "pairs_within_target": sum(r <= TARGET_RATIO for r in ratios),
        "allocated_bytes_per_token": {c: max(allocated[c]) if allocated[c] else None for c in labels},
        "peak_rss_mib": rss,
    }


def table(summaries: dict[str, dict[str, Any]], labels: tuple[str, str]) -> list[str]:
    """Markdown rows, one per fixture."""
    a, b = labels
    lines = [
        f"| fixture | decode ms/token: {a} / {b} | {b} ÷ {a} (pairs ≤ {TARGET_RATIO}×) | prefill ms: {a} / {b} "
        f"| whole generation ms: {a} / {b} | managed bytes/token, largest round: {a} / {b} "
        f"| peak RSS MiB: {a} / {b} |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in summaries.items():
        d, p, g = s["decode_ms_per_token"], s["prefill_ms"], s["generation_ms"]
        rss, alloc = s["peak_rss_mib"], s["allocated_bytes_per_token"]
        lines.append(
            f"| {name} | {d[a]:.3f} / {d[b]:.3f} | {s['ratio']:.3f} ({s['pairs_within_target']}/{len(s['ratios'])}) "
            f"| {p[a]:.2f} / {p[b]:.2f} | {g[a]:.2f} / {g[b]:.2f} | {_figure(alloc[a])} / {_figure(alloc[b])} "
            f"| {_figure(rss[a])} / {_figure(rss[b])} |"
        )
    return lines


def _figure(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def cpu_name() -> str:
    """The CPU's model name as /proc/cpuinfo gives it, and whether it has AMX and AVX-512."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return platform.processor() or "unknown"
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    flags = next((set(line.split(":", 1)[1].split()) for line in text.splitlines() if line.startswith("flags")), set())
    features = [name for name, flag in (("AVX-512", "avx512f"), ("AMX", "amx_tile")) if flag in flags]
    return f"{model} ({', '.join(features) or 'no AVX-512, no AMX'})"


def tool_version(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError:
        return "not found"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else "?"


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "dotnet": tool_version(["dotnet", "--version"]),
        "cxx": tool_version(["c++", "--version"]),
        "load_before": os.getloadavg(),
    }


def markdown(raw: dict[str, Any]) -> str:
    s: Settings = Settings(**raw["settings"])
    m = raw["machine"]
    a, b = labels = (raw["labels"][0], raw["labels"][1])
    runtimes = sorted({run["onnxruntime"] for pairs in raw["runs"].values() for p in pairs for run in p.values()})
    lines = [
        f"# {a} and {b}: the decode loops side by side",
        "",
        f"{m['cpu']}, {m['cpus']} cores; .NET SDK {m['dotnet']}; {m['cxx']}; ONNX Runtime {', '.join(runtimes)} "
        f"(one release in both when one is named). Load average {m['load_before'][0]:.2f} before the run, "
        f"{m['load_after'][0]:.2f} after.",
        "",
        f"Each fixture: {len(next(iter(raw['runs'].values())))} pairs of processes, {a} and {b}, the order swapping "
        f"pair by pair; each process opens the export once, warms up {s.warmup} round(s), then times {s.rounds} "
        f"rounds of a {s.prompt}-token prefill and {s.new} greedy tokens, {s.threads} intra-op thread(s). Medians "
        "over every round (a whole generation: a round's prefill + its tokens, so that work a program does before "
        f"its first step counts); the ratio is {b}'s median ÷ {a}'s in each pair, the median over pairs (in how "
        f"many pairs it was at most {TARGET_RATIO}×). Managed bytes: `GC.GetAllocatedBytesForCurrentThread` over "
        f"the decode loop ÷ tokens, where a program reports them (.NET; target ≤ {TARGET_BYTES}).",
        "",
        *table(raw["summaries"], labels),
        "",
    ]
    return "\n".join(lines)


def save(raw: dict[str, Any], results: Path, suffix: str) -> Path:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{stamp}{suffix}.md"
    path.write_text(markdown(raw), encoding="utf-8")
    path.with_suffix(".json").write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--first", type=labelled, default=f"C++={DEFAULT_CPP}", help="LABEL=COMMAND (C++)")
    parser.add_argument("--second", type=labelled, default=f".NET={DEFAULT_DOTNET}", help="LABEL=COMMAND (.NET)")
    parser.add_argument("--fixtures", default="pydocs-micro-fp32,pydocs-micro-int4", help="fixtures/ folders")
    parser.add_argument("--pairs", type=int, default=5, help="pairs of processes per fixture")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per process")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds per process")
    parser.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    parser.add_argument("--new", type=int, default=64, help="greedy steps per round")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--suffix", default="-clients-decode")
    args = parser.parse_args()
    if args.pairs < 1 or args.rounds < 1:
        parser.error("--pairs and --rounds must be at least 1")
    settings = Settings(args.prompt, args.new, args.rounds, args.warmup, args.threads)
    commands = dict([args.first, args.second])
    labels = (args.first[0], args.second[0])
    if labels[0] == labels[1]:
        parser.error("--first and --second need different labels")
    raw: dict[str, Any] = {"labels": labels, "settings": vars(settings), "machine": machine(), "runs": {}}
    raw["summaries"] = {}
    for name in args.fixtures.split(","):
        folder = FIXTURES / name
        pairs = []
        for index in range(args.pairs):
            pairs.append({label: run_client(commands[label], folder, settings) for label in pair_order(labels, index)})
            print(f"{name} pair {index + 1}/{args.pairs} done", file=sys.stderr)
        raw["runs"][name] = pairs
        raw["summaries"][name] = summarize(pairs, labels)
    raw["machine"]["load_after"] = os.getloadavg()
    path = save(raw, args.results, args.suffix)
    print(path.read_text(encoding="utf-8"))
    print(f"written: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
