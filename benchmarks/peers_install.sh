#!/usr/bin/env bash
# The peers' environments for benchmarks/peers_side_by_side.sh: one venv each for OpenVINO, llama.cpp,
# CTranslate2 and ONNX Runtime's OpenVINO execution provider, from PyPI only, pinned by
# benchmarks/{openvino,llama-cpp,ctranslate2,openvino-ep}-requirements.txt.
# Idempotent: a venv is rebuilt only when what it was built from changed (a stamp file in it records the Python
# version, the requirements and, for llama.cpp, the build flags); an interrupted build has no stamp.
#
#   benchmarks/peers_install.sh                           # all four
#   benchmarks/peers_install.sh openvino ctranslate2      # some
#   PEERS_CACHE=/elsewhere benchmarks/peers_install.sh    # default .ci-cache/peers (git-ignored)
#
# Prints "NAME PYTHON" per peer on stdout when done (progress goes to stderr).
# llama.cpp: the library is built with CMake from the llama.cpp vendored in the llama-cpp-python sdist (one build:
# libllama with its ggml libraries, llama-quantize for the GGUF variants, and llama-server for
# benchmarks/serve_peers.py); the binding is installed from the
# same sdist without its own C++ build and finds the library in its package's lib/ folder, where it normally is.
# -march=native, AMX kernels off (they crashed on an Intel machine with AMX): -DGGML_AMX_*=OFF and -mno-amx-*.
# Seen again on 2026-12-04 (Intel Xeon, 2 cores, the kernel granting AMX: arch_prctl(ARCH_REQ_XCOMP_PERM) = 0):
# llama-bench built with them dies of SIGILL at tileloadd in ggml_backend_amx_mul_mat, with 1 thread or 2.
# torch is installed first everywhere and pinned: a bare `pip install torch` on Linux pulls the multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}                    # the venvs are made from this one's base interpreter
PEERS_CACHE=${PEERS_CACHE:-.ci-cache/peers}
TORCH=${TORCH:-torch==2.13.0}
JOBS=${JOBS:-2}
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
LLAMA_CMAKE=(
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
  "-DCMAKE_C_FLAGS=$NO_AMX" "-DCMAKE_CXX_FLAGS=$NO_AMX"
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=\$ORIGIN"  # libraries and tools find each other
)

log() { echo "$*" >&2; }

# new_venv DIR: a fresh venv from the main venv's base interpreter, torch first.
new_venv() {
  local base
  base=$("$PYTHON" -c 'import sys; print(sys._base_executable)')
  rm -rf "$1"
  "$base" -m venv "$1"
  "$1/bin/python" -m pip install -q --upgrade pip
  "$1/bin/python" -m pip install -q "$TORCH"
}

# wanted REQUIREMENTS [EXTRA...]: what a venv is built from, as its stamp records it.
wanted() {
  echo "$("$PYTHON" -c 'import platform; print(platform.python_version())') $TORCH ${*:2}"
  cat "$1"
}

# fresh VENV WANTED: true when VENV's stamp says it was built from WANTED.
fresh() {
  [ -f "$1/gpt2-onnx-stamp.txt" ] && [ "$(cat "$1/gpt2-onnx-stamp.txt")" = "$2" ]
}

install_openvino() {
  local venv=$PEERS_CACHE/openvino-venv req=benchmarks/openvino-requirements.txt want
  want=$(wanted "$req")
  if ! fresh "$venv" "$want"; then
    log "building $venv"
    new_venv "$venv"
    "$venv/bin/python" -m pip install -q -r "$req"
    "$venv/bin/python" -m pip uninstall -q -y torchvision  # optimum-intel's requirement; see the requirements file
    printf '%s' "$want" >"$venv/gpt2-onnx-stamp.txt"
  fi
  echo "openvino $venv/bin/python"
}

install_openvino_ep() {  # no torch: the worker runs an existing gpt2-onnx export
  local venv=$PEERS_CACHE/openvino-ep-venv req=benchmarks/openvino-ep-requirements.txt want base
  want=$(wanted "$req")
  if ! fresh "$venv" "$want"; then
    log "building $venv"
    base=$("$PYTHON" -c 'import sys; print(sys._base_executable)')
    rm -rf "$venv"
    "$base" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -r "$req"
    printf '%s' "$want" >"$venv/gpt2-onnx-stamp.txt"
  fi
  echo "openvino-ep $venv/bin/python"
}

install_ctranslate2() {
  local venv=$PEERS_CACHE/ctranslate2-venv req=benchmarks/ctranslate2-requirements.txt want
  want=$(wanted "$req")
  if ! fresh "$venv" "$want"; then
    log "building $venv"
    new_venv "$venv"
    "$venv/bin/python" -m pip install -q -r "$req"
    printf '%s' "$want" >"$venv/gpt2-onnx-stamp.txt"
  fi
  echo "ctranslate2 $venv/bin/python"
}

# The llama-cpp-python sdist, unpacked once: $PEERS_CACHE/llama-src/llama_cpp_python-VERSION.
llama_source() {
  local version=$1 dir=$PEERS_CACHE/llama-src
  if [ ! -f "$dir/llama_cpp_python-$version/vendor/llama.cpp/CMakeLists.txt" ]; then
    log "fetching the llama-cpp-python $version sdist"
    rm -rf "$dir" && mkdir -p "$dir"
    "$PYTHON" -m pip download -q --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$dir"
    tar -xzf "$dir/llama_cpp_python-$version.tar.gz" -C "$dir"
  fi
  echo "$dir/llama_cpp_python-$version"
}

install_llama_cpp() {
  local venv=$PEERS_CACHE/llama-cpp-venv req=benchmarks/llama-cpp-requirements.txt want version source build
  version=$(sed -n 's/^llama-cpp-python==//p' "$req")
  want=$(wanted "$req" "${LLAMA_CMAKE[@]}")
  build=$PEERS_CACHE/llama-build
  if ! fresh "$venv" "$want"; then
    source=$(llama_source "$version")
    log "building llama.cpp (vendored in llama-cpp-python $version) in $build"
    rm -rf "$build"
    cmake -S "$source/vendor/llama.cpp" -B "$build" "${LLAMA_CMAKE[@]}" >"$PEERS_CACHE/llama-cmake.log" 2>&1 \
      || { tail -20 "$PEERS_CACHE/llama-cmake.log" >&2; exit 1; }
    cmake --build "$build" -j "$JOBS" --target llama llama-quantize llama-server >>"$PEERS_CACHE/llama-cmake.log" 2>&1 \
      || { tail -20 "$PEERS_CACHE/llama-cmake.log" >&2; exit 1; }
    log "building $venv"
    new_venv "$venv"
    grep -v '^llama-cpp-python==' "$req" >"$PEERS_CACHE/llama-deps.txt"
    "$venv/bin/python" -m pip install -q -r "$PEERS_CACHE/llama-deps.txt"
    CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" \
      "$venv/bin/python" -m pip install -q --no-deps "$PEERS_CACHE/llama-src/llama_cpp_python-$version.tar.gz"
    local lib
    lib=$("$venv/bin/python" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llama_cpp"); print(pathlib.Path(s.origin).parent / "lib")')
    mkdir -p "$lib"
    cp -a "$build"/bin/lib*.so* "$lib"/
    "$venv/bin/python" -c 'import llama_cpp; print("llama_cpp", llama_cpp.__version__)' >&2
    printf '%s' "$want" >"$venv/gpt2-onnx-stamp.txt"
  fi
  echo "llama-cpp $venv/bin/python"
}

mkdir -p "$PEERS_CACHE"
peers=("$@")
[ ${#peers[@]} -gt 0 ] || peers=(openvino llama-cpp ctranslate2 openvino-ep)
for peer in "${peers[@]}"; do
  case $peer in
    openvino) install_openvino ;;
    llama-cpp) install_llama_cpp ;;
    ctranslate2) install_ctranslate2 ;;
    openvino-ep) install_openvino_ep ;;
    *) echo "unknown peer '$peer' (openvino, llama-cpp, ctranslate2, openvino-ep)" >&2; exit 2 ;;
  esac
done
