"""Measure what the fp32 parity rule (gpt2_onnx_core.tolerances.ArithmeticRule) rests on: how far an fp32 export and the
float32 source model each lie from the source model run in float64, across logit scales, widths, depths, positions
and both session layouts. docs/verification.md quotes its output.

    python benchmarks/fp32_rule.py [--models tiny,wide,gpt2,...] [--scales 1,10,40,100] [--positions 1024]
                                   [--checkpoint FOLDER ...] [--out results.json]

Models: ``tiny`` (2 layers, 64 wide), ``wide`` (4 layers, 256 wide), ``gpt2`` (12 layers, 768 wide), each seed 0,
every scale applied as the issue that asked for the rule did (ln_f.weight × scale, ln_f.bias = 0); the
``-trained-scale`` presets (random_models.TRAINED_SCALE) and ``--checkpoint`` folders run as they are. One export per
model and scale (its own check off: this measures what the check is to judge).

For each model and scale, over one text of ``--positions`` tokens (LICENSE, repeated):
    split all positions   decode.onnx with an empty past over every position: logits (1, T, V) and every present
    split past T-4 + 4    decode.onnx fed the float32 source's cache of T - 4 positions and 4 new tokens
    merged prefill+4      the merged layout (one session, the runtime's IO-bound KV loop): prefill of T - 4 tokens,
                          then 4 decode steps teacher-forced, the 5 next-token logits
Each row: max |export - float64|, max |float32 source - float64|, their ratio, max |float64| and the relative error.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
WIDTHS = {"tiny": (2, 4, 64), "wide": (4, 4, 256), "gpt2": (12, 12, 768)}


def _row(name: str, actual: np.ndarray, source: np.ndarray, exact: np.ndarray) -> dict[str, Any]:
    export_error = float(np.abs(actual.astype(np.float64) - exact).max())
    source_error = float(np.abs(source.astype(np.float64) - exact).max())
    peak = float(np.abs(exact).max())
    return {
        "check": name,
        "export_error": export_error,
        "source_error": source_error,
        "ratio": export_error / source_error if source_error else float("inf"),
        "peak": peak,
        "relative": export_error / peak,
        "relative_source": source_error / peak,
    }


def _measure(folder: Path, model: Any, tokens: list[int]) -> list[dict[str, Any]]:
    from gpt2_onnx_core.batching import position_ids
    from gpt2_onnx_core.integrity import IntegrityCheck
    from gpt2_onnx_core.names import DECODE, LOGITS, past_names, present_names
    from gpt2_onnx_exporters.reference import ReferenceModel
    from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
    from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
    from gpt2_onnx_runtimes.session import LoadedExport

    reference = ReferenceModel(model)
    ids = np.array([tokens], dtype=np.int64)  # (1, T)
    ones = np.ones_like(ids)
    ref = reference.forward(ids, ones, position_ids(ones), exact=True)
    assert ref.exact is not None
    n_layer = model.config.n_layer
    rows = []
    unchecked = IntegrityCheck(sha256=False)
    with LoadedExport.load(folder, RuntimeOptions(layout="split", integrity=unchecked)) as split:
        empty = np.zeros((1, model.config.n_head, 0, model.config.n_embd // model.config.n_head), np.float32)
        feeds = {"input_ids": ids, "attention_mask": ones, "position_ids": position_ids(ones)}
        out = split.run(DECODE, {**feeds, **dict.fromkeys(past_names(n_layer), empty)})
        rows.append(_row("split all positions: logits", out[LOGITS], ref.logits, ref.exact.logits))
        kv = [
            _row("kv", out[n], s, e)
            for n, s, e in zip(present_names(n_layer), ref.cache(), ref.exact.cache(), strict=True)
        ]
        worst = max(kv, key=lambda r: r["ratio"])
        rows.append({**worst, "check": "split all positions: worst present"})
        past = len(tokens) - 4
        cache = {n: np.ascontiguousarray(t[:, :, :past]) for n, t in zip(past_names(n_layer), ref.cache(), strict=True)}
        new = {"input_ids": ids[:, past:], "attention_mask": ones, "position_ids": position_ids(ones)[:, past:]}
        out = split.run(DECODE, new | cache)
        span = slice(past, None)
        rows.append(_row("split past T-4 + 4: logits", out[LOGITS], ref.logits[:, span], ref.exact.logits[:, span]))
    with LoadedExport.load(folder, RuntimeOptions(layout="merged", integrity=unchecked)) as merged:
        prompt = len(tokens) - 4
        runner = KvCacheRunner(merged, capacity=len(tokens))
        mask = ones[:, :prompt]
        found = [runner.prefill(ids[:, :prompt], mask, position_ids(mask))]  # (1, V) each
        for step in range(prompt, len(tokens)):
            mask = ones[:, : step + 1]
            found.append(runner.decode(ids[:, step : step + 1], mask, position_ids(mask)[:, -1:]))
        span = slice(prompt - 1, len(tokens))
        actual = np.stack(found, axis=1)  # (1, 5, V)
        rows.append(_row("merged prefill + 4: logits", actual, ref.logits[:, span], ref.exact.logits[:, span]))
    return rows


def _model(name: str, seed: int) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    from gpt2_onnx_exporters.source import load_source

    if name in WIDTHS:
        import torch

        n_layer, n_head, n_embd = WIDTHS[name]
        config = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, bos_token_id=50256, eos_token_id=50256)
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config).eval()
        model.config._attn_implementation = "eager"
        return model
    return load_source(name if "/" in name else f"random:{name}", seed).model


def _save(model: Any, folder: Path) -> None:
    from gpt2_onnx_exporters.tokenizer_files import load_packaged_gpt2_tokenizer

    model.save_pretrained(folder)
    load_packaged_gpt2_tokenizer().save_pretrained(folder)


def run_model(name: str, scales: list[float], positions: int, work: Path) -> list[dict[str, Any]]:
    import torch

    from gpt2_onnx.app.export import export_model
    from gpt2_onnx_core.config import ExportOptions
    from gpt2_onnx_exporters.tokenizer_files import load_packaged_gpt2_tokenizer

    model = _model(name, 0)
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    encoded = load_packaged_gpt2_tokenizer()(text)["input_ids"]
    tokens = [int(t) for t in (encoded * (positions // len(encoded) + 1))[:positions]]
    original = model.transformer.ln_f.weight.detach().clone()
    fixed = name not in WIDTHS  # presets and checkpoints run as they are
    results = []
    for scale in [1.0] if fixed else scales:
        if not fixed:
            with torch.no_grad():
                model.transformer.ln_f.weight.copy_(original * scale)
                model.transformer.ln_f.bias.zero_()
        checkpoint, folder = work / "checkpoint", work / "export"
        _save(model, checkpoint)
        export_model(ExportOptions(model=str(checkpoint), output=folder, check=False, force=True))
        for row in _measure(folder, model, tokens):
            results.append({"model": name, "scale": scale, "positions": positions, **row})
            print(json.dumps(results[-1]), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tiny,wide,gpt2,tiny-trained-scale,gpt2-trained-scale")
    parser.add_argument("--scales", default="1,10,40,100")
    parser.add_argument("--positions", type=int, default=1024)
    parser.add_argument("--checkpoint", action="append", default=[], help="a checkpoint folder, run as it is")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sys.path[:0] = [str(REPO / folder) for folder in ("", "core", "exporters", "runtimes")]  # this checkout's packages
    from gpt2_onnx.app.environment import describe_environment

    scales = [float(s) for s in args.scales.split(",")]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work:
        for name in [*filter(None, args.models.split(",")), *args.checkpoint]:
            results += run_model(name, scales, args.positions, Path(work))
    summary = {"machine": platform.processor() or platform.machine(), "environment": describe_environment()}
    if args.out:
        args.out.write_text(json.dumps({**summary, "rows": results}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
