# tunnelbench: see README.md.
GO ?= go
BUF_VERSION := v1.75.0
BIN := bin

.PHONY: all build test bench chaos generate lint fmt dashboards-up dashboards-down dashboards-gen

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

test:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); exit 1; }
	$(GO) test -race -timeout 15m ./...

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
