#!/usr/bin/env bash
# Builds the llama.cpp tools that bench/peers/run.py and the Gemma 3 real-weights check call.
#
#   bench/peers/build_llamacpp.sh PATH_TO_LLAMA_CPP [BUILD_DIR]
#
# PATH is a llama.cpp source tree the user provides (a git checkout, or the copy vendored in the
# llama-cpp-python sdist); nothing of it is kept in this repository. The binaries land in
# BUILD_DIR/bin (default PATH/build-ocular-peers/bin). The build is CPU-only, tuned for this
# machine (GGML_NATIVE), Release, run at low priority on two jobs so it can share the machine.
set -euo pipefail

if [[ $# -lt 1 || ! -f "$1/CMakeLists.txt" || ! -d "$1/ggml" ]]; then
  echo "usage: $0 PATH_TO_LLAMA_CPP [BUILD_DIR]" >&2
  echo "  PATH must be a llama.cpp source tree (it has CMakeLists.txt and ggml/)" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=${2:-$src/build-ocular-peers}
jobs=${JOBS:-2}

# llama-bench:    prefill (pp) and decode (tg) tok/s.
# llama-simple:   greedy decoding with no sampler options (f16 KV cache).
# llama-completion: greedy (--temp 0) with an f32 KV cache (-ctk/-ctv f32): the text compared.
# llama-mtmd-cli: image encode time with an mmproj file.
# llama-quantize: makes Q8_0 / Q4_K_M files of the random-weight GGUFs.
# llama-tokenize: the prompt's token ids (tools/reference/gemma3_gguf_parity.py).
targets=(llama-bench llama-simple llama-completion llama-mtmd-cli llama-quantize llama-tokenize)

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

nice -n 15 cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_SERVER=OFF "${launcher[@]}"
nice -n 15 cmake --build "$build" -j"$jobs" --target "${targets[@]}"

# llama_logits (bench/peers/llama_logits.cc, ours): llama.cpp's logits and layer outputs for
# given token ids, as a safetensors file of ocular's tap names (tools/reference/gemma3_gguf_parity.py).
here=$(cd "$(dirname "$0")" && pwd)
nice -n 15 "${CXX:-c++}" -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" \
  "$here/llama_logits.cc" -L"$build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$build/bin" \
  -o "$build/bin/llama_logits"
targets+=(llama_logits)

for t in "${targets[@]}"; do
  [[ -x "$build/bin/$t" ]] || { echo "build_llamacpp: $build/bin/$t was not built" >&2; exit 1; }
done
echo "llama.cpp tools in $build/bin"
