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

[ "$(id -u)" = 0 ] || die "needs root (it imports images into the cluster's containerd and reads the cluster's cgroups)"
pid_of kube-apiserver >/dev/null || die "the cluster is not up: run 'make cluster-up' first"
src=${TOFU_CONTROLLER_SRC:-}
[ -n "$src" ] || die "set TOFU_CONTROLLER_SRC to a checkout of tofu-controller's source (github.com/flux-iac/tofu-controller)"
src=$(cd "$src" && pwd)
for f in cmd/manager/main.go cmd/runner/main.go go.mod charts/tofu-controller/Chart.yaml; do
	[ -f "$src/$f" ] || die "$src has no $f: TOFU_CONTROLLER_SRC must be tofu-controller's repository"
done
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

log "building tofu-controller $version from $src"
cp "$src/go.mod" "$work/go.mod"
cp "$src/go.sum" "$work/go.sum"
go mod edit -droprequire github.com/elgohr/go-localstack \
	-replace "github.com/flux-iac/tofu-controller/api=$src/api" \
	-replace "github.com/flux-iac/tofu-controller/tfctl=$src/tfctl" "$work/go.mod"
(cd "$src" && GOFLAGS=-buildvcs=false CGO_ENABLED=0 go build -modfile="$work/go.mod" -trimpath -o "$work/bin/" ./cmd/manager ./cmd/runner)

# The images, as their Dockerfiles make them: the manager alone on
# scratch with CA certificates and a passwd, the runner on Alpine (here
# Debian's static busybox, as Landform's runner image) with tofu.
cat >"$work/images.yaml" <<EOF
bases:
  alpine:
    busybox: /bin/busybox
    files:
      /bin/busybox: {host: /bin/busybox}
      /etc/ssl/certs/ca-certificates.crt: {host: /etc/ssl/certs/ca-certificates.crt}
      /etc/passwd: {text: "root:x:0:0:root:/root:/sbin/nologin\nrunner:x:65532:65532:runner:/home/runner:/sbin/nologin\n"}
      /etc/group: {text: "root:x:0:\nrunner:x:65532:\n"}
    dirs: [/tmp, /home/runner]
    env:
      PATH: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
images:
  - name: tofu-controller
    ref: localhost/tofu-controller:bench
    copies:
      - files:
          /tofu-controller: {host: $work/bin/manager}
          /etc/ssl/certs/ca-certificates.crt: {host: /etc/ssl/certs/ca-certificates.crt}
          /etc/passwd: {text: "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"}
    user: "65532:65532"
    entrypoint: [/tofu-controller]
  - name: tf-runner
    ref: localhost/tf-runner:bench
    base: alpine
    copies:
      - files:
          /usr/local/bin/tofu: {bin: tofu-static}
          /usr/local/bin/tf-runner: {host: $work/bin/runner}
    user: "65532:65532"
    entrypoint: [/usr/local/bin/tf-runner]
EOF
"$root/hack/images/build.sh" --spec "$work/images.yaml" --out "$work/images" --address "$containerd_sock" tofu-controller tf-runner

if ! pid_of e2e-poddns >/dev/null; then
	GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o "$bin/e2e-poddns" ./e2e/poddns
	start e2e-poddns --listen="$ip:53" --cidr="$pod_cidr"
	sleep 1
	pid_of e2e-poddns >/dev/null || die "e2e-poddns did not start; see $logs/e2e-poddns.log"
fi

kubectl create namespace "$peer_ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
log "installing tofu-controller's chart (runners in $peer_ns)"
"$bin/helm" upgrade --install tofu-controller "$src/charts/tofu-controller" \
	--namespace tofu-system --create-namespace \
	--set image.repository=localhost/tofu-controller --set image.tag=bench \
	--set runner.image.repository=localhost/tf-runner --set runner.image.tag=bench \
	--set awsPackage.install=false --set eventsAddress= \
	--set "runner.serviceAccount.allowedNamespaces={$peer_ns}" \
	--wait --timeout 5m
kubectl -n tofu-system patch deployment tofu-controller --type=merge \
	-p "{\"spec\":{\"template\":{\"spec\":{\"dnsPolicy\":\"None\",\"dnsConfig\":{\"nameservers\":[\"$ip\"],\"searches\":[]}}}}}" >/dev/null
kubectl -n tofu-system rollout status deployment tofu-controller --timeout=5m

log "measuring Landform, then tofu-controller (BENCH_PEER_N=${BENCH_PEER_N:-200})"
# shellcheck disable=SC2086 # word splitting of the extra flags is intended
go run ./hack/bench -cluster -cluster-dir "$dir" -cluster-namespace bench-cluster -cluster-containerd "$containerd_sock" \
	-cluster-n "${BENCH_PEER_N:-200}" -cluster-peer tofu-controller -cluster-peer-namespace "$peer_ns" \
	-cluster-peer-source "$built" ${BENCH_FLAGS:-}
