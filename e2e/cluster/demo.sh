#!/usr/bin/env bash
# `make demo-cluster`: the walkthrough of `make demo` on a real single-node
# cluster. Starts the cluster (make cluster-up's e2e/cluster/up.sh), builds
# and imports the images, starts the platform (git server, stand-in cloud,
# Flux's controllers), installs Landform with its chart, walks through
# (`landform dev demo --cluster-kubeconfig`), and tears everything down,
# pass or fail. Exits with the walkthrough's status.
#
# Needs what cluster-up needs (root, containerd installable, the ports free;
# e2e/cluster/README.md) and no cluster of its own running: it refuses to
# take over a cluster you started.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "needs root (it runs a kubelet, containerd and iptables); 'make demo' runs anywhere"
cd "$root"
started=$(date +%s)
"$root/e2e/cluster/up.sh"

finish() {
	local rc=$?
	log "tearing the cluster down"
	"$root/e2e/cluster/down.sh" >/dev/null 2>&1 || log "WARNING: cluster-down failed; run 'make cluster-down'"
	log "demo-cluster finished in $(($(date +%s) - started))s (exit $rc)"
	exit "$rc"
}
trap finish EXIT

prepare_platform
export KUBECONFIG=$kubeconfig
"$bin/kubectl" create namespace demo
log "installing Landform's chart (runner namespace demo)"
install_landform demo
"$bin/landform" dev demo --cluster-kubeconfig "$kubeconfig" \
	--git-url "$LANDFORM_CLUSTER_GIT_URL/landform.git" --cloud-url "$LANDFORM_CLUSTER_CLOUD_URL" \
	--app-image localhost/landform-e2e-app:e2e
