# ddpstore: software iWARP (MPA/DDP/RDMAP) storage transport.
#
#   make run     build and run the demo on its embedded default
#   make test    vet, every unit and integration test with -race, allocation checks (what CI runs)
#   make bench   benchmarks, results in out/bench.txt (BENCHCOUNT=5: ratios of medians)
#   make fuzz    every fuzz target for FUZZTIME each (default 60s)
#   make lint    gofmt, go vet, staticcheck

SHELL       := /bin/bash
GO          ?= go
FUZZTIME    ?= 60s
FUZZMINTIME ?= 10s
BENCHTIME   ?= 1s
BENCHCOUNT  ?= 1
TESTTIMEOUT ?= 25m
BIN         := $(CURDIR)/bin
OUT         := $(CURDIR)/out
STATICCHECK_VERSION := v0.8.2
CMDS        := $(notdir $(wildcard cmd/*))

export PATH := $(BIN):$(PATH)

.PHONY: all build run test check bench fuzz lint clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
	scripts/demo.sh $(BIN)

check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

test: check
	@# Allocation checks without -race first (it makes sync.Pool allocate).
	$(GO) test -count=1 -run 'Alloc' ./...
	$(GO) test -race -count=1 -timeout $(TESTTIMEOUT) ./...

bench:
	@mkdir -p $(OUT)
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./... | tee $(OUT)/bench.txt
	@echo; echo "RNIC and iSER against plain TCP over loopback (same run):"
	@$(GO) run ./internal/benchratio < $(OUT)/bench.txt | tee $(OUT)/bench-ratio.txt

# Each fuzz target runs alone (go test -fuzz takes one target per package).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) $$pkg; \
	  done; \
	done

$(BIN)/staticcheck:
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: check $(BIN)/staticcheck
	$(BIN)/staticcheck ./...

clean:
	rm -rf $(BIN) $(OUT)
