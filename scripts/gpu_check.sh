#!/usr/bin/env bash
# Exercise every GPU path of bench once and print what worked (scripts/gpu_check.py): the
# first thing to run on a new GPU host, after `bash scripts/setup.sh`.  On a host without a
# GPU it checks that the GPU-only settings are refused, and exits 0 when they are.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || python=python3
exec "$python" scripts/gpu_check.py "$@"
