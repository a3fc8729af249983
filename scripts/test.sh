#!/usr/bin/env bash
# Set up, lint, type-check, check the import contracts, build the docs and run the whole
# test suite, printing where the time goes (each phase's seconds, the 40 slowest tests, each
# tier's total, and the e2e tier against its committed baseline: scripts/test_times.py).
#
# Horovod's build (about 13 minutes of compiling on 2 cores, cached afterwards) runs niced in
# the background while the lint and the rest of the suite run; the Horovod tests run last and
# wait for it (tests/conftest.py).  BENCH_HOROVOD=0 skips the build and those tests.  The
# Docker tests' images start building in the background too.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
phase() { echo "test.sh: $1 done at $(( $(date +%s) - started )) s" >&2; }
bash scripts/system_deps.sh
phase "system packages"
BENCH_MXNET=1 BENCH_HOROVOD=0 bash scripts/setup.sh
phase "environment"

build=$(mktemp -d)
background=()  # process groups stopped when this script ends, however it ends
cleanup() {
  for pid in "${background[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
  rm -rf "$build"
}
trap cleanup EXIT
if [ "${BENCH_HOROVOD:-1}" = 0 ]; then
  echo 0 > "$build/rc"
else
  setsid bash -c 'nice -n 10 .venv/bin/python -m bench setup horovod >"$0/log" 2>&1; echo $? >"$0/rc"' \
    "$build" &
  background+=($!)
fi
export BENCH_HOROVOD_BUILD=$build
# The Docker tests' images, built meanwhile too (tests/docker_images.py); their fixture
# waits for a build under way (bench.images.ensure and the base image script hold locks).
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  setsid .venv/bin/python -m tests.docker_images >"$build/images.log" 2>&1 &
  background+=($!)
fi
# The checks that mostly wait on the package index, side by side with everything after
# them; their verdicts are read at the end.
checks=(
  "scripts/locks.py --check"  # the locks are what pyproject.toml and the grid give
  # The wheels bench carries to a Python 3.12 interpreter that has its own torch (the GPU
  # check's machine): the set resolves for CPython 3.12 manylinux x86_64, under 50 MiB.
  "scripts/gpu_wheels.py --check"
)
for i in "${!checks[@]}"; do
  setsid bash -c '.venv/bin/python $1 >"$0/check-$2.log" 2>&1; echo $? >"$0/check-$2.rc"' \
    "$build" "${checks[$i]}" "$i" &
  background+=($!)
done

.venv/bin/ruff check bench tests scripts hydra_plugins
.venv/bin/ruff format --check bench tests scripts hydra_plugins
.venv/bin/mypy bench
.venv/bin/lint-imports --no-cache  # the import contracts in pyproject.toml
.venv/bin/python scripts/layout_doc.py --check  # the docs' module and script lists
bash scripts/docs.sh  # docs/: mkdocs --strict, no broken link or anchor
phase "lint, types, contracts, docs"

# Two pytest-xdist workers; tests that share the Docker engine's images, the Slurm cluster,
# the version environments or the Horovod build keep to one worker (tests/conftest.py).
# The reference workload is timed before and after, for the e2e tier's guard.
export BENCH_TEST_TIMES=$build/times.json
before=$(.venv/bin/python scripts/test_times.py calibrate)
status=0
.venv/bin/python -m pytest -n 2 --dist loadgroup "$@" || status=$?
after=$(.venv/bin/python scripts/test_times.py calibrate)
phase "pytest"
if [ -f "$build/log" ]; then cat "$build/log" >&2; fi
if [ -f "$build/images.log" ]; then cat "$build/images.log" >&2; fi
for i in "${!checks[@]}"; do
  while [ ! -f "$build/check-$i.rc" ]; do sleep 1; done
  cat "$build/check-$i.log"
  if [ "$(cat "$build/check-$i.rc")" != 0 ]; then
    echo "test.sh: ${checks[$i]} failed" >&2
    status=1
  fi
done
if [ -f "$BENCH_TEST_TIMES" ]; then
  .venv/bin/python - "$BENCH_TEST_TIMES" "$before" "$after" <<'PY'
import json, sys
path, *figures = sys.argv[1:]
times = json.load(open(path))
times["calibration_s"] = [float(f) for f in figures]
json.dump(times, open(path, "w"), indent=1)
PY
  # Fails only on growth, so a run of some of the tests passes it too.
  .venv/bin/python scripts/test_times.py check "$BENCH_TEST_TIMES" || status=1
  if [ -n "${BENCH_TEST_TIMES_KEEP:-}" ]; then cp "$BENCH_TEST_TIMES" "$BENCH_TEST_TIMES_KEEP"; fi
fi
phase "all"
exit "$status"
