#!/usr/bin/env bash
# Builds (or reuses) the control-plane binaries and those of kind's nodes the tests need, from the Go module proxy.
#
#   hack/testcluster/build.sh            # prints the bin directory on its last line
#   hack/testcluster/build.sh node       # only what kind's node image holds (etcd, Kubernetes, CoreDNS)
#   hack/testcluster/build.sh controlplane  # only what a kwok control plane starts with (etcd, Kubernetes, kwok)
#   hack/testcluster/build.sh helm       # only one of the others: kwok, helm, helm-controller, kstatus,
#                                        # argocd-health, kind, kubeadm, prometheus or metrics-server
#
# Binaries land in $KALIPER_CACHE (default ~/.cache/kaliper) under bin/<name>-<version>/, so a second
# run is a no-op and a version bump builds only what changed. The Go build cache is kept by Go itself
# (~/.cache/go-build), outside the repository.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
bin="$cache/bin"
mkdir -p "$bin"
# One build of each part at a time: make test's pytest workers (and kind's node image build) may
# ask for the same binary; the others wait for that binary alone, then find it cached (a test that needs helm
# does not wait for Argo CD's build).
locked() { local name=$1; shift; ( flock 9; "$@" ) 9>"$cache/build-$name.lock"; }

export CGO_ENABLED=0
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local
# Every binary is linked with -s -w (no symbol table, no DWARF), so the compiler need not write DWARF either:
# 14 % less CPU for a cold build (kwok from an empty build cache: 203 CPU-seconds, 175 with it).
go_flags=(-trimpath -gcflags=all=-dwarf=false)

die() { echo "build.sh: $*" >&2; exit 1; }
command -v go >/dev/null || die "go is not installed; install Go 1.25 or newer"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# have NAME VERSION -> true when the cached binary exists
have() { [ -x "$bin/$1-$2/$1" ]; }
# Point LINK at TARGET by a rename, never by unlink-then-link as `ln -sf` does: a control plane starting beside
# another build.sh execs these links, and saw one missing for that instant.
relink() {
  local target=$1 link=$2
  [ "$(readlink "$link" 2>/dev/null)" = "$target" ] && return 0
  ln -sfn "$target" "$link.$$" && mv -Tf "$link.$$" "$link"
}

# Kubernetes: k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces the staging modules with
# local paths), so a throw-away wrapper module requires it and replaces each staging module by the
# published k8s.io/<name> v0.Y.Z.  The list of staging modules comes from that release's own go.mod.
# Builds the commands named, or by default those kind's nodes run (with kubeadm).
build_kubernetes() {
  local v=$KUBERNETES_VERSION staging_v="v0.${KUBERNETES_VERSION#v1.}"
  local names=("$@") missing=()
  [ ${#names[@]} -gt 0 ] || names=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
  for n in "${names[@]}"; do have "$n" "$v" || missing+=("$n"); done
  [ ${#missing[@]} -eq 0 ] && { log "kubernetes $v: cached"; return; }
  log "kubernetes $v: building ${missing[*]}"
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  local upstream_mod
  upstream_mod=$(go mod download -json "k8s.io/kubernetes@$v" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])') \
    || die "could not download k8s.io/kubernetes@$v from the module proxy"
  {
    echo "module kaliper.dev/testcluster/kubernetes"
    echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1/')"
    echo "require k8s.io/kubernetes $v"
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$upstream_mod" \
      | awk -v sv="$staging_v" '{print "replace " $1 " => " $1 " " sv}'
  } >"$work/go.mod"
  local ver_flags="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1"
  ver_flags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$v" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
  ver_flags+=" -X k8s.io/client-go/pkg/version.gitVersion=$v"
  for n in "${missing[@]}"; do
    log "  go build k8s.io/kubernetes/cmd/$n"
    mkdir -p "$bin/$n-$v.tmp"
    (cd "$work" && go build "${go_flags[@]}" -ldflags "$ver_flags" -o "$bin/$n-$v.tmp/$n" "k8s.io/kubernetes/cmd/$n") \
      || die "building $n $v failed (see the Go errors above)"
    rm -rf "$bin/$n-$v" && mv "$bin/$n-$v.tmp" "$bin/$n-$v"
  done
}

# etcd: go.etcd.io/etcd/server/v3 also replaces its sibling modules locally, so it builds through a
# wrapper module too; the siblings then resolve to their published versions.
build_etcd() {
  local v=$ETCD_VERSION
  have etcd "$v" && { log "etcd $v: cached"; return; }
  log "etcd $v: building"
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  printf 'module kaliper.dev/testcluster/etcd\ngo 1.25\nrequire go.etcd.io/etcd/server/v3 %s\n' "$v" >"$work/go.mod"
  mkdir -p "$bin/etcd-$v.tmp"
  (cd "$work" && go build "${go_flags[@]}" -ldflags "-s -w" -o "$bin/etcd-$v.tmp/etcd" go.etcd.io/etcd/server/v3) \
    || die "building etcd $v failed (see the Go errors above)"
  rm -rf "$bin/etcd-$v" && mv "$bin/etcd-$v.tmp" "$bin/etcd-$v"
}

# Modules without local replaces install directly.
go_install() {
  local name=$1 pkg=$2 v=$3
  have "$name" "$v" && { log "$name $v: cached"; return; }
  log "$name $v: go install $pkg@$v"
  mkdir -p "$bin/$name-$v.tmp"
  GOBIN="$bin/$name-$v.tmp" GOFLAGS= go install "${go_flags[@]}" -ldflags "-s -w" "$pkg@$v" \
    || die "installing $name $v failed (see the Go errors above)"
  rm -rf "$bin/$name-$v" && mv "$bin/$name-$v.tmp" "$bin/$name-$v"
}

# Our own small programs over a pinned library (hack/testcluster/<name>/main.go): cached by the library's
# version and the program's hash, built in a throw-away module that requires the library; an optional fourth
# argument names a function printing further go.mod lines (replaces).
build_program() {
  local name=$1 module=$2 lib_v=$3 more_gomod=${4:-}
  local v; v="$lib_v-$(sha256sum "$here/$name/main.go" | cut -c1-8)"
  if have "$name" "$v"; then
    log "$name $v: cached"
  else
    log "$name $v: building against $module $lib_v"
    local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
    cp "$here/$name/main.go" "$work/"
    { printf 'module kaliper.dev/testcluster/%s\ngo 1.25\nrequire %s %s\n' "$name" "$module" "$lib_v"
      if [ -n "$more_gomod" ]; then "$more_gomod"; fi; } >"$work/go.mod"
    mkdir -p "$bin/$name-$v.tmp"
    (cd "$work" && go build "${go_flags[@]}" -ldflags "-s -w" -o "$bin/$name-$v.tmp/$name" .) \
      || die "building $name $v failed (see the Go errors above)"
    rm -rf "$bin/$name-$v" && mv "$bin/$name-$v.tmp" "$bin/$name-$v"
  fi
  mkdir -p "$cache/current"
  relink "$bin/$name-$v/$name" "$cache/current/$name"
}

# Argo CD's replaces, which a module that requires it must repeat (Go ignores a dependency's replaces), less
# its local gitops-engine, which comes from the module proxy at the pinned commit of its release branch.
argocd_replaces() {
  local upstream_mod
  upstream_mod=$(go mod download -json "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])') \
    || die "could not download github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION from the module proxy"
  awk '/^replace \(/{inside=1; next} inside && /^\)/{inside=0} inside && /=>/ && !/=> \.\//' "$upstream_mod" \
    | sed 's/^[[:space:]]*/replace /'
  echo "replace github.com/argoproj/argo-cd/gitops-engine => github.com/argoproj/argo-cd/gitops-engine $ARGOCD_GITOPS_ENGINE"
}

# module_dir MODULE@VERSION -> the module's files in Go's module cache, downloaded through the proxy
module_dir() {
  go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' \
    || die "could not download $1 from the module proxy"
}

# Flux's helm-controller: its go.mod replaces its API module with ./api, which the module proxy serves as a
# module of its own (the controller's zip leaves that folder out), so the build puts the two together. The
# CRDs it works with travel beside the binary: HelmRelease, and source-controller's ExternalArtifact (the
# documented way for a producer other than source-controller to hand it a chart), HelmChart and
# OCIRepository (it watches those too, and does not start without them).
FLUX_SOURCE_CRDS=(externalartifacts helmcharts ocirepositories)
build_helm_controller() {
  local v=$FLUX_HELM_CONTROLLER_VERSION
  if have helm-controller "$v" && [ -f "$bin/helm-controller-$v/source.toolkit.fluxcd.io_${FLUX_SOURCE_CRDS[-1]}.yaml" ]; then
    log "helm-controller $v: cached"; return
  fi
  log "helm-controller $v: building"
  local work; work=$(mktemp -d); trap 'rm -rf "$work"' RETURN
  local controller api source
  controller=$(module_dir "github.com/fluxcd/helm-controller@$v")
  api=$(module_dir "github.com/fluxcd/helm-controller/api@$v")
  source=$(module_dir "github.com/fluxcd/source-controller@$FLUX_SOURCE_CONTROLLER_VERSION")
  cp -r "$controller" "$work/src" && chmod -R u+w "$work/src"
  rm -rf "$work/src/api" && cp -r "$api" "$work/src/api" && chmod -R u+w "$work/src/api"
  local out="$bin/helm-controller-$v.tmp"
  mkdir -p "$out"
  (cd "$work/src" && go build "${go_flags[@]}" -ldflags "-s -w" -o "$out/helm-controller" .) \
    || die "building helm-controller $v failed (see the Go errors above)"
  cp "$controller/config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml" "$out/"
  for crd in "${FLUX_SOURCE_CRDS[@]}"; do cp "$source/config/crd/bases/source.toolkit.fluxcd.io_$crd.yaml" "$out/"; done
  chmod u+w "$out"/*.yaml
  rm -rf "$bin/helm-controller-$v" && mv "$out" "$bin/helm-controller-$v"
}

# Prometheus 3 publishes its Go module as v0.3MM.P for v3.MM.P; built with its Kubernetes service discovery alone
# (its build tags leave the cloud providers' out) and its version stamped as its release build does.
build_prometheus() {
  local v=$PROMETHEUS_VERSION minor patch
  have prometheus "$v" && { log "prometheus $v: cached"; return; }
  minor=$(echo "$v" | cut -d. -f2); patch=$(echo "$v" | cut -d. -f3)
  local module_v; module_v=$(printf 'v0.3%02d.%s' "$minor" "$patch")
  log "prometheus $v: go install github.com/prometheus/prometheus/cmd/prometheus@$module_v"
  mkdir -p "$bin/prometheus-$v.tmp"
  GOBIN="$bin/prometheus-$v.tmp" GOFLAGS= go install "${go_flags[@]}" -tags remove_all_sd,enable_kubernetes_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${v#v}" \
    "github.com/prometheus/prometheus/cmd/prometheus@$module_v" \
    || die "installing prometheus $v failed (see the Go errors above)"
  rm -rf "$bin/prometheus-$v" && mv "$bin/prometheus-$v.tmp" "$bin/prometheus-$v"
}

what=${1:-all}
rest=(kwok helm helm-controller kstatus argocd-health kind kubeadm prometheus metrics-server)
case " all node controlplane ${rest[*]} " in *" $what "*) ;; *)
  die "unknown set '$what': use all (the default), node, controlplane, or one of ${rest[*]}" ;;
esac
want() { [ "$what" = all ] || [ "$what" = "$1" ]; }
start=$(date +%s)
if [ "$what" = all ] || [ "$what" = node ] || [ "$what" = controlplane ]; then
  locked etcd build_etcd
  locked kubernetes build_kubernetes
fi
if [ "$what" = all ] || [ "$what" = node ]; then
  locked coredns go_install coredns github.com/coredns/coredns "$COREDNS_VERSION"
fi
# kind's node image and the control-plane tier start with the binaries above and ask for the rest (helm, kstatus,
# ...) when a test needs them, so on a cold machine those build while the tiers' first tests wait.
if want kwok || [ "$what" = controlplane ]; then locked kwok go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"; fi
if want helm; then locked helm go_install helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"; fi
if want helm-controller; then locked helm-controller build_helm_controller; fi
if want kstatus; then locked kstatus build_program kstatus sigs.k8s.io/cli-utils "$CLI_UTILS_VERSION"; fi
if want kind; then locked kind go_install kind sigs.k8s.io/kind "$KIND_VERSION"; fi
if want kubeadm; then locked kubernetes build_kubernetes kubeadm; fi
if want prometheus; then locked prometheus build_prometheus; fi
if want metrics-server; then
  locked metrics-server go_install metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server "$METRICS_SERVER_VERSION"
fi
if want argocd-health; then
  locked argocd-health build_program argocd-health github.com/argoproj/argo-cd/v3 "$ARGOCD_VERSION" argocd_replaces
fi

# A stable directory of links to the pinned versions, for PATH.
current="$cache/current"
link_current() {
  mkdir -p "$current"
  for pair in etcd:$ETCD_VERSION kube-apiserver:$KUBERNETES_VERSION kube-controller-manager:$KUBERNETES_VERSION \
              kube-scheduler:$KUBERNETES_VERSION kubectl:$KUBERNETES_VERSION \
              kubelet:$KUBERNETES_VERSION kube-proxy:$KUBERNETES_VERSION kwok:$KWOK_VERSION \
              helm:$HELM_VERSION helm-controller:$FLUX_HELM_CONTROLLER_VERSION \
              coredns:$COREDNS_VERSION kind:$KIND_VERSION kubeadm:$KUBERNETES_VERSION \
              prometheus:$PROMETHEUS_VERSION; do
    n=${pair%%:*}; ver=${pair#*:}
    have "$n" "$ver" || continue
    relink "$bin/$n-$ver/$n" "$current/$n"
  done
}
locked current link_current
log "done in $(( $(date +%s) - start ))s"
echo "$current"
