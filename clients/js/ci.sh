#!/usr/bin/env bash
# The JavaScript client's CI: npm ci, the type check, and node --test over the fixture exports: onnxruntime-node, the
# command line, the packed tarball installed into a fresh application, headless Chromium (Debian's, installed with
# apt when missing; CI runs as root) on the page `gpt2-onnx-js serve-page` serves, and transformers.js.
#
# The transformers.js test converts the fixtures with the Python `gpt2-onnx` command ($GPT2_ONNX_CLI, else
# $VENV/bin/gpt2-onnx, VENV relative to the repository or absolute). When that command is missing, scripts/setup.sh
# installs it where PyPI packages install (GPT2_ONNX_CI_PYPI=yes|no, as .ci/run exports it; unset: the same probe as
# .ci/run's); where they do not, the script says so in one line and that one test skips itself (node:test's skip, as
# under `npm test`), and everything else runs. Exits non-zero when anything fails.
# Screenshots: clients/js/out/browser-<export>.png, out/transformers-js-browser.png.
set -euo pipefail
cd "$(dirname "$0")"
REPO=$(cd ../.. && pwd)
# VENV: relative to the repository, or absolute (as clients/cpp/ci.sh takes it).
VENV=${VENV:-.venv}
case "$VENV" in /*) ;; *) VENV=$REPO/$VENV ;; esac
export VENV
say() { echo "clients/js/ci.sh: $*"; }

FIXTURES=${GPT2_ONNX_FIXTURES:-$REPO/fixtures}
if [ ! -f "$FIXTURES/expectations.json" ]; then
    say "$FIXTURES/expectations.json is missing (scripts/make_fixtures.py makes it)" >&2
    exit 1
fi
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
    say "installing chromium with apt"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# PyPI reachable: .ci/run's finding when it gives one, else pip fetching one tiny pinned package in a short time.
pypi_reachable() {
    case "${GPT2_ONNX_CI_PYPI:-}" in yes) return 0 ;; no) return 1 ;; esac
    command -v python3 >/dev/null 2>&1 || return 1
    local dest
    dest=$(mktemp -d)
    timeout 30 python3 -m pip download --quiet --no-deps --dest "$dest" "six==1.16.0" >/dev/null 2>&1
    local status=$?
    rm -rf "$dest"
    return $status
}

# The test skips itself where the command is missing (as under `npm test`); this line says why it cannot be installed.
export GPT2_ONNX_CLI=${GPT2_ONNX_CLI:-$VENV/bin/gpt2-onnx}
if [ ! -x "$GPT2_ONNX_CLI" ]; then
    if pypi_reachable; then
        (cd "$REPO" && scripts/setup.sh)
    else
        say "skipping test/transformers_js.test.js: it converts the fixtures with the Python gpt2-onnx command, which is not installed ($GPT2_ONNX_CLI) and cannot be (PyPI packages do not install here)"
    fi
fi

# clients/js/.npmrc keeps onnxruntime-node's install step from fetching CUDA libraries (onnxruntime-node-install=skip).
# That step downloads through global-agent; pointing its proxy at a closed port makes any attempt fail npm ci at once
# (instead of fetching the CUDA package where NuGet is reachable), so CI checks that the .npmrc line does its work.
GLOBAL_AGENT_HTTPS_PROXY=http://127.0.0.1:9 GLOBAL_AGENT_HTTP_PROXY=http://127.0.0.1:9 npm ci --no-audit --no-fund
node_modules/.bin/tsc -p .
node --test --test-concurrency=1 test/*.test.js
