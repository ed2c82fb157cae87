"""Where a step's time goes: ONNX Runtime's own profiler over gpt2-onnx generations, kernel time per operator type,
prefill and decode apart. Used to find out which fusions pay on the CPU provider (e.g. why ``--optimize`` does not).

    python benchmarks/op_profile.py EXPORT [EXPORT ...] --rounds 3 --new-tokens 32 [--json out.json]
    python benchmarks/op_profile.py EXPORT --prompt 1000 --kv-cache int8 --prompt-kernel dynamic   # runtime options

Prefill figures are per prompt (every chunk of a long one), decode figures per step.

Each export is profiled in a process of its own, the exports' rounds alternating, so that machine load falls on
all alike. Kernel times are ONNX Runtime's ``*_kernel_time`` events, less those of control-flow nodes (an fp32
export's single-row head is an If, whose branch's MatMul is timed on its own); their sum per run is below the wall
time by the session's own overhead (binding, allocation, thread hand-offs), printed beside it.
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

from gpt2_onnx_core.layouts import KV_CACHE_FORMATS, PROMPT_KERNELS  # noqa: E402  # after the path

CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})  # the profile times their subgraphs' nodes on their own too

_CHILD = """
import json, sys, time
import numpy as np
sys.path[:0] = [sys.argv[1] + folder for folder in ("", "/core", "/exporters", "/runtimes")]
import collections
import onnxruntime as ort
from gpt2_onnx_runtimes import session as S
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
runs = collections.Counter()  # runs per session, so that the load's own runs (warm-ups, calibration) are told apart
def counting(name):
    original = getattr(ort.InferenceSession, name)
    def run(self, *arguments, **keywords):
        runs[id(self)] += 1
        return original(self, *arguments, **keywords)
    setattr(ort.InferenceSession, name, run)
for name in ("run", "run_with_iobinding", "run_with_ort_values"):
    counting(name)
folder, prefix = sys.argv[2], sys.argv[3]
new_tokens, threads, prompt = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
layout, kv_cache, prompt_kernel = sys.argv[7:10]
plain = S.session_options_for
def profiled(options, **keywords):
    so = plain(options, **keywords); so.enable_profiling = True; so.profile_file_prefix = prefix; return so
S.session_options_for = profiled
options = S.RuntimeOptions(
    intra_op_threads=threads, inter_op_threads=1, layout=layout, kv_cache=kv_cache, prompt_kernel=prompt_kernel
)
loaded = S.LoadedExport.load(folder, options)
ids = np.random.default_rng(0).integers(0, loaded.manifest.dims.vocab_size, (1, prompt), dtype=np.int64)
walls = {"prefill": [], "decode": []}
at_load = collections.Counter(runs)
for _ in range(2):
    runner = KvCacheRunner(loaded, capacity=prompt + new_tokens + 1)
    mask = np.ones_like(ids)
    start = time.perf_counter(); logits = runner.prefill(ids, mask, np.arange(prompt)[None])
    walls["prefill"].append(time.perf_counter() - start)
    for step in range(new_tokens):
        token = logits.argmax(-1)[:, None]; mask = np.concatenate([mask, np.ones_like(token)], axis=1)
        start = time.perf_counter(); logits = runner.decode(token, mask, np.array([[prompt + step]]))
        walls["decode"].append(time.perf_counter() - start)
steps = loaded.steps
roles = {"both": steps.prefill} if steps.prefill is steps.decode else {"prefill": steps.prefill, "decode": steps.decode}
files = {
    role: {"file": s.end_profiling(), "skip": at_load[id(s)], "runs": runs[id(s)] - at_load[id(s)]}
    for role, s in roles.items()
}
print(json.dumps({"files": files, "walls": walls}))
"""
GENERATIONS = 2  # per process, as _CHILD runs them


def _profile(folder: Path, new_tokens: int, args: argparse.Namespace) -> dict[str, Any]:
    """One process: two generations (one prompt of ``args.prompt`` tokens, then ``new_tokens`` steps) with
    profiling on; the events by the phase their session serves ("both": the merged layout's one session)."""
    with tempfile.TemporaryDirectory(prefix="gpt2-onnx-profile-") as tmp:
        command = [sys.executable, "-c", _CHILD, str(REPO), str(folder), f"{tmp}/p", str(new_tokens)]
        command += [str(args.threads), str(args.prompt), args.layout, args.kv_cache, args.prompt_kernel]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        files = answer["files"]
        events = {role: (json.loads(Path(found["file"]).read_text()), found) for role, found in files.items()}
    return {"events": events, "walls": answer["walls"]}


def _phases(events: list[dict[str, Any]], role: str, counted: dict[str, int], new_tokens: int) -> list[str]:
    """Each run's phase, in order: "load" for the runs the load made itself (``counted["skip"]``), then the
    generations' ``counted["runs"]``. A prompt's session serves prefill only, a step session decode only, and the
    one session of the merged layout runs, per generation, a prompt's runs (more than one where the prompt is
    chunked) and then ``new_tokens`` steps."""
    total = sum(1 for e in events if e.get("name") == "model_run")
    skip, generated = counted["skip"], counted["runs"]
    if total != skip + generated:
        raise SystemExit(f"op_profile: the profile holds {total} runs, the process counted {skip} + {generated}")
    if role != "both":
        return ["load"] * skip + [role] * generated
    per_generation = generated // GENERATIONS
    prompt_runs = per_generation - new_tokens
    if prompt_runs < 1 or per_generation * GENERATIONS != generated:
        raise SystemExit(f"op_profile: {generated} runs are not {GENERATIONS} generations of {new_tokens} steps")
    phases = ["prefill" if index % per_generation < prompt_runs else "decode" for index in range(generated)]
    return ["load"] * skip + phases


def _per_op(
    events: dict[str, tuple[list[dict[str, Any]], dict[str, int]]], new_tokens: int
) -> dict[str, dict[str, float]]:
    """Kernel ms by operator type per prompt (all its chunks) and per decode step. Each profile file has a clock
    of its own, so a file's events are placed among its own runs."""
    import bisect

    totals: dict[str, collections.Counter[str]] = {"prefill": collections.Counter(), "decode": collections.Counter()}
    counts = {"prefill": GENERATIONS, "decode": GENERATIONS * new_tokens}
    for role, (file_events, counted) in events.items():
        phases = _phases(file_events, role, counted, new_tokens)
        starts = sorted(e["ts"] for e in file_events if e.get("name") == "model_run")
        for event in file_events:
            if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
                continue
            if event["args"].get("op_name") in CONTROL_FLOW_OPS:  # counted once, as its branch's nodes
                continue
            index = bisect.bisect_right(starts, event["ts"]) - 1
            phase = phases[index] if index >= 0 else "load"  # before the first run: none of the generations'
            if phase != "load":
                totals[phase][event["args"]["op_name"]] += event["dur"] / 1000.0
    return {phase: {op: ms / counts[phase] for op, ms in totals[phase].most_common()} for phase in totals}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exports", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layout", default="merged", choices=["merged", "split"])
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens (the context decode steps follow)")
    parser.add_argument("--kv-cache", default="float32", choices=KV_CACHE_FORMATS)
    parser.add_argument("--prompt-kernel", default="export", choices=PROMPT_KERNELS)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    found: dict[str, list[dict[str, Any]]] = {str(folder): [] for folder in args.exports}
    for round_index in range(args.rounds):
        for folder in args.exports[round_index % len(args.exports) :] + args.exports[: round_index % len(args.exports)]:
            print(f"round {round_index + 1}/{args.rounds}: {folder}", file=sys.stderr, flush=True)
            profile = _profile(folder, args.new_tokens, args)
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
