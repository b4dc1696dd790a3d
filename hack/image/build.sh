#!/usr/bin/env bash
# Builds the project's image from its Dockerfile with buildah, for the kind tier of the test suite (or for
# you), and writes it as an archive that `kind load image-archive` (or containerd's `ctr images import`) takes.
#
#   hack/image/build.sh [TAG]     # prints the archive path on its last line; TAG defaults to localhost/kaliper:test
#   ONNXRUNTIME=onnxruntime-gpu hack/image/build.sh localhost/kaliper:gpu    # the GPU variant
#
# The Dockerfile's base (python:3.11-slim-bookworm) lives in a container registry, which this machine cannot
# reach, so the base is made here instead: a minimal Debian bookworm from Debian's archive (debootstrap) with
# Debian's Python 3.11 and pip, imported as localhost/kaliper-base:<key> and passed in as BASE_IMAGE. Its key
# is a hash of this recipe, so it is made once per machine. buildah keeps the Dockerfile's layers, so a
# change to Kaliper's code rebuilds only the last, small layer.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
tag=${1:-localhost/kaliper:test}
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
mkdir -p "$cache/images"

die() { echo "image/build.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
for tool in buildah podman debootstrap; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install buildah podman debootstrap)"
done

# The base: Debian's Python where the python image has its own, and pip allowed to install system-wide as
# it is in the python image (a container's Python belongs to the image, so Debian's guard is lifted).
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=python3,python3-pip,python-is-python3,ca-certificates
base_key=$(printf '%s\n' "$suite" "$packages" "$(sed -n '/^make_base()/,/^}/p' "$0")" | sha256sum | cut -c1-12)
base=localhost/kaliper-base:$base_key

make_base() {
  local root; root=$(mktemp -d /var/tmp/kaliper-base.XXXXXX)
  trap 'rm -rf "$root"' RETURN
  log "base: debootstrap $suite (minbase + $packages) from $mirror"
  debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; die "debootstrap failed (log above)"; }
  rm -f "$root.log" "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | podman import --quiet - "$base" >/dev/null
}

if ! podman image exists "$base"; then make_base; else log "base: $base (cached)"; fi

# llama.cpp's binaries, compiled once per version by the same recipe the Dockerfile's llama stage uses: the
# folder replaces that stage.
llama_dir=$(dirname "$(bash "$repo/hack/llama/build.sh")")

# RUN steps use the host's network (pip reaches PyPI) and chroot isolation: this machine's root may not
# set oom_score_adj, which runc needs (see shared/real-node-notes.md).
# What the image's Python steps are made from, hashed: buildah's cache does not see through a RUN's mount of
# another stage, so these keys (build arguments the steps echo) make a changed source rebuild them.
deps_key=$(sha256sum "$repo/pyproject.toml" | cut -c1-16)
source_key=$(cd "$repo" && tar -c --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  --exclude=__pycache__ --exclude='*.egg-info' pyproject.toml README.md operator | sha256sum | cut -c1-16)
log "image: buildah bud -> $tag"
start=$(date +%s)
# pip trusts this machine's CA bundle (which may hold a TLS-intercepting proxy's CA) through a build secret.
buildah bud --quiet --layers --network host --isolation chroot \
  --secret id=ca-bundle,src="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" \
  --build-context "llama=$llama_dir" \
  --build-arg "BASE_IMAGE=$base" --build-arg "ONNXRUNTIME=${ONNXRUNTIME:-onnxruntime}" \
  --build-arg "DEPS_KEY=$deps_key" --build-arg "SOURCE_KEY=$source_key" \
  -t "$tag" -f "$repo/Dockerfile" "$repo" >&2 \
  || die "buildah bud failed (see above)"
archive="$cache/images/$(echo "$tag" | tr '/:' '__').tar"
id=$(podman image inspect --format '{{.Id}}' "$tag")
if [ ! -s "$archive" ] || [ "$(cat "$archive.id" 2>/dev/null)" != "$id" ]; then  # unchanged: keep the archive
  rm -f "$archive" "$archive.id"
  podman save --quiet --format docker-archive -o "$archive.tmp" "$tag" && mv "$archive.tmp" "$archive"
  echo "$id" >"$archive.id"
fi
log "image: $tag ready in $(( $(date +%s) - start ))s, $(du -m "$archive" | cut -f1) MiB"
echo "$archive"
