# Attune appliance. `make run` sets up and starts it; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null | sed 's/^v//' || echo 0.0.0-dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X github.com/attune-io/attune/appliance/buildinfo.Version=$(VERSION) \
           -X github.com/attune-io/attune/appliance/buildinfo.Commit=$(COMMIT) \
           -X github.com/attune-io/attune/appliance/buildinfo.Date=$(DATE)
TEST_TIMEOUT ?= 20m

.PHONY: build run test deps generate vet bench clean

build: generate
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/attune ./appliance/cmd/attune

deps:
	./scripts/install-deps.sh

generate:
	@if compgen -G "ui/**/*.templ" >/dev/null || compgen -G "ui/*.templ" >/dev/null; then $(GO) tool templ generate -path ui >/dev/null; fi

run: deps build
	./bin/attune serve $(ARGS)

vet:
	$(GO) vet ./...

test: deps build vet
	ATTUNE_TEST_BINARY=$(CURDIR)/bin/attune $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -p 2 ./...

bench: deps build
	./scripts/bench.sh

clean:
	rm -rf bin dist

-include make/*.mk
