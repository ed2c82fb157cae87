"""Where an fp32 prompt's time goes, ours beside OpenVINO's f32: each kind of projection's kernel time, attention
and the rest, from each runtime's own profiler, on the same checkpoint.

    python benchmarks/fp32_projections.py --openvino-python .ci-cache/peers/openvino-venv/bin/python --rounds 5
    # writes benchmarks/results/<stamp>-fp32-projections.{json,md}

Ours: ONNX Runtime's profiler over the generation graph of ``--ours`` (an fp32 export) on a 128-token prompt, as
benchmarks/op_profile.py runs it; each MatMul/Gemm is named by the weight it reads in the folder's decode.onnx.
OpenVINO: the CPU plugin's performance counters over ``--openvino`` (``optimum-cli export openvino`` of the same
checkpoint) compiled with f32 compute and an f32 KV cache, the same prompt through its stateful graph. That graph is
the folder's own, not the paged one OpenVINO GenAI's scheduler runs (which the side-by-side benchmark times): its
head multiplies all 128 positions, so the head is a row apart and left out of the sums.

Each round runs one process of each (order alternating); a process times two prompts and keeps the second. The
table gives medians over rounds.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from op_profile import _profile  # noqa: E402  # benchmarks/, beside this script
from peers_report import save_result  # noqa: E402

from gpt2_onnx.app.bench.environment import machine_info  # noqa: E402  # after the path
from gpt2_onnx_core.wording import plural  # noqa: E402

KINDS = (
    ("attn.c_attn", "qkv projection (768→2304)"),
    ("attn.c_proj", "attention output (768→768)"),
    ("mlp.c_fc", "MLP in (768→3072)"),
    ("mlp.c_proj", "MLP out (3072→768)"),
)
PROJECTIONS = [label for _, label in KINDS]
HEAD, ATTENTION, OTHER = "head", "attention", "everything else"

_OPENVINO_CHILD = """
import collections, json, sys, time
import numpy as np
import openvino as ov
xml, threads, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
labels = json.loads(sys.argv[4])  # the rows' names, as the parent names them
properties = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32", "INFERENCE_NUM_THREADS": threads,
              "NUM_STREAMS": 1, "PERF_COUNT": True}
request = ov.Core().compile_model(xml, "CPU", properties).create_infer_request()
ids = np.random.default_rng(0).integers(0, 50257, (1, 128))
feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(128)[None],
        "beam_idx": np.zeros(1, np.int32)}
found = []
for _ in range(runs):
    request.reset_state()
    start = time.perf_counter()
    request.infer(feed)
    wall = time.perf_counter() - start
    ms = collections.Counter()
    for item in request.profiling_info:
        took = item.real_time.total_seconds() * 1000
        kind = next((label for pattern, label in labels["kinds"] if pattern in item.node_name), None)
        if "lm_head" in item.node_name:
            kind = labels["head"]
        elif kind is None:
            attention = item.node_type.startswith("ScaledDotProductAttention")
            kind = labels["attention"] if attention else labels["other"]
        ms[kind] += took
    found.append({"wall_ms": 1000 * wall, "ms": dict(ms)})
print(json.dumps(found))
"""


def weight_of_node(folder: Path) -> dict[str, str]:
    """Each MatMul/Gemm node of the folder's decode.onnx, by name, with the initializer it multiplies by."""
    import onnx

    graph = onnx.load(str(folder / "decode.onnx"), load_external_data=False).graph
    return {node.name: node.input[1] for node in graph.node if node.op_type in ("MatMul", "Gemm")}


def kind_of(node: str, op: str, weights: dict[str, str]) -> str:
    """The row a node's kernel time counts in."""
    weight = weights.get(node, "")
    if weight.endswith("wte.weight"):
        return HEAD
    for pattern, label in KINDS:
        if pattern in weight:
            return label
    return ATTENTION if op in ("GroupQueryAttention", "MultiHeadAttention", "Attention") else OTHER


def ours_round(folder: Path, threads: int) -> dict[str, Any]:
    """One process of ours: kernel ms per row of the second prompt, and its wall time."""
    profile = _profile(folder, 1, threads, "merged")  # two generations of one prompt and one step each
    runs = sorted((e for e in profile["events"] if e.get("name") == "model_run"), key=lambda e: e["ts"])
    second = runs[2]  # prompt, step, prompt, step
    weights = weight_of_node(folder)
    ms: collections.Counter[str] = collections.Counter()
    for event in profile["events"]:
        inside = second["ts"] <= event.get("ts", -1) <= second["ts"] + second["dur"]
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and inside:
            node = event["name"].removesuffix("_kernel_time")
            ms[kind_of(node, event["args"]["op_name"], weights)] += event["dur"] / 1000
    return {"wall_ms": 1000 * profile["walls"]["prefill"][1], "ms": dict(ms)}


def openvino_round(python: str, xml: Path, threads: int) -> dict[str, Any]:
    """One process of OpenVINO: the second of two prompts."""
    labels = {"kinds": KINDS, "head": HEAD, "attention": ATTENTION, "other": OTHER}
    command = [python, "-c", _OPENVINO_CHILD, str(xml), str(threads), "2", json.dumps(labels)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])[1]


def medians(rounds: list[dict[str, Any]]) -> dict[str, float]:
    """Per row, the median over rounds; plus the projections' sum, the sum without the head, and the wall."""
    rows = [*PROJECTIONS, ATTENTION, OTHER, HEAD]
    out = {row: statistics.median(r["ms"].get(row, 0.0) for r in rounds) for row in rows}
    out["projections"] = statistics.median(sum(r["ms"].get(row, 0.0) for row in PROJECTIONS) for r in rounds)
    out["kernels without the head"] = statistics.median(
        sum(ms for row, ms in r["ms"].items() if row != HEAD) for r in rounds
    )
    out["wall"] = statistics.median(r["wall_ms"] for r in rounds)
    return out


def table(ours: dict[str, float], openvino: dict[str, float]) -> list[str]:
    """Markdown rows: ours, OpenVINO's and their quotient per row."""
    head = "| kernel time per 128-token prompt | ours, ms | OpenVINO f32, ms | OpenVINO ÷ ours |"
    lines = [head, "|---|---:|---:|---:|"]
    for row in [*PROJECTIONS, "projections", ATTENTION, OTHER, "kernels without the head", HEAD, "wall"]:
        note = {HEAD: " (ours: the last position; OpenVINO's graph: all 128)", "wall": " (profiling on)"}.get(row, "")
        bold = "**" if row in ("projections", "kernels without the head") else ""
        ratio = f"{openvino[row] / ours[row]:.2f}×" if ours[row] else "—"
        cells = f"{ours[row]:.1f} | {openvino[row]:.1f} | {ratio}"
        lines.append(f"| {bold}{row}{bold}{note} | {cells} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", type=Path, default=REPO / "benchmarks/out/peers/gpt2-onnx-fp32")
    parser.add_argument("--openvino", type=Path, default=REPO / "benchmarks/out/peers/openvino-fp32")
    parser.add_argument("--openvino-python", required=True, help="the OpenVINO venv's python (peers_install.sh)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out-dir", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args()
    before = machine_info("cpu")
    found: dict[str, list[dict[str, Any]]] = {"ours": [], "openvino": []}
    for index in range(args.rounds):
        order = ["ours", "openvino"] if index % 2 == 0 else ["openvino", "ours"]
        for system in order:
            print(f"round {index + 1}/{args.rounds}: {system}", file=sys.stderr, flush=True)
            if system == "ours":
                found[system].append(ours_round(args.ours, args.threads))
            else:
                xml = args.openvino / "openvino_model.xml"
                found[system].append(openvino_round(args.openvino_python, xml, args.threads))
    after = machine_info("cpu")
    summary = {system: medians(rounds) for system, rounds in found.items()}
    versions = ", ".join(f"{k} {v}" for k, v in sorted(before["libraries"].items()))
    ov_version = subprocess.run(
        [args.openvino_python, "-c", "import openvino; print(openvino.__version__)"], capture_output=True, text=True
    ).stdout.strip()
    text = [
        "# An fp32 prompt's kernels, ours beside OpenVINO f32",
        "",
        *table(summary["ours"], summary["openvino"]),
        "",
        f"GPT-2-small (`{args.ours.name}`, `{args.openvino.name}`: one checkpoint), one 128-token prompt, "
        f"{args.threads} threads, {plural(args.rounds, 'round')} of one process each (order alternating), each "
        "the second prompt of its process, medians. Ours: ONNX Runtime's profiler over the generation graph; "
        "OpenVINO: its CPU plugin's performance counters over the folder's stateful graph with f32 compute and an "
        "f32 KV cache. Machine: "
        f"{before['cpu']}, {before['physical_cores']} cores; load average {before['load_average']} before, "
        f"{after['load_average']} after. Versions: {versions}; openvino {ov_version}.",
    ]
    data = {"rounds": found, "medians": summary, "threads": args.threads, "before": before, "after": after}
    save_result(args.out_dir, "-fp32-projections", "\n".join(text) + "\n", data)
    print("\n".join(text))


if __name__ == "__main__":
    main()
