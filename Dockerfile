# Landform images, for users with a Docker engine (none runs on the project's
# build machines). Targets: controller (default) and runner.
#   docker build -t landform-controller .
#   docker build --target runner -t landform-runner .
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
COPY api/go.mod api/go.sum api/
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -ldflags "-s -w -X github.com/landform-dev/landform/internal/version.Version=${VERSION}" -o /out/landform-controller ./cmd/controller && \
    go build -ldflags "-s -w -X github.com/landform-dev/landform/internal/version.Version=${VERSION}" -o /out/landform-runner ./cmd/runner

# OpenTofu built from the Go module proxy exactly as `make tools` builds it.
FROM golang:${GO_VERSION} AS tofu
WORKDIR /src
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY hack/tools/tofu/ hack/tools/tofu/
RUN cd hack/tools/tofu && go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o /out/tofu github.com/opentofu/opentofu/cmd/tofu

FROM gcr.io/distroless/static-debian12:nonroot AS controller
COPY --from=build /out/landform-controller /usr/local/bin/landform-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/landform-controller"]

# The runner needs a shell for local-exec provisioners; busybox keeps it small.
FROM busybox:1.37-musl AS runner
COPY --from=build /out/landform-runner /usr/local/bin/landform-runner
COPY --from=tofu /out/tofu /usr/local/bin/tofu
USER 65532:65532
ENV HOME=/tmp
ENTRYPOINT ["/usr/local/bin/landform-runner"]

FROM controller
