# fabricsim: build, test, benchmark and demo targets. Everything a fresh
# machine needs comes through the Go module proxy.
GO       ?= go
BIN      := bin
CMDS     := $(notdir $(wildcard cmd/*))
FUZZTIME ?= 1s
FUZZJOBS ?= 2
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build test test-long unit race fuzz e2e bench demo interop interop-run slurm-check slurm-run lint clean nccl-tests

all: build

build:
	@mkdir -p $(BIN)
	@[ -x $(BIN)/fctstats ] || echo "build: compiling the programs and their dependencies (about 3.5 minutes on an empty Go build cache)"
	$(GO) build -o $(BIN)/ ./cmd/...

# step: one line saying when a step of make test ended, in seconds from
# its start, so a slow run shows where its time went (.ci/run is make test).
step = echo "make test: $(1) at $$(( $$(date +%s) - $$(cat out/.test-start) )) s"

## test: vet, unit and end-to-end tests, a short run of every fuzz target,
## then the interop checks (DuckDB, Arrow JS, pandas; INTEROP=0 skips them).
## go test's own vet (a subset of go vet's checks) is off: go vet ./... has
## just run them all. ./tests/ comes first so that its end-to-end tests, by
## far the longest package, start first: go test runs the packages in the
## order given, two at a time, and ./tests/ last ran its tests that run one
## at a time (a minute of six on a loaded machine) alone on one core of two.
test:
	@mkdir -p out && date +%s >out/.test-start
	@$(MAKE) --no-print-directory build
	@$(call step,build done)
	@echo "vet: go vet ./..."
	@$(GO) vet ./...
	@$(call step,vet done)
	@echo "unit and end-to-end tests: go test -short ./... (the slow checks at full size: make test-long)"
	FABRICSIM_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -short -vet=off -timeout 30m ./tests/ ./...
	@$(call step,go test done)
	@$(MAKE) --no-print-directory race
	@$(call step,race done)
	@echo "fuzz: every fuzz target for $(FUZZTIME), two at a time; beside it, the interop and Slurm checks (mostly waiting on installs and daemons), their logs after it"
	@{ $(MAKE) --no-print-directory interop-run; r=$$?; $(call step,interop done); exit $$r; } >out/interop-step.log 2>&1 & ip=$$!; \
	{ $(MAKE) --no-print-directory slurm-run; r=$$?; $(call step,slurm done); exit $$r; } >out/slurm-step.log 2>&1 & sp=$$!; \
	$(MAKE) --no-print-directory fuzz; fz=$$?; \
	$(call step,fuzz done); \
	wait $$ip; ir=$$?; wait $$sp; sr=$$?; \
	echo "interop: readers fabricsim did not write (INTEROP=0 skips)"; cat out/interop-step.log; \
	cat out/slurm-step.log; \
	[ $$fz = 0 ] && [ $$ir = 0 ] && [ $$sr = 0 ]
	@echo "make test: passed in $$(( $$(date +%s) - $$(cat out/.test-start) )) s"

## test-long: every test at full size, the slow ones too (they skip
## themselves under -short, which make test passes)
test-long: build
	$(GO) test -count=1 -timeout 60m ./...

## race: the partitioned packet loop's tests under the race detector
## (its parts share the flows' columns and the DAG across goroutines)
race:
	@echo "race: the partitioned packet loop's tests under the race detector"
	@if [ "$$($(GO) env CGO_ENABLED)" = 1 ]; then $(GO) test -count=1 -short -race -run 'Partition' ./pkg/packet/; \
	else echo "race: skipped: the race detector needs cgo (CGO_ENABLED=0)"; fi

fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZJOBS=$(FUZZJOBS) ./tests/fuzz.sh

## bench: Go benchmarks (records/s, rows/s ...), end-to-end speed checks, the
## fabric tables (pipelines/fabric.sh: one workload through every model and
## routing on 128 to 9216 GPUs), the nccl-tests sweep tables of one DGX
## A100 and one DGX H100 per backend, 4x HGX H100 AllReduce and AllGather
## against the published Voltage Park sweeps and AllToAll against AWS p5's
## (time ratio per size)
bench: build
	@echo "bench: machine $$(nproc) cores, $$(awk '/MemTotal/ {printf "%.0f GiB", $$2/1048576}' /proc/meminfo); load before: $$(cut -d' ' -f1-3 /proc/loadavg) (figures on a loaded machine are not speeds)"
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x ./tests/
	$(GO) test -run '^$$' -bench . -benchmem $$($(GO) list ./... | grep -v /tests)
	@rm -rf out/bench/routing && $(MAKE) --no-print-directory -C pipelines/routing -j 2 BIN=$(CURDIR)/bin OUT=$(CURDIR)/out/bench/routing
	@rm -rf out/bench/surrogate && start=$$(date +%s) && \
		$(MAKE) --no-print-directory -C pipelines/surrogate -j 1 BIN=$(CURDIR)/bin OUT=$(CURDIR)/out/bench/surrogate && \
		echo "seed-003 table (issue 14: under 5 minutes, surrogate speedup 15x): $$(( $$(date +%s) - start )) s"
	@./pipelines/fabric.sh --out out/bench/fabric
	@./pipelines/nccl-tests.sh --gpu-type A100 --max 8GiB --out out/bench/nccl-tests-a100 \
		--reference examples/reference/hpe-apollo6500-8xa100_allreduce_plateau_nccl-tests-149.csv
	@./pipelines/nccl-tests.sh --gpu-type H100 --max 8GiB --out out/bench/nccl-tests-h100 \
		--reference examples/reference/dgx-h100_allreduce-nvls_plateau_nccl-tests-212.csv
	@for op in allreduce allgather; do ./pipelines/nccl-tests.sh --gpus 32 --gpu-type H100 --nic-bw 400Gbps \
		--group dp --op $$op --min 1MiB --max 4GiB --backends "busbw fluid" --out out/bench/nccl-tests-vp-$$op \
		--reference examples/reference/vp-4x8h100-ib_$${op}_nccl-2.24.csv; done
	@./pipelines/nccl-tests.sh --gpus 32 --gpu-type H100 --nic-bw 400Gbps --group dp --op alltoall \
		--min 32MiB --max 2GiB --backends "busbw fluid" --transport preset=h100-efa --out out/bench/nccl-tests-p5-alltoall \
		--reference examples/reference/aws-p5-4x8h100-efa_alltoall.csv
	@echo "bench: load after: $$(cut -d' ' -f1-3 /proc/loadavg)"

## nccl-tests: all_reduce_perf -b 8 -e 16G -f 2 on one simulated DGX H100
## through every backend, tables and out/nccl-tests/busbw.{png,svg}
nccl-tests: build
	@./pipelines/nccl-tests.sh --gpu-type H100 --out out/nccl-tests \
		--reference examples/reference/dgx-h100_allreduce-nvls_plateau_nccl-tests-212.csv \
		--reference examples/reference/dgx-h100_ring_plateau_nccl-tests-212.csv

## demo: the main pipeline on a small cluster, printed for people
demo: build
	@./pipelines/demo.sh

## interop: readers fabricsim did not write read its traces (pipelines/interop.sh)
interop: build interop-run

# interop-run and slurm-run are the checks without the build, which make
# test runs beside the fuzzing (two builds at once would write bin/ twice).
# FABRICSIM_TEST_BIN: the end-to-end tests run the programs make build has
# just written instead of linking their own copies (tests/main_test.go).
interop-run:
	@GO=$(GO) ./pipelines/interop.sh

## slurm-check: a 4-point sweep through a real single-node Slurm set up by
## pipelines/slurm-setup.sh (root only; SLURM=0 or SLURM_CHECK=0 skips it);
## the daemons it started are stopped afterwards
slurm-check: build slurm-run

slurm-run:
	@mkdir -p out
	@if [ "$${SLURM:-1}" = 0 ] || [ "$${SLURM_CHECK:-1}" = 0 ]; then echo "slurm-check: skipped (SLURM=0)"; \
	else echo "slurm-check: a sweep through a single-node Slurm (as root: installs slurm-wlm and munge, starts their daemons, stops them after)"; \
	FABRICSIM_SLURM=1 FABRICSIM_TEST_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -v -run '^TestChunkSweepSlurm$$' ./tests/ >out/slurm-check.log 2>&1; rc=$$?; \
	grep -E -- '--- (PASS|SKIP|FAIL)|sweep_test.go' out/slurm-check.log | sed 's/^/slurm-check: /'; \
	if [ "$$(id -u)" = 0 ]; then ./pipelines/slurm-setup.sh stop | sed 's/^/slurm-check: /'; fi; exit $$rc; fi

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf $(BIN) out
