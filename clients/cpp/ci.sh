#!/usr/bin/env bash
# Build the gpt2_onnx C++ library, its programs and its tests, and run ctest, as CI does:
#   1. GoogleTest and OpenSSL's headers (Debian's libgtest-dev, libssl-dev) where they are missing; ONNX Runtime, onnxruntime-genai (NuGet only) and
#      nlohmann/json into clients/cpp/third_party/ (get-onnxruntime.sh; skipped when present)
#   2. with a Python that has gpt2-onnx (GPT2_ONNX_CPP_FRESH=yes): python -m gpt2_onnx export --model
#      checkpoints/pydocs-tiny (the trained checkpoint) into clients/cpp/build/export-tiny, and GPT-2-small
#      dimensions at --precision int4 into clients/cpp/build/export-gpt2-int4 (quantized kernels differ between
#      prompt and decode shapes only at realistic sizes); without one: the golden checks read the committed fixtures
#   3. cmake configure + build, then ctest: the GoogleTest suites on the fixtures (unit.*, export.*, text.* where
#      the text layer is built), the programs' checks, the golden checks, and a consumer of the installed package
# Safe to run again; the build is incremental.
#
# Environment:
#   PYTHON            Python with gpt2-onnx installed (default: $VENV/bin/python, VENV defaulting to .venv)
#   GPT2_ONNX_EXPORT  an existing export folder to check instead of exporting checkpoints/pydocs-tiny
#   GPT2_ONNX_EXPORT_QUANTIZED  an existing quantized export instead of exporting random:gpt2 --precision int4
#                     ("none" skips that check)
#   BUILD_DIR         build folder (default clients/cpp/build)
#   ORT_SOURCE, ORT_PACKAGE, ORT_VERSION, GENAI_VERSION, DEBIAN_SUITE, DEBIAN_MIRROR: see get-onnxruntime.sh
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV=${VENV:-.venv}
case "$VENV" in /*) ;; *) VENV=$ROOT/$VENV ;; esac
PYTHON=${PYTHON:-$VENV/bin/python}
BUILD_DIR=${BUILD_DIR:-$HERE/build}

# GPT2_ONNX_CPP_FRESH=no (or no Python with gpt2-onnx): no export is made; the tests read the committed fixtures
# (fixtures/pydocs-micro-fp32 and -int4) and ONNX Runtime comes from the NuGet package (ORT_SOURCE=nuget).
FRESH=${GPT2_ONNX_CPP_FRESH:-auto}
if [ "$FRESH" = auto ]; then
  if { [ -x "$PYTHON" ] || command -v "$PYTHON" >/dev/null; } && "$PYTHON" -c "import gpt2_onnx" 2>/dev/null; then
    FRESH=yes
  else
    FRESH=no
  fi
fi
if [ "$FRESH" = no ]; then
  echo "ci.sh: no fresh export here; the tests read the committed fixtures, ONNX Runtime from NuGet"
  export ORT_SOURCE=${ORT_SOURCE:-nuget}
  GPT2_ONNX_EXPORT=${GPT2_ONNX_EXPORT:-$ROOT/fixtures/pydocs-micro-fp32}
  GPT2_ONNX_EXPORT_QUANTIZED=${GPT2_ONNX_EXPORT_QUANTIZED:-$ROOT/fixtures/pydocs-micro-int4}
fi

# Debian's libgtest-dev (GoogleTest, its CMake package GTest) and libssl-dev (OpenSSL's libcrypto, the file check's
# SHA-256), installed here where they are missing and we may.
MISSING=()
HAVE_GTEST=no
for config in /usr/lib/*/cmake/GTest/GTestConfig.cmake /usr/lib/cmake/GTest/GTestConfig.cmake; do
  [ -f "$config" ] && HAVE_GTEST=yes
done
[ "$HAVE_GTEST" = yes ] || MISSING+=(libgtest-dev)
[ -f /usr/include/openssl/evp.h ] || MISSING+=(libssl-dev)
if [ ${#MISSING[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "ci.sh: installing ${MISSING[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${MISSING[@]}" >/dev/null
  else
    echo "ci.sh: missing ${MISSING[*]}: apt-get install ${MISSING[*]} (as root)" >&2
    exit 1
  fi
fi

PYTHON=$PYTHON "$HERE/get-onnxruntime.sh"

if [ -z "${GPT2_ONNX_EXPORT:-}" ]; then
  GPT2_ONNX_EXPORT=$BUILD_DIR/export-tiny
  mkdir -p "$BUILD_DIR"
  (cd "$ROOT" && "$PYTHON" -m gpt2_onnx export --model checkpoints/pydocs-tiny --output "$GPT2_ONNX_EXPORT" --force)
fi
if [ -z "${GPT2_ONNX_EXPORT_QUANTIZED:-}" ]; then
  GPT2_ONNX_EXPORT_QUANTIZED=$BUILD_DIR/export-gpt2-int4
  mkdir -p "$BUILD_DIR"
  (cd "$ROOT" && "$PYTHON" -m gpt2_onnx export --model random:gpt2 --precision int4 \
    --output "$GPT2_ONNX_EXPORT_QUANTIZED" --force)
elif [ "$GPT2_ONNX_EXPORT_QUANTIZED" = none ]; then
  GPT2_ONNX_EXPORT_QUANTIZED=
fi

GENERATOR=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  GENERATOR=(-G Ninja)  # only when configuring afresh: a build folder keeps its generator
fi
cmake -S "$HERE" -B "$BUILD_DIR" "${GENERATOR[@]}" -DGPT2_ONNX_EXPORT="$GPT2_ONNX_EXPORT" \
  -DGPT2_ONNX_EXPORT_QUANTIZED="$GPT2_ONNX_EXPORT_QUANTIZED"
cmake --build "$BUILD_DIR" --parallel "$(nproc 2>/dev/null || echo 2)"
cd "$BUILD_DIR"
ctest --output-on-failure
TEXT_REASON=$(cat "$BUILD_DIR/text_layer.txt")
if [ -n "$TEXT_REASON" ]; then
  echo "ci.sh: text tests skipped: the library was built without the text layer ($TEXT_REASON)"
fi
