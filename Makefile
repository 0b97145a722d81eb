# ddpstore: software iWARP (MPA/DDP/RDMAP) storage transport.
#
#   make run     build and run the demo on its embedded default
#   make test    vet, every unit and integration test with -race, allocation checks (what CI runs)
#   make bench   benchmarks, results in out/bench.txt (BENCHCOUNT=5: ratios of medians)
#   make compare ddpstore against nbdkit, in process and mounted (root): out/compare.md
#   make fuzz    every fuzz target for FUZZTIME each (default 60s)
#   make soak    verified I/O under chaos for DURATION (default 10m), root: out/soak.md
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

# The soak (integration/soak, docs/operations.md): DURATION of verified I/O
# while connections are cut, the target restarts and clients come and go.
DURATION     ?= 10m
SOAK_TIMEOUT ?= 3h
SOAK_REPORT  ?= $(OUT)/soak.md

COMPARE_RUNTIME ?= 8s
COMPARE_RUNS    ?= 3

.PHONY: all deps build run test check bench compare compare-smoke fuzz lint soak clean

all: build

# What the build needs beyond Go: librbd's headers for blockdev/rbd's cgo
# (and the single-node Ceph that its tests start), installed when missing.
deps:
	@scripts/ceph.sh

build: deps
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
	scripts/demo.sh $(BIN)

check: deps
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

test: check
	@# Allocation checks without -race first (it makes sync.Pool allocate).
	$(GO) test -count=1 -run 'Alloc' ./...
	$(GO) test -race -count=1 -timeout $(TESTTIMEOUT) ./...
	$(MAKE) --no-print-directory compare-smoke
	$(MAKE) --no-print-directory soak DURATION=2m SOAK_TIMEOUT=15m SOAK_REPORT=$(OUT)/soak-test.md

# Skipped, saying why, without root or /dev/fuse. The test builds its own
# programs (without -race; SOAK_RACE=1 for it).
soak:
	@mkdir -p $(OUT)
	SOAK_DURATION=$(DURATION) SOAK_OUT=$(SOAK_REPORT) $(GO) test -count=1 -v -run '^TestSoak$$' -timeout $(SOAK_TIMEOUT) ./integration/soak

bench: deps
	@mkdir -p $(OUT)
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./... | tee $(OUT)/bench.txt
	@echo; echo "RNIC and iSER against plain TCP over loopback (same run):"
	@$(GO) run ./internal/benchratio < $(OUT)/bench.txt | tee $(OUT)/bench-ratio.txt

# The peer comparison (docs/performance.md): servers on CPU 0, clients on
# CPU 1, every pattern on every system in turn, COMPARE_RUNS times.
compare: build
	@mkdir -p $(OUT)
	scripts/peers.sh
	$(GO) run ./internal/compare --bin $(BIN) --runtime $(COMPARE_RUNTIME) --runs $(COMPARE_RUNS) \
	  --out $(OUT)/compare.md --png $(OUT)/compare.png

# One second of each, so that the harness cannot rot; it checks that every
# system runs, not how fast (timings stay out of pass/fail).
compare-smoke: build
	@mkdir -p $(OUT)
	@if scripts/peers.sh; then \
	  $(GO) run ./internal/compare --bin $(BIN) --runtime 1s --runs 1 --out $(OUT)/compare-smoke.md --png "" >$(OUT)/compare-smoke.log 2>&1 \
	    || { cat $(OUT)/compare-smoke.log; exit 1; }; \
	  echo "compare-smoke: every system ran every pattern (out/compare-smoke.md)"; \
	else echo "compare-smoke: skipped: the peers are not installed and cannot be (see above)"; fi

# Each fuzz target runs alone (go test -fuzz takes one target per package).
fuzz: deps
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
