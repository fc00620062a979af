# numaproxy — see README.md. `make run` and `make test` do all set-up themselves.
GO       ?= go
BIN      := bin/numaproxy
REVISION := $(shell git describe --always --dirty 2>/dev/null)
LDFLAGS  := -X main.revision=$(REVISION)

.PHONY: build run test lint fuzz docs clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/numaproxy

# Runs in the foreground with the default configuration; Ctrl-C stops it.
run: build
	./$(BIN) -p . -c conf/numaproxy.conf

# Everything, with the race detector; fuzz targets run their seed corpora.
test: lint
	$(GO) test -race -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Longer fuzzing runs than the seeds `make test` runs (FUZZTIME per target).
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzLoad -fuzztime=$(FUZZTIME) ./conf/

# Regenerates the README's directive reference from the registry.
docs:
	$(GO) test ./cmd/numaproxy -run TestREADMEReference -update

clean:
	rm -rf bin logs
