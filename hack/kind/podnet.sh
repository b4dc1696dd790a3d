#!/bin/sh
# The pod network of Kaliper's kind nodes: a stand-in for kind's kindnetd, whose source the Go module proxy does
# not serve (a nested module of kind's repository). Like kindnetd it gives this node's pods addresses from the
# node's podCIDR through the standard CNI plugins (ptp, host-local, portmap) and routes every other node's
# podCIDR to that node's address, all nodes sharing one podman network. Nothing is masqueraded: the cluster's
# traffic has nowhere else to go.
set -eu
conf=/etc/cni/net.d/10-kaliper-podnet.conflist
# kind adds CONTROL_PLANE_ENDPOINT to the manifest ("would you kindly patch this file"), so the pod reaches the
# API server before kube-proxy has programmed the kubernetes Service.
sa=/var/run/secrets/kubernetes.io/serviceaccount
server=${CONTROL_PLANE_ENDPOINT:+https://$CONTROL_PLANE_ENDPOINT}
server=${server:-https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT}
# The token by file reference, never on a command line that `ps` on the machine would show.
export KUBECONFIG=/tmp/kubeconfig
cat >"$KUBECONFIG" <<CONFIG
apiVersion: v1
kind: Config
clusters: [{name: kind, cluster: {server: "$server", certificate-authority: $sa/ca.crt}}]
users: [{name: podnet, user: {tokenFile: $sa/token}}]
contexts: [{name: podnet, context: {cluster: kind, user: podnet}}]
current-context: podnet
CONFIG

write_conf() {
  cat >"$conf.tmp" <<CONF
{"cniVersion": "0.3.1", "name": "kaliper-podnet", "plugins": [
  {"type": "ptp", "ipMasq": false, "mtu": 1500,
   "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state", "routes": [{"dst": "0.0.0.0/0"}],
            "ranges": [[{"subnet": "$1"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
CONF
  if ! cmp -s "$conf.tmp" "$conf"; then mv "$conf.tmp" "$conf"; echo "pod network $1 on $NODE_NAME"; fi
  rm -f "$conf.tmp"
}

while true; do
  if nodes=$(kubectl get nodes \
      -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}'); then
    echo "$nodes" | while read -r name cidr address; do
      [ -n "$cidr" ] && [ -n "$address" ] || continue
      if [ "$name" = "$NODE_NAME" ]; then write_conf "$cidr"
      else ip route replace "$cidr" via "$address"
      fi
    done
  fi
  sleep 10
done
