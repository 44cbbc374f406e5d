#!/usr/bin/env bash
# CI's real-cluster step (.ci/run, after `make test`): where this machine
# can run a single-node cluster (root, containerd installable, iptables
# usable, the ports free), runs `make cluster-up`, `make e2e-cluster` (and
# a runner Pod test and a chaos test again with one Pod per run) and a small `make
# bench-cluster`, and `make cluster-down` at the end, pass
# or fail, then checks that nothing is left: no process, mount, iptables
# chain, link or CNI config.
# Elsewhere it prints why it skipped and exits 0.
set -euo pipefail
# shellcheck source=e2e/cluster/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$root"

skip() {
	echo "e2e-cluster: skipped: $*" >&2
	exit 0
}
[ "$(id -u)" = 0 ] || skip "not root (a kubelet, containerd and iptables need it)"
if ! command -v containerd >/dev/null && ! apt-cache show containerd >/dev/null 2>&1; then
	skip "containerd is not installed and apt cannot install it"
fi
command -v iptables >/dev/null && ! iptables -w -L -n >/dev/null 2>&1 && skip "iptables does not work here (no CAP_NET_ADMIN?)"
for port in 2379 2380 6443 10248 10249 10250 10256 10257 10259 "$git_port" "$cloud_port" "$engine_mirror_port" "$storage_port"; do
	if ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then skip "port $port is in use"; fi
done
ip link show cni0 >/dev/null 2>&1 && skip "a cni0 link exists (another cluster?)"

started=$(date +%s)
rc=0
make cluster-up || rc=$?
[ "$rc" -ne 0 ] || make e2e-cluster || rc=$?
# The suite ran with the chart's default, runner Pods kept for reuse; one
# Pod per run (--runner-pod-reuse=0) again for the tests of a runner Pod's
# life and of one killed mid-apply.
[ "$rc" -ne 0 ] || LANDFORM_RUNNER_POD_REUSE=0 E2E_FLAGS='-run TestRunnerPodsOnARealKubelet|TestChaosRunnerKilledMidApply' make e2e-cluster || rc=$?
# A small bench-cluster (about a minute: 3 samples, 5 objects) on the
# images e2e-cluster installed: the harness works on a real cluster. No
# figure is judged, and they go to a temporary directory, not docs/.
if [ "$rc" -eq 0 ]; then
	bench_out=$(mktemp -d)
	cp docs/benchmarks.json "$bench_out/"
	BENCH_CLUSTER_IMAGES=0 BENCH_CLUSTER_N=5 BENCH_SAMPLES=3 \
		BENCH_FLAGS="-out-json $bench_out/benchmarks.json -out-md $bench_out/benchmarks.md" make bench-cluster || rc=$?
	rm -rf "$bench_out"
fi
make cluster-down || rc=$?

# What cluster-down must have left: nothing.
left=()
for c in "${components[@]}" "${platform[@]}"; do
	pid_of "$c" >/dev/null && left+=("process $c")
done
pgrep -f "$containerd_sock" >/dev/null && left+=("containerd shims")
grep -q " $kubelet_dir" /proc/mounts && left+=("mounts under $kubelet_dir")
grep -q " $run_dir" /proc/mounts && left+=("mounts under $run_dir")
ip link show cni0 >/dev/null 2>&1 && left+=("link cni0")
[ -e "$cni_conf" ] && left+=("$cni_conf")
ls /run/netns/cni-* >/dev/null 2>&1 && left+=("network namespaces /run/netns/cni-*")
for table in filter nat mangle; do
	iptables -w -t "$table" -S 2>/dev/null | grep -qE '^-N (KUBE|CNI)-' && left+=("iptables $table chains")
done
iptables -w -S FORWARD 2>/dev/null | grep -q landform-cluster && left+=("the egress rule")
if [ ${#left[@]} -gt 0 ]; then
	echo "e2e-cluster: cluster-down left: ${left[*]}" >&2
	rc=1
fi
echo "e2e-cluster: cluster-up, e2e-cluster, bench-cluster and cluster-down took $(($(date +%s) - started))s (exit $rc)" >&2
exit "$rc"
