#!/usr/bin/env bash
# The README's performance table: GPT-2-small dimensions (random:gpt2, seed 0, no download), every variant this
# tool exports, against PyTorch eager in one interleaved run. Writes benchmarks/results/<date>.{json,md}.
#
#   benchmarks/perf_table.sh                 # exports (once) into benchmarks/out, then measures
#   REPEATS=11 THREADS=2 benchmarks/perf_table.sh
#
# The machine should be otherwise idle: the figures are ratios measured side by side, but two threads on two busy
# cores still distort them (torch's OpenMP suffers most). The load average is recorded with the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-benchmarks/out}
REPEATS=${REPEATS:-7}
THREADS=${THREADS:-2}
mkdir -p "$OUT" benchmarks/results

# name → extra export options; every variant comes from the same seeded checkpoint.
declare -A VARIANTS=(
  [fp32]=""
  [fp32-optimize]="--optimize"
  [int8]="--precision int8"
  [int4]="--precision int4"
  [int4-b128]="--precision int4 --block-size 128"
)
ORDER=(fp32 fp32-optimize int8 int4 int4-b128)

folders=()
for name in "${ORDER[@]}"; do
  if [ ! -f "$OUT/$name/manifest.json" ]; then
    # shellcheck disable=SC2086  # the options are words on purpose
    "$PYTHON" -m gpt2_onnx export --model random:gpt2 --weights-seed 0 -o "$OUT/$name" --force ${VARIANTS[$name]}
  fi
  folders+=("$OUT/$name")
done

stamp=$(date -u +%Y%m%dT%H%M%SZ)
# --unshared adds fp32 as ONNX Runtime loads it itself (prepacked weights per session): the memory/speed trade.
"$PYTHON" -m gpt2_onnx bench "${folders[@]}" --unshared --threads "$THREADS" --repeats "$REPEATS" --json \
  >"benchmarks/results/$stamp.json"
"$PYTHON" benchmarks/markdown_table.py "benchmarks/results/$stamp.json" | tee "benchmarks/results/$stamp.md"
