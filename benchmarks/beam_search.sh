#!/usr/bin/env bash
# Beam search (4 beams) of gpt2-onnx's runtime against transformers' generate in one interleaved run:
# benchmarks/beam_search.py. GPT-2-small dimensions (random:gpt2, seed 0). Writes
# benchmarks/results/<stamp>-beam.{json,md}. About 2 minutes on 2 cores after the export (1 minute, once); the
# machine should be otherwise idle.
#
#   benchmarks/beam_search.sh
#   ROUNDS=7 NEW_TOKENS=64 benchmarks/beam_search.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-benchmarks/out}
ROUNDS=${ROUNDS:-7}
NEW_TOKENS=${NEW_TOKENS:-32}
THREADS=${THREADS:-2}
mkdir -p "$OUT" benchmarks/results
if [ ! -f "$OUT/fp32/manifest.json" ]; then
  "$PYTHON" -m gpt2_onnx export --model random:gpt2 --weights-seed 0 -o "$OUT/fp32" --force
fi
uptime >&2
stamp=$(date -u +%Y%m%dT%H%M%SZ)
"$PYTHON" benchmarks/beam_search.py --export "$OUT/fp32" --rounds "$ROUNDS" --new-tokens "$NEW_TOKENS" \
  --threads "$THREADS" --out "benchmarks/results/$stamp-beam.json"
