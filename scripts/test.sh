#!/usr/bin/env bash
# Set up (scripts/setup.sh), lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system_deps.sh
bash scripts/setup.sh
.venv/bin/ruff check bench tests scripts
.venv/bin/ruff format --check bench tests scripts
.venv/bin/mypy bench
.venv/bin/python -m pytest "$@"
