#!/usr/bin/env bash
# Starts what the real-cluster scenarios need beside the cluster, as host
# processes listening on the node's address (which Pods reach: it is this
# machine): a git server that accepts pushes, the stand-in cloud, a mirror
# of Terraform's releases (bin/terraform-static as 1.5.7), and Flux's
# source-controller, kustomize-controller and helm-controller with the
# admin kubeconfig. PIDs go to $LANDFORM_CLUSTER_DIR/pids like the
# cluster's own (cluster-down stops them), logs to logs/, and the URLs to
# $LANDFORM_CLUSTER_DIR/platform.env. Components already running are left
# alone, so it can run before every `make e2e-cluster`.
#
# Flux's controllers are host processes, not Pods: their images would need
# the same Docker-free build as Landform's, and the scenarios exercise
# Landform's Pods, not Flux's.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "needs root"
pid_of kube-apiserver >/dev/null || die "the cluster is not up: run 'make cluster-up' first"
for b in terraform-static landform-cloud source-controller kustomize-controller helm-controller flux-crds flux-kustomize-crds flux-helm-crds kubectl; do
	[ -e "$bin/$b" ] || die "bin/$b is missing: run 'make cluster-tools build'"
done
command -v git >/dev/null || die "git is missing: run hack/cluster-deps.sh"

ip=$(node_ip)
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
mkdir -p "$platform_dir/storage" "$platform_dir/git" "$logs" "$pids"

# The e2e git server and engine mirror are small programs of this repository.
(cd "$root" && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o "$bin/e2e-gitserver" ./e2e/gitserver &&
	GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o "$bin/e2e-enginemirror" ./e2e/enginemirror)

log "installing Flux's CRDs and the flux-system namespace"
kubectl apply --server-side --force-conflicts -f "$bin/flux-crds/" -f "$bin/flux-kustomize-crds/" -f "$bin/flux-helm-crds/" >/dev/null
kubectl create namespace flux-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl wait --for=condition=Established crd/gitrepositories.source.toolkit.fluxcd.io crd/ocirepositories.source.toolkit.fluxcd.io \
	crd/buckets.source.toolkit.fluxcd.io crd/kustomizations.kustomize.toolkit.fluxcd.io crd/helmreleases.helm.toolkit.fluxcd.io --timeout=60s >/dev/null

# launch NAME URL ARGS...: start bin/NAME unless it runs, then wait until
# URL answers.
launch() {
	local name=$1 check=$2 i pid
	shift 2
	if pid_of "$name" >/dev/null; then
		log "$name runs already (pid $(pid_of "$name"))"
		return
	fi
	KUBECONFIG=$kubeconfig RUNTIME_NAMESPACE=flux-system CHECKPOINT_DISABLE=1 start "$name" "$@"
	pid=$(cat "$pids/$name.pid")
	for ((i = 0; i < 120; i++)); do
		if curl -s -o /dev/null "$check"; then return; fi
		# (pid_of would race the fork: the child is not yet exec'd.)
		[ -d "/proc/$pid" ] || die "$name exited; see $logs/$name.log"
		sleep 0.5
	done
	die "$name did not answer $check in 60s; see $logs/$name.log"
}

running=0
for c in "${platform[@]}"; do pid_of "$c" >/dev/null && running=1; done
if [ "$running" = 0 ]; then
	for port in "$git_port" "$cloud_port" "$storage_port" "$engine_mirror_port" 9791 9792 9793 9794 9795 9796; do
		if ss -Htln "sport = :$port" | grep -q .; then
			die "port $port is in use (the platform's ports: $git_port git, $cloud_port cloud, $engine_mirror_port engine mirror, $storage_port and 9791-9796 Flux)"
		fi
	done
fi

# landform.git holds the checkout's modules/ (the walkthrough of `make
# demo-cluster` pushes its manifests to it); the suite seeds its own.
rm -rf "$platform_dir/seed" && mkdir -p "$platform_dir/seed" && cp -r "$root/modules" "$platform_dir/seed/"
find "$platform_dir/seed" -name .terraform -type d -prune -exec rm -rf {} +
launch e2e-gitserver "http://$ip:$git_port/" --listen="$ip:$git_port" --root="$platform_dir/git" --allow-push \
	--seed="landform=$platform_dir/seed"
launch landform-cloud "http://$ip:$cloud_port/v1/databases" --listen="$ip:$cloud_port"
# (The key is written once the mirror answers; a mirror already running
# wrote it when it started.)
pid_of e2e-enginemirror >/dev/null || rm -f "$engine_mirror_key"
launch e2e-enginemirror "http://$ip:$engine_mirror_port/_requests" --listen="$ip:$engine_mirror_port" \
	--dir="$platform_dir/engine-mirror" --terraform="$bin/terraform-static=1.5.7" --key-file="$engine_mirror_key"
for ((i = 0; i < 20; i++)); do [ -s "$engine_mirror_key" ] && break; sleep 0.5; done
[ -s "$engine_mirror_key" ] || die "the engine mirror wrote no key to $engine_mirror_key; see $logs/e2e-enginemirror.log"
flux=(--enable-leader-election=false --log-level=info)
launch source-controller "http://127.0.0.1:9792/readyz" "${flux[@]}" \
	--metrics-addr=127.0.0.1:9791 --health-addr=127.0.0.1:9792 \
	--storage-path="$platform_dir/storage" --storage-addr="$ip:$storage_port" --storage-adv-addr="$ip:$storage_port"
launch kustomize-controller "http://127.0.0.1:9794/readyz" "${flux[@]}" --requeue-dependency=5s \
	--metrics-addr=127.0.0.1:9793 --health-addr=127.0.0.1:9794
launch helm-controller "http://127.0.0.1:9796/readyz" "${flux[@]}" \
	--metrics-addr=127.0.0.1:9795 --health-addr=127.0.0.1:9796

cat >"$platform_env" <<EOF
LANDFORM_CLUSTER_GIT_URL=http://$ip:$git_port
LANDFORM_CLUSTER_CLOUD_URL=http://$ip:$cloud_port
LANDFORM_CLUSTER_ENGINE_MIRROR_URL=http://$ip:$engine_mirror_port
LANDFORM_CLUSTER_GIT_ROOT=$platform_dir/git
EOF
log "platform ready: git http://$ip:$git_port, cloud http://$ip:$cloud_port, engines http://$ip:$engine_mirror_port, Flux storage http://$ip:$storage_port"
