#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the test suite: tiny seeded models, no network, no GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
VENV=${VENV:-.venv}
exec "$VENV/bin/python" -m pytest -q "$@"
