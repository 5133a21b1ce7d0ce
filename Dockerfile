# chart-upgrader image: a static binary on scratch, launched by
# system-upgrade-controller through a Plan (see plans/ and README).
#
#   docker build --build-arg VERSION=v0.1.0 -t chart-upgrader:v0.1.0 .
#
# `make image-binary` builds the same binary the same way without Docker.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/chart-upgrader/chart-upgrader/internal/cli.Version=${VERSION}" \
      -o /out/chart-upgrader ./cmd/chart-upgrader

FROM scratch
# TLS to Helm repositories and the API server
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/chart-upgrader /chart-upgrader
ENTRYPOINT ["/chart-upgrader"]
CMD ["upgrade"]
