#!/usr/bin/env bash
# Starts a real single-node Kubernetes cluster on this machine (`make
# cluster-up`): etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# containerd, kubelet and kube-proxy as host processes, every PID recorded in
# $LANDFORM_CLUSTER_DIR/pids, every log in $LANDFORM_CLUSTER_DIR/logs. Waits
# until the Node is Ready and prints the admin kubeconfig's path.
#
# Needs root, the binaries of `make cluster-tools` in bin/, and Debian's
# containerd, runc and CNI plugins (hack/cluster-deps.sh). The recipe and why
# each setting is there: e2e/cluster/README.md. `make cluster-down` undoes
# everything this starts or changes.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "needs root (it runs a kubelet, containerd and iptables)"

if running=$(running_components) && [ -n "$running" ]; then
	die "a cluster is already running ($(echo "$running" | paste -sd' ')); its kubeconfig is $kubeconfig. Run 'make cluster-down' first."
fi

for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
	[ -x "$bin/$b" ] || die "bin/$b is missing: run 'make cluster-tools'"
done
for c in containerd containerd-shim-runc-v2 runc ctr iptables openssl curl; do
	command -v "$c" >/dev/null || die "$c is missing: run hack/cluster-deps.sh"
done
[ -x /usr/lib/cni/bridge ] || die "the CNI plugins are missing (/usr/lib/cni/bridge): run hack/cluster-deps.sh"

# Machine-wide resources another cluster (or a crashed one) would hold.
busy=()
for port in 2379 2380 6443 10248 10249 10250 10256 10257 10259; do
	if ss -Htln "sport = :$port" | grep -q .; then busy+=("$port"); fi
done
[ ${#busy[@]} -eq 0 ] || die "ports in use: ${busy[*]} (another cluster? 'make cluster-down' stops one this script started)"
if ip link show cni0 >/dev/null 2>&1 || [ -e "$cni_conf" ] || grep -q " $kubelet_dir" /proc/mounts; then
	die "leftovers of an earlier cluster (cni0, $cni_conf or mounts under $kubelet_dir): run 'make cluster-down' first"
fi

ip=$(node_ip)
started=$(date +%s)
# The previous cluster's logs stay readable in logs.prev.
if [ -d "$logs" ]; then rm -rf "$logs.prev" && mv "$logs" "$logs.prev"; fi
mkdir -p "$pki" "$logs" "$pids" "$run_dir"
chmod 700 "$dir"
log "cluster state in $dir (node $node, address $ip)"

# If anything below fails, stop what was started so far: a half-started
# cluster is worse than none.
cleanup_on_failure() {
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		log "cluster-up failed; logs in $logs. Stopping what was started."
		"$root/e2e/cluster/down.sh" || true
	fi
	exit "$rc"
}
trap cleanup_on_failure EXIT

# ---------------------------------------------------------------- PKI
# A CA, serving certificates for the API server and the kubelet, client
# certificates for each component and the admin, and the service-account
# key pair. Kept across cluster-down, made again when the address changed.
if [ "$(cat "$pki/node-ip" 2>/dev/null)" != "$ip" ]; then
	rm -rf "$pki" && mkdir -p "$pki"
fi

# cert NAME CN ORG USAGE [SANS]: a key and a certificate signed by the CA.
cert() {
	local name=$1 cn=$2 org=$3 usage=$4 sans=${5:-} subj
	[ -s "$pki/$name.crt" ] && return
	subj="/CN=$cn"
	[ -z "$org" ] || subj="/O=$org$subj"
	openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
	openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr"
	{
		echo "basicConstraints = critical, CA:FALSE"
		echo "keyUsage = critical, digitalSignature, keyEncipherment"
		echo "extendedKeyUsage = $usage"
		[ -z "$sans" ] || echo "subjectAltName = $sans"
	} >"$pki/$name.ext"
	openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 365 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
	rm -f "$pki/$name.csr" "$pki/$name.ext"
}

if [ ! -s "$pki/ca.crt" ]; then
	log "creating the PKI"
	openssl genrsa -out "$pki/ca.key" 2048 2>/dev/null
	openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=landform-cluster-ca" -days 365 -sha256 \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
		-out "$pki/ca.crt"
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi
cert apiserver kube-apiserver "" serverAuth \
	"DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$service_ip,IP:$ip"
cert kubelet-serving "system:node:$node" system:nodes serverAuth "DNS:$node,DNS:localhost,IP:127.0.0.1,IP:$ip"
cert admin admin system:masters clientAuth
cert kubelet "system:node:$node" system:nodes clientAuth
cert kube-controller-manager system:kube-controller-manager "" clientAuth
cert kube-scheduler system:kube-scheduler "" clientAuth
cert kube-proxy system:kube-proxy "" clientAuth
echo "$ip" >"$pki/node-ip"
chmod 600 "$pki"/*.key

# kubeconfig NAME: $dir/NAME.kubeconfig with NAME's client certificate,
# embedded so that the file can be copied elsewhere.
kubeconfig_for() {
	local name=$1
	cat >"$dir/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: landform
  cluster:
    server: https://$ip:6443
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$pki/$name.crt")
    client-key-data: $(base64 -w0 "$pki/$name.key")
contexts:
- name: landform
  context: {cluster: landform, user: $name}
current-context: landform
EOF
	chmod 600 "$dir/$name.kubeconfig"
}
for n in admin kubelet kube-controller-manager kube-scheduler kube-proxy; do kubeconfig_for "$n"; done

# ---------------------------------------------------------------- configs
mkdir -p "$dir/config"
cat >"$dir/config/containerd.toml" <<EOF
version = 2
root = "$containerd_root"
state = "$run_dir/containerd/state"
[grpc]
  address = "$containerd_sock"
[ttrpc]
  address = "$containerd_sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:landform"
  # This machine's root lacks CAP_SYS_RESOURCE: containers may not lower
  # their oom_score_adj below containerd's.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
EOF

cat >"$dir/config/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
# cgroups are v1 on these machines; the kubelet refuses v1 unless told.
failCgroupV1: false
containerRuntimeEndpoint: unix://$containerd_sock
address: $ip
healthzBindAddress: 127.0.0.1
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
# The images were imported, not pulled: never collect them.
imageGCHighThresholdPercent: 100
evictionHard: {}
EOF

cat >"$dir/config/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $dir/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $pod_cidr
hostnameOverride: $node
bindAddress: $ip
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  # Leave the machine's conntrack table size alone.
  maxPerCore: 0
EOF

# ---------------------------------------------------------------- network
# Forwarding and bridge netfilter, remembered so that cluster-down puts
# them back.
modprobe br_netfilter 2>/dev/null || true
[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || die "bridge netfilter is not available (modprobe br_netfilter)"
if [ ! -s "$dir/sysctl.saved" ]; then
	for k in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables; do
		echo "$k=$(sysctl -n "$k")"
	done >"$dir/sysctl.saved"
fi
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1

mkdir -p "$(dirname "$cni_conf")"
cat >"$cni_conf" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$cni_name",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$pod_cidr"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

# Pods reach each other, Services and this machine, nothing else: no
# masquerading (ipMasq false above), and forwarded traffic from the Pod
# network to any other address is dropped here.
iptables -w -I FORWARD -s "$pod_cidr" ! -d "$pod_cidr" -m comment --comment landform-cluster -j DROP

# ---------------------------------------------------------------- start
# wait_for WHAT SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
	local what=$1 timeout=$2 i
	shift 2
	for ((i = 0; i < timeout * 2; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	die "timed out after ${timeout}s waiting for $what (logs in $logs)"
}

alive() { pid_of "$1" >/dev/null || die "$1 exited; see $logs/$1.log"; }

api() { curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://$ip:6443$1"; }

mkdir -p "$run_dir/containerd"
start containerd --config "$dir/config/containerd.toml"
wait_for containerd 30 ctr --address "$containerd_sock" version
alive containerd

# The sandbox (pause) image, built without Docker and imported, before the
# kubelet asks for it.
log "building and importing the pause image"
"$root/hack/images/build.sh" --address "$containerd_sock" pause >>"$logs/images.log" 2>&1 ||
	die "building the pause image failed; see $logs/images.log"

rm -rf "$dir/etcd" "$dir"/audit*.log
start etcd --name "$node" --data-dir "$dir/etcd" \
	--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
	--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
	--initial-cluster "$node=http://127.0.0.1:2380"
wait_for etcd 30 curl -sf http://127.0.0.1:2379/health
alive etcd

# LANDFORM_CLUSTER_AUDIT=1: an audit log of every write, for
# `BENCH_ONLY=writes make bench-cluster`; =all: of every request, reads
# too. Off by default: it costs the API server CPU, which `make
# bench-cluster` measures.
audit=()
case "${LANDFORM_CLUSTER_AUDIT:-0}" in
0) ;;
1) policy=audit-policy.yaml ;;
all) policy=audit-policy-all.yaml ;;
*) die "LANDFORM_CLUSTER_AUDIT=${LANDFORM_CLUSTER_AUDIT}: want 1 (every write) or all (every request)" ;;
esac
if [ -n "${policy:-}" ]; then
	audit=(--audit-policy-file="$root/e2e/cluster/$policy" --audit-log-path="$dir/audit.log"
		--audit-log-mode=blocking --audit-log-format=json --audit-log-maxsize=200 --audit-log-maxbackup=1)
fi
start kube-apiserver \
	--etcd-servers=http://127.0.0.1:2379 \
	--bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$ip" \
	--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
	--client-ca-file="$pki/ca.crt" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
	--service-cluster-ip-range="$service_cidr" \
	--authorization-mode=Node,RBAC \
	--kubelet-client-certificate="$pki/admin.crt" --kubelet-client-key="$pki/admin.key" \
	--kubelet-certificate-authority="$pki/ca.crt" \
	--kubelet-preferred-address-types=InternalIP,Hostname "${audit[@]}"
wait_for kube-apiserver 90 api /readyz
alive kube-apiserver

start kube-controller-manager \
	--kubeconfig="$dir/kube-controller-manager.kubeconfig" \
	--authentication-kubeconfig="$dir/kube-controller-manager.kubeconfig" \
	--authorization-kubeconfig="$dir/kube-controller-manager.kubeconfig" \
	--bind-address=127.0.0.1 --leader-elect=false \
	--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
	--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
	--use-service-account-credentials
start kube-scheduler \
	--kubeconfig="$dir/kube-scheduler.kubeconfig" \
	--authentication-kubeconfig="$dir/kube-scheduler.kubeconfig" \
	--authorization-kubeconfig="$dir/kube-scheduler.kubeconfig" \
	--bind-address=127.0.0.1 --leader-elect=false

rm -rf "$kubelet_dir"
start kubelet --config="$dir/config/kubelet.yaml" --kubeconfig="$dir/kubelet.kubeconfig" \
	--hostname-override="$node" --node-ip="$ip"
start kube-proxy --config="$dir/config/kube-proxy.yaml"

kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
log "waiting for node $node to be Ready"
wait_for "node $node to register" 60 kubectl get node "$node"
if ! kubectl wait --for=condition=Ready "node/$node" --timeout=120s >/dev/null; then
	die "node $node is not Ready: $(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"
fi
# The default ServiceAccount exists once the controller-manager works;
# Pods in a namespace cannot be created before.
wait_for "the default ServiceAccount (kube-controller-manager)" 60 kubectl -n default get serviceaccount default
for c in "${components[@]}"; do alive "$c"; done

trap - EXIT
log "cluster up in $(($(date +%s) - started))s: node $node Ready"
echo "export KUBECONFIG=$kubeconfig"
