# Herald's container image: a static binary (CGO_ENABLED=0; modernc SQLite is
# pure Go) on an empty base (scratch) with the CA bundle, running as a non-root
# user (65532), data in the /data volume, configured by HERALD_* variables.
#
# From source (needs the golang image from a registry):
#   docker build -t herald .
# Offline, from a binary built on the host (what .ci/image.sh does):
#   CGO_ENABLED=0 go build -trimpath -o dist/rootfs/herald ./cmd/herald
#   mkdir -p dist/rootfs/etc/ssl/certs dist/rootfs/data
#   cp /etc/ssl/certs/ca-certificates.crt dist/rootfs/etc/ssl/certs/
#   podman build --format docker --target prebuilt -t herald .
# (--format docker keeps the HEALTHCHECK, which the OCI format has no field for.)

ARG GO_VERSION=1.26

# ---- everything the two images share: configuration, user, volume, health
FROM scratch AS base
ENV HERALD_ADDR=:8080 \
    HERALD_DB=sqlite:/data/herald.db \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["/herald", "healthcheck"]
ENTRYPOINT ["/herald"]
CMD ["serve"]

# ---- offline: the root filesystem prepared in the build context
FROM base AS prebuilt
COPY --chown=0:0 dist/rootfs/herald /herald
COPY --chown=0:0 dist/rootfs/etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --chown=65532:65532 dist/rootfs/data/ /data/

# ---- from source
FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.1.0-dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/herald-webhooks/herald/internal/buildinfo.Version=${VERSION}" \
      -o /rootfs/herald ./cmd/herald \
 && mkdir -p /rootfs/etc/ssl/certs /rootfs/data \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/

FROM base AS image
COPY --from=build --chown=0:0 /rootfs/herald /herald
COPY --from=build --chown=0:0 /rootfs/etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build --chown=65532:65532 /rootfs/data/ /data/
