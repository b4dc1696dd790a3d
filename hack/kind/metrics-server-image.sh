#!/usr/bin/env bash
# Builds the metrics-server image that examples/kind/metrics-server.yaml names
# (registry.k8s.io/metrics-server/metrics-server:<version>) from the binary hack/testcluster/build.sh builds from
# its module, because this machine cannot reach a container registry: the same program under the same name, FROM
# scratch, with the official image's entrypoint. Written as an archive for `kind load image-archive`.
#
#   hack/kind/metrics-server-image.sh      # prints the archive path on its last line
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../testcluster/versions.env
source "$repo/hack/testcluster/versions.env"
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
name=registry.k8s.io/metrics-server/metrics-server:$METRICS_SERVER_VERSION
archive="$cache/images/metrics-server-$METRICS_SERVER_VERSION-$(sha256sum "$0" | cut -c1-8).tar"
if [ ! -s "$archive" ]; then
  bash "$repo/hack/testcluster/build.sh" metrics-server >/dev/null
  c=$(buildah from --quiet scratch)
  buildah copy --quiet "$c" "$cache/bin/metrics-server-$METRICS_SERVER_VERSION/metrics-server" /metrics-server >/dev/null
  buildah config --user 65534:65534 --entrypoint '["/metrics-server"]' "$c"
  buildah commit --quiet --rm "$c" "$name" >/dev/null
  mkdir -p "$cache/images"
  buildah push --quiet "$name" "docker-archive:$archive.tmp:$name" && mv "$archive.tmp" "$archive"
  buildah rmi "$name" >/dev/null 2>&1 || true
fi
echo "$archive"
