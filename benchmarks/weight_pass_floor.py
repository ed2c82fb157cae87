"""How close fp32 gets to what this machine allows: gpt2-onnx and PyTorch eager beside the bare weight pass, in one
interleaved ``bench`` run.

A decode step streams every weight once (benchmarks/weight_pass_system.py), so its time over eager's step bounds
every fp32 decode ratio from below, on this machine, whatever the runtime fuses. Systems, each in its own worker:

- ``pytorch-eager``: the baseline (transformers, sdpa, its own KV-cache loop);
- ``gpt2-onnx`` and ``gpt2-onnx+prepack``: the fp32 export in the default (merged) layout, and split into its two
  sessions with the weights prepacked per session;
- ``pass-torch``: the products alone with torch;
- ``pass-ort`` and ``pass-ort+prepack``: the products alone with ONNX Runtime, unpacked or prepacked.

    python benchmarks/weight_pass_floor.py --export benchmarks/out/fp32 --out benchmarks/results/STAMP-floor.json

``--export`` must be a gpt2-onnx export of ``--model`` (default random:gpt2, seed 0); it is made when missing.
The JSON is ``gpt2-onnx bench``'s report (ratios × eager) plus ``floor``: each system's decode step over each
pass's, paired per round. ``benchmarks/markdown_table.py`` renders the report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from gpt2_onnx.app.bench.report import metrics, paired_per_round  # noqa: E402
from gpt2_onnx.app.bench.run import measure  # noqa: E402  # after the path
from gpt2_onnx.app.bench.table import render_table  # noqa: E402
from gpt2_onnx.app.bench.tasks import RawResults  # noqa: E402
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec  # noqa: E402
from gpt2_onnx_core.manifest import read_manifest  # noqa: E402

FACTORY = "benchmarks.weight_pass_system:"
PASSES = ("pass-torch", "pass-ort", "pass-ort+prepack")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def plan(model: str, seed: int, export: Path) -> list[SystemSpec]:
    """Eager first (the baseline), then ours, then the passes."""
    return [
        SystemSpec("eager", "pytorch-eager", model=model, seed=seed),
        SystemSpec("onnx", "gpt2-onnx", folder=str(export)),
        SystemSpec("onnx", "gpt2-onnx+prepack", folder=str(export), layout="split", share_weights=False),
        SystemSpec("onnx", "pass-torch", model=model, seed=seed, factory=FACTORY + "TorchWeightPass"),
        SystemSpec("onnx", "pass-ort", model=model, seed=seed, factory=FACTORY + "OrtWeightPass"),
        SystemSpec(
            "onnx", "pass-ort+prepack", model=model, seed=seed, share_weights=False, factory=FACTORY + "OrtWeightPass"
        ),
    ]


def floor_ratios(raws: list[RawResults], settings: BenchSettings) -> dict[str, dict[str, Any]]:
    """Each system's decode step ÷ each pass's, paired per round: median over rounds, and the rounds' spread."""
    by_label = {raw.spec.label: raw for raw in raws}
    decode = next(m for m in metrics(settings) if m.key == "decode_ms_per_token")
    result: dict[str, dict[str, Any]] = {}
    for label, raw in by_label.items():
        result[label] = {}
        for floor in PASSES:
            per_round = paired_per_round(raw, by_label[floor], decode)
            result[label][floor] = {
                "median": float(np.median(per_round)),
                "min": min(per_round),
                "max": max(per_round),
            }
    return result


def ensure_export(model: str, seed: int, export: Path) -> None:
    if (export / "manifest.json").is_file():
        return
    source = ["--model", model, "--weights-seed", str(seed)]
    command = [sys.executable, "-m", "gpt2_onnx", "export", *source, "-o", str(export)]
    _log(" ".join(command))
    export.parent.mkdir(parents=True, exist_ok=True)
    if subprocess.run(command, check=False).returncode != 0:
        raise SystemExit(f"exporting {model} to {export} failed")


def floor_table(floors: dict[str, dict[str, Any]]) -> str:
    lines = ["| decode step ÷ pass (paired per round) | " + " | ".join(PASSES) + " |", "|---" * (len(PASSES) + 1) + "|"]
    for label, row in floors.items():
        cells = [f"{row[p]['median']:.2f}× ({row[p]['min']:.2f}–{row[p]['max']:.2f})" for p in PASSES]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random:gpt2", help="checkpoint: folder, hub id or random:NAME")
    parser.add_argument("--seed", type=int, default=0, help="seed of random:NAME weights")
    parser.add_argument("--export", type=Path, required=True, help="gpt2-onnx fp32 export of --model (made if absent)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    args = parser.parse_args()

    ensure_export(args.model, args.seed, args.export)
    manifest = read_manifest(args.export)
    settings = BenchSettings(threads=args.threads, prompt_lengths=(128,), repeats=args.repeats)
    report, raws = measure(plan(args.model, args.seed, args.export), settings, manifest, _log)
    floors = floor_ratios(raws, settings)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**report.to_json(), "floor": floors}, indent=1) + "\n", encoding="utf-8")
    print(render_table(report))
    print()
    print(floor_table(floors))


if __name__ == "__main__":
    main()
