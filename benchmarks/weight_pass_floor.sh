#!/usr/bin/env bash
# fp32 against the bare weight pass (benchmarks/weight_pass_floor.py) in one interleaved run, written as
# benchmarks/results/<stamp>-floor.{json,md}. About 6 minutes on 2 cores after the export; the machine should be
# otherwise idle.
#
#   benchmarks/weight_pass_floor.sh
#   REPEATS=11 benchmarks/weight_pass_floor.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-benchmarks/out}
REPEATS=${REPEATS:-7}
THREADS=${THREADS:-2}
mkdir -p benchmarks/results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
result="benchmarks/results/$stamp-floor"
"$PYTHON" benchmarks/weight_pass_floor.py --export "$OUT/fp32" --repeats "$REPEATS" --threads "$THREADS" \
  --out "$result.json" >"$result.log"
{
  echo "# fp32 against the bare weight pass (benchmarks/weight_pass_floor.py)"
  echo
  echo "\`pass-*\` columns time only the matrix products of a forward (every block matrix, the tied head on the last"
  echo "position), on the same weights, in the same interleaved run: a decode step cannot be faster than its pass."
  echo "Their memory rows are not meaningful (each pass process holds torch, the model and a second copy of the"
  echo "weights). \`gpt2-onnx\` is the default (merged) layout; \`gpt2-onnx+prepack\` the split layout with each"
  echo "session's weights prepacked."
  echo
  "$PYTHON" benchmarks/markdown_table.py "$result.json"
  echo
  "$PYTHON" -c 'import json, sys; sys.path.insert(0, "benchmarks"); from weight_pass_floor import floor_table; print(floor_table(json.load(open(sys.argv[1]))["floor"]))' "$result.json"
} >"$result.md"
rm -f "$result.log"
cat "$result.md"
