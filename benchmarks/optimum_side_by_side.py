"""gpt2-onnx against Optimum-ONNX (and PyTorch eager) on the same checkpoint, in one interleaved ``bench`` run.

Run in the main venv; Optimum runs in its own (it pins transformers < 4.58), each system in a worker process of its
own, all driven by ``gpt2_onnx.app.bench.runner`` (warm-up round, then rounds rotating the systems' order, task by
task). ``benchmarks/optimum_side_by_side.sh`` builds the venv and the folders, then calls this:

    python benchmarks/optimum_side_by_side.py --checkpoint CKPT --ours OURS --optimum OPT [--optimum-untied OPT2] \\
        --optimum-python .ci-cache/optimum-venv/bin/python --out benchmarks/results/STAMP-optimum.json

Before measuring, every system's greedy tokens on the decode prompt are compared (same weights, same choices).
The JSON holds ``gpt2-onnx bench``'s report (ratios × eager), the paired ratios of ours ÷ Optimum (tie kept),
the token check, the stored vocabulary tables per folder and the Optimum venv's versions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from benchmarks.greedy_tokens import tokens_in_process  # noqa: E402  # after the path
from gpt2_onnx.app.bench.report import metrics, paired_per_round, paired_ratios  # noqa: E402
from gpt2_onnx.app.bench.run import measure  # noqa: E402
from gpt2_onnx.app.bench.table import render_table  # noqa: E402
from gpt2_onnx.app.bench.tasks import RawResults  # noqa: E402
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec  # noqa: E402
from gpt2_onnx_core.manifest import read_manifest  # noqa: E402

OPTIMUM_FACTORY = "benchmarks.optimum_system:OptimumSystem"
PREPACKED = "gpt2-onnx+prepack"  # ours split into two sessions, each prepacking its own copy of the weights
OPTIMUM_PACKAGES = ("optimum-onnx", "optimum", "transformers", "torch", "onnxruntime", "onnx", "accelerate", "numpy")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def venv_versions(python: str, packages: Sequence[str]) -> dict[str, str | None]:
    """The versions of ``packages`` in ``python``'s environment (None: not installed)."""
    code = (
        "import json, sys, importlib.metadata as m\n"
        "def v(n):\n  try: return m.version(n)\n  except m.PackageNotFoundError: return None\n"
        "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
    )
    done = subprocess.run([python, "-c", code, *packages], capture_output=True, text=True, check=True)
    found: dict[str, str | None] = json.loads(done.stdout)
    return found


def optimum_versions(python: str) -> dict[str, str | None]:
    """The Optimum venv's package versions (None: not installed)."""
    return venv_versions(python, OPTIMUM_PACKAGES)


def vocab_tables(folder: Path, vocab_size: int) -> dict[str, Any]:
    """The vocabulary-sized tensors the folder's graphs store: one when the tie survived, two when duplicated.

    Tensors in an external file count once per (file, offset), so two graphs reading one tensor count one."""
    import onnx

    stored: set[tuple[str, str]] = set()
    shapes: list[list[int]] = []
    for graph_file in sorted(folder.glob("*.onnx")):
        model = onnx.load(str(graph_file), load_external_data=False)
        for tensor in model.graph.initializer:
            if vocab_size not in tensor.dims:
                continue
            external = {entry.key: entry.value for entry in tensor.external_data}
            key = (external["location"], external.get("offset", "0")) if external else (graph_file.name, tensor.name)
            if key not in stored:
                stored.add(key)
                shapes.append(list(tensor.dims))
        del model
    return {"count": len(stored), "shapes": shapes}


# label → (greedy_tokens.py's system name, the python that runs it, its folder)
Systems = dict[str, tuple[str, str, Path]]


def greedy_check(systems: Systems, settings: BenchSettings, vocab_size: int) -> dict[str, Any]:
    """Each system's greedy tokens on the decode prompt (a process each), and whether all agree."""
    tokens: dict[str, list[int]] = {}
    for label, (kind, python, folder) in systems.items():
        _log(f"greedy tokens: {label}")
        tokens[label] = tokens_in_process(python, [kind, str(folder)], settings, vocab_size, label)["tokens"]
    reference = next(iter(tokens.values()))
    first_difference = {
        label: next((i for i, (a, b) in enumerate(zip(row, reference, strict=True)) if a != b), None)
        for label, row in tokens.items()
    }
    return {
        "agree": all(i is None for i in first_difference.values()),
        "first_difference": first_difference,
        "tokens": tokens,
    }


def paired(raws: list[RawResults], label: str, base_label: str, settings: BenchSettings) -> dict[str, Any]:
    """``label`` ÷ ``base_label`` per timing, paired per round, and the decode ratio of each round (its spread)."""
    by_label = {raw.spec.label: raw for raw in raws}
    ours, base = by_label[label], by_label[base_label]
    decode = next(m for m in metrics(settings) if m.key == "decode_ms_per_token")
    return {
        "system": label,
        "baseline": base_label,
        "ratios": paired_ratios(ours, base, settings),
        "decode_ratio_per_round": paired_per_round(ours, base, decode),
    }


def plan(args: argparse.Namespace) -> tuple[list[SystemSpec], Systems]:
    """The bench's systems (eager first, the baseline) and the greedy check's."""
    optimum = {"optimum-onnx": args.optimum}
    if args.optimum_untied:
        optimum["optimum-onnx-untied"] = args.optimum_untied
    specs = [
        SystemSpec("eager", "pytorch-eager", model=str(args.checkpoint), seed=0),
        SystemSpec("onnx", "gpt2-onnx", folder=str(args.ours)),
        *(
            [SystemSpec("onnx", PREPACKED, folder=str(args.ours), layout="split", share_weights=False)]
            if args.prepacked
            else []
        ),
        *(
            SystemSpec("onnx", label, folder=str(folder), factory=OPTIMUM_FACTORY, python=args.optimum_python)
            for label, folder in optimum.items()
        ),
    ]
    systems: Systems = {  # prepacking changes no result: the check runs ours once
        "pytorch-eager": ("eager", sys.executable, args.checkpoint),
        "gpt2-onnx": ("ours", sys.executable, args.ours),
        **{label: ("optimum", args.optimum_python, folder) for label, folder in optimum.items()},
    }
    return specs, systems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True, help="the checkpoint folder (eager's model)")
    parser.add_argument("--ours", type=Path, required=True, help="gpt2-onnx export folder of the checkpoint")
    parser.add_argument("--optimum", type=Path, required=True, help="Optimum export folder (tie deduplicated)")
    parser.add_argument("--optimum-untied", type=Path, help="Optimum export folder without the dedup (optional)")
    parser.add_argument("--optimum-python", required=True, help="the Optimum venv's python")
    parser.add_argument(
        "--prepacked",
        action="store_true",
        help="ours a second time in the split layout with share_weights=False (weights prepacked per session)",
    )
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    args = parser.parse_args()

    settings = BenchSettings(threads=args.threads, prompt_lengths=(128,), repeats=args.repeats)
    manifest = read_manifest(args.ours)
    vocab_size = manifest.dims.vocab_size
    specs, systems = plan(args)
    tokens = greedy_check(systems, settings, vocab_size)
    _log(f"greedy tokens agree: {tokens['agree']} (first difference per system: {tokens['first_difference']})")
    tables = {label: vocab_tables(path, vocab_size) for label, (kind, _, path) in systems.items() if kind != "eager"}
    if args.prepacked:
        tables[PREPACKED] = tables["gpt2-onnx"]  # the same folder

    report, raws = measure(specs, settings, manifest, _log)
    result = {
        **report.to_json(),
        "vs_optimum": [
            paired(raws, spec.label, "optimum-onnx", settings) for spec in specs if spec.folder == str(args.ours)
        ],
        "greedy": tokens,
        "vocab_tables": tables,
        "optimum_env": optimum_versions(args.optimum_python),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(render_table(report))


if __name__ == "__main__":
    main()
