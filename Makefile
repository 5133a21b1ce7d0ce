# Makefile: an index of what can be run. Each target calls go or scripts/.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/chart-upgrader/chart-upgrader/internal/cli.Version=$(VERSION) -X github.com/chart-upgrader/chart-upgrader/internal/cli.Commit=$(COMMIT)
GO      ?= go
EXAMPLES := package/examples

.PHONY: cover bench-channel all build image-binary image-check test demo demo-k3s demo-merge bench bench-upgrade bench-latency bench-scale fuzz soak lint testenv clean

all: lint build test

## build: static bin/chart-upgrader (CGO off, version from git)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/chart-upgrader ./cmd/chart-upgrader

## image-binary: dist/chart-upgrader built exactly as the Dockerfile's build stage builds it
image-binary:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X github.com/chart-upgrader/chart-upgrader/internal/cli.Version=$(VERSION)" -o dist/chart-upgrader ./cmd/chart-upgrader

## image-check: build and run the image's final stage (also read-only, without capabilities, as a Plan runs it) and a chart bundle image with buildah (no Docker engine)
image-check:
	scripts/image-check

## testenv: build the control plane, kwok and helm-controller from the Go module proxy (cached outside the repo)
testenv:
	@scripts/testenv >/dev/null

## test: every test, the end-to-end ones against a real kube-apiserver + etcd
test:
	scripts/test

## demo: the main job on the bundled example
demo: build
	scripts/demo

## demo-k3s: the main job on the bundled example as a k3s HelmChart, with the real helm-controller
demo-k3s: build
	scripts/demo-k3s

## demo-merge: the offline merge of the bundled example charts, with the decision table
demo-merge: build
	bin/chart-upgrader merge -o table \
		--values $(EXAMPLES)/values.yaml \
		--old-chart $(EXAMPLES)/charts/demo-app-1.0.0 \
		--chart $(EXAMPLES)/charts/demo-app-2.0.0 \
		--policy $(EXAMPLES)/policy.yaml \
		--live $(EXAMPLES)/live.yaml

## bench: the merge benchmarks (figures in docs/performance.md)
bench:
	scripts/bench

## bench-upgrade: chart-upgrader side by side with a bash + kubectl + yq script, on the local control plane (docs/performance.md)
bench-upgrade:
	scripts/bench-upgrade

## bench-latency: ready detection, the simulator's ready write → the tool's exit, 100 runs
bench-latency:
	scripts/bench-latency

## bench-scale: 1,000/10,000 BundleDeployments, a rollout over 100 nodes (the no-op run), a spec of 50 charts
bench-scale:
	scripts/bench-scale

## bench-channel: a bounded load run of channel serve: requests/s and p99 (docs/performance.md)
bench-channel:
	scripts/bench-channel

## soak: upgrade and rollback cycles with random faults, invariants checked after each (docs/reliability.md); stops within 10 minutes; SOAK_FLAGS="-seed N -duration 3m"
soak:
	scripts/soak $(SOAK_FLAGS)

## cover: statement coverage of the pure core (internal/upgrade) from unit tests alone; fails below 85%
cover:
	scripts/cover

## fuzz: a short bounded run of every fuzz target
fuzz:
	scripts/fuzz

## lint: gofmt check and go vet
lint:
	scripts/lint

clean:
	rm -rf bin dist
