"""gpt2-onnx's own CPU modes side by side, before and after, against PyTorch eager in one interleaved ``bench`` run.

Every export comes from the same seeded checkpoint (``random:gpt2``, seed 0). Each mode is one worker process,
driven by ``gpt2_onnx.app.bench.run.runner`` (warm-up, then rounds rotating the order, task by task):

    split-shared       the folder's two graphs, weights mapped once, prepacking off (the default before the merged
                       layout)
    split-prepacked    the two graphs, ONNX Runtime's own loading: weights prepacked per session
    merged             one session over the generation graph (the default)
    merged-nospin      the same with ONNX Runtime's intra-op threads not spinning between runs
    + --optimize, int8 and int4 exports, merged and split; int4 with blocks of 128 and 256; int8 with
      ``--matmul-kernel dynamic`` (DynamicQuantizeMatMul)

    python benchmarks/runtime_modes.py --exports benchmarks/out --repeats 5 --out benchmarks/results/STAMP-modes.json

``benchmarks/runtime_modes.sh`` makes the exports and writes the JSON and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages

from gpt2_onnx.app.bench.run.run import measure  # noqa: E402  # after the path
from gpt2_onnx.app.bench.run.table import render_table  # noqa: E402
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec  # noqa: E402
from gpt2_onnx_core.manifest import read_manifest  # noqa: E402

NO_SPIN = {"session.intra_op.allow_spinning": "0"}

# label → (export folder name, layout, share_weights, session config)
MODES: dict[str, tuple[str, str, bool, dict[str, str]]] = {
    "fp32 split-shared": ("fp32", "split", True, {}),
    "fp32 split-prepacked": ("fp32", "split", False, {}),
    "fp32 merged": ("fp32", "merged", True, {}),
    "fp32 merged-nospin": ("fp32", "merged", True, NO_SPIN),
    "fp32-optimize merged": ("fp32-optimize", "merged", True, {}),
    "int8 split": ("int8", "split", True, {}),
    "int8 merged": ("int8", "merged", True, {}),
    "int4 split": ("int4", "split", True, {}),
    "int4 merged": ("int4", "merged", True, {}),
    "int4-b128 merged": ("int4-b128", "merged", True, {}),
    "int4-b256 merged": ("int4-b256", "merged", True, {}),
    "int8-dynamic merged": ("int8-dynamic", "merged", True, {}),
    "int8-dynamic split": ("int8-dynamic", "split", True, {}),
}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def specs(exports: Path, modes: list[str]) -> list[SystemSpec]:
    chosen = [SystemSpec("eager", "pytorch-eager", model="random:gpt2", seed=0)]
    for label in modes:
        folder, layout, share, config = MODES[label]
        chosen.append(
            SystemSpec(
                "onnx",
                label,
                folder=str(exports / folder),
                layout=layout,
                share_weights=share,
                session_config=dict(config),
            )
        )
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exports", type=Path, required=True, help="folder holding fp32/, int4/, … exports")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated labels (default: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=64, help="tokens per decode run")
    parser.add_argument("--batch-size", type=int, default=4, help="rows of the throughput run")
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    args = parser.parse_args()
    modes = [label for label in args.modes.split(",") if label]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise SystemExit(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(MODES)}")
    settings = BenchSettings(
        threads=args.threads,
        prompt_lengths=(128,),
        repeats=args.repeats,
        new_tokens=args.new_tokens,
        batch_size=args.batch_size,
    )
    manifest = read_manifest(args.exports / "fp32")
    report, _ = measure(specs(args.exports, modes), settings, manifest, _log)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    print(render_table(report))


if __name__ == "__main__":
    main()
