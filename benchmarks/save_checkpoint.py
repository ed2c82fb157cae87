"""Save ``random:gpt2`` (seed 0, GPT-2-small dims) as a Hugging Face checkpoint folder (safetensors + tokenizer),
so that gpt2-onnx, Optimum-ONNX and PyTorch eager all start from the same files (main venv).

    python benchmarks/save_checkpoint.py OUT [--model random:gpt2] [--seed 0]

The tokenizer's ``tokenizer_class`` is written as ``GPT2Tokenizer``: transformers 5 saves ``TokenizersBackend``,
which the transformers < 4.58 that Optimum pins cannot load; both read ``GPT2Tokenizer`` with this tokenizer.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path)
    parser.add_argument("--model", default="random:gpt2")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages
    from gpt2_onnx_exporters.source import is_tied, load_source

    source = load_source(args.model, args.seed)
    if not is_tied(source.model):
        raise SystemExit(f"{args.model}: the head is not tied to the embedding; the side-by-side expects GPT-2's tie")
    partial = args.output.with_name(args.output.name + ".partial")  # renamed when complete: reruns see all or none
    shutil.rmtree(partial, ignore_errors=True)  # an interrupted run's leftovers
    source.model.save_pretrained(partial, safe_serialization=True)
    source.tokenizer.save_pretrained(partial)
    config_file = partial / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "GPT2Tokenizer"
    config.pop("backend", None)  # transformers 5 only
    config_file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    partial.rename(args.output)
    print(f"saved {args.model} (seed {args.seed}) to {args.output}")


if __name__ == "__main__":
    main()
