#!/usr/bin/env bash
# The end-to-end suite on a kind cluster (`make e2e-kind`): builds the
# images with Docker, creates a kind cluster and loads them, installs Flux's
# source-controller and Landform's Helm chart, then runs the scenarios of
# e2e/ (go test ./e2e) against it. See e2e/README.md.
#
# Needs a Docker engine, kubectl and Go; the first image build compiles
# OpenTofu (about 10 minutes; BuildKit caches it afterwards). Without a
# Docker engine it prints a "skipped" line and exits 0.
#
# Environment:
#   LANDFORM_E2E_CLUSTER       kind cluster name (default landform-e2e); an
#                              existing cluster of that name is reused and kept
#   LANDFORM_E2E_KEEP_CLUSTER  1: keep the cluster this run created
#   LANDFORM_E2E_NAMESPACE     runner namespace of the scenarios (default e2e)
#   LANDFORM_E2E_GO_TEST_FLAGS extra `go test` flags (e.g. -run TestManualApproval)
#   KIND_NODE_IMAGE            kind node image (default: kind's own)
set -euo pipefail

if ! docker info >/dev/null 2>&1; then
	echo "e2e-kind skipped: no Docker engine (docker info failed)"
	exit 0
fi

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
for cmd in kubectl go; do
	command -v "$cmd" >/dev/null || { echo "e2e-kind needs $cmd on PATH" >&2; exit 1; }
done

cluster=${LANDFORM_E2E_CLUSTER:-landform-e2e}
ns=${LANDFORM_E2E_NAMESPACE:-e2e}
# The images e2e/kind/values.yaml installs.
controller_image=landform-controller:e2e
runner_image=landform-runner:e2e
gitserver_image=landform-e2e-gitserver:e2e

log() { printf '==> %s\n' "$*" >&2; }

hack/tools.sh kind helm kustomize
kind=$root/bin/kind
helm=$root/bin/helm
kustomize=$root/bin/kustomize

work=$(mktemp -d)
export KUBECONFIG=$work/kubeconfig
created=

diagnostics() {
	log "diagnostics"
	kubectl get pods -A -o wide || true
	kubectl get gitrepositories,terraforms -A -o wide || true
	kubectl -n "$ns" get events --sort-by=.lastTimestamp || true
	kubectl -n landform-system logs deployment/landform-controller --tail=300 || true
	kubectl -n source-system logs deployment/source-controller --tail=100 || true
}

finish() {
	local rc=$?
	[ "$rc" -eq 0 ] || diagnostics
	if [ -n "$created" ] && [ "${LANDFORM_E2E_KEEP_CLUSTER:-}" != 1 ]; then
		log "deleting kind cluster $cluster"
		"$kind" delete cluster --name "$cluster" || true
		rm -rf "$work"
	else
		log "kind cluster $cluster kept: export KUBECONFIG=$KUBECONFIG"
	fi
	exit "$rc"
}
trap finish EXIT

log "building images"
docker build --target controller -t "$controller_image" .
docker build --target runner-e2e -t "$runner_image" .
docker build --target e2e-gitserver -t "$gitserver_image" .

if "$kind" get clusters | grep -qx "$cluster"; then
	log "reusing kind cluster $cluster"
	"$kind" get kubeconfig --name "$cluster" >"$KUBECONFIG"
else
	log "creating kind cluster $cluster"
	created=1
	"$kind" create cluster --name "$cluster" --kubeconfig "$KUBECONFIG" --wait 3m ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
fi
for image in "$controller_image" "$runner_image" "$gitserver_image"; do
	"$kind" load docker-image --name "$cluster" "$image"
done

# Flux's source-controller, the version hack/tools.sh pins, from the
# manifests in its Go module (config/default: CRDs, RBAC, Deployment in
# namespace source-system); the node pulls its image from Docker Hub.
flux_version=$(sed -n 's/^FLUX_SOURCE_VERSION=//p' hack/tools.sh)
log "installing source-controller $flux_version"
flux_src=$(cd hack/tools/tofu && go mod download -json "github.com/fluxcd/source-controller@$flux_version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
"$kustomize" build "$flux_src/config/default" | kubectl apply --server-side -f -
kubectl -n source-system rollout status deployment/source-controller --timeout=5m

log "installing Landform's chart"
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -
"$helm" upgrade --install landform charts/landform \
	--namespace landform-system --create-namespace \
	--values e2e/kind/values.yaml \
	--set "runner.namespaces={$ns}" \
	--wait --timeout 5m

log "running the e2e scenarios"
# shellcheck disable=SC2086 # word splitting of the extra flags is intended
LANDFORM_E2E_KUBECONFIG=$KUBECONFIG \
LANDFORM_E2E_NAMESPACE=$ns \
LANDFORM_E2E_GITSERVER_IMAGE=$gitserver_image \
	go test -count=1 -v -timeout 30m ${LANDFORM_E2E_GO_TEST_FLAGS:-} ./e2e/
