# Clawguard — `make run` starts the whole system locally, `make test` runs every test.
SHELL := /bin/bash
.DEFAULT_GOAL := help

TOOLS      := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)
export GOFLAGS ?= -buildvcs=false

BUF_VERSION             := v1.75.0
PROTOC_GEN_GO_VERSION   := v1.36.12
PROTOC_GEN_GRPC_VERSION := v1.6.0

# The version every binary reports (--version; ncl version): git describe, "dev" outside a git checkout.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Binaries carry their commit (go version -m shows vcs.revision) where git can read the checkout;
# tests and a tarball build without it (GOFLAGS above).
BUILDVCS := $(shell git status --porcelain >/dev/null 2>&1 && echo true || echo false)
NCL_LDFLAGS := -X github.com/clawguard/clawguard/cli/internal/ncl.Version=$(VERSION)

MODULES := proto migrations server runner cli examples bench e2e
GO_PKGS := $(foreach m,$(MODULES),./$(m)/...)

.PHONY: help
help: ## list targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc ## install pinned buf and protoc plugins into .tools/bin

$(TOOLS)/buf:
	GOBIN=$(TOOLS) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GRPC_VERSION)

.PHONY: proto
proto: tools ## regenerate the Go code of proto/ (committed)
	buf lint
	buf generate

.PHONY: proto-check
proto-check: tools ## fail if buf lint fails, regeneration changes anything, or the API breaks against the previous main
	buf lint
	buf generate
	@git diff --exit-code -- proto || { echo "generated protobuf code is stale: run 'make proto' and commit" >&2; exit 1; }
	@if [ -n "$$(git status --porcelain -- proto)" ]; then echo "regeneration created untracked files under proto/" >&2; git status --porcelain -- proto >&2; exit 1; fi
	@base=$${BUF_BREAKING_AGAINST:-$$(git rev-parse -q --verify HEAD~1 2>/dev/null)}; \
	if [ -n "$$base" ] && git cat-file -e "$$base:proto" 2>/dev/null; then \
	  echo "buf breaking against $$base"; buf breaking --against ".git#ref=$$base"; \
	else echo "buf breaking: no previous main with proto/ to compare against"; fi

.PHONY: build
build: ## build bin/clawguard-server, bin/clawguard-runner, bin/clawguard-mcp, bin/clawguard-init, bin/ncl, bin/clawguard-telegram, bin/clawguard-slack, the demo agents (static)
	@mkdir -p bin
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(LDFLAGS)" -o bin/clawguard-server ./server/cmd/clawguard-server
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(LDFLAGS)" -o bin/clawguard-runner ./runner/cmd/clawguard-runner
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(LDFLAGS)" -o bin/clawguard-mcp ./runner/cmd/clawguard-mcp
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(LDFLAGS)" -o bin/clawguard-init ./runner/cmd/clawguard-init
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(NCL_LDFLAGS)" -o bin/ncl ./cli/cmd/ncl
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(LDFLAGS)" -o bin/clawguard-telegram ./cli/cmd/clawguard-telegram
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(LDFLAGS)" -o bin/clawguard-slack ./cli/cmd/clawguard-slack
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -o bin/demo-agent ./runner/agent/demo
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -o bin/llm-agent ./runner/agent/llm
	@[ "$(BUILDVCS)" = false ] || go version -m bin/clawguard-server | grep -q 'vcs.revision=' \
	  || { echo "bin/clawguard-server carries no vcs.revision" >&2; exit 1; }
	@[ "$$(bin/clawguard-server --version)" = "$(VERSION)" ] && [ "$$(bin/clawguard-runner --version)" = "$(VERSION)" ] \
	  && [ "$$(bin/clawguard-telegram --version)" = "$(VERSION)" ] && [ "$$(bin/clawguard-slack --version)" = "$(VERSION)" ] \
	  && [ "$$(bin/ncl --version)" = "ncl version $(VERSION)" ] || { echo "the binaries do not report version $(VERSION)" >&2; exit 1; }

# OCI labels every image gets at build time (the static ones are in the Dockerfiles).
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
OCI_LABELS = --label org.opencontainers.image.version=$(VERSION) --label org.opencontainers.image.revision=$(REVISION) \
  --label org.opencontainers.image.created=$(shell date -u +%Y-%m-%dT%H:%M:%SZ) --label org.opencontainers.image.source=https://github.com/clawguard/clawguard

.PHONY: images
images: build ## build the server, runner and bridge images (FROM scratch, OCI labels), tagged :$(VERSION) and :dev
	docker build -q $(OCI_LABELS) -f deploy/docker/server.Dockerfile -t clawguard-server:$(VERSION) -t clawguard-server:dev bin/
	docker build -q $(OCI_LABELS) -f deploy/docker/runner.Dockerfile -t clawguard-runner:$(VERSION) -t clawguard-runner:dev bin/
	for b in clawguard-telegram clawguard-slack; do \
	  docker build -q $(OCI_LABELS) --build-arg BRIDGE=$$b -f deploy/docker/bridge.Dockerfile -t $$b:$(VERSION) -t $$b:dev bin/ || exit 1; \
	done

.PHONY: demo-image
demo-image: ## build the demo agent image clawguard-agent-demo:latest (FROM scratch, with clawguard-mcp; needs Docker)
	@mkdir -p bin
	CGO_ENABLED=0 go build -trimpath -o bin/demo-agent ./runner/agent/demo
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(LDFLAGS)" -o bin/clawguard-mcp ./runner/cmd/clawguard-mcp
	cd runner && go run ./internal/runtime/docker/buildbase -binary ../bin/demo-agent -mcp ../bin/clawguard-mcp -tag clawguard-agent-demo:latest

.PHONY: debian-image
debian-image: ## build clawguard-debian:<suite> (mmdebstrap, cached in Docker) and the demo agent on it, clawguard-agent-demo-debian:latest
	@mkdir -p bin
	CGO_ENABLED=0 go build -trimpath -o bin/demo-agent ./runner/agent/demo
	CGO_ENABLED=0 go build -buildvcs=$(BUILDVCS) -trimpath -ldflags "$(LDFLAGS)" -o bin/clawguard-mcp ./runner/cmd/clawguard-mcp
	base=$$(deploy/local/debian-image.sh) && cd runner && \
	  go run ./internal/runtime/docker/buildbase -from "$$base" -binary ../bin/demo-agent -mcp ../bin/clawguard-mcp -tag clawguard-agent-demo-debian:latest

.PHONY: run
run: build ## start a throwaway Postgres, the server, a runner and the demo agent; with ANTHROPIC_API_KEY or OPENAI_API_KEY also an LLM agent (Ctrl-C stops all)
	@deploy/local/run.sh

.PHONY: test
test: ## run every test (starts a throwaway Postgres; Docker must be running)
	@deploy/local/test.sh

.PHONY: e2e
e2e: ## run only the end-to-end tests: real binaries and Postgres; the multi-host test needs root (network namespaces)
	go test -count=1 -timeout 5m -v ./e2e/...

.PHONY: console-screenshots
console-screenshots: ## retake the README's console screenshots (headless Chromium, a test Postgres)
	CLAWGUARD_SCREENSHOT_DIR=$(CURDIR)/server/internal/console/screenshots \
	  go test -count=1 -run 'TestBrowserApprovesAHoldLive|TestBrowserPagesFitAPhoneAndADesk' ./server/internal/console/

.PHONY: lint
lint: tools ## gofmt, go vet, buf lint
	@out=$$(gofmt -l $(MODULES) deploy 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(GO_PKGS)
	buf lint

.PHONY: bench
bench: build ## run the load generators against a local server (see BENCHMARKS.md)
	@deploy/local/bench.sh

.PHONY: clean
clean: ## remove build output and local data
	rm -rf bin .data
