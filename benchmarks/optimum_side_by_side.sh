#!/usr/bin/env bash
# gpt2-onnx against Optimum-ONNX (ORTModelForCausalLM) and PyTorch eager on the same weights, in one interleaved
# bench run (issue 5: "ahead of Optimum-ONNX on decode ms/token and RSS"). Not part of CI: it installs a second
# venv (torch, transformers 4.57, optimum-onnx) and takes ~10 minutes on 2 cores. Idempotent: each step is skipped
# when its output is there (the venv is rebuilt when benchmarks/optimum-requirements.txt changes).
#
#   benchmarks/optimum_side_by_side.sh                    # writes benchmarks/results/<stamp>-optimum.{json,md}
#   PYTHON=/path/to/main/venv/bin/python REPEATS=11 benchmarks/optimum_side_by_side.sh
#
# Steps: (1) the Optimum venv in $OPTIMUM_VENV (git-ignored .ci-cache/); (2) random:gpt2 seed 0 saved as a
# safetensors checkpoint; (3) exported by `gpt2-onnx export` and by Optimum (tie deduplicated, as with accelerate,
# and without the dedup, as Optimum does where accelerate is absent); (4) greedy tokens compared, then the run.
# torch is pinned: a bare `pip install torch` on Linux pulls the multi-GB CUDA build. Where no CPU wheel is found
# by default, point pip at PyTorch's CPU index (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}                   # the main venv: gpt2-onnx, transformers 5, torch
OPTIMUM_VENV=${OPTIMUM_VENV:-.ci-cache/optimum-venv}
OPTIMUM_TORCH=${OPTIMUM_TORCH:-torch==2.13.0}
OUT=${OUT:-benchmarks/out/optimum}
REPEATS=${REPEATS:-8}
THREADS=${THREADS:-2}
UNTIED=${UNTIED:-1}                                   # 0: leave out the tie-duplicated Optimum export
PREPACKED=${PREPACKED:-1}                             # 0: leave out ours with share_weights=False
REQUIREMENTS=benchmarks/optimum-requirements.txt

# (1) The Optimum venv, stamped with what it was built from; an interrupted build has no stamp and is rebuilt.
stamp="$OPTIMUM_VENV/gpt2-onnx-stamp.txt"
wanted="$("$PYTHON" -c 'import platform; print(platform.python_version())') $OPTIMUM_TORCH $(cat "$REQUIREMENTS")"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  echo "building $OPTIMUM_VENV" >&2
  rm -rf "$OPTIMUM_VENV"
  base=$("$PYTHON" -c 'import sys; print(sys._base_executable)')  # the interpreter the main venv was made from
  "$base" -m venv "$OPTIMUM_VENV"
  "$OPTIMUM_VENV/bin/python" -m pip install -q "$OPTIMUM_TORCH"
  "$OPTIMUM_VENV/bin/python" -m pip install -q -r "$REQUIREMENTS"
  printf '%s' "$wanted" >"$stamp"
fi
OPTIMUM_PYTHON="$OPTIMUM_VENV/bin/python"

# (2) One checkpoint for all.
mkdir -p "$OUT" benchmarks/results
if [ ! -f "$OUT/checkpoint/model.safetensors" ]; then
  "$PYTHON" benchmarks/save_checkpoint.py "$OUT/checkpoint" --model random:gpt2 --seed 0
fi

# (3) The exports.
if [ ! -f "$OUT/gpt2-onnx/manifest.json" ]; then
  "$PYTHON" -m gpt2_onnx export --model "$OUT/checkpoint" -o "$OUT/gpt2-onnx" --force
fi
if [ ! -f "$OUT/optimum/model.onnx" ]; then
  "$OPTIMUM_PYTHON" benchmarks/optimum_export.py "$OUT/checkpoint" "$OUT/optimum"
fi
untied=()
if [ "$UNTIED" = 1 ]; then
  if [ ! -f "$OUT/optimum-untied/model.onnx" ]; then
    "$OPTIMUM_PYTHON" benchmarks/optimum_export.py "$OUT/checkpoint" "$OUT/optimum-untied" --no-dedup
  fi
  untied=(--optimum-untied "$OUT/optimum-untied")
fi

# (4) The run.
prepacked=()
if [ "$PREPACKED" = 1 ]; then
  prepacked=(--prepacked)
fi
uptime >&2
stamp=$(date -u +%Y%m%dT%H%M%SZ)
result="benchmarks/results/$stamp-optimum"
"$PYTHON" benchmarks/optimum_side_by_side.py --checkpoint "$OUT/checkpoint" --ours "$OUT/gpt2-onnx" \
  --optimum "$OUT/optimum" "${untied[@]}" "${prepacked[@]}" --optimum-python "$OPTIMUM_PYTHON" \
  --repeats "$REPEATS" --threads "$THREADS" --out "$result.json"
"$PYTHON" benchmarks/optimum_table.py "$result.json" | tee "$result.md"
