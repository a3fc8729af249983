#!/usr/bin/env bash
# CI on a slower machine, simulated: run a command (by default .ci/run) with the CPU time
# of a fraction of this machine's cores, through a CPU cgroup with a quota (root only).
#
#     sudo bash scripts/slow_ci.sh [--cpus 1.25] [--] [command ...]
#
# --cpus N: the cores' worth of CPU time the command and everything it starts may use
# (default 1.25 on a 2-core machine: 1.6x slower for work that would use both cores, the
# slowdown the reliability issue measured on another machine of our kind).  Prints the wall
# time at the end.  What it does not slow: daemons already running before it starts (a
# Docker engine or Slurm started earlier: stop them first to have them started inside the
# cgroup), and containers, which Docker puts in cgroups of their own.
set -euo pipefail

cpus=1.25
if [[ "${1:-}" == "--cpus" ]]; then
  cpus="$2"
  shift 2
fi
[[ "${1:-}" == "--" ]] && shift
if [[ $# -eq 0 ]]; then
  set -- bash "$(dirname "$0")/../.ci/run"
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "slow_ci.sh: needs root (it makes a CPU cgroup)" >&2
  exit 2
fi

period=100000
quota=$(python3 -c "import sys; print(int(float(sys.argv[1]) * $period))" "$cpus")
name="bench-slow-ci-$$"
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then  # cgroup v2
  group="/sys/fs/cgroup/$name"
  mkdir "$group"
  echo "$quota $period" >"$group/cpu.max"
elif [[ -d /sys/fs/cgroup/cpu ]]; then  # cgroup v1
  group="/sys/fs/cgroup/cpu/$name"
  mkdir "$group"
  echo "$period" >"$group/cpu.cfs_period_us"
  echo "$quota" >"$group/cpu.cfs_quota_us"
else
  echo "slow_ci.sh: no CPU cgroup controller under /sys/fs/cgroup" >&2
  exit 2
fi
cleanup() {
  # the group is removed once empty; anything still in it is moved back to the root first
  if [[ -f "$group/cgroup.procs" ]]; then
    while read -r pid; do echo "$pid" >"$(dirname "$group")/cgroup.procs" 2>/dev/null || true; done <"$group/cgroup.procs"
  fi
  rmdir "$group" 2>/dev/null || true
}
trap cleanup EXIT

echo "slow_ci.sh: running with ${cpus} CPUs' worth of time ($(nproc) cores here): $*" >&2
started=$(date +%s)
set +e
bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' slow "$group" "$@"
rc=$?
set -e
took=$(($(date +%s) - started))
echo "slow_ci.sh: rc=$rc after ${took} s ($((took / 60)) min $((took % 60)) s) at ${cpus} CPUs" >&2
exit "$rc"
