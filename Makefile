# tunnelbench: see README.md.
GO ?= go
BUF_VERSION := v1.75.0
BIN := bin

.PHONY: all build test test-short fuzz bench chaos generate lint fmt dashboards-up dashboards-down dashboards-gen

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

test:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); exit 1; }
	$(GO) test -race -timeout 15m ./...
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

# The edit-loop tier: go vet, gofmt and every test with -short, without -race or fuzzing. -short skips
# the tests that need redis-server, prometheus or promtool, build the commands or run seconds of load
# (internal/testtier); `make test` runs them all. Under a minute on 2 cores with a warm build cache.
test-short: lint
	$(GO) test -short ./...

# Every fuzz target, as package:target. go test fuzzes one target per run, so `make fuzz` runs them one
# after another, each for FUZZTIME; `make test` runs each for FUZZTIME_SHORT. The seed corpora are in
# each package's testdata/fuzz/<target>/ (they also run as plain tests); new inputs the fuzzer finds
# stay in the Go build cache, and only an input that fails is written to testdata, to be committed with
# its fix.
FUZZ_TARGETS := \
	./core/rpc:FuzzStateTable \
	./core/rpc:FuzzEnvelopeDecode \
	./core/httptunnel:FuzzExchange \
	./core/httptunnel:FuzzParsePath \
	./core/kas:FuzzParseArgs \
	./core/agentk:FuzzParseArgs \
	./chaos/scenario:FuzzParse \
	./bench/tunnels:FuzzParseList
FUZZTIME ?= 30s
FUZZTIME_SHORT ?= 3s

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*}; \
	done

# The benchmark matrix on an in-process topology; results in results/latest.
bench:
	$(GO) run ./cmd/tunnelbench bench --out results/latest

# Every chaos scenario in scenarios/ against an in-process topology; results in results/chaos/.
chaos:
	$(GO) run ./cmd/tunnelbench chaos --dir scenarios --out results/chaos

# Regenerates the protobuf code with pinned tools (buf, protoc-gen-go, protoc-gen-go-grpc; see buf.gen.yaml).
generate:
	$(GO) run github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION) generate --path core/rpc --path core/demo

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); exit 1; }

fmt:
	gofmt -w $$(git ls-files '*.go' | grep -v '\.pb\.go$$')

# Prometheus and Grafana with the project's dashboards (needs Docker); see dashboards/README.md.
dashboards-up:
	docker compose -f dashboards/docker-compose.yml up -d
dashboards-down:
	docker compose -f dashboards/docker-compose.yml down
# Regenerates dashboards/*.json from the Go code that describes them.
dashboards-gen:
	$(GO) run ./dashboards/gen
