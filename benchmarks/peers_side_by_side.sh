#!/usr/bin/env bash
# gpt2-onnx beside OpenVINO GenAI, llama.cpp and CTranslate2 (and PyTorch eager, the baseline) on the same weights,
# in one interleaved bench run (issue 14). Not part of CI. The first time it builds three venvs and llama.cpp
# (benchmarks/peers_install.sh, ~15 minutes on 2 cores) and converts the checkpoint with each tool (~5 minutes);
# then it checks tokens and measures (~10 minutes with 3 rounds). Idempotent: each step is skipped when its output
# is there.
#
#   benchmarks/peers_side_by_side.sh                  # writes benchmarks/results/<UTC stamp>-peers.{json,md}
#   REPEATS=5 PEERS="openvino llama-cpp" benchmarks/peers_side_by_side.sh
#   PEERS=llama-cpp PREPARE_ONLY=1 benchmarks/peers_side_by_side.sh   # the files only, no run
#   PEERS=openvino-ep OURS_DEFAULTS=0 SUFFIX=peers-ep benchmarks/peers_side_by_side.sh \
#     --ours "gpt2-onnx fp32 (default: one merged session)" benchmarks/out/peers/gpt2-onnx-fp32
#   OURS_DEFAULTS=0 benchmarks/peers_side_by_side.sh \
#     --ours "gpt2-onnx fp32, split sessions" benchmarks/out/peers/gpt2-onnx-fp32 layout=split
#   DECODE_CONTEXTS=512,1000 benchmarks/peers_side_by_side.sh  # + decode ms/token after 512 and 1,000 tokens (issue 25),
#                                   # and after 128 in runs as long, which each growth divides by
#
# Arguments go to benchmarks/peers_side_by_side.py: more gpt2-onnx systems as --ours LABEL FOLDER [FIELD=VALUE ...]
# (any SystemSpec field: the runtime options of the bench's ONNX path), more peers as --peer.
# Steps: (1) the peers' venvs; (2) random:gpt2 seed 0 saved as a safetensors checkpoint; (3) converted by
# `gpt2-onnx export` (fp32, int8, int4, int4 with --block-size 128 and int8 with --matmul-kernel dynamic),
# `optimum-cli export openvino` (fp32, int8, int4), llama.cpp's
# convert_hf_to_gguf.py + llama-quantize (f32, q8_0, q4_0) and ct2-transformers-converter (float32, int8, and
# int16 where the CPU computes it); (4) the token check, the run, the table.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}                   # the main venv: gpt2-onnx, transformers 5, torch
PEERS_CACHE=${PEERS_CACHE:-.ci-cache/peers}
PEERS=${PEERS:-openvino llama-cpp ctranslate2 openvino-ep}
OUT=${OUT:-benchmarks/out/peers}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
OURS_DEFAULTS=${OURS_DEFAULTS:-1}                    # 0: only the --ours given as arguments
SUFFIX=${SUFFIX:-peers}                              # results/<stamp>-SUFFIX.{json,md}
DECODE_CONTEXTS=${DECODE_CONTEXTS:-}                 # e.g. 512,1000: decode runs after longer prompts too
CONTEXT_NEW_TOKENS=${CONTEXT_NEW_TOKENS:-}           # tokens in each (unset: the default, 16; 1,000 + 24 fills 1,024)
# KV_INT8=0: leave out our exports with the int8 KV cache (--kv-cache int8, the lossy option)
# PROMPT_DYNAMIC=0: leave out our int8/int4 exports with --prompt-kernel dynamic (more memory, prompts through QGEMM)
export PEERS_CACHE PYTHON

# (1) The venvs: "NAME PYTHON" lines.
declare -A PY=()
# shellcheck disable=SC2086  # PEERS is a list of words
venvs=$(benchmarks/peers_install.sh $PEERS)  # a failed build stops the run here
while read -r name python; do PY[$name]=$python; done <<<"$venvs"

# (2) One checkpoint for all.
mkdir -p "$OUT" benchmarks/results
CKPT=$OUT/checkpoint
if [ ! -f "$CKPT/model.safetensors" ]; then
  "$PYTHON" benchmarks/save_checkpoint.py "$CKPT" --model random:gpt2 --seed 0
fi

# done_or_partial DIR: true when DIR is complete; otherwise clears DIR.partial for a fresh attempt.
done_or_partial() {
  [ -e "$1" ] && return 0
  rm -rf "$1.partial"
  return 1
}

# (3) The exports; each is written to NAME.partial and renamed when complete.
systems=()
# int4-b128 and int8-dynamic: the explicit options --block-size 128 and --matmul-kernel dynamic
for variant in fp32 int8 int4 int4-b128 int8-dynamic; do
  dir=$OUT/gpt2-onnx-$variant
  if [ ! -f "$dir/manifest.json" ]; then
    precision=${variant%%-*}
    case $variant in
      int4-b128) extra="--block-size 128" ;;
      int8-dynamic) extra="--matmul-kernel dynamic" ;;
      *) extra="" ;;
    esac
    # shellcheck disable=SC2086  # the option is two words on purpose
    "$PYTHON" -m gpt2_onnx export --model "$CKPT" -o "$dir" --precision "$precision" --force $extra
  fi
done
if [ "$OURS_DEFAULTS" = 1 ]; then
  systems+=(--ours "gpt2-onnx fp32 (default: one merged session)" "$OUT/gpt2-onnx-fp32")
  systems+=(--ours "gpt2-onnx fp32, split sessions as shipped" "$OUT/gpt2-onnx-fp32" layout=split)
  systems+=(--ours "gpt2-onnx int8" "$OUT/gpt2-onnx-int8")
  systems+=(--ours "gpt2-onnx int4" "$OUT/gpt2-onnx-int4")
  systems+=(--ours "gpt2-onnx int4, --block-size 128" "$OUT/gpt2-onnx-int4-b128")
  systems+=(--ours "gpt2-onnx int8, --matmul-kernel dynamic" "$OUT/gpt2-onnx-int8-dynamic")
  if [ "${KV_INT8:-1}" = 1 ]; then  # the lossy option of the KV cache (run/serve --kv-cache int8): 0 leaves it out
    systems+=(--ours "gpt2-onnx int8, --kv-cache int8" "$OUT/gpt2-onnx-int8" layout=merged kv_cache=int8)
    systems+=(--ours "gpt2-onnx int4, --kv-cache int8" "$OUT/gpt2-onnx-int4" layout=merged kv_cache=int8)
    systems+=(--ours "gpt2-onnx int4, --block-size 128, --kv-cache int8" "$OUT/gpt2-onnx-int4-b128" layout=merged kv_cache=int8)
  fi
  if [ "${PROMPT_DYNAMIC:-1}" = 1 ]; then  # the runtime's prompt kernel (run/serve --prompt-kernel dynamic)
    systems+=(--ours "gpt2-onnx int8, --prompt-kernel dynamic" "$OUT/gpt2-onnx-int8" layout=merged prompt_kernel=dynamic)
    systems+=(--ours "gpt2-onnx int4, --prompt-kernel dynamic" "$OUT/gpt2-onnx-int4" layout=merged prompt_kernel=dynamic)
    systems+=(--ours "gpt2-onnx int4, --block-size 128, --kv-cache int8, --prompt-kernel dynamic" "$OUT/gpt2-onnx-int4-b128" layout=merged kv_cache=int8 prompt_kernel=dynamic)
  fi
fi

if [ -n "${PY[openvino]:-}" ]; then
  ov=${PY[openvino]}
  for format in fp32 int8 int4; do
    dir=$OUT/openvino-$format
    if ! done_or_partial "$dir"; then
      "$(dirname "$ov")/optimum-cli" export openvino --model "$CKPT" --task text-generation-with-past \
        --weight-format "$format" "$dir.partial"
      mv "$dir.partial" "$dir"
    fi
  done
  systems+=(--peer "OpenVINO fp32, f32 compute forced" benchmarks.openvino_system:forced_f32 "$ov" "$OUT/openvino-fp32")
  systems+=(--peer "OpenVINO fp32, CPU defaults" benchmarks.openvino_system:cpu_defaults "$ov" "$OUT/openvino-fp32")
  systems+=(--peer "OpenVINO int8 weights, f32 compute" benchmarks.openvino_system:forced_f32 "$ov" "$OUT/openvino-int8")
  systems+=(--peer "OpenVINO int4 weights, CPU defaults" benchmarks.openvino_system:cpu_defaults "$ov" "$OUT/openvino-int4")
fi

if [ -n "${PY[openvino-ep]:-}" ]; then  # ONNX Runtime's OpenVINO execution provider on our own fp32 export
  ep=${PY[openvino-ep]}
  systems+=(--peer "ONNX Runtime OpenVINO EP, fp32 export, FP32" benchmarks.openvino_ep_system:fp32_precision "$ep" "$OUT/gpt2-onnx-fp32")
  systems+=(--peer "ONNX Runtime OpenVINO EP, fp32 export, plugin defaults" benchmarks.openvino_ep_system:cpu_defaults "$ep" "$OUT/gpt2-onnx-fp32")
fi

if [ -n "${PY[llama-cpp]:-}" ]; then
  llama=${PY[llama-cpp]}
  version=$(sed -n 's/^llama-cpp-python==//p' benchmarks/llama-cpp-requirements.txt)
  vendored=$PEERS_CACHE/llama-src/llama_cpp_python-$version/vendor/llama.cpp
  gguf=$OUT/gguf
  mkdir -p "$gguf"
  if ! done_or_partial "$gguf/f32.gguf"; then
    # The converter reads the context length from n_ctx, which transformers 5 no longer writes: a copy of the
    # checkpoint's config with it (the other files linked).
    hf=$gguf/checkpoint-n_ctx
    rm -rf "$hf" && mkdir -p "$hf"
    for file in "$CKPT"/*; do ln -s "$(realpath "$file")" "$hf/$(basename "$file")"; done
    rm "$hf/config.json"
    "$llama" -c 'import json, sys; c = json.load(open(sys.argv[1])); c.setdefault("n_ctx", c["n_positions"]); json.dump(c, open(sys.argv[2], "w"), indent=2)' \
      "$CKPT/config.json" "$hf/config.json"
    "$llama" "$vendored/convert_hf_to_gguf.py" "$hf" --outtype f32 --outfile "$gguf/f32.gguf.partial"
    mv "$gguf/f32.gguf.partial" "$gguf/f32.gguf"
  fi
  for type in q8_0 q4_0; do
    if ! done_or_partial "$gguf/$type.gguf"; then
      "$PEERS_CACHE/llama-build/bin/llama-quantize" "$gguf/f32.gguf" "$gguf/$type.gguf.partial" "$type" "$THREADS"
      mv "$gguf/$type.gguf.partial" "$gguf/$type.gguf"
    fi
  done
  systems+=(--peer "llama.cpp f32" benchmarks.llama_cpp_system:LlamaCppSystem "$llama" "$gguf/f32.gguf")
  systems+=(--peer "llama.cpp q8_0" benchmarks.llama_cpp_system:LlamaCppSystem "$llama" "$gguf/q8_0.gguf")
  systems+=(--peer "llama.cpp q4_0" benchmarks.llama_cpp_system:LlamaCppSystem "$llama" "$gguf/q4_0.gguf")
fi

if [ -n "${PY[ctranslate2]:-}" ]; then
  ct2=${PY[ctranslate2]}
  # int16 where this CPU's build computes it (Intel MKL); elsewhere CTranslate2 runs an int16 model as int8.
  quantizations="float32 int8"
  if "$ct2" -c 'import ctranslate2, sys; sys.exit("int16" not in ctranslate2.get_supported_compute_types("cpu"))'; then
    quantizations="float32 int16 int8"
  fi
  for quantization in $quantizations; do
    dir=$OUT/ctranslate2-$quantization
    if ! done_or_partial "$dir"; then
      "$(dirname "$ct2")/ct2-transformers-converter" --model "$CKPT" --output_dir "$dir.partial" \
        --quantization "$quantization"
      mv "$dir.partial" "$dir"
    fi
    systems+=(--peer "CTranslate2 $quantization" benchmarks.ctranslate2_system:Ctranslate2System "$ct2" "$dir")
  done
fi

# PREPARE_ONLY=1: the venvs, the checkpoint and the converted files only (benchmarks/serve_peers.sh uses them).
if [ "${PREPARE_ONLY:-0}" = 1 ]; then
  exit 0
fi

# (4) The run.
contexts=()
if [ -n "$DECODE_CONTEXTS" ]; then
  contexts=(--decode-contexts "$DECODE_CONTEXTS")
  if [ -n "$CONTEXT_NEW_TOKENS" ]; then
    contexts+=(--context-new-tokens "$CONTEXT_NEW_TOKENS")
  fi
fi
uptime >&2
stamp=$(date -u +%Y%m%dT%H%M%SZ)
result="benchmarks/results/$stamp-$SUFFIX"
"$PYTHON" benchmarks/peers_side_by_side.py --checkpoint "$CKPT" "${systems[@]}" "$@" \
  --repeats "$REPEATS" --threads "$THREADS" "${contexts[@]}" --out "$result.json"
"$PYTHON" benchmarks/peers_table.py "$result.json" | tee "$result.md"
