#!/usr/bin/env bash
# Set up (scripts/setup.sh), then the main job offline: export GPT-2-small-sized random weights, verify the
# export against the source model, and generate text with ONNX Runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
VENV=${VENV:-.venv}
OUT=${OUT:-gpt2-onnx-out}
"$VENV/bin/gpt2-onnx" export --model random:gpt2 --seed 0 --opset 17 -o "$OUT" --force
"$VENV/bin/gpt2-onnx" run "$OUT" -p "The meaning of life is" --max-new-tokens 20
