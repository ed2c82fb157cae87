#!/usr/bin/env bash
# gpt2-onnx serve under load (1, 4, 16 clients; 1 and 2 replicas) beside the same requests one at a time through
# gpt2-onnx run: benchmarks/serve_load.py. GPT-2-small dimensions (random:gpt2, seed 0), fp32 and int4. Writes
# benchmarks/results/<stamp>-serve.{json,md}. About 12 minutes on 2 cores; the machine should be otherwise idle.
#
#   benchmarks/serve_load.sh
#   REQUESTS=8 ROUNDS=5 MAX_TOKENS=64 benchmarks/serve_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-benchmarks/out}
mkdir -p "$OUT" benchmarks/results
for name in fp32 int4; do
  if [ ! -f "$OUT/$name/manifest.json" ]; then
    precision=$([ "$name" = int4 ] && echo "--precision int4" || true)
    # shellcheck disable=SC2086  # the option is two words on purpose
    "$PYTHON" -m gpt2_onnx export --model random:gpt2 --weights-seed 0 -o "$OUT/$name" --force $precision
  fi
done
uptime >&2
stamp=$(date -u +%Y%m%dT%H%M%SZ)
"$PYTHON" benchmarks/serve_load.py --exports "$OUT" --requests "${REQUESTS:-16}" --rounds "${ROUNDS:-5}" \
  --max-tokens "${MAX_TOKENS:-32}" --out "benchmarks/results/$stamp-serve.json"
