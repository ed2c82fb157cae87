#!/usr/bin/env bash
# Create .venv (if missing) and install gpt2-onnx with its test tools. Safe to run again.
#
# PyTorch is pinned to 2.13.0. Where a CPU-only build should be used and PyPI would give a CUDA build, set
#   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
# setuptools' note on every editable install (a 9-line box: "Editable installation ... may take precedence during
# imports") is advice for package authors, not for someone setting up: kept off the terminal by its message alone.
QUIET_EDITABLE_NOTE="ignore:Editable installation"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "torch==2.13.0"
PYTHONWARNINGS="$QUIET_EDITABLE_NOTE${PYTHONWARNINGS:+,$PYTHONWARNINGS}" "$VENV/bin/python" -m pip install --quiet -e ".[dev]"
echo "gpt2-onnx installed in $VENV ($("$VENV/bin/gpt2-onnx" --version))"
