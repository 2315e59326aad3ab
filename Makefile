# ocular — the two commands users run: `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DOCULAR_WERROR=ON
endif
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all setup configure build test demo asan fuzz fuzz-deep fuzz-build reference-env fixtures clean

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

# Tests under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs this too), built as
# ASan's documentation advises: -O1 with line tables (-g1: reports keep file:line), the kernels
# at -O2 (src/kernels/CMakeLists.txt) so that Highway's wrappers inline. The build takes about
# half the CPU of -O2 -g. Warnings are the Release build's job (-Werror there; other -O levels
# warn differently). The model goldens run at the SIMD ISAs (avx512, amx where the CPU has
# them); their scalar and avx2 twins run in the Release suite.
ASAN_DEBUG := '-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG' '-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG'
asan:
	@$(MAKE) --no-print-directory test BUILD=build-asan CTEST_ARGS="-E '^(scalar|avx2)\.'" \
	  CMAKE_FLAGS="$(CMAKE_FLAGS) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOCULAR_SANITIZE=ON -DOCULAR_WERROR=OFF $(ASAN_DEBUG)"

# libFuzzer smoke run (clang, ASan+UBSan), fixed inputs count and seed: every target but
# chat_request_fuzz, whose build takes the models, runtime and server with it (a CI-time
# budget); it runs in fuzz-deep with the others.
FUZZ_SMOKE := image_decode_fuzz tokenizer_json_fuzz tokenizer_model_fuzz safetensors_header_fuzz \
  config_json_fuzz preprocess_json_fuzz detection_parse_fuzz gguf_fuzz npz_fuzz \
  jinja_template_fuzz json_schema_fuzz
FUZZ_TARGETS := $(FUZZ_SMOKE) chat_request_fuzz
FUZZ_BUILD ?= $(FUZZ_TARGETS)
comma := ,
space := $(subst ,, )
fuzz:
	@$(MAKE) --no-print-directory fuzz-build FUZZ_BUILD="$(FUZZ_SMOKE)"
	@scripts/fuzz build-fuzz $(FUZZ_RUNS) --targets $(subst $(space),$(comma),$(strip $(FUZZ_SMOKE)))

# Deeper fuzzing (not CI): every target (or FUZZ_ONLY=a,b) for FUZZ_SECONDS at nice 19, from
# the committed corpus fuzz/corpus/ (new coverage merged back into it) and the working corpus
# fuzz-corpus/; the executions counted in the committed ledger fuzz/execs.tsv (docs/testing.md).
FUZZ_SECONDS ?= 300
fuzz-deep: fuzz-build
	@scripts/fuzz build-fuzz --seconds $(FUZZ_SECONDS) --corpus fuzz-corpus $(if $(FUZZ_ONLY),--targets $(FUZZ_ONLY))

fuzz-build:
	@scripts/setup --fuzz
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DOCULAR_FUZZ=ON -DOCULAR_SANITIZE=ON $(ASAN_DEBUG) >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target $(FUZZ_BUILD)

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
	rm -rf build build-asan build-fuzz
