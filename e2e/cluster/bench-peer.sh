#!/usr/bin/env bash
# `make bench-cluster-peer TOFU_CONTROLLER_SRC=DIR`: Landform beside
# tofu-controller on the cluster of `make cluster-up`, each given
# BENCH_PEER_N objects at once (hack/bench -cluster -cluster-peer).
#
# tofu-controller is built from a checkout of its source (DIR: its
# repository, e.g. a clone of github.com/flux-iac/tofu-controller) and
# installed with its own chart from that checkout, with its defaults but
# for:
#   - the images: its manager and runner built here with CGO disabled and
#     assembled without Docker (hack/images --spec), the runner with the
#     same bin/tofu-static as Landform's runner image;
#   - awsPackage.install=false and eventsAddress "" (nothing to fetch from
#     a registry, no notification-controller to post to);
#   - its controller Pod's DNS: tofu-controller dials each runner Pod as
#     <ip>.<namespace>.pod.cluster.local, and this cluster has no DNS, so
#     the Pod asks e2e-poddns on the node's address, which answers those
#     names for the Pod network and nothing else.
# The go.mod it builds with drops one test-only requirement the module
# proxy does not serve (github.com/elgohr/go-localstack); the checkout is
# not changed.
#
# Environment:
#   TOFU_CONTROLLER_SRC    the checkout (required)
#   BENCH_PEER_N           objects for each controller (default 200)
#   BENCH_CLUSTER_IMAGES   0: Landform's images and installation as they are
#   BENCH_FLAGS            more hack/bench flags
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=e2e/cluster/tofu-controller.sh
source "$(dirname "$0")/tofu-controller.sh"

[ "$(id -u)" = 0 ] || die "needs root (it imports images into the cluster's containerd and reads the cluster's cgroups)"
pid_of kube-apiserver >/dev/null || die "the cluster is not up: run 'make cluster-up' first"
src=$(tofu_controller_src)
version=$(awk '$1 == "appVersion:" {gsub(/"/, "", $2); print $2}' "$src/charts/tofu-controller/Chart.yaml")
# What was built, for the report: the checkout's commit where it is one.
built="tofu-controller $version"
if commit=$(git -C "$src" rev-parse --short=8 HEAD 2>/dev/null); then
	built="$built, commit $commit$(git -C "$src" diff --quiet HEAD 2>/dev/null || echo ' with local changes')"
fi
peer_ns=bench-peer
ip=$(node_ip)
work=$dir/peer
mkdir -p "$work/bin" "$logs" "$pids"
export KUBECONFIG=$kubeconfig
kubectl() { "$bin/kubectl" "$@"; }
cd "$root"

# The platform (Flux's CRDs and source-controller among it) and Landform
# as make bench-cluster installs them, with the bench's namespace.
BENCH_CLUSTER_IMAGES=${BENCH_CLUSTER_IMAGES:-1}
if [ "$BENCH_CLUSTER_IMAGES" != 0 ]; then
	prepare_platform
else
	"$root/e2e/cluster/platform.sh"
fi
kubectl create namespace bench-cluster --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# shellcheck disable=SC2046 # one namespace per word
install_landform $(printf '%s\n' $(landform_runner_namespaces) bench-cluster | sort -u)

build_tofu_controller "$src" "$work"
install_tofu_controller "$src" "$peer_ns"

log "measuring Landform, then tofu-controller (BENCH_PEER_N=${BENCH_PEER_N:-200})"
# shellcheck disable=SC2086 # word splitting of the extra flags is intended
go run ./hack/bench -cluster -cluster-dir "$dir" -cluster-namespace bench-cluster -cluster-containerd "$containerd_sock" \
	-cluster-n "${BENCH_PEER_N:-200}" -cluster-peer tofu-controller -cluster-peer-namespace "$peer_ns" \
	-cluster-peer-source "$built" ${BENCH_FLAGS:-}
