# ocular — the two commands users run: `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DOCULAR_WERROR=ON
endif
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all setup configure build test demo asan asan-build fuzz fuzz-deep fuzz-ubsan-build \
  fuzz-deep-ubsan reference-env fixtures clean

all: build

# CI also installs Chromium for the web page test (server_web_page skips without it) and
# HAProxy for the load-balancer fail-over test (deploy_haproxy_failover skips without it).
setup:
	@scripts/setup $(if $(filter true,$(CI)),--web --lb)

configure: setup
	@cmake -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

demo: build
	@scripts/demo $(BUILD)

# Tests under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs this too) and the libFuzzer
# targets, from one clang build (build-asan, -DOCULAR_FUZZ=ON: the libraries carry libFuzzer's
# coverage counters, the tests link them as they are). Built as ASan's documentation advises:
# -O1 with line tables (-g1: reports keep file:line), the kernels at -O2
# (src/kernels/CMakeLists.txt) so that Highway's wrappers inline. Warnings are the Release
# build's job (-Werror there; other compilers and -O levels warn differently). The model goldens
# and the CLI end-to-end test run at the SIMD ISAs (avx512, amx where the CPU has them); their
# scalar and avx2 twins run in the Release suite.
ASAN_DEBUG := '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG' '-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG'
asan-build: setup
	@scripts/setup --fuzz
	@CC=clang CXX=clang++ cmake -S . -B build-asan $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) \
	  -DOCULAR_SANITIZE=ON -DOCULAR_FUZZ=ON -DOCULAR_WERROR=OFF $(ASAN_DEBUG) >/dev/null
	@cmake --build build-asan -j $(JOBS)

asan: asan-build
	@cd build-asan && ctest --output-on-failure -j $(JOBS) -E '^(scalar|avx2)\.|\.(scalar|avx2)$$'

# libFuzzer smoke run (every target, a fixed number of inputs and seed).
fuzz: asan-build
	@scripts/fuzz build-asan $(FUZZ_RUNS)

# Deeper fuzzing (not CI): every target (or FUZZ_ONLY=a,b) for FUZZ_SECONDS at nice 19, from
# the committed corpus fuzz/corpus/ (new coverage merged back into it) and the working corpus
# fuzz-corpus/; the executions counted in the committed ledger fuzz/execs.tsv (docs/testing.md).
FUZZ_SECONDS ?= 300
fuzz-deep: asan-build
	@scripts/fuzz build-asan --seconds $(FUZZ_SECONDS) --corpus fuzz-corpus $(if $(FUZZ_ONLY),--targets $(FUZZ_ONLY))

# The same targets without ASan (UBSan only, -O2; build-fuzz-ubsan): about 2x the executions per
# second, for depth; the ledger records each run's sanitizers.
fuzz-ubsan-build: setup
	@scripts/setup --fuzz
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz-ubsan $(GEN) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) \
	  -DOCULAR_FUZZ=ON -DOCULAR_WERROR=OFF -DOCULAR_PYTHON=OFF \
	  '-DCMAKE_CXX_FLAGS=-fsanitize=undefined -fno-sanitize-recover=undefined -g1' \
	  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=undefined >/dev/null
	@cmake --build build-fuzz-ubsan -j $(JOBS) --target fuzz_targets

fuzz-deep-ubsan: fuzz-ubsan-build
	@scripts/fuzz build-fuzz-ubsan --seconds $(FUZZ_SECONDS) --corpus fuzz-corpus $(if $(FUZZ_ONLY),--targets $(FUZZ_ONLY))

# The Python reference stack (transformers, torch, ...) — only needed to regenerate fixtures.
reference-env: .venv/.installed
.venv/.installed: tools/reference/requirements.txt
	python3 -m venv .venv
	.venv/bin/pip install -q -r tools/reference/requirements.txt
	touch $@

# Regenerates every committed fixture from the reference (deterministic).
fixtures: reference-env
	.venv/bin/python -m tools.reference.make_all

clean:
	rm -rf build build-asan
