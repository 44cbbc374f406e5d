#!/usr/bin/env bash
# Installs the Debian packages the single-node cluster (e2e/cluster, `make
# cluster-up`) needs: containerd, runc and the CNI plugins run the Pods,
# busybox-static is the runner image's shell (hack/images), iptables and
# openssl are used by the cluster scripts. Idempotent: installed packages
# are left alone, and apt is not asked anything when all are there.
set -euo pipefail

packages=(containerd runc containernetworking-plugins busybox-static iptables openssl curl)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0

sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
printf '==> installing %s (apt)\n' "${missing[*]}" >&2
$sudo apt-get update -qq
# containerd's package would start it under systemd where there is one;
# the cluster runs its own containerd with its own config and socket.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
