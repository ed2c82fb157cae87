"""GPT-2-small's matrix products (``benchmarks/matmul_kernels.py``) in the installed ONNX Runtime and in another
release side by side: does a newer (or older) release's MLAS change what a kernel costs?

One process cannot load two ONNX Runtime releases, so each pair of runs is two processes of matmul_kernels.py, the
installed release and the other (its package first on ``PYTHONPATH``), the order swapping from pair to pair. The
table gives, per kernel and number of rows M, each release's median milliseconds over the pairs and the other
release's time ÷ the installed one's, paired per pair (median over pairs, and in how many pairs it was no larger).

    .venv/bin/pip install --no-deps --target /tmp/ort-1.32.0 onnxruntime==1.32.0    # the other release, apart
    .venv/bin/python benchmarks/onnxruntime_release_kernels.py /tmp/ort-1.32.0 --pairs 3
    # writes benchmarks/results/<stamp>-kernels-onnxruntime-release.{json,md}

Each process reports the ``onnxruntime`` module it loaded; a pair whose processes did not load two different
releases stops the run (an ``onnxruntime`` folder that does not import, or the same release twice).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from peers_report import save_result  # benchmarks/, beside this script

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "matmul_kernels.py"
DEFAULT_VARIANTS = "fp32,dynamic,nbits-4-b32-a4,nbits-4-b128-a4,nbits-8-b128-a4"
INSTALLED, OTHER = "installed", "other"  # the two releases' runs, by role


def one_run(other: Path | None, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """matmul_kernels.py in a fresh process, with ``other``'s onnxruntime first on the path when given; its JSON."""
    environment = dict(os.environ)
    if other is not None:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(other), environment.get("PYTHONPATH", "")]))
    folder = Path(tempfile.mkdtemp(dir=out))
    command = [sys.executable, str(KERNELS), "--variants", args.variants, "--rows", args.rows]
    command += ["--rounds", str(args.rounds), "--threads", str(args.threads), "--results", str(folder)]
    subprocess.run(command, env=environment, check=True, stdout=subprocess.DEVNULL)
    (found,) = folder.glob("*.json")
    raw: dict[str, Any] = json.loads(found.read_text(encoding="utf-8"))
    return raw


def milliseconds(raw: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{M: {variant: median ms}} of one run (JSON turns M into a string)."""
    return {
        rows: {variant: 1000 * statistics.median(times) for variant, times in per_variant.items()}
        for rows, per_variant in raw["seconds"].items()
    }


def table(runs: dict[str, list[dict[str, dict[str, float]]]], names: tuple[str, str], variants: list[str]) -> list[str]:
    """Markdown rows: per variant and M, each release's median ms over the pairs, and the second release's ÷ the
    first's, paired per pair."""
    first, second = names
    row_counts = list(runs[first][0])
    head = " | ".join(f"M = {rows}: {first} ms | {second} ms | ÷ (no larger)" for rows in row_counts)
    lines = [f"| kernel | {head} |", "|---|" + "---:|---:|---:|" * len(row_counts)]
    for variant in variants:
        cells = []
        for rows in row_counts:
            a = [run[rows][variant] for run in runs[first]]
            b = [run[rows][variant] for run in runs[second]]
            ratios = [y / x for x, y in zip(a, b, strict=True)]
            no_larger = sum(r <= 1.0 for r in ratios)
            cells.append(
                f"{statistics.median(a):.1f} | {statistics.median(b):.1f} | "
                f"{statistics.median(ratios):.3f} ({no_larger}/{len(ratios)})"
            )
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="a folder holding another release's onnxruntime package")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--rows", default="128,16,1", help="M values: a prompt, a 16-row batched step, one step")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds inside each process")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if not (args.other / "onnxruntime" / "__init__.py").is_file():
        parser.error(f"{args.other} holds no onnxruntime package (pip install --no-deps --target DIR onnxruntime==X)")
    raws: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for pair in range(args.pairs):
            order = (INSTALLED, OTHER) if pair % 2 == 0 else (OTHER, INSTALLED)
            found = {key: one_run(args.other if key == OTHER else None, args, Path(scratch)) for key in order}
            versions = {key: raw["after"]["onnxruntime_loaded"] for key, raw in found.items()}
            if len(set(versions.values())) != 2 or None in versions.values():
                sys.exit(f"pair {pair + 1}: the two processes loaded onnxruntime {versions}, not two releases")
            for key, raw in found.items():
                raws.setdefault(key, []).append(raw)
    names = tuple(raws[key][0]["after"]["onnxruntime_loaded"] for key in (INSTALLED, OTHER))
    runs = {name: [milliseconds(raw) for raw in raws[key]] for name, key in zip(names, (INSTALLED, OTHER), strict=True)}
    variants = args.variants.split(",")
    first = raws[INSTALLED][0]
    text = [
        f"# GPT-2-small's matrix products: ONNX Runtime {names[0]} (installed) and {names[1]}",
        "",
        *table(runs, (names[0], names[1]), variants),
        "",
        f"`benchmarks/onnxruntime_release_kernels.py`: the 48 projections of GPT-2-small alone "
        f"(`benchmarks/matmul_kernels.py`, random weights), {args.threads} intra-op threads, spinning off; "
        f"{args.pairs} pairs of processes, one per release, the order swapping each pair; in each process "
        f"{args.rounds} interleaved rounds, medians. ÷ is {names[1]}'s median ÷ {names[0]}'s in the same pair, "
        f"the median over pairs (in how many pairs it was no larger). Machine: {first['before']['cpu']}, "
        f"{first['before']['physical_cores']} cores; load average {first['before']['load_average']} at the start, "
        f"{raws[OTHER][-1]['after']['load_average']} at the end.",
    ]
    raw = {"settings": vars(args) | {"other": str(args.other)}, "releases": list(names), "runs": raws}
    print(save_result(HERE / "results", "-kernels-onnxruntime-release", "\n".join(text) + "\n", raw))
    print("\n".join(text))


if __name__ == "__main__":
    main()
