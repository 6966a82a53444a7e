# Terrace — two commands matter:
#   make run    a real single-node Terrace with emulated mem/ssd/hdd tiers under ./terrace-data
#   make test   every test: unit, fault, end-to-end, the S3 smoke test with real clients,
#               the S3 conformance set and a 60-fault chaos run (test/chaos)
#   make chaos  a longer chaos run (CHAOS_EVENTS faults; docs/reliability.md)

GO      ?= go
BIN     ?= bin/terrace
DATA    ?= terrace-data
PKGS    ?= ./...
# staticcheck is pinned and fetched through the Go module proxy on first use.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build run test unit smoke conformance vet fuzz bench screenshots chaos clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/terrace

run: build
	$(BIN) server --data-dir $(DATA)

vet:
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)

unit:
	$(GO) test -timeout 20m -count=1 $(PKGS)

smoke: build
	scripts/smoke.sh $(BIN)

# S3 conformance with boto3 and aws-sdk-go-v2, two users and anonymous
# access, checked against scripts/s3-conformance.expected.
conformance: build
	scripts/s3-conformance.sh $(BIN)

test: vet unit smoke conformance

# Short fuzz runs of every fuzz target (FUZZTIME per target).
FUZZTIME ?= 10s
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

bench:
	scripts/bench.sh

# Screenshots of the web console for docs/operations.md, taken by the
# browser tests (headless Chromium) against a real node.
screenshots:
	TERRACE_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -run TestConsole ./test/console

# A longer chaos run: CHAOS_EVENTS faults on a 5-node cluster under nice;
# CHAOS_SEED=0 picks a seed (printed). The run directory keeps the
# schedule, history and logs for replay.
CHAOS_EVENTS ?= 300
CHAOS_SEED   ?= 0
CHAOS_DIR    ?= chaos-runs/$(shell date +%Y%m%d-%H%M%S)
chaos: build
	nice -n 10 $(BIN) chaos --nodes 5 --events $(CHAOS_EVENTS) --seed $(CHAOS_SEED) --dir $(CHAOS_DIR)

clean:
	rm -rf bin
