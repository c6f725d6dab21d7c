# sidemirror: offset-exact Kafka cluster mirroring into stock Apache Kafka.
#
#   make demo   set up a fresh machine, start source and destination clusters
#               with sidecars, mirror a topic; prints the status page's URL
#   make test   set up a fresh machine and run every test (unit, integration, e2e)
#   make bench  Go benchmarks of the data plane, then the end-to-end benchmark on
#               real Kafka: sidemirror beside MirrorMaker 2 and the destination's own
#               ingest, per workload; writes docs/performance.md's Benchmark section
#               (BENCH_ARGS, e.g. -records 200000 -workloads zstd,small)
#   make bench-partitions  one sidecar with 10,000 partitions: RSS, start, stop
#   make failover-compare  a consumer group's failover with sidemirror and with
#               MirrorMaker 2: records re-read and skipped (docs/failover-compare.md)
#   make release  release archives, .deb and .rpm packages in dist/ (reproducible)

SHELL       := bash
GO          ?= go
GOBIN       := $(shell $(GO) env GOBIN)
ifeq ($(GOBIN),)
GOBIN       := $(shell $(GO) env GOPATH)/bin
endif
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS     := -X github.com/sidemirror/sidemirror/sidecar.Version=$(VERSION) -X github.com/sidemirror/sidemirror/sidecar.Commit=$(COMMIT) -X main.version=$(VERSION)
UNIT_PKGS    = $$($(GO) list ./... | grep -v /e2e)
E2E_TIMEOUT ?= 35m

.PHONY: all generate setup build test test-unit test-tools e2e lint demo bench bench-partitions chaos failover-compare e2e-fail-check release clean

all: build generate

# Files generated from code and committed: the Grafana dashboard
# (tools/dashboard; a test fails when the committed JSON is stale).
generate:
	$(TOOLS_GO) run ./dashboard -out ../deploy/grafana/sidemirror.json

setup:
	@bash scripts/setup.sh

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/sidemirror ./cmd/sidemirror
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/kafka-cluster-mirrors ./cmd/kafka-cluster-mirrors

# Everything: unit and integration tests (race detector on), then the
# end-to-end tests on real Kafka.
test: setup
	$(MAKE) test-unit
	$(MAKE) e2e

test-unit: test-tools
	$(GO) test -race -count=1 $(UNIT_PKGS)

# The tools module (tools/go.mod, its own dependencies): the release build
# (reproducible; installs the .deb with dpkg as root), the deploy/ manifests
# and the Dockerfile. It uses this repository's module through a replace
# directive, so a module that go.mod gains is missing from tools/go.sum until
# someone runs go mod tidy there: TOOLS_GO adds it on the fly meanwhile.
TOOLS_GO     = cd tools && GOFLAGS=-mod=mod $(GO)
test-tools:
	$(TOOLS_GO) test -count=1 ./...

# Release archives, .deb and .rpm packages and SHA256SUMS in dist/, for
# linux/amd64 and linux/arm64: see tools/release.
release:
	$(TOOLS_GO) run ./release -repo .. -out ../dist -version $(VERSION) -commit $(COMMIT)

# End-to-end packages each start their own Kafka clusters; -p 1 runs them
# one after another so the suite fits two cores. They include the short
# chaos run (e2e/chaos for CHAOS_CI_DURATION, about 7 minutes with the
# checks; `make chaos` is the long one), which replays the schedule of
# CHAOS_CI_SEED (empty: a random seed, printed); E2E_CHAOS=0 leaves it out.
E2E_CHAOS         ?= 1
CHAOS_CI_DURATION ?= 4m
CHAOS_CI_SEED     ?= 140
e2e: build
	CHAOS=$(E2E_CHAOS) CHAOS_SEED=$(CHAOS_CI_SEED) CHAOS_DURATION=$(CHAOS_CI_DURATION) $(GO) test -count=1 -p 1 -timeout $(E2E_TIMEOUT) ./e2e/...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOBIN)/staticcheck ./...
	$(TOOLS_GO) vet ./... && GOFLAGS=-mod=mod $(GOBIN)/staticcheck ./...

# Shows that a failing end-to-end run leaves no Kafka JVM behind, for a
# test that fails and for one that panics, both after the clusters started.
# The failing runs' output goes to bin/e2e-fail-check-<mode>.log.
e2e-fail-check:
	@mkdir -p bin
	@for mode in fail panic; do \
		log=bin/e2e-fail-check-$$mode.log; \
		if SIDEMIRROR_E2E_FAIL_ON_PURPOSE=$$mode $(GO) test -count=1 -run 'TestFailOnPurpose' ./e2e/ >$$log 2>&1; then \
			echo "the test that fails on purpose ($$mode) passed: see $$log"; exit 1; fi; \
		if ! grep -q 'failing on purpose' $$log; then \
			echo "the run that should fail on purpose ($$mode) failed for another reason: see $$log"; exit 1; fi; \
		echo "a test failed on purpose midway ($$mode, log: $$log)"; \
		bash scripts/check-no-java.sh || exit 1; \
	done

# The seeded chaos run (e2e/chaos, docs/chaos-testing.md): on the multi-host
# bed as root (every fault kind), else on the loopback bed (process faults
# only). CHAOS_SEED=<n> replays a run, CHAOS_DURATION=<go duration> sets its
# length (default 20m, 4m when CI=true; `make e2e` runs CHAOS_CI_DURATION
# of CHAOS_CI_SEED).
chaos: build
	CHAOS=1 $(GO) test -count=1 -v -timeout 90m -run '^TestChaos$$' ./e2e/chaos/

# Failover outcome for a consumer group, sidemirror beside MirrorMaker 2
# (e2e/failover, docs/failover-compare.md): a planned and an unplanned
# failover, records re-read and skipped by each tool. A few minutes; not
# part of make test.
failover-compare: setup build
	FAILOVER_COMPARE=1 $(GO) test -count=1 -v -timeout 20m -run '^TestFailoverCompare$$' ./e2e/failover/ 2>&1 | \
		tee bin/failover-compare.log | grep -E '^(planned|unplanned) failover|^TOOL|^(sidemirror|mirrormaker2) |^(--- |ok|FAIL|PASS)|failover_test.go'; \
		rc=$${PIPESTATUS[0]}; echo "full output: bin/failover-compare.log"; exit $$rc

# Measures, asserts nothing: see docs/operations.md#performance.
bench: setup build
	$(GO) test -run '^$$' -bench . -benchtime 2s ./fetcher/
	$(GO) run ./e2e/cmd/bench -doc docs/performance.md -plot docs/benchmark-throughput.png -lag-plot docs/benchmark-lag.png $(BENCH_ARGS)

# One sidecar with 10,000 partitions led by its broker: peak RSS, first record
# of 2,000 fresh partitions, --stop of 1,000 (docs/performance.md). Measures only.
bench-partitions: setup build
	$(GO) run ./e2e/cmd/bench -scale-partitions 10000 -doc docs/performance.md $(BENCH_ARGS)

demo: setup build
	$(GO) run ./e2e/cmd/demo $(if $(DEMO_DURATION),-duration $(DEMO_DURATION))

clean:
	rm -rf bin dist
