"""Where batched greedy tokens part from the tokens a request gets alone, and how close the choice was there.

The batching engine feeds every row the same logits it would get alone up to ONNX Runtime's rounding, which
depends on how many rows a kernel multiplies at once (and on the thread count). For fp32 that is float rounding;
int4's MatMulNBits takes other code paths for one row than for several, and its logits move by up to a few
hundredths. This runs the load benchmark's requests alone (batch 1) and all together (one batch, the shorter
left-padded), and for every request whose tokens differ reports the first step where they do and the margin there
between the token chosen alone and the one chosen batched (their log-probabilities, alone): a divergence at a
margin below the difference the kernels make is a near-tie, not a fault of the batching.

    python benchmarks/batch_divergence.py benchmarks/out/int4 --threads 2 --out benchmarks/results/STAMP-divergence.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from serve_load import requests  # noqa: E402

from gpt2_onnx_runtimes.batch_requests import ChoiceUpdate, CompletionSpec, Update  # noqa: E402  # after the path
from gpt2_onnx_runtimes.batching import BatchEngine, EngineOptions  # noqa: E402
from gpt2_onnx_runtimes.decoding import MAX_TOP_LOGPROBS  # noqa: E402
from gpt2_onnx_runtimes.generation import GenerationOptions  # noqa: E402
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions  # noqa: E402


def run(engine: BatchEngine, specs: list[CompletionSpec]) -> list[list[ChoiceUpdate]]:
    """``specs`` submitted together; each one's updates."""
    updates: list[list[Update]] = [[] for _ in specs]
    for spec, sink in zip(specs, updates, strict=True):
        engine.submit(spec, sink.append)
    while engine.step():
        pass
    return [[u for u in found if isinstance(u, ChoiceUpdate)] for found in updates]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    runtime = RuntimeOptions(intra_op_threads=args.threads)
    engine = BatchEngine.load(args.export, runtime, EngineOptions(max_rows=args.requests))
    bodies = requests(args.requests, args.max_tokens)
    greedy = GenerationOptions(max_new_tokens=args.max_tokens, ignore_eos=True)
    specs = [
        CompletionSpec(tuple(engine.tokenizer.encode(b["prompt"])), greedy, logprobs=MAX_TOP_LOGPROBS) for b in bodies
    ]
    alone = [run(engine, [spec])[0] for spec in specs]
    together = run(engine, specs)
    rows: list[dict[str, Any]] = []
    for index, (a, b) in enumerate(zip(alone, together, strict=True)):
        first = next((step for step, (x, y) in enumerate(zip(a, b, strict=True)) if x.token_id != y.token_id), None)
        if first is None:
            continue
        top = a[first].top_logprobs
        assert top is not None
        other = dict(top).get(b[first].token_id)  # the batched token's log-probability, alone
        margin = None if other is None else round(a[first].logprob - other, 6)
        rows.append({"request": index, "first_step": first, "margin_alone": margin})
    result = {
        "export": str(args.export),
        "threads": args.threads,
        "requests": len(specs),
        "differing": len(rows),
        "divergences": rows,
        "largest_margin_at_a_divergence": max(
            (r["margin_alone"] for r in rows if r["margin_alone"] is not None), default=None
        ),
        "beyond_the_top_20": sum(r["margin_alone"] is None for r in rows),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
