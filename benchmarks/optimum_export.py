"""Export a checkpoint folder with Optimum-ONNX (run in Optimum's venv): ``main_export`` with the task
``text-generation-with-past``, i.e. one ``model.onnx`` taking and returning the KV cache, as
``optimum-cli export onnx --model CHECKPOINT --task text-generation-with-past OUT`` does.

    python benchmarks/optimum_export.py CHECKPOINT OUT               # tie kept: Optimum dedups it with accelerate
    python benchmarks/optimum_export.py CHECKPOINT OUT --no-dedup    # as Optimum exports where accelerate is absent

Optimum removes the tied head's duplicate only when accelerate is installed; ``--no-dedup`` turns that check off
in this process so both variants come from one venv.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument(
        "--no-dedup", action="store_true", help="skip the tied-weight deduplication (as without accelerate)"
    )
    args = parser.parse_args()

    import optimum.exporters.onnx.base as onnx_config_base
    from optimum.exporters.onnx import main_export

    if args.no_dedup:
        onnx_config_base.is_accelerate_available = lambda: False  # the one switch Optimum reads for the dedup
    partial = args.output.with_name(args.output.name + ".partial")  # renamed when complete: reruns see all or none
    shutil.rmtree(partial, ignore_errors=True)
    main_export(
        str(args.checkpoint),
        partial,
        task="text-generation-with-past",
        device="cpu",
        local_files_only=True,
    )
    partial.rename(args.output)


if __name__ == "__main__":
    main()
