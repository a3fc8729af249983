#!/usr/bin/env bash
# Build bench's local base image from Debian packages, for machines that reach a Debian
# mirror but no container registry (where no image can be pulled):
#
#   debootstrap --variant=minbase bookworm + python3, python3-venv, ca-certificates
#   -> docker import -> bench-base:bookworm
#
# The framework images are then built on it by passing its id as the base image:
#   python -m bench launcher=docker launcher.docker.base_image=bench-base:bookworm ...
# (bench resolves the tag to the image id and pins that).  Users with a registry need none
# of this: by default the images are built on the frameworks' official images.
#
# Usage: sudo bash scripts/build_base_image.sh [TAG]     (default TAG: bench-base:bookworm)
# Env:   DEBIAN_MIRROR (default http://deb.debian.org/debian), FORCE=1 to rebuild.
# Idempotent: does nothing when TAG already exists; one build at a time (a file lock).
# Needs root, debootstrap and docker.
set -euo pipefail

tag=${1:-bench-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm

# One build at a time: a second caller (the Docker tests' fixture beside the early build
# that scripts/test.sh starts) waits here, then finds the tag.
lock=${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bench}/base-image.lock
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
flock 9
if [ -z "${FORCE:-}" ] && docker image inspect "$tag" >/dev/null 2>&1; then
  exit 0
fi
for tool in debootstrap docker; do
  command -v "$tool" >/dev/null || { echo "build_base_image: $tool is needed" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "build_base_image: debootstrap needs root" >&2; exit 1; }

root=$(mktemp -d "${TMPDIR:-/var/tmp}/bench-base.XXXXXX")
trap 'rm -rf "$root"' EXIT
started=$(date +%s)
echo "build_base_image: debootstrap $suite from $mirror (a few minutes)" >&2
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -30 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"

# What a container never needs: package lists and caches, documentation, locales.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/var/log/*.log "$root"/var/log/apt/*
find "$root"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'C.*' -exec rm -rf {} +
# Container hygiene: no policy-rc.d surprises, a plain hostname and resolver.
: >"$root"/etc/hostname
: >"$root"/etc/resolv.conf

tar --numeric-owner -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  --message "debootstrap --variant=minbase $suite + python3 python3-venv ca-certificates" \
  - "$tag" >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$tag")
echo "build_base_image: $tag built in $(($(date +%s) - started)) s ($((size / 1024 / 1024)) MiB)" >&2
