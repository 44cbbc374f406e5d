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

.PHONY: all tools generate generate-check build vet test test-unit test-integration bench demo clean

all: build

## tools: install every pinned tool into ~/.cache/landform/tools, linked into bin/
tools:
	hack/tools.sh

## generate: deepcopy, CRDs, RBAC and protobuf
generate:
	cd api && $(BIN)/controller-gen object paths=./...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(BIN)/controller-gen rbac:roleName=landform-controller paths=./controllers/... output:rbac:artifacts:config=config/rbac
	$(BIN)/protoc --plugin=protoc-gen-go=$(BIN)/protoc-gen-go --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc \
		--go_out=paths=source_relative:. --go-grpc_out=paths=source_relative:. runner/proto/runner.proto

## generate-check: fail when generated files are not committed
generate-check: generate
	@git diff --exit-code --stat -- api config runner/proto || \
		{ echo "generated files are out of date: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config runner/proto)" || \
		{ git status --porcelain -- api config runner/proto; echo "untracked generated files: run 'make generate' and commit"; exit 1; }

## build: bin/landform-controller, bin/landform-runner, bin/landform
build:
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/landform-controller ./cmd/controller
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/landform-runner ./cmd/runner
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/landform ./cmd/landform
	hack/build-provider.sh $(BIN)/providers

vet:
	go vet ./...
	cd api && go vet ./...
	cd providers/landform && go vet ./...

## test: generate-check, vet, unit and integration tests (real kube-apiserver, etcd and OpenTofu)
test: generate-check vet build
	KUBEBUILDER_ASSETS=$(BIN) LANDFORM_RUNNER_BIN=$(BIN)/landform-runner LANDFORM_TOFU=$(BIN)/tofu \
		LANDFORM_TERRAFORM=$(BIN)/terraform \
		go test -timeout $(TEST_TIMEOUT) -count=1 ./...
	cd providers/landform && LANDFORM_TOFU=$(BIN)/tofu go test -count=1 ./...

## bench: benchmarks (performance targets live here, never in tests)
bench: build
	KUBEBUILDER_ASSETS=$(BIN) LANDFORM_RUNNER_BIN=$(BIN)/landform-runner LANDFORM_TOFU=$(BIN)/tofu \
		go test -run '^$$' -bench . -benchmem ./...

## demo: the embedded environment walkthrough (see README)
demo: tools build
	@echo "make demo needs 'landform dev', which lands with the embedded environment (issue 5)."; exit 1

clean:
	rm -rf bin
