# tunnelbench: see README.md.
GO ?= go
BUF_VERSION := v1.75.0
BIN := bin

.PHONY: all build test test-racy-peers test-short fuzz bench chaos generate lint fmt dashboards-up dashboards-down dashboards-gen

all: build

# -buildvcs=auto: --version shows the commit built from a git clone, even where GOFLAGS turns stamping off.
build:
	$(GO) build -buildvcs=auto -o $(BIN)/ ./cmd/...

test:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); exit 1; }
	$(GO) test -race -timeout 15m ./...
	@$(MAKE) --no-print-directory test-racy-peers
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

# The checks of a peer tunnel whose library has data races of its own (remotedialer: connection.go
# writes err and deadlines without a lock), which the -race run leaves out: here without -race. It fails
# unless every one of them ran and passed (RACY_PEER_CHECKS subtests).
RACY_PEER_TESTS := ^(TestAdapters|TestIdleCost|TestAdaptersUnderLoad|TestAgentDial|TestShortAgentLatencyTunnels|TestShortAgentBlackholeTunnels)$$/^remotedialer$$
RACY_PEER_CHECKS := 6
test-racy-peers:
	@echo "go test (no -race) remotedialer's checks in ./bench/tunnels ./chaos/runner"
	@out=$$($(GO) test -count=1 -timeout 10m -v -run '$(RACY_PEER_TESTS)' ./bench/tunnels ./chaos/runner 2>&1); status=$$?; \
		echo "$$out" | grep -E '^ *(--- |ok|FAIL|panic)' ; \
		passed=$$(echo "$$out" | grep -c -- '--- PASS: .*/remotedialer'); \
		if [ $$status -ne 0 ] || [ $$passed -ne $(RACY_PEER_CHECKS) ]; then echo "$$out" | tail -50; echo "remotedialer: $$passed of $(RACY_PEER_CHECKS) checks passed"; exit 1; fi

# The edit-loop tier: go vet, gofmt and every test with -short, without -race or fuzzing. -short skips
# the tests that need redis-server, prometheus or promtool, build the commands or run seconds of load
# (internal/testtier); `make test` runs them all. Under a minute on 2 cores with a warm build cache.
test-short: lint
	$(GO) test -short ./...

# Every fuzz target, as package:target. go test fuzzes one target per run, so `make fuzz` runs them one
# after another, each for FUZZTIME; `make test` runs each for FUZZTIME_SHORT (a number of inputs). The
# seed corpora are in each package's testdata/fuzz/<target>/ (they also run as plain tests); new inputs
# the fuzzer finds stay in the Go build cache, and only an input that fails is written to testdata, to be
# committed with its fix.
FUZZ_TARGETS := \
	./core/rpc:FuzzStateTable \
	./core/rpc:FuzzEnvelopeDecode \
	./core/rpc:FuzzHopDecode \
	./core/rpc:FuzzProtoFastPath \
	./core/httptunnel:FuzzExchange \
	./core/httptunnel:FuzzProtoFastPath \
	./core/httptunnel:FuzzParsePath \
	./core/kas:FuzzParseArgs \
	./core/agentk:FuzzParseArgs \
	./chaos/scenario:FuzzParse \
	./bench/tunnels:FuzzParseList
FUZZTIME ?= 30s
# A count, not a duration: with a duration, Go's fuzz coordinator (before Go 1.27) can report its own
# -fuzztime deadline as a failure, "context deadline exceeded" with no failing input (golang/go#75804).
# 5000 inputs take about 0.5-2 s per target here.
FUZZTIME_SHORT ?= 5000x

# A run that fails with that deadline error and wrote no failing input is reported and passes; any other
# failure fails.
fuzz:
	@set -e; log=$$(mktemp); trap 'rm -f "$$log"' EXIT; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
		status=0; $(GO) test -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*} > "$$log" 2>&1 || status=$$?; \
		cat "$$log"; \
		if [ $$status -ne 0 ]; then \
			if grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log"; then \
				echo "(not a failure: Go's fuzz coordinator reported its own -fuzztime deadline, golang/go#75804; no failing input)"; \
			else exit $$status; fi; \
		fi; \
	done

# The benchmark matrix on an in-process topology; results in results/latest.
bench:
	$(GO) run ./cmd/tunnelbench bench --out results/latest

# Every chaos scenario in scenarios/ against an in-process topology; results in results/chaos-latest
# (results/chaos is the committed reference run, as results/baseline is bench's).
chaos:
	$(GO) run ./cmd/tunnelbench chaos --dir scenarios --out results/chaos-latest

# Regenerates the protobuf code of every .proto with pinned tools (buf, protoc-gen-go, protoc-gen-go-grpc
# and protoc-gen-go-vtproto; see buf.gen.yaml and buf.gen.vtproto.yaml).
generate:
	$(GO) run github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION) generate --path core/rpc --path core/demo --path core/httptunnel
	$(GO) run github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION) generate --template buf.gen.vtproto.yaml --path core/rpc --path core/httptunnel

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); exit 1; }

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '\.pb\.go$$')

# Prometheus and Grafana with the project's dashboards (needs Docker); see dashboards/README.md, which
# also runs the Prometheus binary without Docker. Each check names what is missing instead of a docker error.
DASHBOARDS_NO_DOCKER := without Docker, run Prometheus on dashboards/prometheus.yml (see the section Without Docker in dashboards/README.md)
dashboards-up:
	@command -v docker >/dev/null 2>&1 || { echo "make dashboards-up: docker not found; $(DASHBOARDS_NO_DOCKER)" >&2; exit 1; }
	@docker compose version >/dev/null 2>&1 || { echo "make dashboards-up: the Docker Compose plugin is missing (docker compose version fails); install it, or $(DASHBOARDS_NO_DOCKER)" >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "make dashboards-up: the Docker daemon does not answer (docker info fails); start it, or $(DASHBOARDS_NO_DOCKER)" >&2; exit 1; }
	docker compose -f dashboards/docker-compose.yml up -d
dashboards-down:
	docker compose -f dashboards/docker-compose.yml down
# Regenerates dashboards/*.json from the Go code that describes them.
dashboards-gen:
	$(GO) run ./dashboards/gen
