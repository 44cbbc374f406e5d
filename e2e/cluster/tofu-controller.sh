# tofu-controller on the cluster of `make cluster-up`, built from a
# checkout of its source, for e2e/cluster/bench-peer.sh and
# e2e/cluster/migrate-peer.sh (sourced after lib.sh, with kubectl set
# up).

# tofu_controller_src prints the absolute path of the checkout
# TOFU_CONTROLLER_SRC names, once it is seen to be tofu-controller's.
tofu_controller_src() {
	local src=${TOFU_CONTROLLER_SRC:-} f
	[ -n "$src" ] || die "set TOFU_CONTROLLER_SRC to a checkout of tofu-controller's source (github.com/flux-iac/tofu-controller)"
	src=$(cd "$src" && pwd)
	for f in cmd/manager/main.go cmd/runner/main.go go.mod charts/tofu-controller/Chart.yaml; do
		[ -f "$src/$f" ] || die "$src has no $f: TOFU_CONTROLLER_SRC must be tofu-controller's repository"
	done
	echo "$src"
}

# build_tofu_controller SRC WORK: its manager and runner, built here with
# CGO disabled from the checkout SRC (a go.mod in WORK drops one test-only
# requirement the module proxy does not serve; the checkout is not
# changed), and their images assembled without Docker and imported into
# the cluster's containerd: the manager alone on scratch with CA
# certificates and a passwd, the runner on Debian's static busybox (as
# Landform's runner image) with the same bin/tofu-static.
build_tofu_controller() {
	local src_dir=$1 work_dir=$2
	log "building tofu-controller from $src_dir"
	mkdir -p "$work_dir/bin"
	cp "$src_dir/go.mod" "$work_dir/go.mod"
	cp "$src_dir/go.sum" "$work_dir/go.sum"
	go mod edit -droprequire github.com/elgohr/go-localstack \
		-replace "github.com/flux-iac/tofu-controller/api=$src_dir/api" \
		-replace "github.com/flux-iac/tofu-controller/tfctl=$src_dir/tfctl" "$work_dir/go.mod"
	(cd "$src_dir" && GOFLAGS=-buildvcs=false CGO_ENABLED=0 go build -modfile="$work_dir/go.mod" -trimpath -o "$work_dir/bin/" ./cmd/manager ./cmd/runner)

	# The images, as their Dockerfiles make them: the manager alone on
	# scratch with CA certificates and a passwd, the runner on Alpine (here
	# Debian's static busybox, as Landform's runner image) with tofu.
	cat >"$work_dir/images.yaml" <<-EOF
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
	          /tofu-controller: {host: $work_dir/bin/manager}
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
	          /usr/local/bin/tf-runner: {host: $work_dir/bin/runner}
	    user: "65532:65532"
	    entrypoint: [/usr/local/bin/tf-runner]
	EOF
	"$root/hack/images/build.sh" --spec "$work_dir/images.yaml" --out "$work_dir/images" --address "$containerd_sock" tofu-controller tf-runner
}

# install_tofu_controller SRC NAMESPACE: its own chart from the checkout,
# with its defaults but for the images built above, no AWS package to
# fetch, no events address, runners allowed in NAMESPACE; its controller
# Pod asks e2e-poddns on the node's address for the runner Pods' names
# (<ip>.<namespace>.pod.cluster.local: this cluster has no DNS).
install_tofu_controller() {
	local src_dir=$1 runner_ns=$2 ip
	ip=$(node_ip)
	if ! pid_of e2e-poddns >/dev/null; then
		GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o "$bin/e2e-poddns" ./e2e/poddns
		start e2e-poddns --listen="$ip:53" --cidr="$pod_cidr"
		sleep 1
		pid_of e2e-poddns >/dev/null || die "e2e-poddns did not start; see $logs/e2e-poddns.log"
	fi

	kubectl create namespace "$runner_ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
	log "installing tofu-controller's chart (runners in $runner_ns)"
	"$bin/helm" upgrade --install tofu-controller "$src_dir/charts/tofu-controller" \
		--namespace tofu-system --create-namespace \
		--set image.repository=localhost/tofu-controller --set image.tag=bench \
		--set runner.image.repository=localhost/tf-runner --set runner.image.tag=bench \
		--set awsPackage.install=false --set eventsAddress= \
		--set "runner.serviceAccount.allowedNamespaces={$runner_ns}" \
		--wait --timeout 5m
	kubectl -n tofu-system patch deployment tofu-controller --type=merge \
		-p "{\"spec\":{\"template\":{\"spec\":{\"dnsPolicy\":\"None\",\"dnsConfig\":{\"nameservers\":[\"$ip\"],\"searches\":[]}}}}}" >/dev/null
	kubectl -n tofu-system rollout status deployment tofu-controller --timeout=5m
}
