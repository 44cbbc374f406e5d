#!/usr/bin/env bash
# Stops the cluster e2e/cluster/up.sh started (`make cluster-down`) and puts
# the machine back as it was: the recorded processes, containerd's
# containers and shims, kube-proxy's and the kubelet's iptables chains,
# kubelet and container mounts, CNI network namespaces, the cni0 bridge,
# the CNI config and IPAM state, the sysctls up.sh changed. Safe to run
# when nothing runs; the state directory (PKI, logs, images) stays.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "needs root"
started=$(date +%s)
log "stopping the cluster (state in $dir)"

# stop NAME [SECONDS]: SIGTERM the recorded process, SIGKILL after SECONDS.
stop() {
	local name=$1 timeout=${2:-20} pid i
	if pid=$(pid_of "$name"); then
		log "stopping $name (pid $pid)"
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < timeout * 5; i++)); do
			[ -d "/proc/$pid" ] || break
			sleep 0.2
		done
		if [ -d "/proc/$pid" ]; then
			log "$name did not stop in ${timeout}s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.5
		fi
	fi
	rm -f "$pids/$name.pid"
}

# The platform (e2e/cluster/platform.sh) first: Flux's controllers talk to
# the API server.
for ((i = ${#platform[@]} - 1; i >= 0; i--)); do stop "${platform[i]}"; done
# Its repositories and artifacts belong to this cluster's objects.
rm -rf "$platform_dir" "$platform_env"
stop kube-proxy
stop kubelet 30
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver

# The containers the kubelet left: killed and removed through containerd
# while it still runs, so that their shims exit and unmount their rootfs.
if pid_of containerd >/dev/null && ctr --address "$containerd_sock" version >/dev/null 2>&1; then
	tasks=$(ctr_ tasks ls -q 2>/dev/null || true)
	if [ -n "$tasks" ]; then
		log "killing $(echo "$tasks" | wc -l) containers"
		for t in $tasks; do ctr_ tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
		for t in $tasks; do
			for ((i = 0; i < 50; i++)); do
				status=$(ctr_ tasks ls 2>/dev/null | awk -v id="$t" '$1 == id {print $3}')
				[ "$status" = RUNNING ] || break
				sleep 0.2
			done
			ctr_ tasks rm -f "$t" >/dev/null 2>&1 || true
		done
	fi
	containers=$(ctr_ containers ls -q 2>/dev/null || true)
	for c in $containers; do ctr_ containers rm "$c" >/dev/null 2>&1 || true; done
	# CNI's cached results of these sandboxes (their own network and
	# loopback), removed below.
	echo "$containers" >"$dir/containers.removed"
fi
stop containerd 30
stop etcd

# Shims whose containerd is gone (a SIGKILLed containerd leaves them):
# recognised by our containerd's address, which no other containerd uses.
for p in /proc/[0-9]*; do
	cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null || true)
	case $cmd in
	*containerd-shim*"-address $containerd_sock "*)
		log "killing orphaned shim ${p#/proc/}"
		kill -KILL "${p#/proc/}" 2>/dev/null || true
		;;
	esac
done

# iptables: kube-proxy's own cleanup, then what the kubelet (KUBE-FIREWALL,
# KUBE-KUBELET-CANARY, ...) and the portmap plugin (CNI-*) left, then
# up.sh's egress rule.
if [ -x "$bin/kube-proxy" ]; then
	"$bin/kube-proxy" --cleanup >>"$logs/kube-proxy.log" 2>&1 || true
fi
for ipt in iptables ip6tables; do
	command -v "$ipt" >/dev/null || continue
	for table in filter nat mangle raw; do
		rules=$("$ipt" -w -t "$table" -S 2>/dev/null) || continue
		# Jumps into our chains from the built-in ones (INPUT, OUTPUT, ...).
		jumps=$(echo "$rules" | grep -E '^-A [A-Z]+ .*-j (KUBE-|CNI-)' | grep -vE '^-A (KUBE-|CNI-)' || true)
		while read -r rule; do
			[ -n "$rule" ] || continue
			# The rule as -S printed it, quotes included; -A becomes -D.
			eval "$ipt -w -t $table ${rule/-A/-D}" 2>/dev/null || true
		done <<<"$jumps"
		chains=$(echo "$rules" | awk '$1 == "-N" && ($2 ~ /^KUBE-/ || $2 ~ /^CNI-/) {print $2}')
		for c in $chains; do "$ipt" -w -t "$table" -F "$c" 2>/dev/null || true; done
		for c in $chains; do "$ipt" -w -t "$table" -X "$c" 2>/dev/null || true; done
	done
done
while iptables -w -C FORWARD -s "$pod_cidr" ! -d "$pod_cidr" -m comment --comment landform-cluster -j DROP 2>/dev/null; do
	iptables -w -D FORWARD -s "$pod_cidr" ! -d "$pod_cidr" -m comment --comment landform-cluster -j DROP
done

# Mounts: the kubelet's volumes and the containers' rootfs and shm that a
# killed shim did not unmount; deepest first.
mounts=$(awk -v a="$kubelet_dir" -v b="$run_dir" -v c="$containerd_root" \
	'index($2, a) == 1 || index($2, b) == 1 || index($2, c) == 1 {print $2}' /proc/mounts | sort -r)
for m in $mounts; do
	umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
done
for ns in /run/netns/cni-*; do
	[ -e "$ns" ] || continue
	umount "$ns" 2>/dev/null || true
	rm -f "$ns"
done
if ip link show cni0 >/dev/null 2>&1; then
	ip link delete cni0
fi
rm -f "$cni_conf"
rm -rf "/var/lib/cni/networks/$cni_name" "/var/lib/cni/results/$cni_name"-*
if [ -s "$dir/containers.removed" ]; then
	while read -r id; do
		[ -z "$id" ] || rm -f /var/lib/cni/results/*-"$id"-*
	done <"$dir/containers.removed"
fi
rm -f "$dir/containers.removed"
# Never delete through a mount that would not go.
if ! awk -v a="$kubelet_dir" -v b="$run_dir" 'index($2, a) == 1 || index($2, b) == 1 {found = 1} END {exit !found}' /proc/mounts; then
	rm -rf "$kubelet_dir" "$run_dir"
fi

# The directories CNI made, when empty.
rmdir /run/netns /var/lib/cni/networks /var/lib/cni/results /var/lib/cni /etc/cni/net.d /etc/cni 2>/dev/null || true

if [ -s "$dir/sysctl.saved" ]; then
	while IFS= read -r kv; do sysctl -qw "$kv" || true; done <"$dir/sysctl.saved"
	rm -f "$dir/sysctl.saved"
fi

# What is still there is a bug of this script: say so.
left=$(awk -v a="$kubelet_dir" -v b="$run_dir" -v c="$containerd_root" \
	'index($2, a) == 1 || index($2, b) == 1 || index($2, c) == 1 {print $2}' /proc/mounts)
[ -z "$left" ] || log "WARNING: mounts left: $left"
[ -z "$(running_components)" ] || log "WARNING: still running: $(running_components)"
log "cluster down in $(($(date +%s) - started))s"
