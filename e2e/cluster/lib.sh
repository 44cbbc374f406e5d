# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this
# Shared settings of e2e/cluster/up.sh and down.sh (sourced, not run).
#
# One single-node cluster per machine: ports 2379, 6443 and 10250, the cni0
# bridge and the iptables chains are machine-wide.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$root/bin

# State: PKI, configs, etcd data, logs, PIDs. Kept after cluster-down (the
# logs are what you read when something failed); cluster-up starts a fresh
# cluster (new etcd data) but keeps the PKI and containerd's images.
dir=${LANDFORM_CLUSTER_DIR:-/var/lib/landform-cluster}
pki=$dir/pki
logs=$dir/logs
pids=$dir/pids
kubeconfig=$dir/admin.kubeconfig

# containerd runs on its own socket and state directory, so that it can
# never be confused with a containerd the machine runs for something else,
# and its shims are recognisable by that address.
run_dir=/run/landform-cluster
containerd_sock=$run_dir/containerd/containerd.sock
containerd_root=$dir/containerd

node=${LANDFORM_CLUSTER_NODE:-landform-node}
cni_name=landform
cni_conf=/etc/cni/net.d/10-$cni_name.conflist
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/16
service_ip=10.96.0.1
kubelet_dir=/var/lib/kubelet

# Components in start order; cluster-down stops them in reverse.
components=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

# What e2e/cluster/platform.sh runs beside the cluster, as host processes
# on the node's address: the git server, the stand-in cloud, the engine
# release mirror and Flux's controllers; and the pod-name DNS stand-in that
# e2e/cluster/bench-peer.sh starts. cluster-down stops them first.
platform=(e2e-gitserver landform-cloud e2e-enginemirror source-controller kustomize-controller helm-controller e2e-poddns)
platform_dir=$dir/platform
platform_env=$dir/platform.env
git_port=9080
cloud_port=9480
storage_port=9790
engine_mirror_port=9680
# The engine mirror's public signing key, which install_landform configures.
engine_mirror_key=$dir/platform/engine-mirror.asc

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }

# node_ip: the machine's own address (the first address of the interface
# of its default route, or its first global address);
# LANDFORM_CLUSTER_NODE_IP overrides it.
node_ip() {
	if [ -n "${LANDFORM_CLUSTER_NODE_IP:-}" ]; then
		echo "$LANDFORM_CLUSTER_NODE_IP"
		return
	fi
	local dev ip=
	dev=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}')
	[ -z "$dev" ] || ip=$(ip -4 -o addr show dev "$dev" scope global | awk '{split($4, a, "/"); print a[1]; exit}')
	[ -n "$ip" ] || ip=$(ip -4 -o addr show scope global | awk '$2 != "cni0" {split($4, a, "/"); print a[1]; exit}')
	[ -n "$ip" ] || die "cannot find this machine's address; set LANDFORM_CLUSTER_NODE_IP"
	echo "$ip"
}

# pid_of NAME: the recorded PID of a component, if that process still runs
# the same binary.
pid_of() {
	local f=$pids/$1.pid pid
	[ -s "$f" ] || return 1
	pid=$(cat "$f")
	[ -d "/proc/$pid" ] || return 1
	grep -qF "$1" "/proc/$pid/cmdline" 2>/dev/null || return 1
	echo "$pid"
}

running_components() {
	local c
	for c in "${components[@]}" "${platform[@]}"; do
		pid_of "$c" >/dev/null && echo "$c"
	done
	return 0
}

# start NAME ARGS...: run bin/NAME (or NAME) detached from this script's
# session, PID in $pids/NAME.pid, output in $logs/NAME.log.
start() {
	local name=$1 exe
	shift
	exe=$bin/$name
	[ -x "$exe" ] || exe=$(command -v "$name")
	log "starting $name"
	printf '\n=== %s %s\n' "$(date -Is)" "$name" >>"$logs/$name.log"
	setsid "$exe" "$@" >>"$logs/$name.log" 2>&1 </dev/null &
	echo $! >"$pids/$name.pid"
}

ctr_() { ctr --address "$containerd_sock" -n k8s.io "$@"; }

# install_landform NAMESPACE...: Landform with its Helm chart and
# e2e/cluster/values.yaml (images of `make images`), runners allowed in the
# given namespaces, which must exist. The image tag stays e2e; the digest
# annotation rolls the controller out when its image changed.
# LANDFORM_RUNNER_POD_REUSE (a Go duration; 0: one Pod per run) sets
# runner.podReuse (--runner-pod-reuse); unset, the chart's default (30s).
install_landform() {
	local digest namespaces
	namespaces=$(IFS=,; echo "$*")
	# Runner Pods install the engines objects ask for from the platform's
	# mirror, verified with its key (when the platform runs).
	local engine_values=() reuse_values=()
	[ -z "${LANDFORM_RUNNER_POD_REUSE:-}" ] || reuse_values=(--set-string "runner.podReuse=$LANDFORM_RUNNER_POD_REUSE")
	if [ -s "$engine_mirror_key" ]; then
		engine_values=(--set "engines.terraform.releasesURL=http://$(node_ip):$engine_mirror_port"
			--set-file "engines.terraform.signingKey=$engine_mirror_key")
	fi
	digest=$(ctr_ images ls | awk '$1 == "localhost/landform-controller:e2e" {print $3}')
	"$bin/helm" --kubeconfig "$kubeconfig" upgrade --install landform "$root/charts/landform" \
		--namespace landform-system --create-namespace \
		--values "$root/e2e/cluster/values.yaml" \
		--set "runner.namespaces={$namespaces}" \
		"${engine_values[@]}" \
		"${reuse_values[@]}" \
		--set-string "podAnnotations.landform\.dev/image-digest=${digest//:/-}" \
		--wait --timeout 5m
}

# landform_runner_namespaces: the runner namespaces the installation has
# (other work's among them, which an upgrade must keep), one per line.
landform_runner_namespaces() {
	"$bin/kubectl" --kubeconfig "$kubeconfig" get serviceaccounts -A \
		-l app.kubernetes.io/component=runner,app.kubernetes.io/instance=landform \
		-o jsonpath='{range .items[*]}{.metadata.namespace}{"\n"}{end}'
}

# prepare_platform: the images of `make images` built and imported into the
# cluster's containerd, the platform started (e2e/cluster/platform.sh), and
# its URLs (platform.env) exported.
prepare_platform() {
	log "building the images and importing them into the cluster's containerd"
	"$root/hack/images/build.sh" --version "${VERSION:-dev}" --address "$containerd_sock" pause controller runner runner-e2e e2e-app
	"$root/e2e/cluster/platform.sh"
	set -a
	# shellcheck source=/dev/null # written by platform.sh
	source "$platform_env"
	set +a
}
