# fabricsim: build, test, benchmark and demo targets. Everything a fresh
# machine needs comes through the Go module proxy.
GO       ?= go
BIN      := bin
CMDS     := $(notdir $(wildcard cmd/*))
FUZZTIME ?= 3s
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build test unit fuzz e2e bench demo interop lint clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

## test: vet, unit and end-to-end tests, a short run of every fuzz target,
## then the interop checks (DuckDB, Arrow JS, pandas; INTEROP=0 skips them)
test: build
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	@$(MAKE) --no-print-directory fuzz
	@$(MAKE) --no-print-directory interop

fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) ./tests/fuzz.sh

## bench: Go benchmarks (records/s, rows/s ...) and end-to-end speed checks
bench: build
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x ./tests/
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v /tests)

## demo: the main pipeline on a small cluster, printed for people
demo: build
	@./pipelines/demo.sh

## interop: readers fabricsim did not write read its traces (pipelines/interop.sh)
interop: build
	@GO=$(GO) ./pipelines/interop.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf $(BIN) out
