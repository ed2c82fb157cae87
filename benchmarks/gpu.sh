#!/usr/bin/env bash
# Issue 5's GPU check, at most ~5 minutes on one GPU: CUDA fp32 and fp16 decode ms/token (IO binding, the KV cache
# on the device) against PyTorch eager on CUDA, GPT-2-small dimensions (random:gpt2, seed 0), one interleaved bench
# run; before it, `verify --provider cuda` on both exports (parity on the GPU, fp16 by its own tolerances).
#
#   benchmarks/gpu.sh                                   # writes benchmarks/results/<stamp>-cuda.{json,md}
#   PYTHON=python3 OUT=/tmp/gpu RESULTS=$OUT benchmarks/gpu.sh
#
# Needs a python with gpt2-onnx's dependencies, onnxruntime-gpu whose CUDA provider loads (pip install
# 'gpt2-onnx[cuda]': CUDA 13, cuDNN 9) and torch built with CUDA. When either cannot reach a GPU it stops at once with
# one line, before exporting anything. Never run yet: no session building it was lent a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-benchmarks/out/gpu}
RESULTS=${RESULTS:-benchmarks/results}
REPEATS=${REPEATS:-5}
STEPS=${STEPS:-32}

# The GPU first: both sides must see it, or nothing is measured.
"$PYTHON" - <<'EOF'
import sys

import torch

from gpt2_onnx_core.errors import Gpt2OnnxError
from gpt2_onnx_runtimes.providers import ensure_provider_loadable

if not torch.cuda.is_available():
    sys.exit(f"gpu.sh: torch {torch.__version__} sees no CUDA device; the eager baseline needs torch built with CUDA")
try:
    ensure_provider_loadable("cuda")  # names the missing library
except Gpt2OnnxError as exc:
    sys.exit(f"gpu.sh: {exc}")
print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}", file=sys.stderr)
EOF

mkdir -p "$OUT" "$RESULTS"
for precision in fp32 fp16; do
  if [ ! -f "$OUT/$precision/manifest.json" ]; then
    "$PYTHON" -m gpt2_onnx export --model random:gpt2 --weights-seed 0 --precision "$precision" -o "$OUT/$precision" --force
  fi
  "$PYTHON" -m gpt2_onnx verify "$OUT/$precision" --provider cuda --steps "$STEPS" --report "$RESULTS/verify-cuda-$precision.json"
done

stamp=$(date -u +%Y%m%dT%H%M%SZ)
"$PYTHON" -m gpt2_onnx bench "$OUT/fp32" "$OUT/fp16" --provider cuda --prompt-lengths 8,128 --repeats "$REPEATS" \
  --json >"$RESULTS/$stamp-cuda.json"
"$PYTHON" benchmarks/markdown_table.py "$RESULTS/$stamp-cuda.json" | tee "$RESULTS/$stamp-cuda.md"
