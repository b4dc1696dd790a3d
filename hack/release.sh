#!/usr/bin/env bash
# A release of Kaliper (`make release`): one version, read from pyproject.toml, on every artifact.
#
#   hack/release.sh [DIST]      # default dist/
#
# 1. Checks that the version is the same everywhere it is written (pyproject.toml, kaliper/__init__.py, the chart's
#    version and appVersion) and that docs/changelog.md has its section; stops before building anything if not.
# 2. The Python wheel and sdist (setuptools' own PEP 517 hooks, no network).
# 3. The chart, packaged by Helm (kaliper-VERSION.tgz), its default image the same version.
# 4. The image, tagged ghcr.io/kaliper-dev/kaliper:VERSION (hack/image/build.sh; its layers are reused), and its
#    archive (docker-archive, which `docker load`, `podman load` and `kind load image-archive` take).
# Then it prints what it made and the commands that publish them; it pushes and tags nothing itself.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dist=$(realpath -m "${1:-$repo/dist}")
python=${PYTHON:-$repo/.venv/bin/python}
cd "$repo"

die() { echo "release: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -1)
[ -n "$version" ] || die "pyproject.toml: no version = \"...\" line"
module=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' operator/kaliper/__init__.py)
chart=$(sed -n 's/^version: *\(.*\)$/\1/p' charts/kaliper/Chart.yaml)
app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/kaliper/Chart.yaml)
problems=()
[ "$module" = "$version" ] || problems+=("operator/kaliper/__init__.py: __version__ is $module; set it to $version")
[ "$chart" = "$version" ] || problems+=("charts/kaliper/Chart.yaml: version is $chart; set it to $version")
[ "$app" = "$version" ] || problems+=("charts/kaliper/Chart.yaml: appVersion is $app; set it to \"$version\"")
grep -q "^## $version " docs/changelog.md 2>/dev/null \
  || problems+=("docs/changelog.md: no section '## $version (DATE)'; write what changed for its readers")
if [ ${#problems[@]} -gt 0 ]; then
  printf 'release: %s\n' "${problems[@]}" >&2
  die "version $version (pyproject.toml) is not the same everywhere; nothing was built"
fi

mkdir -p "$dist"
log "release $version into $dist"
log "python: wheel and sdist"
# Each hook in a process of its own: setuptools keeps state between two builds in one process (the second one
# lands in a folder of the first's). Their chatter goes to a log, shown when one fails.
for hook in build_wheel build_sdist; do
  "$python" -c "import sys; from setuptools import build_meta; build_meta.$hook(sys.argv[1])" "$dist" \
    >"$dist/$hook.log" 2>&1 || { tail -20 "$dist/$hook.log" >&2; die "$hook failed (log above)"; }
  rm "$dist/$hook.log"
done

log "chart: helm package"
helm=$(hack/testcluster/build.sh helm | tail -1)/helm  # the suite's Helm, built once from the module proxy
"$helm" package charts/kaliper --destination "$dist" >&2

log "image: hack/image/build.sh"
image=ghcr.io/kaliper-dev/kaliper:$version
archive=$(hack/image/build.sh "$image" | tail -1)
cp "$archive" "$dist/kaliper-image-$version.tar"

echo "release $version:"
for made in "kaliper-$version-py3-none-any.whl" "kaliper-$version.tar.gz" "kaliper-$version.tgz" \
  "kaliper-image-$version.tar"; do
  [ -s "$dist/$made" ] || die "$dist/$made was not made"
  echo "  $dist/$made ($(du -m "$dist/$made" | cut -f1) MiB)"
done
echo "  image $image"
cat <<EOF
to publish: git tag v$version && git push origin v$version; podman push $image;
  helm push $dist/kaliper-$version.tgz oci://ghcr.io/kaliper-dev/charts; twine upload $dist/kaliper-$version*.{whl,tar.gz}
EOF
