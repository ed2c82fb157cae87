"""Where a step's time goes: ONNX Runtime's own profiler over gpt2-onnx generations, kernel time per operator type,
prefill and decode apart. Used to find out which fusions pay on the CPU provider (e.g. why ``--optimize`` does not).

    python benchmarks/op_profile.py EXPORT [EXPORT ...] --rounds 3 --new-tokens 32 [--json out.json]

Each export is profiled in a process of its own, the exports' rounds alternating, so that machine load falls on
all alike. Kernel times are ONNX Runtime's ``*_kernel_time`` events; their sum per run is below the wall time by
the session's own overhead (binding, allocation, thread hand-offs), printed beside it.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

_CHILD = """
import json, sys, time
import numpy as np
sys.path[:0] = [sys.argv[1] + folder for folder in ("", "/core", "/exporters", "/runtimes")]
from gpt2_onnx_runtimes import session as S
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
folder, prefix, new_tokens, threads, layout = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
plain = S.session_options_for
def profiled(options):
    so = plain(options); so.enable_profiling = True; so.profile_file_prefix = prefix; return so
S.session_options_for = profiled
loaded = S.LoadedExport.load(folder, S.RuntimeOptions(intra_op_threads=threads, inter_op_threads=1, layout=layout))
ids = np.random.default_rng(0).integers(0, loaded.manifest.dims.vocab_size, (1, 128), dtype=np.int64)
walls = {"prefill": [], "decode": []}
for _ in range(2):
    runner = KvCacheRunner(loaded, capacity=128 + new_tokens + 1)
    mask = np.ones_like(ids)
    start = time.perf_counter(); logits = runner.prefill(ids, mask, np.arange(128)[None])
    walls["prefill"].append(time.perf_counter() - start)
    for step in range(new_tokens):
        token = logits.argmax(-1)[:, None]; mask = np.concatenate([mask, np.ones_like(token)], axis=1)
        start = time.perf_counter(); logits = runner.decode(token, mask, np.array([[128 + step]]))
        walls["decode"].append(time.perf_counter() - start)
sessions = {id(s): s for s in (loaded.steps.prefill, loaded.steps.decode)}.values()
files = [session.end_profiling() for session in sessions]
print(json.dumps({"files": files, "walls": walls}))
"""


def _profile(folder: Path, new_tokens: int, threads: int, layout: str) -> dict[str, Any]:
    """One process: two generations (one prompt of 128, then ``new_tokens`` steps) with profiling on."""
    with tempfile.TemporaryDirectory(prefix="gpt2-onnx-profile-") as tmp:
        command = [sys.executable, "-c", _CHILD, str(REPO), str(folder), f"{tmp}/p", str(new_tokens), str(threads)]
        done = subprocess.run([*command, layout], capture_output=True, text=True, check=True)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        events = [event for name in answer["files"] for event in json.loads(Path(name).read_text())]
    return {"events": events, "walls": answer["walls"]}


def _per_op(events: list[dict[str, Any]], new_tokens: int) -> dict[str, dict[str, float]]:
    """Kernel ms per run by operator type, prefill and decode apart (runs are in order: 1 prefill, then steps)."""
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    starts = [run["ts"] for run in runs]
    per_generation = new_tokens + 1
    totals: dict[str, collections.Counter[str]] = {"prefill": collections.Counter(), "decode": collections.Counter()}
    counts = {"prefill": 0, "decode": 0}
    for index, _ in enumerate(runs):
        counts["prefill" if index % per_generation == 0 else "decode"] += 1
    import bisect

    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        index = bisect.bisect_right(starts, event["ts"]) - 1
        phase = "prefill" if index % per_generation == 0 else "decode"
        totals[phase][event["args"]["op_name"]] += event["dur"] / 1000.0
    return {phase: {op: ms / max(counts[phase], 1) for op, ms in totals[phase].most_common()} for phase in totals}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exports", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layout", default="merged", choices=["merged", "split"])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    found: dict[str, list[dict[str, Any]]] = {str(folder): [] for folder in args.exports}
    for round_index in range(args.rounds):
        for folder in args.exports[round_index % len(args.exports) :] + args.exports[: round_index % len(args.exports)]:
            print(f"round {round_index + 1}/{args.rounds}: {folder}", file=sys.stderr, flush=True)
            profile = _profile(folder, args.new_tokens, args.threads, args.layout)
            found[str(folder)].append({"ops": _per_op(profile["events"], args.new_tokens), "walls": profile["walls"]})
    summary = {}
    for folder, rounds in found.items():
        ops: dict[str, dict[str, float]] = {"prefill": {}, "decode": {}}
        for phase in ops:
            names = {name for r in rounds for name in r["ops"][phase]}
            ops[phase] = {
                name: sorted(r["ops"][phase].get(name, 0.0) for r in rounds)[len(rounds) // 2] for name in names
            }
        walls = {
            phase: 1000
            * sorted(w for r in rounds for w in r["walls"][phase])[len(rounds[0]["walls"][phase]) * len(rounds) // 2]
            for phase in ("prefill", "decode")
        }
        summary[folder] = {"kernel_ms": ops, "wall_ms_median": walls}
        for phase in ("prefill", "decode"):
            total = sum(ops[phase].values())
            print(f"{folder} {phase}: wall {walls[phase]:.2f} ms, kernels {total:.2f} ms")
            for name, ms in sorted(ops[phase].items(), key=lambda kv: -kv[1])[:10]:
                print(f"    {name:<28} {ms:8.3f} ms  {100 * ms / total:5.1f} %")
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
