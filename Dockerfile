# syntax=docker/dockerfile:1
# Landform images, for users with a Docker engine and BuildKit (the default
# since Docker 23). No engine runs on the project's build machines:
# hack/packaging/dockerfile_test.go checks this file statically instead.
#
#   docker build -t landform-controller .                        # the controller (default target)
#   docker build --target runner -t landform-runner .            # the runner, with OpenTofu
#   docker build --target runner --build-arg WITH_TERRAFORM=true -t landform-runner .
#                                                                # ... and Terraform 1.5.7 (tofu stays the default engine)
#   docker build --target runner --build-arg WITH_TOFU=false --build-arg WITH_TERRAFORM=true -t landform-runner .
#                                                                # Terraform only
#   docker build --target runner-e2e -t landform-runner:e2e .    # + Landform's test provider (examples, e2e)
#   docker build --target e2e-gitserver -t landform-e2e-gitserver:e2e .
#
# Binaries are cross-compiled on the build platform (no emulation), so
# `docker buildx build --platform linux/amd64,linux/arm64` is fast.
ARG GO_VERSION=1.26.8
ARG ALPINE_VERSION=3.22
ARG DEBIAN_VERSION=bookworm
ARG WITH_TOFU=true
ARG WITH_TERRAFORM=false

# Landform's own binaries.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
COPY api/go.mod api/go.sum api/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    export GOOS=$TARGETOS GOARCH=$TARGETARCH && \
    ldflags="-s -w -X github.com/landform-dev/landform/internal/version.Version=${VERSION}" && \
    go build -trimpath -ldflags "$ldflags" -o /out/landform-controller ./cmd/controller && \
    go build -trimpath -ldflags "$ldflags" -o /out/landform-runner ./cmd/runner && \
    go build -trimpath -ldflags "-s -w" -o /out/e2e-gitserver ./e2e/gitserver

# Landform's test provider in a filesystem mirror, for runner-e2e.
FROM build AS provider
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH LANDFORM_TOOLS_CACHE=/tmp/tools \
    hack/build-provider.sh /out/providers

# The engines, from the Go module proxy, exactly as hack/tools.sh builds them
# (same wrapper modules, same flags); statically linked here.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS tofu-true
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY hack/tools/tofu/ hack/tools/tofu/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd hack/tools/tofu && GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o /out/tofu github.com/opentofu/opentofu/cmd/tofu

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS terraform-true
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY hack/tools/terraform/ hack/tools/terraform/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd hack/tools/terraform && GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w" -o /out/terraform github.com/hashicorp/terraform

# An engine left out (WITH_TOFU=false, WITH_TERRAFORM=false): nothing to copy.
# BuildKit builds only the stages the target needs, so a left-out engine
# costs nothing.
FROM alpine:${ALPINE_VERSION} AS tofu-false
RUN mkdir /out
FROM alpine:${ALPINE_VERSION} AS terraform-false
RUN mkdir /out
FROM tofu-${WITH_TOFU} AS tofu
FROM terraform-${WITH_TERRAFORM} AS terraform

# The runner. Alpine rather than distroless: modules need a shell for
# local-exec, git and ssh for git:: module sources, and CA roots for provider
# registries and cloud APIs. The Pod's root filesystem is read-only; HOME
# and the workspace are emptyDirs.
FROM alpine:${ALPINE_VERSION} AS runner
RUN apk add --no-cache ca-certificates git openssh-client
COPY --from=tofu /out/ /usr/local/bin/
COPY --from=terraform /out/ /usr/local/bin/
COPY --from=build /out/landform-runner /usr/local/bin/landform-runner
USER 65532:65532
ENV HOME=/tmp
EXPOSE 9443
ENTRYPOINT ["/usr/local/bin/landform-runner"]

# The runner with Landform's own test provider (landform-dev/landform) in a
# filesystem mirror, for modules/ (examples, e2e): run the controller with
# --provider-mirror=/usr/local/share/landform/providers.
FROM runner AS runner-e2e
COPY --from=provider /out/providers /usr/local/share/landform/providers

# The e2e suite's git server: this repository's modules/ over smart HTTP.
FROM debian:${DEBIAN_VERSION}-slim AS e2e-gitserver
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/e2e-gitserver /usr/local/bin/e2e-gitserver
COPY modules/ /srv/seed/modules/
USER 65532:65532
ENV HOME=/tmp
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/e2e-gitserver", "--listen=:8080", "--root=/tmp/git", "--seed=landform=/srv/seed"]

# The controller (the default target: last).
FROM gcr.io/distroless/static-debian12:nonroot AS controller
COPY --from=build /out/landform-controller /usr/local/bin/landform-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/landform-controller"]
