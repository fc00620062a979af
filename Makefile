# numaproxy — see README.md. `make run` and `make test` do all set-up themselves.
GO       ?= go
BIN      := bin/numaproxy
REVISION := $(shell git describe --always --dirty 2>/dev/null)
LDFLAGS  := -X main.revision=$(REVISION)

.PHONY: build run test unit test-numa lint fuzz docs generate bench bench-quick clean faults

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/numaproxy

# Runs in the foreground with the default configuration; Ctrl-C stops it.
run: build
	./$(BIN) -p . -c conf/numaproxy.conf

# Everything: gofmt and go vet, every package's tests with the race detector (fuzz
# targets run their seed corpora), then the NUMA suite in a two-node VM.
test: lint unit test-numa

unit:
	$(GO) test -race -count=1 ./...

# The tests that check NUMAPROXY_IN_VM, plus a topology probe, in a QEMU guest with
# two NUMA nodes (Debian's kernel, TCG). Where QEMU cannot run it says so plainly and
# succeeds; CI sets NUMA_VM_FLAGS= to make that a failure.
NUMA_VM_FLAGS ?= -allow-missing
test-numa:
	$(GO) run ./integration/vm/cmd/numa-vm $(NUMA_VM_FLAGS) -timeout 5m

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The fault battery in full (integration/faults_test.go): upstream faults, uploads,
# header abuse, connection storms, slowloris, slow readers, descriptor exhaustion,
# reload and stop under them, each against numaproxy and Debian's nginx, with the
# tests that cover them in depth; prints the table. `make test` runs its short form.
faults:
	NUMAPROXY_FAULTS=full $(GO) test -count=1 -v -timeout 30m -run 'TestFaultBattery' ./integration/ | grep -v '^=== '

# Longer fuzzing runs than the seeds `make test` runs (FUZZTIME per target).
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzLoad -fuzztime=$(FUZZTIME) ./conf/
	$(GO) test -run='^$$' -fuzz=FuzzNormalize -fuzztime=$(FUZZTIME) ./httpcore/route/
	$(GO) test -run='^$$' -fuzz=FuzzUpstreamAgrees -fuzztime=$(FUZZTIME) ./httpcore/route/
	$(GO) test -run='^$$' -fuzz=FuzzRequestHead -fuzztime=$(FUZZTIME) ./httpcore/http1/
	$(GO) test -run='^$$' -fuzz=FuzzDN -fuzztime=$(FUZZTIME) ./tls/
	$(GO) test -run='^$$' -fuzz=FuzzDecryptKeyPEM -fuzztime=$(FUZZTIME) ./tls/
	$(GO) test -run='^$$' -fuzz=FuzzResponseHead -fuzztime=$(FUZZTIME) ./httpcore/http1/
	$(GO) test -run='^$$' -fuzz=FuzzChunked -fuzztime=$(FUZZTIME) ./httpcore/http1/
	$(GO) test -run='^$$' -fuzz=FuzzTranslate -fuzztime=$(FUZZTIME) ./pcre/
	$(GO) test -run='^$$' -fuzz=FuzzRewriteDirectives -fuzztime=$(FUZZTIME) ./rewrite/

# Regenerates the README's directive reference from the registry.
docs:
	$(GO) test ./cmd/numaproxy -run TestREADMEReference -update

# Rebuilds the BPF program's generated files (needs clang, llvm and libbpf-dev);
# a test in numa/steering fails when the committed ones drift from the source.
generate:
	$(GO) generate ./numa/steering/

# Side-by-side benchmark against nginx, HAProxy and httputil.ReverseProxy
# (integration/bench/README.md). Needs root and 2+ CPUs; installs nginx, haproxy and
# wrk if missing. Not a pass/fail test.
BENCHFLAGS ?=
bench:
	$(GO) run ./integration/bench $(BENCHFLAGS)

bench-quick:
	$(GO) run ./integration/bench -quick $(BENCHFLAGS)

clean:
	rm -rf bin logs
