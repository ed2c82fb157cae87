#!/usr/bin/env bash
# gpt2-onnx serve beside llama.cpp's llama-server on the same requests (benchmarks/serve_peers.py): 16 clients, one
# replica against 16 slots, fp32 against f32 and int4 (block 32, the --block-size 128 option, and that with the
# int8 KV cache of serve --kv-cache int8; block 32 and block 128 with the int8 cache again with serve --prompt-kernel
# dynamic) against q4_0, all
# of one checkpoint (random:gpt2 seed 0, GPT-2-small dimensions). The first time it builds llama.cpp with its server and converts the checkpoint
# (benchmarks/peers_side_by_side.sh with PREPARE_ONLY=1, ~20 minutes on 2 cores); then ~10 minutes. The machine
# should be otherwise idle. Writes benchmarks/results/<stamp>-SUFFIX.{json,md} (SUFFIX: serve-peers unless set).
#
#   benchmarks/serve_peers.sh
#   ROUNDS=6 CLIENTS=8 benchmarks/serve_peers.sh
#   SUFFIX=serve-peers-xeon benchmarks/serve_peers.sh   # a run on another kind of CPU, kept apart in the docs
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
PEERS_CACHE=${PEERS_CACHE:-.ci-cache/peers}
OUT=${OUT:-benchmarks/out/peers}
export PYTHON PEERS_CACHE OUT
PEERS=llama-cpp PREPARE_ONLY=1 benchmarks/peers_side_by_side.sh
mkdir -p benchmarks/results
uptime >&2
stamp=$(date -u +%Y%m%dT%H%M%SZ)
"$PYTHON" benchmarks/serve_peers.py --llama-server "$PEERS_CACHE/llama-build/bin/llama-server" \
  --pair fp32 "$OUT/gpt2-onnx-fp32" "$OUT/gguf/f32.gguf" \
  --pair int4 "$OUT/gpt2-onnx-int4" "$OUT/gguf/q4_0.gguf" \
  --pair "int4, --block-size 128" "$OUT/gpt2-onnx-int4-b128" "$OUT/gguf/q4_0.gguf" \
  --pair "int4, --block-size 128, --kv-cache int8" "$OUT/gpt2-onnx-int4-b128" "$OUT/gguf/q4_0.gguf" kv-cache=int8 \
  --pair "int4, --prompt-kernel dynamic" "$OUT/gpt2-onnx-int4" "$OUT/gguf/q4_0.gguf" prompt-kernel=dynamic \
  --pair "int4, --block-size 128, --kv-cache int8, --prompt-kernel dynamic" "$OUT/gpt2-onnx-int4-b128" \
    "$OUT/gguf/q4_0.gguf" kv-cache=int8 prompt-kernel=dynamic \
  --clients "${CLIENTS:-16}" --requests "${REQUESTS:-48}" --rounds "${ROUNDS:-4}" --max-tokens "${MAX_TOKENS:-32}" \
  --out "benchmarks/results/$stamp-${SUFFIX:-serve-peers}.json"
