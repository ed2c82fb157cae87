#!/usr/bin/env bash
# The JavaScript client's CI: npm ci, the type check, and node --test over the fixture exports (onnxruntime-node,
# headless Chromium with onnxruntime-web, transformers.js). Needs node + npm; installs Debian's chromium when it is
# missing (CI runs as root) and the Python side (scripts/setup.sh) when the gpt2-onnx command is missing.
# Exits non-zero when anything fails. Screenshot: clients/js/out/browser.png.
set -euo pipefail
cd "$(dirname "$0")"
REPO=$(cd ../.. && pwd)
export VENV=${VENV:-.venv}

if [ ! -f "${GPT2_ONNX_FIXTURES:-$REPO/fixtures}/expectations.json" ]; then
    echo "clients/js/ci.sh: ${GPT2_ONNX_FIXTURES:-$REPO/fixtures}/expectations.json is missing (scripts/make_fixtures.py makes it)" >&2
    exit 1
fi
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
    echo "clients/js/ci.sh: installing chromium with apt"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
export GPT2_ONNX_CLI=${GPT2_ONNX_CLI:-$REPO/$VENV/bin/gpt2-onnx}
if [ ! -x "$GPT2_ONNX_CLI" ]; then
    (cd "$REPO" && scripts/setup.sh)
fi

# onnxruntime-node's install step would fetch CUDA libraries from NuGet; the CPU binary ships in the package.
export ONNXRUNTIME_NODE_INSTALL=skip
# The drivers drive the installed chromium only; never download a browser.
export PUPPETEER_SKIP_DOWNLOAD=1
npm ci --no-audit --no-fund
npx tsc -p .
node --test --test-concurrency=1 test/*.test.js
