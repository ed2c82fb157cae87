#!/usr/bin/env bash
# gpt2-onnx's CPU modes (merged and split session layouts, spinning, --optimize, int8 and int4 kernels) against PyTorch eager
# in one interleaved run: benchmarks/runtime_modes.py. GPT-2-small dimensions (random:gpt2, seed 0). Writes
# benchmarks/results/<stamp>-modes.{json,md}. About 10 minutes on 2 cores; the machine should be otherwise idle.
#
#   benchmarks/runtime_modes.sh
#   REPEATS=7 MODES="fp32 merged,fp32 split-shared" benchmarks/runtime_modes.sh
#   SUFFIX=kernel-modes NEW_TOKENS=16 BATCH_SIZE=1 MODES="int8 merged,int8-dynamic merged,int4 merged,int4-b128 merged" benchmarks/runtime_modes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-benchmarks/out}
REPEATS=${REPEATS:-5}
THREADS=${THREADS:-2}
SUFFIX=${SUFFIX:-modes}  # results/<stamp>-SUFFIX.{json,md}: another suffix keeps a subset of modes apart
mkdir -p "$OUT" benchmarks/results

declare -A VARIANTS=(
  [fp32]=""
  [fp32-optimize]="--optimize"
  [int8]="--precision int8"
  [int4]="--precision int4"
  [int4-b128]="--precision int4 --block-size 128"
  [int4-b256]="--precision int4 --block-size 256"
  [int8-dynamic]="--precision int8 --matmul-kernel dynamic"
)
for name in "${!VARIANTS[@]}"; do
  if [ "$name" != fp32 ] && [ -n "${MODES:-}" ] && ! grep -qE "(^|,)$name " <<<"$MODES"; then
    continue  # only the exports the modes ask for (and fp32, whose manifest the runner reads)
  fi
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
result="benchmarks/results/$stamp-$SUFFIX"
"$PYTHON" benchmarks/runtime_modes.py --exports "$OUT" --repeats "$REPEATS" --threads "$THREADS" "${modes[@]}" \
  --new-tokens "${NEW_TOKENS:-64}" --batch-size "${BATCH_SIZE:-4}" --out "$result.json"
"$PYTHON" benchmarks/markdown_table.py "$result.json" | tee "$result.md"
