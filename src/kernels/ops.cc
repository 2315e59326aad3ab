#include "kernels/ops.h"

#include <hwy/targets.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "core/enum_names.h"
#include "core/half.h"
#include "kernels/cpu/bf16_dot.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_bf16_amx.h"
#include "kernels/cpu/highway_tables.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/activations.h"
#include "kernels/ref/ref_ops.h"

namespace ocular {
namespace {

struct Isa {
  const char* name;
  const kernels::KernelTable* table;
};

// A Highway table completed with the hand-written kernels of cpu/: the quantized-weight
// matmuls (int8 activations: AVX512-VNNI on avx512 where the CPU has it, else AVX2; f32
// activations: 512-bit on avx512, else 256-bit) with exact scalar row dequantization, and on
// avx512 the bf16 dot-product matmul where the CPU has AVX512_BF16. amx: the avx512 table with
// the bf16 GEMM on AMX tiles (prefill and vision matmuls; decode rows keep `vdpbf16ps`).
kernels::KernelTable Complete(const kernels::KernelTable& base, bool avx512, bool amx = false) {
  kernels::KernelTable t = base;
  const bool vnni = avx512 && cpu::QuantVnniSupported();
  const kernels::MatMulFn quant = vnni ? cpu::MatMulQuantVnni : cpu::MatMulQuantAvx2;
  if (vnni) {
    t.quantize_act_row = cpu::QuantizeActRowAvx2;
    t.matmul_quant_rows = cpu::MatMulQuantRowsVnni;
    t.packed_weight_bytes = cpu::PackedQ8_0VnniBytes;
    t.pack_weights = cpu::PackQ8_0Vnni;
  }
  const kernels::MatMulFn quant_f32 = avx512 && cpu::QuantF32Avx512Supported()
                                          ? cpu::MatMulQuantF32Avx512
                                          : cpu::MatMulQuantF32Avx2;
  for (WFormat f :
       {WFormat::kQ8_0, WFormat::kQ4_0, WFormat::kQ5_0, WFormat::kQ4_K, WFormat::kQ6_K}) {
    t.matmul[static_cast<int>(f)] = quant;
    t.matmul_f32_act[static_cast<int>(f)] = quant_f32;
    t.row_to_f32[static_cast<int>(f)] = ref::RowToF32Quant;
  }
  if (avx512 && cpu::Bf16DotSupported()) {
    t.matmul_bf16_dot = cpu::MatMulBF16Dot;
    t.pack_bf16 = cpu::PackBf16Rows;
    t.gemm_bf16 = amx ? cpu::GemmBf16Amx : cpu::GemmBf16;
    t.gemm_bf16_t = amx ? cpu::GemmBf16TAmx : cpu::GemmBf16T;
    t.matmul_bf16_rows = amx ? nullptr : cpu::MatMulBf16Rows;  // GemmBf16's order
    if (amx) t.name = "amx";
  } else {
    t.attention_dot_items = nullptr;  // it multiplies with gemm_bf16
  }
  return t;
}

const kernels::KernelTable* Completed(const cpu::IsaTable& isa) {
  if (std::string_view(isa.name) == "avx512") {
    static const kernels::KernelTable kAvx512 = Complete(*isa.table, true);
    return &kAvx512;
  }
  static const kernels::KernelTable kAvx2 = Complete(*isa.table, false);
  return &kAvx2;
}

// "scalar" first, then every Highway table this CPU and OS can run, then "amx" where the
// CPU has AMX-BF16 (the avx512 table with the AMX GEMM), best last.
std::vector<Isa> RunnableIsas() {
  std::vector<Isa> isas = {{"scalar", &ref::Table()}};
  const int64_t supported = hwy::SupportedTargets();
  std::vector<cpu::IsaTable> tables = cpu::HighwayTables();
  for (auto it = tables.rbegin(); it != tables.rend(); ++it) {
    if ((supported & it->hwy_target) == 0) continue;
    isas.push_back({it->name, Completed(*it)});
    if (std::string_view(it->name) == "avx512" && cpu::Bf16DotSupported() &&
        cpu::AmxBf16Supported()) {
      static const kernels::KernelTable kAmx = Complete(*it->table, true, true);
      isas.push_back({"amx", &kAmx});
    }
  }
  return isas;
}

// Finds a runnable ISA by name, or says why not.
StatusOr<const kernels::KernelTable*> FindIsa(std::string_view name) {
  static constexpr const char* kKnown[] = {"scalar", "avx2", "avx512", "amx"};
  if (std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown)) {
    return Error(StatusCode::kInvalidArgument, "kernels", "unknown ISA '", name,
                 "'; expected scalar, avx2, avx512 or amx");
  }
  for (const Isa& isa : RunnableIsas()) {
    if (name == isa.name) return isa.table;
  }
  return Error(StatusCode::kUnimplemented, "kernels", "ISA '", name,
               "' is not supported by this CPU/OS (or not compiled in)");
}

// The best runnable ISA, unless OCULAR_ISA names another runnable one.
const kernels::KernelTable* DefaultTable() {
  if (const char* env = std::getenv("OCULAR_ISA")) {
    StatusOr<const kernels::KernelTable*> table = FindIsa(env);
    if (table.ok()) return *table;
    std::fprintf(stderr, "ocular: ignoring OCULAR_ISA: %s\n", table.status().ToString().c_str());
  }
  return RunnableIsas().back().table;
}

std::atomic<const kernels::KernelTable*> g_active{nullptr};

const kernels::KernelTable& Active() {
  const kernels::KernelTable* table = g_active.load(std::memory_order_acquire);
  if (table == nullptr) {
    static const kernels::KernelTable* const kDefault = DefaultTable();  // thread-safe init
    const kernels::KernelTable* expected = nullptr;
    g_active.compare_exchange_strong(expected, kDefault);  // a racing SetIsa wins
    table = g_active.load(std::memory_order_acquire);
  }
  return *table;
}

bool IsFloatDType(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

void CheckVector(const TensorView& t, int64_t n) {
  OCULAR_CHECK(IsFloatDType(t.dtype), "HINT: vector must be F32, BF16 or F16");
  OCULAR_CHECK(t.numel() == n, "HINT: vector length must match the row length");
}

// The precision's epilogue on a finished output block.
inline void Epilogue(const Exec& ex, float* x, int64_t n) {
  if (ex.round_bf16()) ex.table().round_bf16(x, n);
}

// Below this many multiply-adds a MatMul runs on the calling thread only.
constexpr int64_t kMinParallelMacs = 1 << 15;
// Column granularity of the MatMul split; a multiple of every kernel's column tile.
constexpr int64_t kColumnsPerUnit = 16;

// Whether every x[r * ld + c] (r < rows, c < cols) is a bf16 value (low 16 bits zero).
bool AreBf16Values(const float* x, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t low = 0;
    const float* row = x + r * ld;
    for (int64_t c = 0; c < cols; ++c) {
      uint32_t bits;
      std::memcpy(&bits, row + c, sizeof(bits));
      low |= bits & 0xFFFFu;
    }
    if (low != 0) return false;
  }
  return true;
}

// Elementwise ops split over the pool above this many elements (below, a thread round trip
// costs more than the work). Every element is computed alone, so results never depend on the
// split.
constexpr int64_t kMinParallelElements = 1 << 16;

// fn(begin, count) over [0, n): in one call, or in contiguous ranges (multiples of 64 elements,
// so vector tails stay at the end) on the pool's threads.
template <class F>
void ForRanges(const Exec& ex, int64_t n, const F& fn) {
  const int64_t threads = std::min<int64_t>(ex.pool().size(), n / kMinParallelElements);
  if (threads <= 1) return fn(int64_t{0}, n);
  const int64_t chunks = (n + 63) / 64;
  ex.pool().ParallelFor(threads, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t begin = chunks * t / threads * 64;
      const int64_t end = std::min(n, chunks * (t + 1) / threads * 64);
      if (end > begin) fn(begin, end - begin);
    }
  });
}

// fn(r0, r1) over blocks of whole rows of a [rows, dim] matrix, split like ForRanges.
template <class F>
void ForRowBlocks(const Exec& ex, int64_t rows, int64_t dim, const F& fn) {
  const int64_t threads =
      std::min<int64_t>({ex.pool().size(), rows, rows * dim / kMinParallelElements});
  if (threads <= 1) return fn(int64_t{0}, rows);
  ex.pool().ParallelFor(threads, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) fn(rows * t / threads, rows * (t + 1) / threads);
  });
}

// Arena floats of one thread's MatMulFn scratch (kernel_table.h).
int64_t ThreadScratchFloats(int64_t K) {
  return static_cast<int64_t>(Arena::Rounded(kernels::MatMulScratchFloats(K) * sizeof(float)) /
                              sizeof(float));
}

// Whether MatMul takes the packed bf16 dot-product GEMM (kernel_table.h gemm_bf16): bf16
// weights, more rows than a decode batch (decode rows keep one kernel whatever the batch, so a
// sequence's tokens do not depend on what it is batched with), and a precision whose
// activations are (kBF16) or may be rounded to (kBF16Fast) bf16.
bool UsesGemmBf16(const Exec& ex, int64_t M, int64_t K, const Matrix& w) {
  return ex.table().gemm_bf16 != nullptr && w.format == WFormat::kBF16 && M > 8 && K % 2 == 0 &&
         ex.precision != Precision::kF32;
}

}  // namespace

constexpr EnumName<Precision> kPrecisionNames[] = {
    {Precision::kF32, "f32"}, {Precision::kBF16, "bf16"}, {Precision::kBF16Fast, "bf16-fast"}};
constexpr EnumName<QuantActivations> kQuantActivationsNames[] = {{QuantActivations::kInt8, "int8"},
                                                                 {QuantActivations::kF32, "f32"}};

const char* PrecisionName(Precision p) { return NameOf(p, kPrecisionNames, "?"); }

bool ParsePrecision(std::string_view name, Precision* out) {
  return ParseEnum(name, kPrecisionNames, out);
}
const char* QuantActivationsName(QuantActivations q) {
  return NameOf(q, kQuantActivationsNames, "?");
}
bool ParseQuantActivations(std::string_view name, QuantActivations* out) {
  return ParseEnum(name, kQuantActivationsNames, out);
}

Backend::Backend(ThreadPool& pool) : pool_(&pool), table_(&Active()) {}

StatusOr<Backend> Backend::ForIsa(ThreadPool& pool, std::string_view isa) {
  OCULAR_ASSIGN_OR_RETURN(const kernels::KernelTable* table, FindIsa(isa));
  return Backend(pool, *table);
}

const char* Backend::isa() const { return table_->name; }

const char* ActiveIsa() { return Active().name; }

Status SetIsa(std::string_view name) {
  OCULAR_ASSIGN_OR_RETURN(const kernels::KernelTable* table, FindIsa(name));
  g_active.store(table, std::memory_order_release);
  return Status::Ok();
}

std::vector<std::string> SupportedIsas() {
  std::vector<std::string> names;
  for (const Isa& isa : RunnableIsas()) names.emplace_back(isa.name);
  return names;
}

namespace ops {

namespace {

// a · wᵀ for every part (same a, same weight format): the activations are packed or checked once
// and one thread split covers the columns of all parts.
void MatMulParts(const Exec& ex, const float* a, int64_t M, int64_t K, int64_t lda,
                 std::span<const MatMulOut> parts) {
  OCULAR_CHECK(M >= 0 && K >= 0 && lda >= K, "HINT: a is [M, K] with row stride lda >= K");
  OCULAR_CHECK(!parts.empty());
  const WFormat format = parts[0].w->format;
  int64_t units = 0;  // column units over all parts, part by part
  for (const MatMulOut& p : parts) {
    const Matrix& w = *p.w;
    OCULAR_CHECK(w.cols == K, "HINT: w must be [N, K]");
    OCULAR_CHECK(w.format == format, "HINT: fused matmuls share one weight format");
    OCULAR_CHECK(K % WFormatBlockValues(w.format) == 0 &&
                     w.row_bytes == static_cast<size_t>(WFormatRowBytes(w.format, K)),
                 "HINT: a quantized w has whole blocks per row (MatrixFromBlocks)");
    OCULAR_CHECK(p.ldo >= w.rows, "HINT: out is [M, N] with row stride ldo >= N");
    if (p.bias != nullptr) CheckVector(*p.bias, w.rows);
    if (M > 0 && w.rows > 0) {
      const float* a_end = a + (M - 1) * lda + K;
      const float* out_end = p.out + (M - 1) * p.ldo + w.rows;
      OCULAR_CHECK(a_end <= p.out || out_end <= a, "HINT: MatMul out must not alias a");
    }
    units += (w.rows + kColumnsPerUnit - 1) / kColumnsPerUnit;
  }
  if (M == 0 || units == 0) return;
  const kernels::KernelTable& table = ex.table();
  // Adds the bias and applies the precision's epilogue to columns [n0, n1) of one part.
  auto finish_columns = [&](const MatMulOut& p, int64_t n0, int64_t n1) {
    if (p.bias != nullptr) {
      // out = a·wᵀ + bias: torch's addmm adds the bias after the dot product.
      float chunk[256];
      for (int64_t c0 = n0; c0 < n1; c0 += 256) {
        const int64_t width = std::min<int64_t>(256, n1 - c0);
        table.to_f32(static_cast<const char*>(p.bias->data) + c0 * DTypeSize(p.bias->dtype),
                     p.bias->dtype, width, chunk);
        for (int64_t m = 0; m < M; ++m) {
          table.add(p.out + m * p.ldo + c0, chunk, p.out + m * p.ldo + c0, width);
        }
      }
    }
    for (int64_t m = 0; m < M; ++m) Epilogue(ex, p.out + m * p.ldo + n0, n1 - n0);
  };
  int64_t macs = 0;
  for (const MatMulOut& p : parts) macs += M * p.w->rows * K;
  ArenaScope scope(ex.arena);
  const int64_t threads = macs < kMinParallelMacs ? 1 : std::min<int64_t>(ex.pool().size(), units);
  // One contiguous range of column units per thread: body(thread, part, n0, n1) for each
  // part the range touches.
  auto for_each_thread = [&](const auto& body) {
    auto run = [&](int64_t t) {
      const int64_t u0 = units * t / threads, u1 = units * (t + 1) / threads;
      int64_t base = 0;  // first unit of the part
      for (const MatMulOut& p : parts) {
        const int64_t n = p.w->rows, part_units = (n + kColumnsPerUnit - 1) / kColumnsPerUnit;
        const int64_t b = std::max(u0, base), e = std::min(u1, base + part_units);
        if (b < e) {
          body(t, p, (b - base) * kColumnsPerUnit, std::min(n, (e - base) * kColumnsPerUnit));
        }
        base += part_units;
      }
    };
    if (threads == 1) return run(0);
    ex.pool().ParallelFor(threads, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) run(t);
    });
  };
  if (UsesGemmBf16(ex, M, K, *parts[0].w)) {
    // bf16 dot products on packed activations. Under kBF16 the activations are bf16 values
    // (op epilogues round them), so the products are exact; if one is not (an input this
    // precision did not round), the f32 kernel below runs instead.
    ArenaScope gemm_scope(ex.arena);
    uint32_t* packed = ex.arena.Alloc<uint32_t>(cpu::PackedBf16Words(M, K));
    const int64_t groups = (M + 15) / 16;
    const bool exact_only = ex.precision == Precision::kBF16;
    std::atomic<bool> packed_ok{true};
    ex.pool().ParallelFor(groups, [&](int64_t g0, int64_t g1) {
      if (!table.pack_bf16(a, M, K, lda, g0, g1, exact_only, packed)) {
        packed_ok.store(false, std::memory_order_relaxed);
      }
    });
    if (packed_ok.load()) {
      for_each_thread([&](int64_t, const MatMulOut& p, int64_t n0, int64_t n1) {
        table.gemm_bf16(packed, M, K, *p.w, n0, n1, p.out, p.ldo);
        finish_columns(p, n0, n1);
      });
      return;
    }
  }
  // Decode rows (1-8) on bf16 dot products where the CPU has them. Under bf16 on bf16-valued
  // activations (exact products, as the GEMM above): on matmul_bf16_dot, every batch size of 1-8
  // alike (batching never changes a sequence's tokens), or with Exec::batch_invariant in the
  // GEMM's own order (matmul_bf16_rows), the same at every M. Under bf16-fast for 2-8 rows (one
  // row stays on the f32 GEMV).
  const bool bf16_values = format == WFormat::kBF16 && M >= 1 && M <= 8 &&
                           ex.precision == Precision::kBF16 && AreBf16Values(a, M, K, lda);
  const bool bf16_rows =
      bf16_values && ex.batch_invariant && table.matmul_bf16_rows != nullptr && K % 2 == 0;
  const bool bf16_dot = !bf16_rows && format == WFormat::kBF16 && M >= 1 && M <= 8 &&
                        table.matmul_bf16_dot != nullptr &&
                        ((ex.precision == Precision::kBF16Fast && M >= 2) || bf16_values);
  // Quantized weights: int8-quantized activations (matmul[]) or f32 ones (matmul_f32_act[]).
  const bool f32_act =
      ex.quant_activations == QuantActivations::kF32 && WFormatBlockValues(format) > 1;
  const kernels::MatMulFn kernel = bf16_rows  ? table.matmul_bf16_rows
                                   : bf16_dot ? table.matmul_bf16_dot
                                   : f32_act  ? table.matmul_f32_act[static_cast<int>(format)]
                                              : table.matmul[static_cast<int>(format)];
  OCULAR_CHECK(kernel != nullptr, "HINT: no kernel for this weight format (refused at load)");
  const int64_t per_thread = ThreadScratchFloats(K);
  if (!f32_act && M > 8 && table.matmul_quant_rows != nullptr && WFormatBlockValues(format) > 1) {
    // Quantized prefill: the rows quantized once, in parallel, for every thread and part.
    const int64_t row_bytes = quant::ActRowBytes(format, K);
    std::byte* act = ex.arena.Alloc<std::byte>(M * row_bytes);
    ex.pool().ParallelFor(M, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        table.quantize_act_row(format, a + r * lda, K, act + r * row_bytes);
      }
    });
    float* scratch = ex.arena.Floats(per_thread * threads);
    for_each_thread([&](int64_t t, const MatMulOut& p, int64_t n0, int64_t n1) {
      table.matmul_quant_rows(act, row_bytes, M, K, *p.w, n0, n1, p.out, p.ldo,
                              scratch + t * per_thread);
      finish_columns(p, n0, n1);
    });
    return;
  }
  float* scratch = ex.arena.Floats(per_thread * threads);
  for_each_thread([&](int64_t t, const MatMulOut& p, int64_t n0, int64_t n1) {
    kernel(a, M, K, lda, *p.w, n0, n1, p.out, p.ldo, scratch + t * per_thread);
    finish_columns(p, n0, n1);
  });
}

}  // namespace

void MatMul(const Exec& ex, const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w,
            const TensorView* bias, float* out, int64_t ldo) {
  const MatMulOut part{&w, bias, out, ldo};
  MatMulParts(ex, a, M, K, lda, std::span<const MatMulOut>(&part, 1));
}

void MatMuls(const Exec& ex, const float* a, int64_t M, int64_t K, int64_t lda,
             std::initializer_list<MatMulOut> parts) {
  const std::span<const MatMulOut> all(parts.begin(), parts.size());
  for (const MatMulOut& p : all) {
    if (p.w->format != all[0].w->format) {  // mixed formats (a K-quant recipe): one by one
      for (const MatMulOut& q : all) MatMul(ex, a, M, K, lda, *q.w, q.bias, q.out, q.ldo);
      return;
    }
  }
  MatMulParts(ex, a, M, K, lda, all);
}

int64_t MatMulArenaFloats(int threads, int64_t M, int64_t K) {
  // The larger of the paths: packed bf16 activations (one buffer), or per-thread scratch after
  // the quantized activation rows (prefill of quantized weights; the K formats' rows are the
  // smaller ones).
  const int64_t packed = static_cast<int64_t>(
      Arena::Rounded(cpu::PackedBf16Words(M, K + K % 2) * sizeof(uint32_t)) / sizeof(float));
  const int64_t quantized = static_cast<int64_t>(
      Arena::Rounded(static_cast<size_t>(M * quant::ActRowBytes(WFormat::kQ8_0, K))) /
      sizeof(float));
  return std::max(packed, quantized + threads * ThreadScratchFloats(K));
}

void RmsNorm(const Exec& ex, const float* x, int64_t rows, int64_t dim, const TensorView& w,
             float eps, bool add_one, float* y) {
  CheckVector(w, dim);
  ForRowBlocks(ex, rows, dim, [&](int64_t r0, int64_t r1) {
    ex.table().rms_norm(x + r0 * dim, r1 - r0, dim, w, eps, add_one, y + r0 * dim);
    Epilogue(ex, y + r0 * dim, (r1 - r0) * dim);
  });
}

void LayerNorm(const Exec& ex, const float* x, int64_t rows, int64_t dim, const TensorView& w,
               const TensorView& b, float eps, float* y) {
  CheckVector(w, dim);
  CheckVector(b, dim);
  ForRowBlocks(ex, rows, dim, [&](int64_t r0, int64_t r1) {
    ex.table().layer_norm(x + r0 * dim, r1 - r0, dim, w, b, eps, y + r0 * dim);
    Epilogue(ex, y + r0 * dim, (r1 - r0) * dim);
  });
}

void GeluTanh(const Exec& ex, float* x, int64_t n) {
  ForRanges(ex, n, [&](int64_t i, int64_t m) {
    ex.table().gelu_tanh(x + i, m);
    Epilogue(ex, x + i, m);
  });
}
void GeluErf(const Exec& ex, float* x, int64_t n) {
  ForRanges(ex, n, [&](int64_t i, int64_t m) {
    ex.table().gelu_erf(x + i, m);
    Epilogue(ex, x + i, m);
  });
}
void Mul(const Exec& ex, const float* a, const float* b, float* out, int64_t n) {
  ForRanges(ex, n, [&](int64_t i, int64_t m) {
    ex.table().mul(a + i, b + i, out + i, m);
    Epilogue(ex, out + i, m);
  });
}
void Add(const Exec& ex, const float* a, const float* b, float* out, int64_t n) {
  ForRanges(ex, n, [&](int64_t i, int64_t m) {
    ex.table().add(a + i, b + i, out + i, m);
    Epilogue(ex, out + i, m);
  });
}
void Scale(const Exec& ex, float* x, int64_t n, float s) {
  ForRanges(ex, n, [&](int64_t i, int64_t m) {
    ex.table().scale(x + i, m, s);
    Epilogue(ex, x + i, m);
  });
}
void Divide(const Exec& ex, float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] /= s;  // rare (once per image): no table entry
  Epilogue(ex, x, n);
}
void SoftCap(const Exec& ex, float* x, int64_t n, float cap) {
  OCULAR_CHECK(cap > 0.0f);
  ex.table().soft_cap(x, n, cap);
  Epilogue(ex, x, n);
}
void CastToActivation(const Exec& ex, float* x, int64_t n) { Epilogue(ex, x, n); }

int64_t RopeArenaFloats(int64_t head_dim) { return head_dim; }

namespace {

// Rope's row loop; cos_sin(pos, cos, sin) fills head_dim / 2 values of each.
template <typename CosSin>
void RopeRows(const Exec& ex, float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
              const int64_t* pos, CosSin cos_sin) {
  OCULAR_CHECK(head_dim > 0 && head_dim % 2 == 0, "HINT: RoPE needs an even head_dim");
  OCULAR_CHECK(ld >= n_heads * head_dim);
  const kernels::KernelTable& table = ex.table();
  const bool bf16 = ex.round_bf16();
  ArenaScope scope(ex.arena);
  float* cos = ex.arena.Floats(RopeArenaFloats(head_dim));
  float* sin = cos + head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    if (r == 0 || pos[r] != pos[r - 1]) {
      cos_sin(pos[r], cos, sin);
      // HF computes cos/sin in f32 and casts them to the activation dtype.
      if (bf16) table.round_bf16(cos, head_dim);
    }
    (bf16 ? table.rope_row_bf16 : table.rope_row)(x + r * ld, n_heads, head_dim, cos, sin);
  }
}

}  // namespace

void Rope(const Exec& ex, float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
          const int64_t* pos, float theta, float inv_freq_divisor) {
  RopeRows(ex, x, rows, n_heads, head_dim, ld, pos, [&](int64_t p, float* cos, float* sin) {
    ref::RopeCosSin(p, head_dim, theta, cos, sin, inv_freq_divisor);
  });
}

void Rope(const Exec& ex, float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
          const int64_t* pos, const float* inv_freq) {
  RopeRows(ex, x, rows, n_heads, head_dim, ld, pos, [&](int64_t p, float* cos, float* sin) {
    const float pos_f = static_cast<float>(p);
    for (int64_t k = 0; k < head_dim / 2; ++k) {
      const float angle = pos_f * inv_freq[k];
      cos[k] = std::cos(angle);
      sin[k] = std::sin(angle);
    }
  });
}

void RopeAxes(const Exec& ex, float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
              const int64_t* pos, const float* inv_freq, const uint8_t* axis_of,
              bool f32_rotation) {
  OCULAR_CHECK(head_dim > 0 && head_dim % 2 == 0, "HINT: RoPE needs an even head_dim");
  OCULAR_CHECK(ld >= n_heads * head_dim);
  const kernels::KernelTable& table = ex.table();
  const bool bf16 = ex.round_bf16();
  const int64_t half = head_dim / 2;
  ArenaScope scope(ex.arena);
  float* cos = ex.arena.Floats(RopeArenaFloats(head_dim));
  float* sin = cos + half;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < half; ++k) {
      // freqs = inv_freq @ position_ids (one f32 product), then the section's axis
      // (torch.cat([m[i % 3] for i, m in enumerate(cos.split(mrope_section))])).
      const float angle = static_cast<float>(pos[int64_t{axis_of[k]} * rows + r]) * inv_freq[k];
      cos[k] = std::cos(angle);
      sin[k] = std::sin(angle);
    }
    if (bf16 && f32_rotation) {
      table.rope_row(x + r * ld, n_heads, head_dim, cos, sin);
      table.round_bf16(x + r * ld, n_heads * head_dim);
      continue;
    }
    if (bf16) table.round_bf16(cos, head_dim);
    (bf16 ? table.rope_row_bf16 : table.rope_row)(x + r * ld, n_heads, head_dim, cos, sin);
  }
}

namespace {

int64_t ArenaFloats(int64_t floats) {
  return static_cast<int64_t>(Arena::Rounded(floats * sizeof(float)) / sizeof(float));
}

// Whether ops::Attention takes the bf16 dot-product kernels: Precision::kBF16 (its inputs are
// bf16 values: q, k, v are rounded op outputs or a bf16 KV cache), enough queries to fill the
// GEMM tiles, even head size, a plain (not ring) KV layout, and a CPU with bf16 dot products.
bool UsesAttentionDot(const Exec& ex, int64_t Tq, int64_t d, const KvRows& kv) {
  return ex.table().attention_dot_items != nullptr && ex.table().gemm_bf16 != nullptr &&
         ex.precision == Precision::kBF16 && Tq >= 16 && d % 2 == 0 && kv.ring == 0;
}

}  // namespace

// Words of one KV head's packed keys and packed values (kernel_table.h AttentionDotArgs).
int64_t PackedKeyWords(int64_t Tk, int64_t d) { return kernels::AttentionDotKeys(Tk) * (d / 2); }
int64_t PackedValueWords(int64_t Tk, int64_t d) {
  return (d + 15) / 16 * 16 * (kernels::AttentionDotKeys(Tk) / 2);
}

int64_t AttentionArenaFloats(int threads, int64_t Tk, int64_t Hkv, int64_t d) {
  const int64_t plain = threads * ArenaFloats(kernels::AttentionScratchFloats(Tk, d));
  const int64_t dot = ArenaFloats(Hkv * PackedKeyWords(Tk, d)) +
                      ArenaFloats(Hkv * PackedValueWords(Tk, d)) +
                      threads * ArenaFloats(kernels::AttentionDotScratchFloats(Tk, d));
  return std::max(plain, dot);
}

namespace {

// fn(begin, end, scratch) over [0, items) in one unit per thread (the split ParallelFor would
// make), each unit with its own per_thread floats of scratch from the arena.
template <class Fn>
void ForItemUnits(const Exec& ex, int64_t threads, int64_t items, int64_t per_thread,
                  const Fn& fn) {
  float* scratch = ex.arena.Floats(per_thread * threads);
  const int64_t units = std::min<int64_t>(threads, items);
  ex.pool().ParallelFor(units, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      fn(items * u / units, items * (u + 1) / units, scratch + u * per_thread);
    }
  });
}

}  // namespace

void Attention(const Exec& ex, const float* q, int64_t Tq, int64_t Hq, int64_t ldq,
               const KvRows& kv, int64_t Hkv, int64_t d, float scale, float softcap,
               const int32_t* key_begin, const int32_t* key_end, float* out, int64_t ldo) {
  OCULAR_CHECK(Hq > 0 && Hkv > 0 && Hq % Hkv == 0, "HINT: Hq must be a multiple of Hkv");
  OCULAR_CHECK(d > 0 && ldq >= Hq * d && ldo >= Hq * d && kv.ldk >= Hkv * d && kv.ldv >= Hkv * d);
  for (int64_t i = 0; i < Tq; ++i) {
    OCULAR_CHECK(0 <= key_begin[i] && key_begin[i] <= key_end[i] && key_end[i] <= kv.Tk,
                 "HINT: key ranges must lie within [0, Tk)");
    OCULAR_CHECK(kv.ring == 0 || key_begin[i] == key_end[i] || key_begin[i] >= kv.Tk - kv.ring,
                 "HINT: a ring holds only the last `ring` keys");
  }
  const kernels::AttentionArgs args{
      q,      Tq,     Hq, ldq,   kv.k,    kv.v,      kv.bf16, kv.ring, kv.Tk, Hkv,
      kv.ldk, kv.ldv, d,  scale, softcap, key_begin, key_end, out,     ldo,   ex.round_bf16()};
  const kernels::KernelTable& table = ex.table();
  const int threads = ex.pool().size();
  ArenaScope scope(ex.arena);
  const int64_t kv_cols = Hkv * d;
  if (UsesAttentionDot(ex, Tq, d, kv) && AreBf16Values(q, Tq, Hq * d, ldq) &&
      (kv.bf16 || (AreBf16Values(static_cast<const float*>(kv.k), kv.Tk, kv_cols, kv.ldk) &&
                   AreBf16Values(static_cast<const float*>(kv.v), kv.Tk, kv_cols, kv.ldv)))) {
    // K rows and V columns of each KV head packed once for every work item (in parallel).
    const int64_t key_words = PackedKeyWords(kv.Tk, d), value_words = PackedValueWords(kv.Tk, d);
    uint32_t* keys = ex.arena.Alloc<uint32_t>(Hkv * key_words);
    uint32_t* values = ex.arena.Alloc<uint32_t>(Hkv * value_words);
    const int64_t value_pairs = kernels::AttentionDotKeys(kv.Tk) / 2;
    ex.pool().ParallelFor(Hkv, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        if (kv.bf16) {
          const uint16_t* k = static_cast<const uint16_t*>(kv.k) + h * d;
          const uint16_t* v = static_cast<const uint16_t*>(kv.v) + h * d;
          cpu::PackBf16Rows(k, kv.Tk, d, kv.ldk, keys + h * key_words);
          cpu::PackBf16Columns(v, kv.Tk, d, kv.ldv, value_pairs, values + h * value_words);
        } else {
          const float* k = static_cast<const float*>(kv.k) + h * d;
          const float* v = static_cast<const float*>(kv.v) + h * d;
          cpu::PackBf16Rows(k, kv.Tk, d, kv.ldk, 0, (kv.Tk + 15) / 16, false, keys + h * key_words);
          cpu::PackBf16Columns(v, kv.Tk, d, kv.ldv, value_pairs, values + h * value_words);
        }
      }
    });
    const kernels::AttentionDotArgs dot{keys,        key_words,   values,
                                        value_words, value_pairs, table.gemm_bf16_t};
    ForItemUnits(ex, threads, kernels::AttentionDotItemCount(Tq, Hq),
                 ArenaFloats(kernels::AttentionDotScratchFloats(kv.Tk, d)),
                 [&](int64_t begin, int64_t end, float* scratch) {
                   table.attention_dot_items(args, dot, begin, end, scratch);
                 });
    return;
  }
  ForItemUnits(ex, threads, kernels::AttentionItemCount(Tq, Hq, Hkv),
               ArenaFloats(kernels::AttentionScratchFloats(kv.Tk, d)),
               [&](int64_t begin, int64_t end, float* scratch) {
                 table.attention_items(args, begin, end, scratch);
               });
}

void EmbedRows(const Exec& ex, const Matrix& table, const int32_t* ids, int64_t n, float* out,
               int64_t ldo) {
  const kernels::RowToF32Fn fn = ex.table().row_to_f32[static_cast<int>(table.format)];
  OCULAR_CHECK(fn != nullptr, "HINT: no kernel for this weight format (refused at load)");
  OCULAR_CHECK(ldo >= table.cols);
  for (int64_t i = 0; i < n; ++i) {
    OCULAR_CHECK(ids[i] >= 0 && ids[i] < table.rows, "HINT: ids are validated by the caller");
    fn(table, ids[i], out + i * ldo);
  }
}

void ToF32(const Exec& ex, const TensorView& t, int64_t offset_elems, int64_t n, float* out) {
  OCULAR_CHECK(IsFloatDType(t.dtype), "HINT: ToF32 takes F32, BF16 or F16");
  OCULAR_CHECK(offset_elems >= 0 && n >= 0 && offset_elems + n <= t.numel());
  const char* base = static_cast<const char*>(t.data) + offset_elems * DTypeSize(t.dtype);
  ex.table().to_f32(base, t.dtype, n, out);
}

size_t PackedWeightBytes(const Matrix& w) {
  const kernels::KernelTable& t = Active();
  return t.packed_weight_bytes != nullptr ? t.packed_weight_bytes(w) : 0;
}

void PackWeights(const Matrix& w, std::byte* out) {
  OCULAR_CHECK(PackedWeightBytes(w) > 0, "HINT: PackedWeightBytes(w) says whether to pack");
  Active().pack_weights(w, out);
}

bool WeightFormatSupported(WFormat f) {
  const int i = static_cast<int>(f);
  for (const Isa& isa : RunnableIsas()) {
    if (isa.table->matmul[i] == nullptr || isa.table->row_to_f32[i] == nullptr) return false;
  }
  return true;
}

}  // namespace ops
}  // namespace ocular
