#!/usr/bin/env bash
# Installs every pinned tool Landform needs from the registries this project can
# reach (the Go module proxy and Debian's apt), into a cache keyed by version
# outside the clone, and links each into bin/. Idempotent: a tool whose cached
# binary exists is only linked again.
#
#   hack/tools.sh            install all tools
#   hack/tools.sh NAME...    install only these (see the "tools" list below)
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

log() { printf '==> %s\n' "$*" >&2; }

# link NAME-VERSION FILE: bin/FILE -> cache/NAME-VERSION/FILE
link() { ln -sfn "$cache/$1/$2" "$bin/$2"; }

# have DIR FILE: is the tool already in the cache?
have() { [ -e "$cache/$1/$2" ]; }

go_install() { # dir binary module@version
	local dir=$1 file=$2 mod=$3
	if ! have "$dir" "$file"; then
		log "building $mod"
		GOBIN="$cache/$dir.tmp" go install "$mod"
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
	ln -sfn "$(command -v protoc)" "$bin/protoc"
	go_install "protoc-gen-go-$PROTOC_GEN_GO_VERSION" protoc-gen-go "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
	go_install "protoc-gen-go-grpc-$PROTOC_GEN_GO_GRPC_VERSION" protoc-gen-go-grpc "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
}

tool_etcd() { wrapper_build "etcd-$ETCD_VERSION" etcd etcd .; }

tool_kube_apiserver() {
	local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	wrapper_build "kube-apiserver-$KUBE_VERSION" kube-apiserver kube k8s.io/kubernetes/cmd/kube-apiserver \
		"-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
}

tool_tofu() {
	wrapper_build "tofu-$TOFU_VERSION" tofu tofu github.com/opentofu/opentofu/cmd/tofu \
		"-X github.com/opentofu/opentofu/version.dev=no"
}

tool_terraform() { wrapper_build "terraform-$TERRAFORM_VERSION" terraform terraform github.com/hashicorp/terraform; }

tool_flux_crds() {
	local dir="flux-source-crds-$FLUX_SOURCE_VERSION"
	if ! have "$dir" crds; then
		log "fetching source-controller $FLUX_SOURCE_VERSION CRDs"
		local src
		src=$(cd "$root/hack/tools/tofu" && go mod download -json "github.com/fluxcd/source-controller@$FLUX_SOURCE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
		mkdir -p "$cache/$dir.tmp/crds"
		cp "$src"/config/crd/bases/*.yaml "$cache/$dir.tmp/crds/"
		chmod -R u+w "$cache/$dir.tmp"
		mv "$cache/$dir.tmp" "$cache/$dir"
	fi
	ln -sfn "$cache/$dir/crds" "$bin/flux-crds"
}

# Fast tools first, so code generation works early; the engines and the API
# server are the long builds and run one at a time (2 cores, 2 GB peak each).
tools=(controller_gen protoc flux_crds etcd kube_apiserver tofu terraform)
[ $# -gt 0 ] && tools=("$@")
for t in "${tools[@]}"; do
	"tool_${t//-/_}"
done
log "tools ready in $bin"
