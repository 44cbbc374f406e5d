#!/usr/bin/env bash
# Builds the images of images.yaml without Docker and, given --address,
# imports them into that containerd (`make images`; e2e/cluster/up.sh builds
# the pause image this way):
#
#   hack/images/build.sh [--address SOCKET] [--version V] [NAME...]
#
# The tarballs land in bin/images/NAME.tar.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
cd "$root/hack/images"
go build -o "$root/bin/landform-images" .
exec "$root/bin/landform-images" --root "$root" "$@"
