#!/usr/bin/env bash
# `make migrate-peer TOFU_CONTROLLER_SRC=DIR`: the migration guide
# (docs/migrating-from-tofu-controller.md) on a real tofu-controller
# install, on the cluster of `make cluster-up`: the platform and Landform
# as `make e2e-cluster` installs them, tofu-controller built from a
# checkout of its source and installed with its own chart
# (e2e/cluster/tofu-controller.sh), then e2e/cluster's
# TestMigrateFromTofuController. By hand, as bench-cluster-peer: the
# module proxy does not serve tofu-controller's api module.
#
# Environment:
#   TOFU_CONTROLLER_SRC         the checkout (required)
#   LANDFORM_CLUSTER_NAMESPACE  runner namespace of both (default e2e-cluster)
#   VERSION                     version stamped into Landform's images
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=e2e/cluster/tofu-controller.sh
source "$(dirname "$0")/tofu-controller.sh"

[ "$(id -u)" = 0 ] || die "needs root (it imports images into the cluster's containerd)"
pid_of kube-apiserver >/dev/null || die "the cluster is not up: run 'make cluster-up' first"
src=$(tofu_controller_src)
cd "$root"
export KUBECONFIG=$kubeconfig
kubectl() { "$bin/kubectl" "$@"; }
ns=${LANDFORM_CLUSTER_NAMESPACE:-e2e-cluster}
mkdir -p "$dir/peer" "$logs" "$pids"

prepare_platform
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
install_landform "$ns"
build_tofu_controller "$src" "$dir/peer"
install_tofu_controller "$src" "$ns"

log "following the migration guide"
LANDFORM_CLUSTER_KUBECONFIG=$kubeconfig LANDFORM_CLUSTER_NAMESPACE=$ns LANDFORM_CLUSTER_TOFU_CONTROLLER=1 \
	go test -count=1 -v -timeout 20m -run TestMigrateFromTofuController ./e2e/cluster/
