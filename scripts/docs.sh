#!/usr/bin/env bash
# Build the reference pages in docs/ with MkDocs, strictly: a broken link or anchor between
# pages fails the build.  The site goes to a temporary folder that is removed afterwards, so
# nothing is written into the checkout; the exit status is mkdocs's.
#
# BENCH_VENV names the virtual environment to use (default .venv, made by scripts/setup.sh;
# relative paths are taken from the repository root).  MkDocs is installed into it, at the
# version requirements.lock pins, when it has none.
set -euo pipefail
cd "$(dirname "$0")/.."

MKDOCS_VERSION=1.6.1
venv=${BENCH_VENV:-.venv}

if [ ! -x "$venv/bin/python" ]; then
  echo "docs: no Python environment at $venv (run scripts/setup.sh, or set BENCH_VENV)" >&2
  exit 1
fi
if [ ! -x "$venv/bin/mkdocs" ]; then
  echo "docs: installing mkdocs==$MKDOCS_VERSION into $venv" >&2
  "$venv/bin/python" -m pip install -q "mkdocs==$MKDOCS_VERSION"
fi

site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
status=0
"$venv/bin/mkdocs" build --strict --site-dir "$site" || status=$?
exit "$status"
