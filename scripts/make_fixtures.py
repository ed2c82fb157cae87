"""Make fixtures/: committed exports of checkpoints/pydocs-tiny and the expectations every consumer's tests read.

    .venv/bin/python scripts/make_fixtures.py              # writes fixtures/ (the only way it changes)
    .venv/bin/python scripts/make_fixtures.py --out DIR    # the same into DIR (the freshness test does this)

fixtures/<name>/ are complete export folders (gpt2-onnx export); fixtures/expectations.json holds, per export and
computed with the Python runtime (gpt2_onnx_runtimes): prompt ids, greedy continuations, first-step top-5 logits,
a left-padded batch and a beam-search result (schema: docs/dotnet.md points to it). The fp32 greedy tokens are
also checked against transformers' generate on the source checkpoint before anything is written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

    from gpt2_onnx.app.export import SharedExportWork

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = "checkpoints/pydocs-tiny"
EXPORTS = {"pydocs-tiny-fp32": "fp32", "pydocs-tiny-int4": "int4"}
PROMPTS = (
    "The return value of the function is",
    "import os\nimport sys\n\ndef main():",
    "Le module « café » gère les chaînes Unicode: naïve, 東京",  # non-ASCII
    "A list is a mutable sequence",
)
GREEDY_NEW = 16
BATCH_NEW = 8
BEAM = {"num_beams": 3, "max_new_tokens": 8, "length_penalty": 1.0, "early_stopping": False}
PAD = 50256
# What a consumer compares first-step logits with. It runs the same graphs as the Python runtime that wrote the
# figures, so only another ONNX Runtime build's kernels and threading order differ: onnxruntime-node 1.30 and the
# C++ sample's build matched Python's 1.31.1 within these limits here (AMD EPYC); golden.json carries the
# source-model rule (per case) for checks against the source.
LOGITS_ATOL = {"fp32": 1e-4, "int4": 1e-3}


def export(name: str, precision: str, out: Path, shared: SharedExportWork, check: bool = True) -> Path:
    """One fixture export. ``check``: the export's own parity check (the freshness test skips it: the committed
    fixtures passed it when they were made, and the export tests check parity)."""
    from gpt2_onnx.app.export import export_model
    from gpt2_onnx_core.config import ExportOptions

    folder = out / name
    # Run from the repository root so the manifest names the checkpoint by its path in the repository.
    export_model(
        ExportOptions(model=CHECKPOINT, output=folder, precision=precision, force=True, check=check), None, shared
    )
    return folder


def _top5(model: Any, ids: list[int]) -> dict[str, list[Any]]:
    feeds = np.array([ids], dtype=np.int64)  # (1, T)
    mask = np.ones_like(feeds)  # (1, T)
    positions = np.arange(len(ids), dtype=np.int64)[None, :]  # (1, T)
    logits = model.prefill(feeds, mask, positions)["logits"][0, -1]  # (V,)
    order = np.argsort(-logits, kind="stable")[:5]
    return {"ids": [int(i) for i in order], "logits": [float(logits[i]) for i in order]}


def _left_pad(rows: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    width = max(len(r) for r in rows)
    ids = [[PAD] * (width - len(r)) + r for r in rows]
    mask = [[0] * (width - len(r)) + [1] * len(r) for r in rows]
    return ids, mask


def expectations_for(folder: Path, precision: str) -> dict[str, Any]:
    from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx

    model = Gpt2Onnx.load(folder)
    prompts = []
    for text in PROMPTS:
        ids = model.encode(text)
        (result,) = model.generate(text, GenerationOptions(max_new_tokens=GREEDY_NEW))
        greedy = {
            "max_new_tokens": GREEDY_NEW,
            "ids": result.token_ids,
            "text": result.text,
            "finish_reason": result.finish_reason,
        }
        prompts.append({"text": text, "ids": ids, "greedy": greedy, "first_step_top5": _top5(model, ids)})
    batch_texts = [PROMPTS[0], PROMPTS[3]]
    batch = model.generate(batch_texts, GenerationOptions(max_new_tokens=BATCH_NEW))
    input_ids, mask = _left_pad([model.encode(t) for t in batch_texts])
    beam_prompt = PROMPTS[0]
    (beam,) = model.generate(beam_prompt, GenerationOptions(**BEAM))  # type: ignore[arg-type]
    return {
        "precision": precision,
        "logits_atol": LOGITS_ATOL[precision],
        "prompts": prompts,
        "padded_batch": {
            "prompts": batch_texts,
            "max_new_tokens": BATCH_NEW,
            "pad_token_id": PAD,
            "input_ids": input_ids,
            "attention_mask": mask,
            "ids": [r.token_ids for r in sorted(batch, key=lambda r: r.index)],
        },
        "beam_search": {"prompt": beam_prompt, **BEAM, "ids": beam.token_ids, "text": beam.text},
    }


def check_against_source(expect: dict[str, Any], source: GPT2LMHeadModel) -> None:
    """fp32 greedy ids must be transformers' generate on the checkpoint (cheap at this size)."""
    import torch

    for prompt in expect["prompts"]:
        with torch.no_grad():
            out = source.generate(
                torch.tensor([prompt["ids"]]),
                max_new_tokens=GREEDY_NEW,
                do_sample=False,
                pad_token_id=PAD,
                eos_token_id=PAD,
            )
        ids = out[0, len(prompt["ids"]) :].tolist()
        if ids != prompt["greedy"]["ids"]:
            raise SystemExit(f"make_fixtures: ONNX greedy {prompt['greedy']['ids']} != transformers {ids}")


def make(out: Path, check_source: bool = True, check: bool = True) -> dict[str, Any]:
    """Write the exports and expectations.json into ``out``. One load and one trace of the checkpoint serve both
    precisions; ``check``: each export's own parity check; ``check_source``: fp32 greedy tokens against transformers."""
    from gpt2_onnx.app.export import SharedExportWork

    os.chdir(ROOT)
    out.mkdir(parents=True, exist_ok=True)
    shared = SharedExportWork()
    exports: dict[str, Any] = {}
    for name, precision in EXPORTS.items():
        folder = export(name, precision, out, shared, check)
        exports[name] = expectations_for(folder, precision)
    if check_source:
        from gpt2_onnx_core.config import ExportOptions

        source, _ = shared.load(ExportOptions(model=CHECKPOINT, output=out))
        check_against_source(exports["pydocs-tiny-fp32"], source.model)
    expectations = {
        "schema_version": 1,
        "made_by": "scripts/make_fixtures.py",
        "checkpoint": CHECKPOINT,
        "runtime": "gpt2_onnx_runtimes (ONNX Runtime, CPU)",
        "exports": exports,
    }
    (out / "expectations.json").write_text(json.dumps(expectations, indent=1, ensure_ascii=False) + "\n")
    return expectations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "fixtures")
    parser.add_argument("--no-source-check", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.out.parent) as work:
        make(Path(work) / "fixtures", check_source=not args.no_source_check)
        if args.out.exists():
            shutil.rmtree(args.out)
        shutil.move(str(Path(work) / "fixtures"), args.out)
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {args.out}: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
