# Landform — see README.md. `make tools` once, then `make test`.
SHELL := /usr/bin/env bash -o pipefail
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false
# The machine may set this to a file that does not exist; the runner and the
# tests always write their own.
unexport TF_CLI_CONFIG_FILE
unexport TF_IN_AUTOMATION

TEST_TIMEOUT ?= 40m
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/landform-dev/landform/internal/version.Version=$(VERSION)

.PHONY: dev all tools generate chart-sync generate-check build flux-plugin vet test test-unit test-integration bench demo e2e e2e-kind clean \
	cluster-tools cluster-up cluster-down images e2e-cluster demo-cluster bench-cluster bench-cluster-peer migrate-peer \
	ui-screenshots

all: build

## tools: install every pinned tool into ~/.cache/landform/tools, linked into bin/
tools:
	hack/tools.sh

## generate: deepcopy, CRDs, RBAC, protobuf and the API reference (docs/api.md)
generate:
	cd api && $(BIN)/controller-gen object paths=./...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(BIN)/controller-gen rbac:roleName=landform-controller paths=./controllers/... output:rbac:artifacts:config=config/rbac
	$(BIN)/protoc --plugin=protoc-gen-go=$(BIN)/protoc-gen-go --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc \
		--go_out=paths=source_relative:. --go-grpc_out=paths=source_relative:. runner/proto/runner.proto
	@$(MAKE) --no-print-directory chart-sync
	go run ./hack/apidocs -crd config/crd/bases/infra.landform.dev_terraforms.yaml -types api/v1alpha1 -out docs/api.md

## chart-sync: copy the generated CRDs, the controller ClusterRole and the kube-state-metrics config into the Helm chart
chart-sync:
	rm -f charts/landform/crds/*.yaml
	cp config/crd/bases/*.yaml charts/landform/crds/
	cp config/rbac/role.yaml charts/landform/files/controller-clusterrole.yaml
	cp config/monitoring/kube-state-metrics.yaml charts/landform/files/kube-state-metrics.yaml

GENERATED := api config runner/proto charts/landform/crds charts/landform/files docs/api.md
## generate-check: fail when generated files are not committed
generate-check: generate
	@git diff --exit-code --stat -- $(GENERATED) || \
		{ echo "generated files are out of date: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- $(GENERATED))" || \
		{ git status --porcelain -- $(GENERATED); echo "untracked generated files: run 'make generate' and commit"; exit 1; }

## build: bin/landform-controller, bin/landform-runner, bin/landform
build:
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/landform-controller ./cmd/controller
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/landform-runner ./cmd/runner
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/landform ./cmd/landform
	ln -sf landform $(BIN)/flux-landform
	go build -o $(BIN)/landform-cloud ./cmd/landform-cloud
	hack/build-provider.sh $(BIN)/providers

# Flux (2.9 and later) runs plugins from this directory only, not from PATH.
FLUX_PLUGIN_DIR = $(or $(FLUXCD_PLUGINS),$(HOME)/.fluxcd/plugins)
## flux-plugin: link bin/landform into Flux's plugin directory ($FLUXCD_PLUGINS, else
## ~/.fluxcd/plugins) as flux-landform, so that `flux landform ...` runs it
flux-plugin: build
	mkdir -p "$(FLUX_PLUGIN_DIR)"
	ln -sf "$(BIN)/landform" "$(FLUX_PLUGIN_DIR)/flux-landform"

vet:
	go vet ./...
	cd api && go vet ./...
	cd providers/landform && go vet ./...

## test: generate-check, vet, unit, integration and end-to-end tests (real kube-apiserver, etcd and
## OpenTofu; the e2e suite of `make e2e` with the real Flux controllers; helm lint/template and
## kustomize build checked against that API server)
test: tools generate-check vet build
	KUBEBUILDER_ASSETS=$(BIN) LANDFORM_RUNNER_BIN=$(BIN)/landform-runner LANDFORM_TOFU=$(BIN)/tofu \
		LANDFORM_TERRAFORM=$(BIN)/terraform LANDFORM_CONTROLLER_BIN=$(BIN)/landform-controller \
		LANDFORM_HELM=$(BIN)/helm LANDFORM_KUSTOMIZE=$(BIN)/kustomize \
		go test -timeout $(TEST_TIMEOUT) -count=1 ./...
	cd providers/landform && LANDFORM_TOFU=$(BIN)/tofu go test -count=1 ./...

## ui-screenshots: run the browser tests of `landform ui` (Chromium from `make tools`) and keep the
## pages they saw as docs/images/ui-*.png, the screenshots docs/ui.md shows
ui-screenshots: tools build
	KUBEBUILDER_ASSETS=$(BIN) LANDFORM_RUNNER_BIN=$(BIN)/landform-runner LANDFORM_TOFU=$(BIN)/tofu \
		LANDFORM_CONTROLLER_BIN=$(BIN)/landform-controller LANDFORM_UI_SCREENSHOTS=$(CURDIR)/docs/images \
		go test -count=1 -run 'TestApproveInTheBrowser|TestReadOnlyUser' ./internal/ui/

BENCH_N ?= 20
## bench: hack/bench on its own kube-apiserver and etcd with the real controller and local runners: one object
## beside the raw engine (a trivial module and one on the stand-in cloud's provider), engine processes, init
## with and without the provider mirror, BENCH_N objects (default 20) on one GitRepository, a new revision,
## idle, restart, drift checks, the UI's list page with 500 objects; writes docs/benchmarks.json, or
## docs/benchmarks-<N>.json for BENCH_N of 200 or more, and renders docs/benchmarks.md from docs/benchmarks.json and
## every docs/benchmarks-<N>.json. BENCH_ONLY=ui runs only the UI list page (no controller, about 20 s) and merges it
## into docs/benchmarks.json, keeping the other results, before rendering docs/benchmarks.md again. BENCH_ONLY=writes
## runs only the trivial module's one-object samples on an API server with an audit log and merges the API writes of
## one object's life, write by write, the same way (the previous ones, of another revision, kept as "before"), with
## a typical object's timeline: its writes and engine processes, phase by phase.
bench: tools build
	KUBEBUILDER_ASSETS=$(BIN) BENCH_N=$(BENCH_N) BENCH_ONLY=$(BENCH_ONLY) go run ./hack/bench \
		-controller $(BIN)/landform-controller -runner $(BIN)/landform-runner -tofu $(BIN)/tofu \
		-provider-mirror $(BIN)/providers

## demo: start the embedded environment, walk through Landform's whole job, stop everything
demo: tools build
	$(BIN)/landform dev demo

## dev: the embedded environment, kept running until Ctrl-C (state in ~/.landform/dev)
dev: tools build
	$(BIN)/landform dev

## e2e: the end-to-end suite on the embedded environment (real Flux controllers, git pushes,
## the stand-in cloud; about 1.5 minutes). `make test` runs it too, with every other package.
## E2E_FLAGS adds go test flags, e.g. E2E_FLAGS='-v -run TestCloudDrift'.
E2E_FLAGS ?=
e2e: tools build
	go test -count=1 -timeout 15m -parallel 5 $(E2E_FLAGS) ./e2e/flux/

## e2e-kind: the end-to-end suite on a kind cluster (needs Docker; skips without it)
e2e-kind:
	e2e/kind/run.sh

## cluster-tools: what the single-node cluster needs beyond `make tools` (kubelet, kube-proxy,
## kube-scheduler, kubectl, a static tofu for the runner image, a static terraform for the
## platform's engine mirror; Debian's containerd, runc, CNI
## plugins and busybox-static). Kept out of `make tools` so that `make test` does not wait for them.
CLUSTER_TOOLS := etcd kube_apiserver kube_controller_manager kube_scheduler kubelet kube_proxy kubectl tofu_static terraform_static helm flux_crds source_controller kustomize_controller helm_controller
cluster-tools:
	hack/cluster-deps.sh
	hack/tools.sh $(CLUSTER_TOOLS)

## cluster-up: a real single-node Kubernetes cluster on this machine (root; about 30 s once the
## tools are built); prints its kubeconfig. See e2e/cluster/README.md.
cluster-up: cluster-tools
	e2e/cluster/up.sh

## cluster-down: stop that cluster and restore the machine (safe when nothing runs)
cluster-down:
	e2e/cluster/down.sh

## images: the pause, controller, runner and runner-e2e images as OCI tarballs in bin/images
## (no Docker; hack/images/images.yaml says what goes in each), imported into the cluster's
## containerd when it runs
CLUSTER_CONTAINERD := /run/landform-cluster/containerd/containerd.sock
images:
	hack/cluster-deps.sh
	hack/tools.sh tofu_static
	hack/images/build.sh --version $(VERSION) $(if $(wildcard $(CLUSTER_CONTAINERD)),--address $(CLUSTER_CONTAINERD))

## demo-cluster: the walkthrough of `make demo` on a real single-node cluster (root, containerd
## installable; see e2e/cluster/README.md): starts it, walks through, tears everything down.
demo-cluster: cluster-tools build
	VERSION=$(VERSION) e2e/cluster/demo.sh

## e2e-cluster: the real-cluster suite (e2e/cluster) on the cluster of `make cluster-up`: images,
## Landform's Helm chart, runner Pods on the real kubelet. E2E_FLAGS adds go test flags.
e2e-cluster:
	hack/cluster-deps.sh
	hack/tools.sh tofu_static terraform_static helm flux_crds
	E2E_FLAGS='$(E2E_FLAGS)' VERSION=$(VERSION) e2e/cluster/e2e.sh

BENCH_CLUSTER_N ?= 50
## bench-cluster: hack/bench on the cluster of `make cluster-up` with the chart's controller and runner
## Pods: one object beside the raw engine in a Pod of the runner image (9 samples), where its time goes,
## BENCH_CLUSTER_N objects at once (default 50), the CPU of the controller, the Pods, the kubelet,
## containerd, kube-apiserver and etcd; writes docs/benchmarks-cluster.json and renders docs/benchmarks.md.
## Builds the images and rolls the controller out as e2e-cluster does (BENCH_CLUSTER_IMAGES=0: as installed).
## BENCH_ONLY=writes, on a cluster started with LANDFORM_CLUSTER_AUDIT=1: the one-object samples' writes by writer (=all: reads too).
## LANDFORM_RUNNER_POD_REUSE=30s: the controller keeps runner Pods for reuse (--runner-pod-reuse; also for bench-cluster-peer).
bench-cluster:
	hack/cluster-deps.sh
	hack/tools.sh tofu_static terraform_static helm flux_crds
	BENCH_CLUSTER_N=$(BENCH_CLUSTER_N) VERSION=$(VERSION) e2e/cluster/bench.sh

BENCH_PEER_N ?= 200
## bench-cluster-peer: Landform beside tofu-controller on the cluster of `make cluster-up`, BENCH_PEER_N
## objects each (default 200), one after the other; tofu-controller built from TOFU_CONTROLLER_SRC (a
## checkout of its source) and installed with its own chart. Writes
## docs/benchmarks-cluster-tofu-controller.json and renders docs/benchmarks.md (by hand, not in CI).
bench-cluster-peer:
	hack/cluster-deps.sh
	hack/tools.sh tofu_static terraform_static helm flux_crds
	BENCH_PEER_N=$(BENCH_PEER_N) VERSION=$(VERSION) TOFU_CONTROLLER_SRC=$(TOFU_CONTROLLER_SRC) e2e/cluster/bench-peer.sh

## migrate-peer: docs/migrating-from-tofu-controller.md on a real tofu-controller (built from
## TOFU_CONTROLLER_SRC, a checkout of its source) on the cluster of `make cluster-up`: an object it
## applied is migrated as the guide says, and Landform's first plan changes nothing (by hand, not in CI).
migrate-peer:
	hack/cluster-deps.sh
	hack/tools.sh tofu_static terraform_static helm flux_crds
	VERSION=$(VERSION) TOFU_CONTROLLER_SRC=$(TOFU_CONTROLLER_SRC) e2e/cluster/migrate-peer.sh

clean:
	rm -rf bin
