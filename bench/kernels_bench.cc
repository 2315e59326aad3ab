// MatMul / attention throughput per ISA, weight dtype and shape.
//
// Counters: GFLOP/s (2·M·N·K per call) and weight GB/s (N·K·sizeof(w) per call: the decode
// roofline is memory bandwidth / weight bytes). Threads: OCULAR_THREADS (default: physical
// cores). Example:
//   build/bench/kernels_bench --benchmark_filter='MatMul/avx2'
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/half.h"
#include "core/matrix.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace ocular {
namespace {

ThreadPool& Pool() {
  static ThreadPool* pool = new ThreadPool(ThreadPool::DefaultThreadCount());
  return *pool;
}

// An f32 execution context on the ISA set last (SetIsa), with a 64 MiB arena.
struct BenchExec {
  explicit BenchExec(Precision p = Precision::kF32)
      : backend(Pool()), arena(size_t{64} << 20), ex{backend, p, arena} {}
  Backend backend;
  Arena arena;
  Exec ex;
};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// precision kBF16Fast on bf16 weights: the bf16 dot-product kernels where the CPU has them.
void BM_MatMul(benchmark::State& state, std::string isa, DType dtype, Precision precision,
               int64_t M, int64_t K, int64_t N) {
  if (!SetIsa(isa).ok()) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const std::vector<float> wf = Random(N * K, 1);
  std::vector<uint16_t> wh;
  if (dtype == DType::kBF16) {
    for (float x : wf) wh.push_back(F32ToBF16(x));
  }
  const TensorView w{dtype == DType::kF32 ? static_cast<const void*>(wf.data())
                                          : static_cast<const void*>(wh.data()),
                     dtype,
                     {N, K}};
  std::vector<float> a = Random(M * K, 2);
  if (precision == Precision::kBF16) {  // bf16 activations, as that precision's inputs are
    for (float& f : a) f = BF16ToF32(F32ToBF16(f));
  }
  std::vector<float> out(M * N);
  BenchExec b(precision);
  const Matrix wm = MatrixFromView(w, N, K);
  for (auto _ : state) {
    ops::MatMul(b.ex, a.data(), M, K, K, wm, nullptr, out.data(), N);
    benchmark::DoNotOptimize(out.data());
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * calls * 1e-9, benchmark::Counter::kIsRate);
  state.counters["wGB/s"] = benchmark::Counter(static_cast<double>(w.nbytes()) * calls * 1e-9,
                                               benchmark::Counter::kIsRate);
  state.counters["threads"] = Pool().size();
}

// Quantized weights (random valid blocks: speed does not depend on the values), with int8 or
// f32 activations (QuantActivations). GB/s counts the weight bytes read per call.
enum class Packing { kLoad, kStored };

void BM_MatMulQuant(benchmark::State& state, std::string isa, WFormat format, int64_t M, int64_t K,
                    int64_t N, QuantActivations acts, Packing packing) {
  if (!SetIsa(isa).ok()) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const int64_t row_bytes = WFormatRowBytes(format, K);
  std::vector<uint8_t> bytes(static_cast<size_t>(N * row_bytes));
  std::mt19937 rng(3);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  // Small finite f16 scales (0x2000 ≈ 0.008) where each format keeps them.
  const int64_t block_bytes = WFormatBlockBytes(format);
  for (size_t off = 0; off < bytes.size(); off += static_cast<size_t>(block_bytes)) {
    const size_t d = format == WFormat::kQ6_K ? 208 : 0;
    bytes[off + d] = 0x00;
    bytes[off + d + 1] = 0x20;
    if (format == WFormat::kQ4_K) {
      bytes[off + 2] = 0x00;
      bytes[off + 3] = 0x20;
    }
  }
  Matrix w{reinterpret_cast<const std::byte*>(bytes.data()), format, N, K,
           static_cast<size_t>(row_bytes)};
  // As the loaders do: the ISA's own layout where it has one (".../stored" keeps the file's).
  std::vector<std::byte> packed(packing == Packing::kLoad ? ops::PackedWeightBytes(w) : 0);
  PackedMatrix pm{packed.data(), w.data, w.rows};
  if (!packed.empty()) {
    ops::PackWeights(w, packed.data());
    w.packed = &pm;
  }
  const std::vector<float> a = Random(M * K, 2);
  std::vector<float> out(M * N);
  BenchExec b;
  b.ex.quant_activations = acts;
  for (auto _ : state) {
    ops::MatMul(b.ex, a.data(), M, K, K, w, nullptr, out.data(), N);
    benchmark::DoNotOptimize(out.data());
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * M * N * K * calls * 1e-9, benchmark::Counter::kIsRate);
  state.counters["wGB/s"] = benchmark::Counter(static_cast<double>(w.bytes()) * calls * 1e-9,
                                               benchmark::Counter::kIsRate);
  state.counters["threads"] = Pool().size();
}

// One attention call: Tq queries (the last Tq of Tk positions, causal unless `full`) over Tk
// keys, f32 K/V. GFLOP/s counts the two products, 4·Tq·Tk·Hq·d per call (all keys).
struct AttentionShape {
  const char* name;
  int64_t Tq, Tk, Hq, Hkv, d;
  bool full;  // every query sees every key (SigLIP); else causal
};
constexpr AttentionShape kAttentionShapes[] = {
    {"decode_Tk256_pg1", 1, 256, 8, 1, 256, false},
    {"decode_Tk1024_pg1", 1, 1024, 8, 1, 256, false},
    {"siglip_224_256x256_h16_d72", 256, 256, 16, 16, 72, true},      // So400m at 224 px
    {"siglip_896_4096x4096_h16_d72", 4096, 4096, 16, 16, 72, true},  // at 896 px
    {"prefill272_h8_kv4_d256", 272, 272, 8, 4, 256, true},  // PaliGemma 2 prefix (bidirectional)
};

void BM_Attention(benchmark::State& state, std::string isa, AttentionShape s, Precision precision) {
  if (!SetIsa(isa).ok()) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  std::vector<float> q = Random(s.Tq * s.Hq * s.d, 3), k = Random(s.Tk * s.Hkv * s.d, 4),
                     v = Random(s.Tk * s.Hkv * s.d, 5);
  if (precision == Precision::kBF16) {  // bf16 activations, as that precision's inputs are
    for (auto* x : {&q, &k, &v}) {
      for (float& f : *x) f = BF16ToF32(F32ToBF16(f));
    }
  }
  std::vector<int32_t> begin(s.Tq, 0), end(s.Tq);
  for (int64_t i = 0; i < s.Tq; ++i)
    end[i] = static_cast<int32_t>(s.full ? s.Tk : s.Tk - s.Tq + i + 1);
  std::vector<float> out(s.Tq * s.Hq * s.d);
  BenchExec b(precision);
  const ops::KvRows kv{k.data(), v.data(), false, 0, s.Tk, s.Hkv * s.d, s.Hkv * s.d};
  for (auto _ : state) {
    ops::Attention(b.ex, q.data(), s.Tq, s.Hq, s.Hq * s.d, kv, s.Hkv, s.d,
                   1.0f / std::sqrt(static_cast<float>(s.d)), 0.0f, begin.data(), end.data(),
                   out.data(), s.Hq * s.d);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      4.0 * s.Tq * s.Tk * s.Hq * s.d * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}

// The compute roofline of one core: independent FMA / bf16 dot-product chains in registers
// (24 accumulators, enough to hide the latency). GFLOP/s: 2 per multiply-add.
__attribute__((target("avx512f"))) float PeakFma(int64_t iters) {
  __m512 acc[24];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  __m512 x = _mm512_set1_ps(1.0f);
  const __m512 y = _mm512_set1_ps(1e-9f);
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile("" : "+v"(x));  // opaque to the optimizer: the loop must run
#pragma GCC unroll 24
    for (__m512& a : acc) a = _mm512_fmadd_ps(x, y, a);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 24; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}
__attribute__((target("avx512f,avx512bf16"))) float PeakBf16Dot(int64_t iters) {
  __m512 acc[24];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // bf16 pairs (1, 1)
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile("" : "+v"(x));  // opaque to the optimizer: the loop must run
#pragma GCC unroll 24
    for (__m512& a : acc) a = _mm512_dpbf16_ps(a, x, x);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 24; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

void BM_PeakOneCore(benchmark::State& state, bool bf16) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || (bf16 && !__builtin_cpu_supports("avx512bf16"))) {
    state.SkipWithError("no AVX-512 (BF16) on this CPU");
    return;
  }
  constexpr int64_t kIters = 1 << 20;
  for (auto _ : state) benchmark::DoNotOptimize(bf16 ? PeakBf16Dot(kIters) : PeakFma(kIters));
  // 24 instructions × 16 lanes × (2 or 4) flops per lane.
  state.counters["GFLOP/s"] = benchmark::Counter(
      24.0 * 16 * (bf16 ? 4 : 2) * kIters * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_PeakOneCore, fma_f32, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PeakOneCore, dot_bf16, true)->Unit(benchmark::kMillisecond);

// Round trip of an (almost) empty ParallelFor: the per-call overhead decode pays ~150x/token.
void BM_ParallelForOverhead(benchmark::State& state) {
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    Pool().ParallelFor(Pool().size(), [&](int64_t b, int64_t e) { sink.fetch_add(e - b); });
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_ParallelForOverhead)->Unit(benchmark::kMicrosecond)->UseRealTime();

struct Shape3 {
  const char* name;
  int64_t M, K, N;
};

// Gemma 2B decode (gate proj), SigLIP So400m fc1 on 256 patches, a small batch.
constexpr Shape3 kShapes[] = {
    {"decode_gate_2048x16384", 1, 2048, 16384},
    {"decode4_gate_2048x16384", 4, 2048, 16384},
    {"decode1_gate_2304x9216", 1, 2304, 9216},  // PaliGemma 2 3B decode, one sequence
    {"decode8_gate_2304x9216", 8, 2304, 9216},  // and a batch of 8
    {"siglip_fc1_256x1152x4304", 256, 1152, 4304},
    {"siglip_fc2_256x4304x1152", 256, 4304, 1152},
    {"prefill272_gate_2304x9216", 272, 2304, 9216},  // PaliGemma 2 3B prefill at 224 px
    {"prefill272_down_9216x2304", 272, 9216, 2304},
    {"m256_gate_2304x9216", 256, 2304, 9216},  // 16 row groups: 4-group tiles only
    {"m192_gate_2304x9216", 192, 2304, 9216},  // 12 row groups: 4-group tiles
    {"m144_gate_2304x9216", 144, 2304, 9216},  // 9 row groups: 3-group tiles
};

// name, M, K, N: weights [N, K].
constexpr Shape3 kQuantShapes[] = {
    {"decode1_gate_2304x9216", 1, 2304, 9216},      {"decode8_gate_2304x9216", 8, 2304, 9216},
    {"prefill272_gate_2304x9216", 272, 2304, 9216}, {"decode1_down_9216x2304", 1, 9216, 2304},
    {"decode8_down_9216x2304", 8, 9216, 2304},      {"prefill272_down_9216x2304", 272, 9216, 2304},
    {"decode1_l2_2304x512", 1, 2304, 512},  // weights in L2: the kernel's compute ceiling
    {"decode1_q_2304x2048", 1, 2304, 2048},         {"decode8_q_2304x2048", 8, 2304, 2048},
    {"prefill272_q_2304x2048", 272, 2304, 2048},    {"decode1_lmhead_2304x256000", 1, 2304, 256000},
};

// With one thread, rates use CPU time (robust on a busy machine); otherwise wall time.
void Timing(benchmark::internal::Benchmark* b) {
  if (Pool().size() > 1) b->UseRealTime();
}

int RegisterAll() {
  for (const char* isa : {"scalar", "avx2", "avx512", "amx"}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const Shape3& s : kShapes) {
        if (std::string(isa) == "scalar" && s.M > 4) continue;  // far too slow to be useful
        const std::string name =
            std::string("MatMul/") + isa + "/" + DTypeName(dtype) + "/" + s.name;
        benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, isa, dtype, Precision::kF32, s.M, s.K,
                                     s.N)
            ->Unit(benchmark::kMillisecond)
            ->Apply(Timing);
        if (dtype == DType::kBF16) {
          // bf16 (torch's bf16 run; bf16-valued activations) and bf16-fast.
          for (Precision p : {Precision::kBF16, Precision::kBF16Fast}) {
            benchmark::RegisterBenchmark((name + "/" + PrecisionName(p)).c_str(), BM_MatMul, isa,
                                         dtype, p, s.M, s.K, s.N)
                ->Unit(benchmark::kMillisecond)
                ->Apply(Timing);
          }
        }
      }
    }
    // PaliGemma 2 3B (Gemma 2 2B decoder): gate/up, down, q_proj, and the tied LM head; int8
    // activations, then f32 ones (".../f32-act").
    for (WFormat f :
         {WFormat::kQ8_0, WFormat::kQ4_0, WFormat::kQ5_0, WFormat::kQ4_K, WFormat::kQ6_K}) {
      for (QuantActivations acts : {QuantActivations::kInt8, QuantActivations::kF32}) {
        for (const Shape3& s : kQuantShapes) {
          if (std::string(isa) == "scalar" && s.M > 1) continue;
          std::string name =
              std::string("MatMulQuant/") + isa + "/" + WFormatName(f) + "/" + s.name;
          if (acts == QuantActivations::kF32) name += "/f32-act";
          benchmark::RegisterBenchmark(name.c_str(), BM_MatMulQuant, isa, f, s.M, s.K, s.N, acts,
                                       Packing::kLoad)
              ->Unit(benchmark::kMillisecond)
              ->Apply(Timing);
          if (f == WFormat::kQ8_0 && acts == QuantActivations::kInt8 &&
              std::string(isa) != "scalar") {
            benchmark::RegisterBenchmark((name + "/stored").c_str(), BM_MatMulQuant, isa, f, s.M,
                                         s.K, s.N, acts, Packing::kStored)
                ->Unit(benchmark::kMillisecond)
                ->Apply(Timing);
          }
        }
      }
    }
    for (const AttentionShape& s : kAttentionShapes) {
      if (std::string(isa) == "scalar" && s.Tq > 1) continue;
      for (Precision p : {Precision::kF32, Precision::kBF16}) {
        benchmark::RegisterBenchmark(
            (std::string("Attention/") + isa + "/" + s.name + "/" + PrecisionName(p)).c_str(),
            BM_Attention, isa, s, p)
            ->Unit(benchmark::kMillisecond)
            ->Apply(Timing);
      }
    }
  }
  return 0;
}
const int kRegistered = RegisterAll();

}  // namespace
}  // namespace ocular

BENCHMARK_MAIN();
