#!/usr/bin/env bash
# The project's virtual environment (`make setup`): Kaliper's dependencies with the test extra are installed once
# into a template outside the repository, kept while pyproject.toml and the Python stay the same; each checkout
# copies the template and installs its own Kaliper into the copy (editable, without dependencies).
#
#   hack/venv.sh .venv
#
# Why a template: a fresh install is about 50 s of this machine's two cores, most of it unpacking 50,000 files and
# compiling 15,000 modules' bytecode (which must happen at install time: where PYTHONDONTWRITEBYTECODE=1 is set,
# as on this project's machine, nothing compiled later is kept). Copying the template takes about 2 s.
set -euo pipefail

target=$1
python=${PYTHON:-python3}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
key="python-$version-$(sha256sum "$repo/pyproject.toml" | cut -c1-12)"
root="$cache/venvs"
template="$root/$key"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# One install at a time; a copy never reads a template being replaced.
mkdir -p "$cache"
exec 9>"$cache/venvs.lock"
flock 9

if [ ! -f "$template/.template-complete" ]; then
  log "Python environment $key: installing Kaliper's dependencies (once for this pyproject.toml)"
  # A template for another pyproject.toml goes, as does one cut off mid-install: each is over a gigabyte.
  rm -rf "$root" && mkdir -p "$root"
  "$python" -m venv "$template"
  "$template/bin/python" -m pip install --quiet --upgrade pip
  "$template/bin/python" -m pip install --quiet "$repo[test]"
  "$template/bin/python" -m pip uninstall --quiet --yes kaliper  # each checkout installs its own
  touch "$template/.template-complete"
fi

rm -rf "$target"
cp -a "$template" "$target"
rm "$target/.template-complete"
absolute=$(cd "$target" && pwd)
# The copy's scripts (pytest, mkdocs, activate, ...) and pyvenv.cfg name the template: name the copy instead.
grep -rlI --null -F "$template" "$target/bin" "$target/pyvenv.cfg" | xargs -0 -r sed -i "s|$template|$absolute|g"
"$target/bin/python" -m pip install --quiet --no-deps -e "$repo"
