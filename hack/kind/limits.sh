# The open-files and process limits of kind's node containers and of the containerd inside them. kind's podman
# provider has no ulimit flag and podman's defaults exceed what this machine's root may set (no
# CAP_SYS_RESOURCE: "error setting rlimit type 7"), so the nodes get these through a CONTAINERS_CONF file, and
# the node image's containerd unit asks for no more. At most 16384 each, and never above this shell's hard limits.
at_most() { local hard=$1 cap=$2; if [ "$hard" = unlimited ] || [ "$hard" -gt "$cap" ]; then echo "$cap"; else echo "$hard"; fi; }
KIND_NOFILE=$(at_most "$(ulimit -Hn)" 16384)
KIND_NPROC=$(at_most "$(ulimit -Hu)" 16384)
