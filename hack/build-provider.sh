#!/usr/bin/env bash
# Builds the landform Terraform/OpenTofu provider (providers/landform) and
# installs it into a filesystem mirror, under both registry.terraform.io and
# registry.opentofu.org, for the platform of the Go toolchain:
#
#   hack/build-provider.sh MIRROR_DIR
#
# Point the engine at the mirror with a CLI config (TF_CLI_CONFIG_FILE):
#
#   provider_installation {
#     filesystem_mirror {
#       path    = "MIRROR_DIR"
#       include = ["registry.terraform.io/landform-dev/*", "registry.opentofu.org/landform-dev/*"]
#     }
#     direct {
#       exclude = ["registry.terraform.io/landform-dev/*", "registry.opentofu.org/landform-dev/*"]
#     }
#   }
#
# Idempotent: the binary is cached by a hash of the provider's sources, the
# version and the Go toolchain, so an unchanged source is not rebuilt and an
# unchanged binary is not copied again. Builds are reproducible (-trimpath,
# no VCS stamp), so the hashes in .terraform.lock.hcl stay valid as long as
# the source and the toolchain do not change.
set -euo pipefail

PROVIDER_VERSION=0.1.0

if [ $# -ne 1 ]; then
	echo "usage: $0 MIRROR_DIR" >&2
	exit 2
fi
mkdir -p "$1"
mirror=$(cd "$1" && pwd)

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/providers/landform
cache=${LANDFORM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/landform/tools}

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

cd "$src"
platform=$(go env GOOS)_$(go env GOARCH)
file=terraform-provider-landform_v$PROVIDER_VERSION

# Everything that goes into the binary except the module cache, which go.sum pins.
key=$(
	{
		echo "$PROVIDER_VERSION $platform $(go env GOVERSION)"
		find . -type f \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum \) -print0 |
			LC_ALL=C sort -z | xargs -0 sha256sum
	} | sha256sum | cut -c1-16
)
built=$cache/terraform-provider-landform-$PROVIDER_VERSION-$platform-$key/$file

if [ ! -x "$built" ]; then
	printf '==> building %s for %s\n' "$file" "$platform" >&2
	mkdir -p "$(dirname "$built")"
	go build -trimpath -ldflags "-s -w -X main.version=$PROVIDER_VERSION" -o "$built.tmp" .
	mv -f "$built.tmp" "$built"
fi

for host in registry.terraform.io registry.opentofu.org; do
	dir=$mirror/$host/landform-dev/landform/$PROVIDER_VERSION/$platform
	if ! cmp -s "$built" "$dir/$file"; then
		mkdir -p "$dir"
		install -m 0755 "$built" "$dir/$file.tmp"
		mv -f "$dir/$file.tmp" "$dir/$file"
		printf '==> installed %s\n' "$dir/$file" >&2
	fi
done
