#!/usr/bin/env bash
# Set up (scripts/setup.sh), then the main job: export GPT-2 and generate text with ONNX Runtime.
#
# The demo exports the Hub's openai-community/gpt2 when the Hub (or its local cache) has it, and falls back to
# random weights of GPT-2-small size (random:gpt2, offline) when it cannot, saying which it used: random weights
# print nonsense. Settings (environment):
#   OUT=gpt2-onnx-out              the export folder (an earlier export there is replaced)
#   HUB_MODEL=openai-community/gpt2, FALLBACK_MODEL=random:gpt2
#   SKIP_SETUP=1                   use $VENV (default .venv) as it is
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SKIP_SETUP:-0}" != 1 ]; then
  scripts/setup.sh
fi
VENV=${VENV:-.venv}
OUT=${OUT:-gpt2-onnx-out}
HUB_MODEL=${HUB_MODEL:-openai-community/gpt2}
FALLBACK_MODEL=${FALLBACK_MODEL:-random:gpt2}
GPT2_ONNX="$VENV/bin/gpt2-onnx"

if "$GPT2_ONNX" export --model "$HUB_MODEL" --opset 17 -o "$OUT" --force; then
  echo "demo: exported $HUB_MODEL from the Hugging Face Hub (real GPT-2 weights)"
else
  status=$?
  if [ "$status" -eq 130 ]; then
    exit 130
  fi
  echo "demo: $HUB_MODEL could not be exported (the error above says why; offline, the Hub cannot be reached)," \
    "so the demo exports $FALLBACK_MODEL instead: random weights, which print nonsense"
  "$GPT2_ONNX" export --model "$FALLBACK_MODEL" --weights-seed 0 --opset 17 -o "$OUT" --force
  echo "demo: exported $FALLBACK_MODEL (seed 0); for real text, export a checkpoint:" \
    "gpt2-onnx export --model $HUB_MODEL -o $OUT (needs the Hub or its cache)"
fi
"$GPT2_ONNX" run "$OUT" -p "The meaning of life is" --max-new-tokens 20
