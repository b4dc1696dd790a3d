#!/usr/bin/env bash
# Builds the test node's sandbox ("pause") image from pause.c: one static binary in an otherwise empty
# image, written as an archive containerd imports. Cached by the source's hash.
#
#   hack/image/pause.sh      # prints the archive path and the image name on its last line
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
key=$(cat "$here/pause.c" "$0" | sha256sum | cut -c1-12)
name=localhost/kaliper-pause:$key
archive="$cache/images/kaliper-pause-$key.tar"
if [ ! -s "$archive" ]; then
  command -v buildah >/dev/null || { echo "pause.sh: buildah is not installed" >&2; exit 1; }
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  gcc -static -O2 -o "$work/pause" "$here/pause.c"
  container=$(buildah from scratch)
  buildah copy --quiet "$container" "$work/pause" /pause
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$container"
  buildah commit --quiet "$container" "$name" >/dev/null
  buildah rm "$container" >/dev/null
  mkdir -p "$cache/images"
  buildah push --quiet "$name" "docker-archive:$archive.tmp:$name" && mv "$archive.tmp" "$archive"
fi
echo "$archive $name"
