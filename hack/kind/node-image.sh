#!/usr/bin/env bash
# Builds kind's node image here, without a container registry, from the binaries the test suite already builds
# (hack/testcluster/build.sh), Debian's packages and kind's own node files, and keeps it in podman's store.
#
#   hack/kind/node-image.sh        # prints the image name on its last line (localhost/kaliper-kind-node:<key>)
#
# kind describes its node image in its source (images/base/Dockerfile, pkg/build/nodeimage): a systemd root
# file system with containerd, runc, the CNI plugins, kubelet/kubeadm/kubectl, kind's entrypoint, units and
# /kind files, and the control-plane images already in containerd's k8s.io namespace (kubeadm pulls nothing).
# This script makes the same from what this machine can reach:
# - the root file system by debootstrap from Debian's archive (Debian's containerd 1.6, runc and CNI plugins);
# - kind's node files from the kind module in Go's module cache (the version kind itself is built from);
# - each control-plane image from the static binary built here, tagged exactly as `kubeadm config images list`
#   prints, so the etcd and coredns tags name other versions than the binaries inside (ETCD_VERSION and
#   COREDNS_VERSION of versions.env): kubeadm asks for those names;
# - the pod network from podnet.sh, not kindnetd (see there);
# - the images loaded by a throw-away containerd over the root file system, then `podman import`.
# The image's name carries a hash of everything it is made from, so it is built once per machine (about 5-8
# minutes, 2 GB, peak disk about 5 GB under /var/tmp) and again when a version or this recipe changes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../testcluster/versions.env
source "$repo/hack/testcluster/versions.env"
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
die() { echo "kind/node-image.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
for tool in buildah podman debootstrap containerd ctr go python3; do
  command -v "$tool" >/dev/null || die "$tool is not installed (make system-deps)"
done

# The binaries: the node tier's set, kubeadm and kind (cached by version; built when missing).
for set in node kubeadm kind; do bash "$repo/hack/testcluster/build.sh" "$set" >/dev/null; done
bin=$cache/bin
binary() { echo "$bin/$1-$2/$1"; }
read -r pause_archive pause_name < <(bash "$repo/hack/image/pause.sh" | tail -1)

# The node's open-files and process limits: containerd's unit ships `infinity`, which a container may not set
# here (no CAP_SYS_RESOURCE); kind's podman containers get these from the CONTAINERS_CONF file that
# tests/support/kind.py writes, so both come from limits.sh.
# shellcheck source=limits.sh
source "$here/limits.sh"

key=$(cat "$0" "$here/podnet.sh" "$here/default-cni.yaml" "$here/limits.sh" "$repo/hack/testcluster/versions.env" \
  | { cat; echo "$pause_name $KIND_NOFILE $KIND_NPROC"; } | sha256sum | cut -c1-12)
image=localhost/kaliper-kind-node:$key
if podman image exists "$image"; then log "kind node image: $image (cached)"; echo "$image"; exit 0; fi

kind_src=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || die "could not download kind $KIND_VERSION"
files=$kind_src/images/base/files

work=$(mktemp -d /var/tmp/kaliper-kind.XXXXXX)
ctr_pid=
cleanup() {
  [ -z "$ctr_pid" ] || kill "$ctr_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  umount -R "$work/root/proc" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# 1. A small Debian with iptables for kube-proxy and the pod network (they program the node's netfilter).
log "kind node image: tools base (debootstrap bookworm: iptables, conntrack, iproute2)"
debootstrap --variant=minbase --include=iptables,conntrack,iproute2 bookworm "$work/tools" "$mirror" \
  >"$work/tools.log" 2>&1 || { tail -20 "$work/tools.log" >&2; die "debootstrap of the tools base failed"; }
rm -rf "$work"/tools/var/cache/apt/archives/*.deb "$work"/tools/var/lib/apt/lists/*
tools=localhost/kaliper-kind-tools:$key
tar -C "$work/tools" -c . | podman import --quiet - "$tools" >/dev/null

# 2. The images the nodes run, as archives: FROM scratch with a static binary, or the tools base.
mkdir -p "$work/images"
make_image() {  # make_image NAME FROM BINARY PATH_IN_IMAGE [ENTRYPOINT]
  local name=$1 from=$2 binary=$3 path=$4 entrypoint=${5:-} c
  c=$(buildah from --quiet "$from")
  buildah copy --quiet "$c" "$binary" "$path" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  [ -z "$entrypoint" ] || buildah config --entrypoint "[\"$entrypoint\"]" "$c"
  buildah commit --quiet --rm "$c" "$name" >/dev/null
  buildah push --quiet "$name" "docker-archive:$work/images/$(echo "$name" | tr '/:' '__').tar:$name"
}
kubeadm=$(binary kubeadm "$KUBERNETES_VERSION")
mapfile -t wanted < <("$kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" 2>/dev/null)
[ ${#wanted[@]} -ge 6 ] || die "kubeadm listed no images"
pause_tag=
for name in "${wanted[@]}"; do
  log "kind node image: $name"
  case $name in
    */kube-proxy:*) make_image "$name" "$tools" "$(binary kube-proxy "$KUBERNETES_VERSION")" /usr/local/bin/kube-proxy ;;
    */kube-*:*) n=${name##*/}; n=${n%%:*}
      make_image "$name" scratch "$(binary "$n" "$KUBERNETES_VERSION")" "/usr/local/bin/$n" ;;
    */etcd:*) make_image "$name" scratch "$(binary etcd "$ETCD_VERSION")" /usr/local/bin/etcd ;;
    */coredns:*) make_image "$name" scratch "$(binary coredns "$COREDNS_VERSION")" /coredns /coredns ;;
    */pause:*) pause_tag=$name
      buildah tag "$pause_name" "$name" 2>/dev/null \
        || { podman load --quiet -i "$pause_archive" >/dev/null && buildah tag "$pause_name" "$name"; }
      buildah push --quiet "$name" "docker-archive:$work/images/pause.tar:$name" ;;
    *) die "kubeadm lists an image this script does not know how to make: $name" ;;
  esac
done
podnet=localhost/kaliper-podnet:$key
c=$(buildah from --quiet "$tools")
buildah copy --quiet "$c" "$(binary kubectl "$KUBERNETES_VERSION")" /usr/local/bin/kubectl >/dev/null
buildah copy --quiet --chmod 0755 "$c" "$here/podnet.sh" /usr/local/bin/podnet.sh >/dev/null
buildah commit --quiet --rm "$c" "$podnet" >/dev/null
buildah push --quiet "$podnet" "docker-archive:$work/images/podnet.tar:$podnet"

# 3. The node's root file system, as kind's base image makes it (images/base/Dockerfile), from Debian.
log "kind node image: root file system (debootstrap bookworm: systemd, containerd, runc, CNI plugins)"
root=$work/root
debootstrap --variant=minbase \
  --include=systemd,dbus,iptables,nftables,iproute2,conntrack,ethtool,util-linux,mount,kmod,libseccomp2,pigz,bash,ca-certificates,procps,jq,socat,containerd,runc,containernetworking-plugins \
  bookworm "$root" "$mirror" >"$work/root.log" 2>&1 || { tail -20 "$work/root.log" >&2; die "debootstrap of the node failed"; }
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
install -m 0755 "$files"/usr/local/bin/* "$root/usr/local/bin/"
mkdir -p "$root/kind/bin" "$root/kind/manifests" "$root/etc/kubernetes/manifests" "$root/etc/systemd/system/kubelet.service.d"
install -m 0755 "$files"/kind/bin/* "$root/kind/bin/"
install -m 0644 "$files"/etc/crictl.yaml "$root/etc/"
install -m 0644 "$files"/etc/default/kubelet "$root/etc/default/"
install -m 0644 "$files"/etc/sysctl.d/* "$root/etc/sysctl.d/"
install -m 0644 "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice "$root/etc/systemd/system/"
install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"
mkdir -p "$root/etc/containerd"
# Debian's containerd lives in /usr/bin; its limits are the container's (see above); the sandbox image is the
# pause image kubeadm names; and oom_score_adj may only be raised here (no CAP_SYS_RESOURCE).
sed -e 's|^ExecStart=/usr/local/bin/containerd|ExecStart=/usr/bin/containerd|' \
    -e "s|^LimitNOFILE=.*|LimitNOFILE=$KIND_NOFILE|" -e "s|^LimitNPROC=.*|LimitNPROC=$KIND_NPROC|" \
    "$files/etc/systemd/system/containerd.service" >"$root/etc/systemd/system/containerd.service"
rm -f "$root/lib/systemd/system/containerd.service"
sed -e "s|sandbox_image = .*|sandbox_image = \"$pause_tag\"|" \
    -e 's|restrict_oom_score_adj = false|restrict_oom_score_adj = true|' \
    "$files/etc/containerd/config.toml" >"$root/etc/containerd/config.toml"
ctr oci spec | python3 -c '
import json, sys
spec = json.load(sys.stdin)
spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
json.dump(spec, sys.stdout, indent=2)' >"$root/etc/containerd/cri-base.json"
mkdir -p "$root/opt/cni" && ln -sfn /usr/lib/cni "$root/opt/cni/bin"
for n in kubelet kubeadm kubectl; do install -m 0755 "$(binary "$n" "$KUBERNETES_VERSION")" "$root/usr/bin/$n"; done
printf '%s' "$KUBERNETES_VERSION" >"$root/kind/version"
sed "s|PODNET_IMAGE|$podnet|" "$here/default-cni.yaml" >"$root/kind/manifests/default-cni.yaml"
# No local-path-provisioner image is built, so the default StorageClass provisions nothing (no example needs a volume).
cat >"$root/kind/manifests/default-storage.yaml" <<'YAML'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
YAML
# kind's clean-up of systemd units, as in its Dockerfile.
find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
  "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
  "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"$root/etc/systemd/journald.conf"
ln -sfn /usr/lib/systemd/systemd "$root/sbin/init"
chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
chroot "$root" systemctl mask systemd-binfmt.service >/dev/null 2>&1

# 4. The images, loaded into the node's containerd store by a throw-away containerd (CRI off) over the root.
log "kind node image: loading ${#wanted[@]} images and the pod network into containerd's k8s.io namespace"
cat >"$work/containerd.toml" <<TOML
version = 2
root = "$root/var/lib/containerd"
state = "$work/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$work/containerd.sock"
TOML
containerd --config "$work/containerd.toml" >"$work/containerd.log" 2>&1 &
ctr_pid=$!
for _ in $(seq 100); do [ -S "$work/containerd.sock" ] && break; sleep 0.1; done
[ -S "$work/containerd.sock" ] || { cat "$work/containerd.log" >&2; die "the loading containerd did not start"; }
for archive in "$work"/images/*.tar; do
  ctr --address "$work/containerd.sock" -n k8s.io images import --snapshotter overlayfs "$archive" >/dev/null \
    || die "loading $archive failed"
done
kill "$ctr_pid" && wait "$ctr_pid" 2>/dev/null || true
ctr_pid=

# 5. The node image: kind's entrypoint, init and stop signal.
log "kind node image: podman import"
tar -C "$root" -c . | podman import --quiet \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change 'ENV container=docker' --change 'STOPSIGNAL SIGRTMIN+3' - "$image" >/dev/null
podman rmi --force "$tools" "$podnet" >/dev/null 2>&1 || true
# Older node images (another recipe or version) are 2 GB each: keep only this one.
podman images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/kaliper-kind-node:' | grep -vx "$image" \
  | xargs -r podman rmi --force >/dev/null 2>&1 || true
for name in "${wanted[@]}"; do podman rmi --force "$name" >/dev/null 2>&1 || true; done
log "kind node image: $image in $(( $(date +%s) - start ))s"
echo "$image"
