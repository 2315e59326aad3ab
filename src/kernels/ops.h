// Backend-neutral CPU kernels: the only kernel header model code includes.
//
// Conventions (docs/architecture.md): activations are f32, row-major, with an explicit row
// stride in elements (lda/ldo/...); weights are TensorViews in their stored dtype
// (F32, BF16 or F16) with HF layout ([out_features, in_features] for linear layers).
// Shapes are validated at load time by the model; these functions only CHECK invariants.
//
// Each op dispatches once per call (or per row block) to the active ISA's implementation:
// "scalar" is the readable reference in kernels/ref/ (the test oracle); "avx2" and "avx512"
// are Highway implementations in kernels/cpu/. See ActiveIsa()/SetIsa() below.
//
// Accuracy contract: elementwise ops match the reference to a few f32 ulp; reductions (dot
// products, norm statistics, softmax sums) differ only by accumulation order, within 1e-6
// relative to sum(|terms|). Dot products accumulate in f32 with several accumulators; norm
// statistics accumulate in f64 (closest to torch's cascade sums).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "ocular/status.h"

namespace ocular {
namespace ops {

// out[M,N] = a[M,K] · w[N,K]^T (+ bias[N] if non-null).
// w: dtype F32, BF16 or F16, shape [N,K] (HF Linear layout), read in its stored dtype (never
// expanded to an f32 copy). a and out are f32 with row strides lda >= K and ldo >= N.
// REQUIRES: out does not alias a. Parallel over blocks of N on `pool`.
void MatMul(ThreadPool& pool, const float* a, int64_t M, int64_t K, int64_t lda,
            const TensorView& w, const float* bias /*nullable, f32[N]*/, float* out, int64_t ldo);

// Same, with the bias as a TensorView of shape [N] (F32/BF16/F16): HF stores biases in the
// checkpoint dtype. bias may be null.
void MatMulBias(ThreadPool& pool, const float* a, int64_t M, int64_t K, int64_t lda,
                const TensorView& w, const TensorView* bias, float* out, int64_t ldo);

// RMSNorm over each row of x[rows, dim] (contiguous): y = x * rsqrt(mean(x^2) + eps) * (1 + w)
// (Gemma form, add_one = true) or * w (Llama form). w: [dim], any float dtype.
// y may equal x (in place).
void RmsNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, float eps,
             bool add_one, float* y);

// LayerNorm over each row of x[rows, dim]: y = (x - mean) / sqrt(var + eps) * w + b, with the
// biased variance, two-pass as torch. w, b: [dim], any float dtype. y may equal x.
void LayerNorm(const float* x, int64_t rows, int64_t dim, const TensorView& w, const TensorView& b,
               float eps, float* y);

// In place: x = 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) (torch gelu approximate="tanh").
void GeluTanh(float* x, int64_t n);
// In place: x = 0.5x(1 + erf(x/√2)) (torch gelu, exact).
void GeluErf(float* x, int64_t n);
// out = a * b elementwise (GeGLU gate * up). out may alias a or b.
void Mul(const float* a, const float* b, float* out, int64_t n);
// out = a + b elementwise (residual). out may alias a or b.
void Add(const float* a, const float* b, float* out, int64_t n);
// In place: x *= s.
void Scale(float* x, int64_t n, float s);
// In place: x = cap * tanh(x / cap). REQUIRES: cap > 0.
void SoftCap(float* x, int64_t n, float cap);

// Split-half RoPE (HF rotate_half) in place on x[rows, n_heads, head_dim], row stride ld
// (elements), heads contiguous within a row. For row r at position pos[r], k < head_dim/2:
//   inv_freq_k = 1 / theta^(2k/head_dim) (f32, as HF), angle = f32(pos) * inv_freq_k (f32),
//   x1 = x[k], x2 = x[k + d/2]: x[k] = x1*cos - x2*sin, x[k + d/2] = x2*cos + x1*sin.
// REQUIRES: head_dim even.
void RopeSplitHalf(float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
                   const int64_t* pos, float theta);

// Multi-head attention with GQA/MQA. q[Tq, Hq, d] (row stride ldq), k/v[Tk, Hkv, d] (row
// strides ldk/ldv, so a KV cache can be passed), out[Tq, Hq, d] (row stride ldo).
// Query i attends to keys [key_begin[i], key_end[i]) (covers causal, prefix-LM and sliding
// windows). scores = (q·k) * scale; if softcap > 0: scores = softcap * tanh(scores / softcap);
// p = softmax(scores) in f32 (max-subtracted); out = p · v. Query head h reads KV head
// h / (Hq / Hkv). An empty key range gives a zero output row.
// REQUIRES: Hq % Hkv == 0, 0 <= key_begin[i] <= key_end[i] <= Tk, out aliases none of q/k/v.
// Parallel over (query, head) on `pool`.
void Attention(ThreadPool& pool, const float* q, int64_t Tq, int64_t Hq, int64_t ldq,
               const float* k, const float* v, int64_t Tk, int64_t Hkv, int64_t ldk, int64_t ldv,
               int64_t d, float scale, float softcap, const int32_t* key_begin,
               const int32_t* key_end, float* out, int64_t ldo);

// out[0, n) = f32(t.data[offset_elems, offset_elems + n)). t: F32, BF16 or F16 (embedding
// lookup). REQUIRES: offset_elems + n <= t.numel().
void ToF32(const TensorView& t, int64_t offset_elems, int64_t n, float* out);

}  // namespace ops

// Runtime ISA selection: "scalar", "avx2", "avx512" (opt-in: OCULAR_ENABLE_AVX512=1, until the
// AVX-512 tables are verified on hardware). The best one supported by the CPU and OS
// (Highway's CPUID + XGETBV checks) is chosen at first use; the environment variable
// OCULAR_ISA overrides it (tests force each path). Not thread-safe against concurrent ops:
// call SetIsa before running a model.
const char* ActiveIsa();
// InvalidArgument for an unknown name, Unimplemented if this CPU/OS cannot run it.
Status SetIsa(std::string_view name);
// The ISAs this machine can run, "scalar" first.
std::vector<std::string> SupportedIsas();

}  // namespace ocular
