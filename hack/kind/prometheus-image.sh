#!/usr/bin/env bash
# Builds the Prometheus image that examples/kind/prometheus.yaml names (quay.io/prometheus/prometheus:<version>)
# from the binary hack/testcluster/build.sh builds from Prometheus's own source, because this machine cannot
# reach a container registry: the same program under the same name, FROM scratch, running as nobody, with the
# official image's entrypoint. Written as an archive for `kind load image-archive`.
#
#   hack/kind/prometheus-image.sh      # prints the archive path on its last line
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../testcluster/versions.env
source "$repo/hack/testcluster/versions.env"
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
name=quay.io/prometheus/prometheus:$PROMETHEUS_VERSION
archive="$cache/images/prometheus-$PROMETHEUS_VERSION-$(sha256sum "$0" | cut -c1-8).tar"
if [ ! -s "$archive" ]; then
  bash "$repo/hack/testcluster/build.sh" prometheus >/dev/null
  c=$(buildah from --quiet scratch)
  buildah copy --quiet "$c" "$cache/bin/prometheus-$PROMETHEUS_VERSION/prometheus" /bin/prometheus >/dev/null
  buildah config --user 65534:65534 --workingdir /prometheus --entrypoint '["/bin/prometheus"]' \
    --cmd '--config.file=/etc/prometheus/prometheus.yml --storage.tsdb.path=/prometheus' "$c"
  buildah commit --quiet --rm "$c" "$name" >/dev/null
  mkdir -p "$cache/images"
  buildah push --quiet "$name" "docker-archive:$archive.tmp:$name" && mv "$archive.tmp" "$archive"
  buildah rmi "$name" >/dev/null 2>&1 || true
fi
echo "$archive"
