#!/usr/bin/env bash
# `make bench-cluster`: hack/bench's cluster mode on the cluster of `make
# cluster-up`. Builds the images and imports them into its containerd,
# starts the platform (as `make e2e-cluster` does), installs Landform with
# its chart with the bench's runner namespace beside the ones the
# installation has, then measures runner Pods beside the raw engine in a
# Pod (hack/bench -cluster) and writes docs/benchmarks-cluster.json and
# docs/benchmarks.md. See docs/benchmarks.md's section on runner Pods.
#
# Environment:
#   BENCH_CLUSTER_N          objects created at once (default 50; 0 skips them)
#   BENCH_SAMPLES            samples of one object (default 9)
#   BENCH_CLUSTER_NAMESPACE  the bench's runner namespace, of its own (default bench-cluster)
#   BENCH_CLUSTER_IMAGES     0: measure the images and installation as they are (no build, no
#                            rollout of the controller that other work on the cluster may be using)
#   BENCH_FLAGS              more hack/bench flags (e.g. -out-json /tmp/b/benchmarks.json -out-md /tmp/b/b.md)
#   VERSION                  version stamped into the images' binaries
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "needs root (it imports images into the cluster's containerd and reads the cluster's cgroups)"
missing=()
for c in "${components[@]}"; do pid_of "$c" >/dev/null || missing+=("$c"); done
[ ${#missing[@]} -eq 0 ] || die "the cluster is not up (not running: ${missing[*]}): run 'make cluster-up' first"

cd "$root"
export KUBECONFIG=$kubeconfig
ns=${BENCH_CLUSTER_NAMESPACE:-bench-cluster}
kubectl() { "$bin/kubectl" "$@"; }

if [ "${BENCH_CLUSTER_IMAGES:-1}" = 0 ]; then
	log "measuring the images and the installation as they are (BENCH_CLUSTER_IMAGES=0)"
	"$root/e2e/cluster/platform.sh"
else
	prepare_platform
fi

kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# The runner namespaces the installation has (other work's among them:
# install_landform sets the list), and the bench's.
namespaces=$(landform_runner_namespaces)
if ! grep -qx "$ns" <<<"$namespaces" || [ "${BENCH_CLUSTER_IMAGES:-1}" != 0 ]; then
	# shellcheck disable=SC2046 # one namespace per word
	log "installing Landform's chart (runner namespaces $(printf '%s\n' $namespaces "$ns" | sort -u | paste -sd ' '))"
	# shellcheck disable=SC2046
	install_landform $(printf '%s\n' $namespaces "$ns" | sort -u)
fi

log "measuring (BENCH_CLUSTER_N=${BENCH_CLUSTER_N:-50}, BENCH_SAMPLES=${BENCH_SAMPLES:-9})"
# shellcheck disable=SC2086 # word splitting of the extra flags is intended
go run ./hack/bench -cluster -cluster-dir "$dir" -cluster-namespace "$ns" -cluster-containerd "$containerd_sock" ${BENCH_FLAGS:-}
