#!/usr/bin/env bash
# The ONNX Runtime matrix (issue 8): tiny exports made with the main venv, each checked against its golden tokens
# on every pinned onnxruntime release in a venv of its own, without torch. The venvs are cached in
# $GPT2_ONNX_ORT_VENVS (default .ci-cache/ort-matrix/venvs) and rebuilt only when their pins or Python change.
# Prints one line per release and export; exits non-zero on any failure.
#   scripts/ort-matrix.sh           # CI: the required releases plus each variant's minimum and the one below it
#   scripts/ort-matrix.sh --all     # every release in scripts/ort_matrix.py's RUNTIMES, with measured minima
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  scripts/setup.sh
fi
exec "$VENV/bin/python" scripts/ort_matrix.py "$@"
