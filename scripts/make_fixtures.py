"""Make fixtures/: committed exports of checkpoints/pydocs-micro and the expectations every consumer's tests read.

    .venv/bin/python scripts/make_fixtures.py              # writes fixtures/ (the only way it changes)
    .venv/bin/python scripts/make_fixtures.py --out DIR    # the same into DIR (the freshness test does this)

fixtures/<name>/ are complete export folders (gpt2-onnx export); fixtures/expectations.json holds, per export and
computed with the Python runtime (gpt2_onnx_runtimes): prompt ids, greedy continuations, first-step top-5 logits,
a left-padded batch and a beam-search result (schema: docs/dotnet.md points to it). The fp32 greedy tokens are
also checked against transformers' generate on the source checkpoint before anything is written, and every greedy
step of every expectation (both precisions, the left-padded batch too) must lead its runner-up by a safe margin
(MARGIN_FACTOR below), so that consumers on other CPUs choose the same tokens.

The checkpoint is pydocs-micro (2 layers, 32 wide, 128 positions; scripts/train_checkpoint.py --preset micro), not
pydocs-tiny: its tied 50,257-token embedding is most of an export's weights, and 32 wide halves them.
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
CHECKPOINT = "checkpoints/pydocs-micro"
EXPORTS = {"pydocs-micro-fp32": "fp32", "pydocs-micro-int4": "int4"}
# Chosen among candidates for words in the greedy continuations (a 32-wide model trained on hard-wrapped text soon
# predicts a line break and indentation) and for margins well above MARGIN_FACTOR's limit in both precisions.
PROMPTS = (
    "The return value of the function is",
    ">>> for i in range(",
    "Le module « café » (東京): .. versionadded::",  # non-ASCII: accents, guillemets, CJK split into byte tokens
    "A list is a mutable sequence",
    "If *default* is not given, it defaults to",
)
BATCH_PROMPTS = (PROMPTS[0], PROMPTS[4])  # 7 and 11 tokens: the batch's first row is left-padded
GREEDY_NEW = 16
BATCH_NEW = 8
BEAM = {"num_beams": 3, "max_new_tokens": 8, "length_penalty": 1.0, "early_stopping": False}
PAD = 50256
# What a consumer compares first-step logits with. It runs the same graphs as the Python runtime that wrote the
# figures, so only another ONNX Runtime build's kernels and threading order differ: onnxruntime-node 1.30 and the
# C++ sample's build matched Python's 1.31.1 within these limits here (AMD EPYC); golden.json carries the
# source-model rule (per case) for checks against the source.
LOGITS_ATOL = {"fp32": 1e-4, "int4": 1e-3}
# Near-ties: every greedy step's top-1 logit must exceed its runner-up by MARGIN_FACTOR × logits_atol, or no fixture is
# written. A consumer whose logits stay within logits_atol of these figures can change a greedy token only where the
# margin is below 2 × logits_atol (the two logits moving toward each other). The other 5× is for what was not
# measured here: other CPUs' kernels (an Intel Xeon's AMX int8 path for int4's MatMulNBits at accuracy level 4, its
# own fp32 summation order; this machine is an AMD EPYC without AMX), other thread counts, and the drift over the
# decode steps (logits_atol is checked on the first step only).
MARGIN_FACTOR = 10.0


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


def greedy_margins(model: Any, rows: list[list[int]], steps: int) -> tuple[list[list[int]], list[list[float]]]:
    """Greedy decoding of a left-padded batch through the export's own prefill and decode graphs, as a consumer runs
    it: each row's chosen ids and, per step, its top-1 logit minus its top-2 logit."""
    from gpt2_onnx_core.names import PAST_PREFIX

    padded, padding = _left_pad(rows)
    ids = np.array(padded, dtype=np.int64)  # (B, T)
    mask = np.array(padding, dtype=np.int64)  # (B, T)
    positions = np.maximum(np.cumsum(mask, axis=-1) - 1, 0)  # (B, T); padded positions are fed 0
    out = model.prefill(ids, mask, positions)
    chosen: list[np.ndarray] = []
    margins: list[np.ndarray] = []
    for step in range(steps):
        logits = out["logits"][:, -1].astype(np.float64)  # (B, V)
        top2 = np.partition(logits, -2, axis=-1)[:, -2:]  # (B, 2): runner-up, best
        margins.append(top2[:, 1] - top2[:, 0])
        chosen.append(np.argmax(logits, axis=-1))
        if step == steps - 1:
            break
        mask = np.concatenate([mask, np.ones((len(rows), 1), dtype=np.int64)], axis=-1)  # (B, T + step + 1)
        past = {PAST_PREFIX + k.removeprefix("present."): v for k, v in out.items() if k.startswith("present.")}
        out = model.decode_step(chosen[-1][:, None], mask, mask.sum(axis=-1, keepdims=True) - 1, past)
    by_row = np.stack(chosen, axis=1), np.stack(margins, axis=1)  # (B, steps) each
    return [[int(i) for i in row] for row in by_row[0]], [[float(m) for m in row] for row in by_row[1]]


def _checked_margins(
    model: Any, rows: list[list[int]], results: list[list[int]], steps: int, limit: float, where: list[str]
) -> tuple[list[list[float]], list[str]]:
    """Each result's greedy margins (as many as it has tokens), and a complaint for each step below ``limit`` or
    each result the explicit decoding above does not reproduce."""
    ids, margins = greedy_margins(model, rows, steps)
    complaints = []
    kept = []
    for name, row_ids, row_margins, result in zip(where, ids, margins, results, strict=True):
        if row_ids[: len(result)] != result:
            complaints.append(f"{name}: prefill/decode greedy {row_ids} != generate {result}")
        kept.append([round(m, 6) for m in row_margins[: len(result)]])
        complaints += [
            f"{name}: step {step} margin {m:.2e} < {limit:.2e}" for step, m in enumerate(kept[-1]) if m < limit
        ]
    return kept, complaints


def expectations_for(folder: Path, precision: str) -> dict[str, Any]:
    """What a consumer of ``folder`` must reproduce. Raises SystemExit listing every near-tie (MARGIN_FACTOR)."""
    from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx

    model = Gpt2Onnx.load(folder)
    limit = MARGIN_FACTOR * LOGITS_ATOL[precision]
    complaints: list[str] = []
    prompts = []
    for text in PROMPTS:
        ids = model.encode(text)
        (result,) = model.generate(text, GenerationOptions(max_new_tokens=GREEDY_NEW))
        (margins,), found = _checked_margins(model, [ids], [result.token_ids], GREEDY_NEW, limit, [repr(text)])
        complaints += found
        greedy = {
            "max_new_tokens": GREEDY_NEW,
            "ids": result.token_ids,
            "text": result.text,
            "finish_reason": result.finish_reason,
            "margins": margins,
        }
        prompts.append({"text": text, "ids": ids, "greedy": greedy, "first_step_top5": _top5(model, ids)})
    batch_texts = list(BATCH_PROMPTS)
    batch = sorted(model.generate(batch_texts, GenerationOptions(max_new_tokens=BATCH_NEW)), key=lambda r: r.index)
    rows = [model.encode(t) for t in batch_texts]
    input_ids, mask = _left_pad(rows)
    batch_ids = [r.token_ids for r in batch]
    batch_margins, found = _checked_margins(
        model, rows, batch_ids, BATCH_NEW, limit, [f"padded batch row {i}" for i in range(len(rows))]
    )
    complaints += found
    if complaints:
        raise SystemExit(f"make_fixtures: {folder.name}: near-ties (pick other prompts):\n  " + "\n  ".join(complaints))
    beam_prompt = PROMPTS[0]
    (beam,) = model.generate(beam_prompt, GenerationOptions(**BEAM))  # type: ignore[arg-type]
    return {
        "precision": precision,
        "logits_atol": LOGITS_ATOL[precision],
        "min_greedy_margin": limit,
        "prompts": prompts,
        "padded_batch": {
            "prompts": batch_texts,
            "max_new_tokens": BATCH_NEW,
            "pad_token_id": PAD,
            "input_ids": input_ids,
            "attention_mask": mask,
            "ids": batch_ids,
            "margins": batch_margins,
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
        check_against_source(exports["pydocs-micro-fp32"], source.model)
    expectations = {
        "schema_version": 1,
        "made_by": "scripts/make_fixtures.py",
        "checkpoint": CHECKPOINT,
        "runtime": "gpt2_onnx_runtimes (ONNX Runtime, CPU)",
        "margins": (
            f"greedy margins: top-1 minus top-2 logit at each step; each is at least min_greedy_margin "
            f"({MARGIN_FACTOR:g} × logits_atol: 2× for two consumers' errors within logits_atol, 5× for other CPUs' "
            "kernels, thread counts and drift over the steps)"
        ),
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
