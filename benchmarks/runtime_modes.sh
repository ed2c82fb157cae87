#!/usr/bin/env bash
# gpt2-onnx's CPU modes (merged and split session layouts, spinning, --optimize, int8, int4) against PyTorch eager
# in one interleaved run: benchmarks/runtime_modes.py. GPT-2-small dimensions (random:gpt2, seed 0). Writes
# benchmarks/results/<stamp>-modes.{json,md}. About 10 minutes on 2 cores; the machine should be otherwise idle.
#
#   benchmarks/runtime_modes.sh
#   REPEATS=7 MODES="fp32 merged,fp32 split-shared" benchmarks/runtime_modes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-benchmarks/out}
REPEATS=${REPEATS:-5}
THREADS=${THREADS:-2}
mkdir -p "$OUT" benchmarks/results

declare -A VARIANTS=(
  [fp32]=""
  [fp32-optimize]="--optimize"
  [int8]="--precision int8"
  [int4]="--precision int4"
  [int4-b128]="--precision int4 --block-size 128"
)
for name in fp32 fp32-optimize int8 int4 int4-b128; do
  if [ ! -f "$OUT/$name/manifest.json" ]; then
    # shellcheck disable=SC2086  # the options are words on purpose
    "$PYTHON" -m gpt2_onnx export --model random:gpt2 --weights-seed 0 -o "$OUT/$name" --force ${VARIANTS[$name]}
  fi
done

modes=()
if [ -n "${MODES:-}" ]; then
  modes=(--modes "$MODES")
fi
uptime >&2
stamp=$(date -u +%Y%m%dT%H%M%SZ)
result="benchmarks/results/$stamp-modes"
"$PYTHON" benchmarks/runtime_modes.py --exports "$OUT" --repeats "$REPEATS" --threads "$THREADS" "${modes[@]}" \
  --out "$result.json"
"$PYTHON" benchmarks/markdown_table.py "$result.json" | tee "$result.md"
