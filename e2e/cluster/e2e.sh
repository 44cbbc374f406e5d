#!/usr/bin/env bash
# The real-cluster suite (`make e2e-cluster`) on the cluster of `make
# cluster-up`: builds the images and imports them into its containerd,
# starts the platform (e2e/cluster/platform.sh: git server, stand-in cloud,
# Flux's source-, kustomize- and helm-controller), installs Landform with
# its Helm chart, then runs e2e/cluster's tests. On failure it prints what
# the cluster saw.
#
# Environment:
#   LANDFORM_CLUSTER_NAMESPACE  runner namespace of the scenarios (default e2e-cluster)
#   E2E_FLAGS                   extra `go test` flags (e.g. -run TestRunnerPods)
#   VERSION                     version stamped into the images' binaries
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "needs root (it imports images into the cluster's containerd)"
missing=()
for c in "${components[@]}"; do pid_of "$c" >/dev/null || missing+=("$c"); done
[ ${#missing[@]} -eq 0 ] || die "the cluster is not up (not running: ${missing[*]}): run 'make cluster-up' first"

cd "$root"
export KUBECONFIG=$kubeconfig
ns=${LANDFORM_CLUSTER_NAMESPACE:-e2e-cluster}
kubectl() { "$bin/kubectl" "$@"; }
started=$(date +%s)

diagnostics() {
	log "diagnostics"
	kubectl get pods -A -o wide || true
	kubectl get gitrepositories,helmcharts,helmreleases,kustomizations,terraforms -A -o wide || true
	kubectl -n "$ns" get events --sort-by=.lastTimestamp | tail -40 || true
	kubectl -n landform-system logs deployment/landform-controller --tail=200 || true
}
finish() {
	local rc=$?
	[ "$rc" -eq 0 ] || diagnostics
	log "e2e-cluster finished in $(($(date +%s) - started))s (exit $rc)"
	exit "$rc"
}
trap finish EXIT

# The images; Flux's CRDs and controllers, the git server and the cloud.
prepare_platform

log "installing Landform's chart (runner namespace $ns)"
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
install_landform "$ns"

log "running the scenarios"
# shellcheck disable=SC2086 # word splitting of the extra flags is intended
LANDFORM_CLUSTER_KUBECONFIG=$kubeconfig LANDFORM_CLUSTER_NAMESPACE=$ns \
	go test -count=1 -v -timeout 20m ${E2E_FLAGS:-} ./e2e/cluster/
