#!/usr/bin/env bash
# Installs every pinned tool Landform needs from the registries this project can
# reach (the Go module proxy and Debian's apt), into a cache keyed by version
# outside the clone, and links each into bin/. Idempotent: a tool whose cached
# binary exists is only linked again.
#
#   hack/tools.sh            install all tools
#   hack/tools.sh NAME...    install only these (see the "tools" list below)
#   hack/tools.sh kind       the optional kind CLI for `make e2e-kind` (never
#                            installed by default: it needs a Docker engine)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${LANDFORM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/landform/tools}
bin=$root/bin
mkdir -p "$cache" "$bin"

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
# Some checksum look-ups 404 although the proxy serves the module; the wrappers
# commit their go.sum, so this matters only when a wrapper is re-tidied.
export GONOSUMDB=${GONOSUMDB:-github.com/fluxcd,k8s.io}

CONTROLLER_GEN_VERSION=v0.21.0
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
ETCD_VERSION=v3.6.8
KUBE_VERSION=v1.36.4
TOFU_VERSION=v1.12.6
TERRAFORM_VERSION=v1.5.7
FLUX_SOURCE_VERSION=v1.9.6
FLUX_KUSTOMIZE_VERSION=v1.9.6
# The newest helm-controller the proxy serves that builds with Go 1.26.
FLUX_HELM_VERSION=v1.6.4
# The newest notification-controller the proxy serves (v1.9.4-v1.9.6 refused).
FLUX_NOTIFICATION_VERSION=v1.9.3
HELM_VERSION=v3.21.4
KUSTOMIZE_VERSION=v5.8.2
KIND_VERSION=v0.33.0
PROMETHEUS_OPERATOR_VERSION=v0.85.0

log() { printf '==> %s\n' "$*" >&2; }

# link NAME-VERSION FILE: bin/FILE -> cache/NAME-VERSION/FILE
link() { ln -sfn "$cache/$1/$2" "$bin/$2"; }

# have DIR FILE: is the tool already in the cache?
have() { [ -e "$cache/$1/$2" ]; }

go_install() { # dir binary module@version [ldflags]
	local dir=$1 file=$2 mod=$3 ldflags=${4:-}
	if ! have "$dir" "$file"; then
		log "building $mod"
		rm -rf "$cache/$dir.tmp"
		GOBIN="$cache/$dir.tmp" go install -trimpath -ldflags "-s -w $ldflags" "$mod"
		mv "$cache/$dir.tmp" "$cache/$dir"
	fi
	link "$dir" "$file"
}

wrapper_build() { # dir binary wrapper pkg [ldflags]
	local dir=$1 file=$2 wrapper=$root/hack/tools/$3 pkg=$4 ldflags=${5:-}
	if ! have "$dir" "$file"; then
		log "building $pkg (wrapper hack/tools/$3)"
		if [ ! -s "$wrapper/go.sum" ]; then
			(cd "$wrapper" && go mod tidy -e)
		fi
		mkdir -p "$cache/$dir.tmp"
		(cd "$wrapper" && go build -trimpath -ldflags "-s -w $ldflags" -o "$cache/$dir.tmp/$file" "$pkg")
		mv "$cache/$dir.tmp" "$cache/$dir"
	fi
	link "$dir" "$file"
}

tool_controller_gen() { go_install "controller-gen-$CONTROLLER_GEN_VERSION" controller-gen "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION"; }

tool_protoc() {
	if ! command -v protoc >/dev/null; then
		log "installing protoc (Debian protobuf-compiler)"
		local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
		$sudo apt-get update -qq && $sudo apt-get install -y -qq protobuf-compiler >/dev/null
	fi
	# Under make, bin/ is first on PATH: resolve our own link to the real
	# protoc, or it would become a link to itself.
	ln -sfn "$(readlink -f "$(command -v protoc)")" "$bin/protoc"
	go_install "protoc-gen-go-$PROTOC_GEN_GO_VERSION" protoc-gen-go "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
	go_install "protoc-gen-go-grpc-$PROTOC_GEN_GO_GRPC_VERSION" protoc-gen-go-grpc "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
}

# Chromium drives the browser tests of `landform ui` (internal/ui). Debian's
# package, linked as bin/chromium; the tests skip with a message only where it
# cannot be installed.
tool_chromium() {
	if ! command -v chromium >/dev/null; then
		log "installing chromium (Debian chromium)"
		local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
		if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; }; then
			log "chromium could not be installed: the browser tests of internal/ui will skip"
			return 0
		fi
	fi
	ln -sfn "$(readlink -f "$(command -v chromium)")" "$bin/chromium"
}

tool_etcd() { wrapper_build "etcd-$ETCD_VERSION" etcd etcd .; }

tool_kube_apiserver() {
	local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	wrapper_build "kube-apiserver-$KUBE_VERSION" kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver \
		"-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
}

# kube-controller-manager runs beside the test API server where garbage
# collection matters (an Orphan'ed outputs Secret must survive it).
tool_kube_controller_manager() {
	local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	wrapper_build "kube-controller-manager-$KUBE_VERSION" kube-controller-manager kube k8s.io/kubernetes/cmd/kube-controller-manager \
		"-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
}

# The single-node cluster's node components and kubectl (e2e/cluster,
# `make cluster-tools`), from the same wrapper module; not in the default
# list, so that `make tools` does not build them.
kube_build() { # binary
	local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	wrapper_build "$1-$KUBE_VERSION" "$1" kube "k8s.io/kubernetes/cmd/$1" \
		"-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
}
tool_kubelet() { kube_build kubelet; }
tool_kube_scheduler() { kube_build kube-scheduler; }
tool_kube_proxy() { kube_build kube-proxy; }
tool_kubectl() { kube_build kubectl; }

tool_tofu() {
	wrapper_build "tofu-$TOFU_VERSION" tofu tofu github.com/opentofu/opentofu/cmd/tofu \
		"-X github.com/opentofu/opentofu/version.dev=no"
}

# OpenTofu without cgo for the runner image of `make images` (hack/images),
# which has no C library: the same wrapper module and flags as tool_tofu.
tool_tofu_static() {
	CGO_ENABLED=0 wrapper_build "tofu-static-$TOFU_VERSION" tofu-static tofu github.com/opentofu/opentofu/cmd/tofu \
		"-X github.com/opentofu/opentofu/version.dev=no"
}

tool_terraform() { wrapper_build "terraform-$TERRAFORM_VERSION" terraform terraform github.com/hashicorp/terraform; }

# Terraform without cgo, as HashiCorp's release archives are: what the
# real-cluster suite's engine mirror serves to runner Pods, whose image has
# no C library (e2e/cluster/platform.sh).
tool_terraform_static() {
	CGO_ENABLED=0 wrapper_build "terraform-static-$TERRAFORM_VERSION" terraform-static terraform github.com/hashicorp/terraform
}

# The ldflags are those of helm's release builds (its Makefile): the version,
# and the Kubernetes version `helm template` and `helm lint` assume, which
# helm derives from its client-go (v0.36 -> 1.36); without them it assumes
# 1.20 and refuses charts that require a newer one.
HELM_KUBE_MINOR=36
tool_helm() {
	local v=helm.sh/helm/v3
	go_install "helm-$HELM_VERSION" helm "$v/cmd/helm@$HELM_VERSION" \
		"-X $v/internal/version.version=$HELM_VERSION -X $v/internal/version.metadata= \
		-X $v/pkg/chartutil.k8sVersionMajor=1 -X $v/pkg/chartutil.k8sVersionMinor=$HELM_KUBE_MINOR \
		-X $v/pkg/lint/rules.k8sVersionMajor=1 -X $v/pkg/lint/rules.k8sVersionMinor=$HELM_KUBE_MINOR"
}

tool_kustomize() { go_install "kustomize-$KUSTOMIZE_VERSION" kustomize "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"; }

# Optional (e2e/kind only): kind installs anywhere but needs a Docker engine.
tool_kind() { go_install "kind-$KIND_VERSION" kind "sigs.k8s.io/kind@$KIND_VERSION"; }

# module_files DIR WRAPPER MODULE@VERSION LINK FILE...: copies FILEs (paths
# in the module, globs allowed) of a module the proxy serves into the cache
# as DIR/crds, once, and links that directory as bin/LINK. WRAPPER is the
# hack/tools module whose go.sum vouches for it.
module_files() {
	local dir=$1 wrapper=$2 mod=$3 link=$4 src f
	shift 4
	if ! have "$dir" crds; then
		log "fetching files of $mod"
		src=$(cd "$root/hack/tools/$wrapper" && go mod download -json "$mod" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
		mkdir -p "$cache/$dir.tmp/crds"
		for f in "$@"; do
			# shellcheck disable=SC2086 # f may be a glob
			cp "$src"/$f "$cache/$dir.tmp/crds/"
		done
		chmod -R u+w "$cache/$dir.tmp"
		mv "$cache/$dir.tmp" "$cache/$dir"
	fi
	ln -sfn "$cache/$dir/crds" "$bin/$link"
}

tool_flux_crds() {
	module_files "flux-source-crds-$FLUX_SOURCE_VERSION" tofu "github.com/fluxcd/source-controller@$FLUX_SOURCE_VERSION" flux-crds 'config/crd/bases/*.yaml'
}

# Flux's real controllers, for `landform dev` and the e2e suites. Both need
# replace lines (see the wrapper modules), so they are wrapper builds.
tool_source_controller() {
	wrapper_build "source-controller-$FLUX_SOURCE_VERSION" source-controller source-controller github.com/fluxcd/source-controller
	tool_flux_crds
}

tool_kustomize_controller() {
	wrapper_build "kustomize-controller-$FLUX_KUSTOMIZE_VERSION" kustomize-controller kustomize-controller github.com/fluxcd/kustomize-controller
	module_files "flux-kustomize-crds-$FLUX_KUSTOMIZE_VERSION" kustomize-controller "github.com/fluxcd/kustomize-controller@$FLUX_KUSTOMIZE_VERSION" flux-kustomize-crds 'config/crd/bases/*.yaml'
}

# helm-controller, for the real-cluster suite's HelmRelease scenario only
# (CLUSTER_TOOLS in the Makefile): not in the default list.
tool_helm_controller() {
	wrapper_build "helm-controller-$FLUX_HELM_VERSION" helm-controller helm-controller github.com/fluxcd/helm-controller
	module_files "flux-helm-crds-$FLUX_HELM_VERSION" helm-controller "github.com/fluxcd/helm-controller@$FLUX_HELM_VERSION" flux-helm-crds 'config/crd/bases/*.yaml'
}

# notification-controller, for alerts on Terraform objects in `landform dev`
# and the e2e suite that checks them.
tool_notification_controller() {
	wrapper_build "notification-controller-$FLUX_NOTIFICATION_VERSION" notification-controller notification-controller github.com/fluxcd/notification-controller
	module_files "flux-notification-crds-$FLUX_NOTIFICATION_VERSION" notification-controller "github.com/fluxcd/notification-controller@$FLUX_NOTIFICATION_VERSION" flux-notification-crds 'config/crd/bases/*.yaml'
}

# The ServiceMonitor CRD, so that the chart's optional ServiceMonitor is checked
# against its real schema by the packaging tests.
tool_monitoring_crds() {
	module_files "monitoring-crds-$PROMETHEUS_OPERATOR_VERSION" tofu "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" monitoring-crds \
		example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
}

# Fast tools first, so code generation works early; the engines, the API
# server and the Flux controllers are the long builds and run one at a time
# (2 cores, 2 GB peak each).
tools=(controller_gen protoc chromium flux_crds monitoring_crds helm kustomize etcd kube_apiserver kube_controller_manager tofu terraform source_controller kustomize_controller notification_controller)
[ $# -gt 0 ] && tools=("$@")
for t in "${tools[@]}"; do
	"tool_${t//-/_}"
done
log "tools ready in $bin"
