"""Perplexity of one checkpoint's exports at each precision beside the checkpoint itself, over the same windows.

    python benchmarks/perplexity.py                         # checkpoints/pydocs-tiny on its heldout.txt
    python benchmarks/perplexity.py --model CKPT --text TEXT --window 1024 --stride 512 --threads 1

Exports the checkpoint at fp32, fp16, int8 and int4 (the exporter's defaults), then int4 block sizes
(``--block-size``), MatMulNBits accuracy level 0 (float32 activations) beside the default 4 (int8 activations,
``--accuracy-level``) and int8's DynamicQuantizeMatMul kernel (``--matmul-kernel dynamic``), one difference
each. Each export is scored by ONNX Runtime (the decode graph over each window, ``gpt2_onnx_runtimes.perplexity``),
the checkpoint once by PyTorch, all over the same token ids and windows (Hugging Face's sliding-window recipe,
``gpt2_onnx_core.perplexity``). The runtime's prompt kernel (``prompt_kernel='dynamic'``: an int8 or int4
export's projections through DynamicQuantizeMatMul, as prompts run them) scores the windows through it. The int8
KV cache (``kv_cache='int8'``, a runtime option over the same exports) is scored as generation computes it: one
decode step per scored token over the int8 cache. The exports skip their own parity check (``check=False``): the
perplexity is what is measured here; ``gpt2-onnx verify`` judges parity.

Writes benchmarks/results/<UTC stamp>-perplexity.json (every figure, the machine and the versions) and a Markdown
table beside it; ``python benchmarks/performance_doc.py`` then puts the table in docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpt2_onnx.app.environment import describe_environment  # noqa: E402
from gpt2_onnx.app.export import export_model  # noqa: E402  # after the repository is on the path
from gpt2_onnx.app.perplexity import checkpoint_perplexity, export_perplexity, read_for_export  # noqa: E402
from gpt2_onnx_core.config import ExportOptions  # noqa: E402
from gpt2_onnx_core.layouts import KvCacheFormat, PromptKernel  # noqa: E402
from gpt2_onnx_core.perplexity import PerplexityRequest  # noqa: E402
from gpt2_onnx_core.precisions import MatMulKernel, int8_kv_cache_perplexity, precision_flag  # noqa: E402
from gpt2_onnx_runtimes.export_folder import ExportFolder  # noqa: E402
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions  # noqa: E402
from gpt2_onnx_runtimes.session import LoadedExport  # noqa: E402

CHECKPOINT = REPO / "checkpoints" / "pydocs-tiny"


@dataclass(frozen=True)
class Variant:
    """One export: a precision, and for int8/int4 a block size, MatMulNBits accuracy level and kernel."""

    precision: str
    block_size: int | None = None  # None: the precision's default
    accuracy_level: int | None = None  # None: the precision's default
    matmul_kernel: MatMulKernel | None = None  # None: the precision's default
    kv_cache: KvCacheFormat = "float32"  # the runtime's cache format (int8: scored step by step, as generated)
    prompt_kernel: PromptKernel = "export"  # the runtime's prompt kernel (dynamic: the windows through it)

    @property
    def export_name(self) -> str:
        """The export's folder: variants differing in the runtime's options only share it."""
        return self.name.removesuffix("-kv-int8").removesuffix("-prompt-dynamic")

    @property
    def name(self) -> str:
        parts = [self.precision]
        if self.block_size is not None:
            parts.append(f"block{self.block_size}")
        if self.accuracy_level is not None:
            parts.append(f"level{self.accuracy_level}")
        if self.matmul_kernel is not None:
            parts.append(self.matmul_kernel)
        if self.kv_cache != "float32":
            parts.append(f"kv-{self.kv_cache}")
        if self.prompt_kernel != "export":
            parts.append(f"prompt-{self.prompt_kernel}")
        return "-".join(parts)


VARIANTS = (
    Variant("fp32"),
    Variant("fp16"),
    Variant("int8"),
    Variant("int4"),
    Variant("int8", accuracy_level=0),
    Variant("int8", matmul_kernel="dynamic"),
    Variant("int4", accuracy_level=0),
    Variant("int4", block_size=16),
    Variant("int4", block_size=64),
    Variant("int4", block_size=128),
    Variant("int4", block_size=256),
    Variant("fp32", kv_cache="int8"),
    Variant("int8", kv_cache="int8"),
    Variant("int4", kv_cache="int8"),
    Variant("int8", prompt_kernel="dynamic"),
    Variant("int4", prompt_kernel="dynamic"),
    Variant("int4", block_size=128, prompt_kernel="dynamic"),
)


def _export(model: Path, variant: Variant, folder: Path) -> Path:
    if (folder / variant.export_name / "manifest.json").is_file():
        return folder / variant.export_name  # made for a variant that differs in the runtime's options only
    options = ExportOptions(
        model=str(model),
        output=folder / variant.export_name,
        precision=variant.precision,
        block_size=variant.block_size,
        accuracy_level=variant.accuracy_level,
        matmul_kernel=variant.matmul_kernel,
        check=False,
    )
    export_model(options)
    return options.output


def _row(variant: Variant, folder: Path, manifest_quantization: Any, ppl: float, source: float) -> dict[str, Any]:
    relative = ppl / source - 1.0
    limit = precision_flag(variant.precision).perplexity  # the precision table's limit: verify's
    if variant.kv_cache == "int8":
        limit = int8_kv_cache_perplexity(limit)  # plus the int8 cache's: verify --kv-cache int8's
    aim = limit.max_relative
    return {
        "variant": variant.name,
        "precision": variant.precision,
        "kv_cache": variant.kv_cache,
        "quantization": manifest_quantization,
        "perplexity": ppl,
        "difference": ppl - source,
        "relative": relative,
        "aim": aim,
        "within_aim": abs(relative) <= aim,
        "folder": folder.name,
    }


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    variants = [v for v in VARIANTS if args.only is None or v.name in args.only]
    first = ExportFolder.open(_export(args.model, variants[0], work))
    text = read_for_export(args.text, first, args.window, args.stride)
    request = PerplexityRequest(args.text, args.window, args.stride)
    started = time.time()
    source = checkpoint_perplexity(str(args.model), None, text)
    rows = []
    for variant in variants:
        export = first if variant == variants[0] else ExportFolder.open(_export(args.model, variant, work))
        options = RuntimeOptions(intra_op_threads=args.threads, layout="split")
        if variant.kv_cache != "float32" or variant.prompt_kernel != "export":
            options = RuntimeOptions(
                intra_op_threads=args.threads,
                layout="merged",
                kv_cache=variant.kv_cache,
                prompt_kernel=variant.prompt_kernel,
            )
        with LoadedExport.open(export, options) as loaded:
            found = export_perplexity(loaded, text)
        quantization = export.manifest.export.get("quantization")
        rows.append(_row(variant, export.path, quantization, found.value, source.value))
        print(f"{variant.name}: {found.value:.4f} ({rows[-1]['relative']:+.3%})", file=sys.stderr)
    return {
        "what": f"perplexity of {args.model.name}'s exports against the checkpoint (PyTorch), same windows",
        "model": str(args.model.relative_to(REPO) if args.model.is_relative_to(REPO) else args.model),
        "text": str(request.path.relative_to(REPO) if request.path.is_relative_to(REPO) else request.path),
        **text.plan.to_json(),
        "threads": args.threads,
        "source_perplexity": source.value,
        "source_mean_nll": source.mean_nll,
        "exports": rows,
        "seconds": round(time.time() - started, 1),
        "environment": describe_environment("cpu"),
    }


def table(result: dict[str, Any]) -> str:
    env = result["environment"]
    shown = ("onnxruntime", "onnxruntime-gpu", "torch", "transformers")
    versions = ", ".join(f"{k} {v}" for k, v in env["libraries"].items() if k in shown)
    held_out = " (held out from training)" if result["text"].endswith("heldout.txt") else ""
    lines = [
        "# Perplexity",
        "",
        f"`{result['model']}` on `{result['text']}`{held_out}: {result['scored_tokens']:,} of "
        f"{result['tokens']:,} tokens scored, {result['windows']} windows of {result['window']}, stride "
        f"{result['stride']}. Checkpoint (PyTorch): perplexity **{result['source_perplexity']:.4f}**. "
        f"{env['cpu']}, {env['cpu_count']} cores, ONNX Runtime CPU provider, {result['threads']} thread(s); "
        f"gpt2-onnx {env['gpt2-onnx']}, {versions}.",
        "",
        "| export | kernel | block size | accuracy level | perplexity | Δ | relative change | aim (relative) "
        "| within aim |",
        "|---|---|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for row in result["exports"]:
        q = row["quantization"] or {}
        lines.append(
            f"| {row['variant']} | {q.get('kernel', 'matmulnbits' if q else '—')} | {q.get('block_size', '—')} | "
            f"{q.get('accuracy_level', '—')} | "
            f"{row['perplexity']:.4f} | {row['difference']:+.4f} | {row['relative']:+.2e} | "
            f"±{row['aim']:.2g} | {'yes' if row['within_aim'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=CHECKPOINT)
    parser.add_argument("--text", type=Path, default=None, help="default: the checkpoint's heldout.txt")
    parser.add_argument("--window", type=int, default=None, help="default: the model's positions")
    parser.add_argument("--stride", type=int, default=None, help="default: half the window")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads (light by default)")
    parser.add_argument("--only", nargs="*", default=None, help="variant names, e.g. fp32 int4-block64")
    parser.add_argument("--out-dir", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args()
    args.model = args.model.resolve()
    args.text = (args.text or args.model / "heldout.txt").resolve()
    import torch

    torch.set_num_threads(args.threads)  # the checkpoint's side as light as ONNX Runtime's
    with tempfile.TemporaryDirectory(prefix="perplexity-") as work:
        result = measure(args, Path(work))
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out_dir / f"{stamp}-perplexity"
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(table(result), encoding="utf-8")
    print(out.with_suffix(".md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
