// The execution context every forward function takes: where kernels run (the backend), in
// which precision, and the planned scratch memory.
//
//   Exec ex{backend, Precision::kBF16, arena};
//   ops::MatMul(ex, x, rows, H, H, w.q, nullptr, q, qdim);   // rounds q to bf16 in the epilogue
//
// Backend is the seam a device backend plugs into: today the CPU (a thread pool and the
// kernel table of one ISA); ops.h calls reach the table only through it.
#pragma once

#include <string>
#include <string_view>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "ocular/status.h"

namespace ocular {

namespace kernels {
struct KernelTable;
}

// How activations are computed (a user-visible option):
//   kF32       f32 activations (weights read in their stored dtype, products exact in f32);
//   kBF16      reproduces torch's bf16 run: every activation torch stores in bf16 is rounded
//              at the point torch rounds it (op epilogues), attention and RoPE in torch's bf16
//              order. The default for bf16 checkpoints.
//   kBF16Fast  f32 activations and f32 attention over bf16 weights, no intermediate rounding,
//              bf16 KV cache: faster, not bit-faithful to torch. Opt-in.
enum class Precision : uint8_t { kF32, kBF16, kBF16Fast };
const char* PrecisionName(Precision p);  // "f32", "bf16", "bf16-fast"
bool ParsePrecision(std::string_view name, Precision* out);

// How matmuls on quantized weights (q8_0, q4_0, q5_0, q4_k, q6_k) treat the activations (a
// user-visible option; no effect on float weights):
//   kInt8  activations quantized to int8 blocks, integer dot products (llama.cpp's scheme;
//          the default): fastest decode, but the activations' rounding costs accuracy where
//          they have outliers (Gemma 3);
//   kF32   the f32 activations times each weight block dequantized in registers (exactly
//          quant::DequantizeRow's values): the f32 product with the dequantized weights.
enum class QuantActivations : uint8_t { kInt8, kF32 };
const char* QuantActivationsName(QuantActivations q);  // "int8", "f32"
bool ParseQuantActivations(std::string_view name, QuantActivations* out);

// The CPU backend: the thread pool that runs chunks and the kernel table of one ISA.
class Backend {
 public:
  // The ISA active at construction (ActiveIsa(): the best this CPU runs, or OCULAR_ISA).
  explicit Backend(ThreadPool& pool);
  // A named ISA ("scalar", "avx2", "avx512", "amx"); errors as SetIsa.
  static StatusOr<Backend> ForIsa(ThreadPool& pool, std::string_view isa);

  ThreadPool& pool() const { return *pool_; }
  const kernels::KernelTable& table() const { return *table_; }
  const char* isa() const;

 private:
  Backend(ThreadPool& pool, const kernels::KernelTable& table) : pool_(&pool), table_(&table) {}
  ThreadPool* pool_;
  const kernels::KernelTable* table_;
};

struct Exec {
  const Backend& backend;
  Precision precision;
  Arena& arena;  // scratch for the forward pass; taken in ArenaScopes, never freed to the heap
  QuantActivations quant_activations = QuantActivations::kInt8;
  // bf16 weights under Precision::kBF16: decode rows (1-8) sum in the packed GEMM's order
  // (kernel_table.h matmul_bf16_rows, on AVX512_BF16 CPUs), so a row's result does not depend on
  // M at all — merged prefills of different requests then give each its own answer bit for bit.
  // Off by default: that order reads 16 weight rows at once, which is slower than the decode
  // kernel where rows are a multiple of 4 KiB apart (hidden sizes 2048, 4096). Prefill rows
  // (M > 8) and quantized weights are batch-invariant either way.
  bool batch_invariant = false;

  ThreadPool& pool() const { return backend.pool(); }
  const kernels::KernelTable& table() const { return backend.table(); }
  // Whether op epilogues round to bf16 (Precision::kBF16 only).
  bool round_bf16() const { return precision == Precision::kBF16; }
};

}  // namespace ocular
