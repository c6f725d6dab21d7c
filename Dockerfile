# sidemirror container image: the static sidemirror and kafka-cluster-mirrors
# binaries on distroless/static, run as a non-root user (65532).
#
#   docker build -t sidemirror \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse --short HEAD) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) .
#   docker run -v /etc/sidemirror:/etc/sidemirror:ro -v sidemirror-data:/var/lib/sidemirror sidemirror
#
# The binaries come from tools/release, the same build as the release
# archives and packages. The image holds no configuration: mount
# sidecar.properties at /etc/sidemirror/ (deploy/kubernetes shows how) and
# set its listeners to addresses other containers reach (not 127.0.0.1).
# data.dir must be /var/lib/sidemirror, a volume owned by 65532.

FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY tools/go.mod tools/go.sum ./tools/
RUN go mod download && cd tools && GOFLAGS=-mod=mod go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG SOURCE_DATE_EPOCH=0
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN cd tools && GOFLAGS=-mod=mod go run ./release -repo .. -out /out -formats bin \
        -targets "${TARGETOS}/${TARGETARCH}" \
        -version "${VERSION}" -commit "${COMMIT}" -date "${SOURCE_DATE_EPOCH}" \
    && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
LABEL org.opencontainers.image.title="sidemirror" \
      org.opencontainers.image.description="Kafka cluster mirroring sidecar for stock Apache Kafka" \
      org.opencontainers.image.source="https://github.com/sidemirror/sidemirror" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/bin/${TARGETOS}_${TARGETARCH}/sidemirror /out/bin/${TARGETOS}_${TARGETARCH}/kafka-cluster-mirrors /usr/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/sidemirror
USER 65532:65532
# admin.listener, raft.listener, http.listener (/metrics, /healthz, /readyz)
EXPOSE 9191 9192 9193
VOLUME ["/var/lib/sidemirror"]
ENTRYPOINT ["/usr/bin/sidemirror"]
CMD ["run", "--config", "/etc/sidemirror/sidecar.properties"]
