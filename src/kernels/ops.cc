#include "kernels/ops.h"

#include <hwy/targets.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/highway_tables.h"
#include "kernels/kernel_table.h"
#include "kernels/ref/ref_ops.h"

namespace ocular {
namespace {

struct Isa {
  const char* name;
  const kernels::KernelTable* table;
};

// The AVX-512 tables are compiled but have not yet run on AVX-512 hardware (the development
// machines are AVX2-only), so they are opt-in until verified: OCULAR_ENABLE_AVX512=1 makes
// them selectable (and tested by kernels_test). See src/kernels/README.md.
bool Avx512Enabled() {
  const char* env = std::getenv("OCULAR_ENABLE_AVX512");
  return env != nullptr && std::string_view(env) == "1";
}

// "scalar" first, then every Highway table this CPU and OS can run, best last.
std::vector<Isa> RunnableIsas() {
  std::vector<Isa> isas = {{"scalar", &ref::Table()}};
  const int64_t supported = hwy::SupportedTargets();
  std::vector<cpu::IsaTable> tables = cpu::HighwayTables();
  for (auto it = tables.rbegin(); it != tables.rend(); ++it) {
    if (std::string_view(it->name) == "avx512" && !Avx512Enabled()) continue;
    if ((supported & it->hwy_target) != 0) isas.push_back({it->name, it->table});
  }
  return isas;
}

// Finds a runnable ISA by name, or says why not.
StatusOr<const kernels::KernelTable*> FindIsa(std::string_view name) {
  static constexpr const char* kKnown[] = {"scalar", "avx2", "avx512"};
  if (std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown)) {
    return Error(StatusCode::kInvalidArgument, "kernels", "unknown ISA '", name,
                 "'; expected scalar, avx2 or avx512");
  }
  for (const Isa& isa : RunnableIsas()) {
    if (name == isa.name) return isa.table;
  }
  return Error(StatusCode::kUnimplemented, "kernels", "ISA '", name,
               "' is not supported by this CPU/OS (or not compiled in; avx512 also needs ",
               "OCULAR_ENABLE_AVX512=1 until it is verified on hardware)");
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

void CheckVector(const TensorView& t, int64_t n, const char* what) {
  OCULAR_CHECK(IsFloatDType(t.dtype), "HINT: vector must be F32, BF16 or F16");
  OCULAR_CHECK(t.numel() == n, "HINT: vector length must match the row length");
  (void)what;
}

// Below this many multiply-adds a MatMul runs on the calling thread only.
constexpr int64_t kMinParallelMacs = 1 << 15;
// Column granularity of the MatMul split; a multiple of every kernel's column tile.
constexpr int64_t kColumnsPerUnit = 16;

}  // namespace

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

void MatMulBias(ThreadPool& pool, const float* a, int64_t M, int64_t K, int64_t lda,
                const TensorView& w, const TensorView* bias, float* out, int64_t ldo) {
  OCULAR_CHECK(w.shape.size() == 2 && w.shape[1] == K, "HINT: w must be [N, K]");
  OCULAR_CHECK(IsFloatDType(w.dtype), "HINT: w must be F32, BF16 or F16");
  OCULAR_CHECK(M >= 0 && K >= 0 && lda >= K, "HINT: a is [M, K] with row stride lda >= K");
  const int64_t N = w.shape[0];
  OCULAR_CHECK(ldo >= N, "HINT: out is [M, N] with row stride ldo >= N");
  if (bias != nullptr) CheckVector(*bias, N, "bias");
  if (M == 0 || N == 0) return;
  const float* a_end = a + (M - 1) * lda + K;
  const float* out_end = out + (M - 1) * ldo + N;
  OCULAR_CHECK(a_end <= out || out_end <= a, "HINT: MatMul out must not alias a");
  const kernels::KernelTable& table = Active();
  auto run_columns = [&](int64_t n0, int64_t n1) {
    table.matmul_block(a, M, K, lda, w.data, w.dtype, n0, n1, out, ldo);
    if (bias == nullptr) return;
    // out = a·wᵀ + bias: torch's addmm adds the bias after the dot product.
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = n0; n < n1; ++n) {
        out[m * ldo + n] += ref::ElementAsF32(bias->data, bias->dtype, n);
      }
    }
  };
  const int64_t units = (N + kColumnsPerUnit - 1) / kColumnsPerUnit;
  if (M * N * K < kMinParallelMacs || units == 1) {
    run_columns(0, N);
    return;
  }
  pool.ParallelFor(units, [&](int64_t begin, int64_t end) {
    run_columns(begin * kColumnsPerUnit, std::min(N, end * kColumnsPerUnit));
  });
}

void MatMul(ThreadPool& pool, const float* a, int64_t M, int64_t K, int64_t lda,
            const TensorView& w, const float* bias, float* out, int64_t ldo) {
  if (bias == nullptr) {
    MatMulBias(pool, a, M, K, lda, w, nullptr, out, ldo);
    return;
  }
  OCULAR_CHECK(!w.shape.empty());
  const TensorView bias_view{bias, DType::kF32, {w.shape[0]}};
  MatMulBias(pool, a, M, K, lda, w, &bias_view, out, ldo);
}

void RmsNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, float eps,
             bool add_one, float* y) {
  CheckVector(w, dim, "weight");
  Active().rms_norm(x, rows, dim, w, eps, add_one, y);
}

void LayerNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, const TensorView& b,
               float eps, float* y) {
  CheckVector(w, dim, "weight");
  CheckVector(b, dim, "bias");
  Active().layer_norm(x, rows, dim, w, b, eps, y);
}

void GeluTanh(float* x, int64_t n) { Active().gelu_tanh(x, n); }
void GeluErf(float* x, int64_t n) { Active().gelu_erf(x, n); }
void Mul(const float* a, const float* b, float* out, int64_t n) { Active().mul(a, b, out, n); }
void Add(const float* a, const float* b, float* out, int64_t n) { Active().add(a, b, out, n); }
void Scale(float* x, int64_t n, float s) { Active().scale(x, n, s); }

void SoftCap(float* x, int64_t n, float cap) {
  OCULAR_CHECK(cap > 0.0f);
  Active().soft_cap(x, n, cap);
}

void RopeSplitHalf(float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
                   const int64_t* pos, float theta) {
  OCULAR_CHECK(head_dim > 0 && head_dim % 2 == 0, "HINT: RoPE needs an even head_dim");
  OCULAR_CHECK(ld >= n_heads * head_dim);
  const kernels::KernelTable& table = Active();
  std::vector<float> cos_sin(static_cast<size_t>(head_dim));
  float* cos = cos_sin.data();
  float* sin = cos + head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    if (r == 0 || pos[r] != pos[r - 1]) ref::RopeCosSin(pos[r], head_dim, theta, cos, sin);
    table.rope_row(x + r * ld, n_heads, head_dim, cos, sin);
  }
}

void Attention(ThreadPool& pool, const float* q, int64_t Tq, int64_t Hq, int64_t ldq,
               const float* k, const float* v, int64_t Tk, int64_t Hkv, int64_t ldk, int64_t ldv,
               int64_t d, float scale, float softcap, const int32_t* key_begin,
               const int32_t* key_end, float* out, int64_t ldo) {
  OCULAR_CHECK(Hq > 0 && Hkv > 0 && Hq % Hkv == 0, "HINT: Hq must be a multiple of Hkv");
  OCULAR_CHECK(d > 0 && ldq >= Hq * d && ldo >= Hq * d && ldk >= Hkv * d && ldv >= Hkv * d);
  for (int64_t i = 0; i < Tq; ++i) {
    OCULAR_CHECK(0 <= key_begin[i] && key_begin[i] <= key_end[i] && key_end[i] <= Tk,
                 "HINT: key ranges must lie within [0, Tk)");
  }
  const kernels::AttentionArgs args{q,   Tq, Hq,    ldq,     k,         v,       Tk,  Hkv, ldk,
                                    ldv, d,  scale, softcap, key_begin, key_end, out, ldo};
  const kernels::KernelTable& table = Active();
  pool.ParallelFor(kernels::AttentionItemCount(Tq, Hq), [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(
        static_cast<size_t>(kernels::kAttentionQueryBlock * std::max<int64_t>(Tk, 1)));
    table.attention_items(args, begin, end, scratch.data());
  });
}

void ToF32(const TensorView& t, int64_t offset_elems, int64_t n, float* out) {
  OCULAR_CHECK(IsFloatDType(t.dtype), "HINT: ToF32 takes F32, BF16 or F16");
  OCULAR_CHECK(offset_elems >= 0 && n >= 0 && offset_elems + n <= t.numel());
  const char* base = static_cast<const char*>(t.data) + offset_elems * DTypeSize(t.dtype);
  Active().to_f32(base, t.dtype, n, out);
}

}  // namespace ops
}  // namespace ocular
