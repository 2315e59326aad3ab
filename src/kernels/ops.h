// Backend-neutral kernels: the only kernel header model code includes.
//
// Conventions (docs/architecture.md): activations are f32, row-major, with an explicit row
// stride in elements (lda/ldo/...); weights are format-tagged Matrix rows (core/matrix.h) in
// HF layout ([out_features, in_features] for linear layers); vectors (norm weights, biases)
// are TensorViews in their stored dtype (F32, BF16 or F16).
// Shapes are validated at load time by the model; these functions only CHECK invariants.
//
// Every op runs on the Exec's backend: it dispatches once per call (or per row block) to the
// backend's kernel table — "scalar" is the readable reference in kernels/ref/ (the test
// oracle); "avx2" and "avx512" are Highway implementations in kernels/cpu/.
//
// Precision lives here, not in model code: under Precision::kBF16 every op that produces an
// activation rounds it to bf16 in its epilogue (where torch's bf16 run stores a bf16 tensor),
// and Rope/Attention follow torch's bf16 operation order. Under kF32 and kBF16Fast nothing is
// rounded. Ops take scratch only from ex.arena and never allocate.
//
// Accuracy contract: elementwise ops match the reference to a few f32 ulp; reductions (dot
// products, norm statistics, softmax sums) differ only by accumulation order, within 1e-6
// relative to sum(|terms|). Dot products accumulate in f32 with several accumulators; norm
// statistics accumulate in f64 (closest to torch's cascade sums).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/matrix.h"
#include "core/tensor.h"
#include "kernels/exec.h"
#include "ocular/status.h"

namespace ocular {
namespace ops {

// out[M,N] = a[M,K] · w[N,K]^T (+ bias[N] if non-null), w read in its stored format (never
// expanded to an f32 copy). a and out are f32 with row strides lda >= K and ldo >= N.
// bias: F32/BF16/F16 [N] (HF stores biases in the checkpoint dtype), added after the dot
// product as torch's addmm does. REQUIRES: w.cols == K, the backend has a kernel for
// w.format, out does not alias a. Parallel over blocks of N.
void MatMul(const Exec& ex, const float* a, int64_t M, int64_t K, int64_t lda, const Matrix& w,
            const TensorView* bias, float* out, int64_t ldo);

// One output of MatMuls: out[M, w.rows] = a · wᵀ (+ bias), row stride ldo.
struct MatMulOut {
  const Matrix* w;
  const TensorView* bias;  // nullable
  float* out;
  int64_t ldo;
};

// The products of one activation matrix with several weight matrices (fused Q/K/V, gate/up):
// each output equals MatMul's, bit for bit; faster, as the activations are packed or checked
// once and one thread split covers every matrix. Matrices of different formats (a K-quant
// recipe's) run one by one. REQUIRES: as MatMul, for each output.
void MatMuls(const Exec& ex, const float* a, int64_t M, int64_t K, int64_t lda,
             std::initializer_list<MatMulOut> outs);

// Weights the active ISA's MatMul reads faster in its own layout (AVX512-VNNI: q8_0, as strips
// of 16 rows, each one stream of bytes): the bytes that copy takes (0: w is read as stored),
// and the packing into `out` (REQUIRES: PackedWeightBytes(w) > 0). Loaders keep the copy and
// point w.packed at it; MatMul then gives the same bits faster, on any ISA (the others read
// w.data). Memory: as many bytes as w's own for whole 16-row strips.
size_t PackedWeightBytes(const Matrix& w);
void PackWeights(const Matrix& w, std::byte* out);

// True if every ISA has MatMul and EmbedRows kernels for weights in format f: loaders
// refuse a matrix in any other format (kUnimplemented) rather than fail at run time.
bool WeightFormatSupported(WFormat f);

// RMSNorm over each row of x[rows, dim] (contiguous): y = x * rsqrt(mean(x^2) + eps) * (1 + w)
// (Gemma form, add_one = true) or * w (Llama form). w: [dim], any float dtype.
// y may equal x (in place).
void RmsNorm(const Exec& ex, const float* x, int64_t rows, int64_t dim, const TensorView& w,
             float eps, bool add_one, float* y);

// LayerNorm over each row of x[rows, dim]: y = (x - mean) / sqrt(var + eps) * w + b, with the
// biased variance, two-pass as torch. w, b: [dim], any float dtype. y may equal x.
void LayerNorm(const Exec& ex, const float* x, int64_t rows, int64_t dim, const TensorView& w,
               const TensorView& b, float eps, float* y);

// In place: x = 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) (torch gelu approximate="tanh").
void GeluTanh(const Exec& ex, float* x, int64_t n);
// In place: x = 0.5x(1 + erf(x/√2)) (torch gelu, exact).
void GeluErf(const Exec& ex, float* x, int64_t n);
// out = a * b elementwise (GeGLU gate * up). out may alias a or b.
void Mul(const Exec& ex, const float* a, const float* b, float* out, int64_t n);
// out = a + b elementwise (residual). out may alias a or b.
void Add(const Exec& ex, const float* a, const float* b, float* out, int64_t n);
// In place: x *= s.
void Scale(const Exec& ex, float* x, int64_t n, float s);
// In place: x /= s (a true division, as torch's tensor / scalar; not x * (1/s)).
void Divide(const Exec& ex, float* x, int64_t n, float s);
// In place: x = cap * tanh(x / cap). REQUIRES: cap > 0.
void SoftCap(const Exec& ex, float* x, int64_t n, float cap);
// In place: x = x.to(activation dtype): rounds to bf16 under kBF16, no-op otherwise.
void CastToActivation(const Exec& ex, float* x, int64_t n);

// Split-half RoPE (HF rotate_half) in place on x[rows, n_heads, head_dim], row stride ld
// (elements), heads contiguous within a row. For row r at position pos[r], k < head_dim/2:
//   inv_freq_k = 1 / theta^(2k/head_dim) (f32, as HF), angle = f32(pos) * inv_freq_k (f32),
//   x1 = x[k], x2 = x[k + d/2]: x[k] = x1*cos - x2*sin, x[k + d/2] = x2*cos + x1*sin.
// Under kBF16: cos/sin rounded to bf16 and every product and sum rounded, as torch on bf16.
// inv_freq_divisor: HF's "linear" rope_scaling, inv_freq /= factor (an f32 division;
// modeling_rope_utils.py _compute_linear_scaling_rope_parameters); 1 = plain RoPE.
// REQUIRES: head_dim even.
void Rope(const Exec& ex, float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
          const int64_t* pos, float theta, float inv_freq_divisor = 1.0f);
// As Rope, with the frequencies given (inv_freq[k], k < head_dim/2: llama3 rope_scaling's
// per-frequency factors, modeling_rope_utils.py _compute_llama3_parameters):
// angle = f32(pos) * inv_freq[k], cos/sin in f32 (rounded to bf16 under kBF16).
void Rope(const Exec& ex, float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
          const int64_t* pos, const float* inv_freq);
// Multi-axis RoPE: frequency k reads the position of axis axis_of[k], pos holding one row of
// `rows` positions per axis (pos[a * rows + r]): angle = f32(pos[axis_of[k] * rows + r]) *
// inv_freq[k], cos/sin in f32, the rotation as Rope's. Qwen2-VL's M-RoPE
// (modeling_qwen2_vl.py apply_multimodal_rotary_pos_emb: the cos/sin of each mrope_section
// taken from its own axis) and its ViT's 2-D rotary (rot_pos_emb: h positions, then w).
// f32_rotation: the rotation in f32 with f32 cos/sin and each result rounded to the activation
// dtype once (apply_rotary_pos_emb_vision: q.float() ... .to(orig_q_dtype)); otherwise as Rope
// under kBF16 (cos/sin and every product rounded, apply_multimodal_rotary_pos_emb on bf16).
// REQUIRES: head_dim even; axis_of[k] < the axes pos holds.
void RopeAxes(const Exec& ex, float* x, int64_t rows, int64_t n_heads, int64_t head_dim, int64_t ld,
              const int64_t* pos, const float* inv_freq, const uint8_t* axis_of,
              bool f32_rotation = false);

// Keys and values of one attention call: rows [Tk, Hkv, d] with row strides ldk/ldv
// (elements), f32 or bf16 (a bf16 KV cache). With ring > 0 the rows are a ring buffer:
// logical key t is row t % ring (a sliding-window cache), and only the last `ring` logical
// keys exist.
struct KvRows {
  const void* k = nullptr;
  const void* v = nullptr;
  bool bf16 = false;
  int64_t ring = 0;
  int64_t Tk = 0;
  int64_t ldk = 0, ldv = 0;
};

// Multi-head attention with GQA/MQA. q[Tq, Hq, d] (row stride ldq), K/V as above,
// out[Tq, Hq, d] (row stride ldo). Query i attends to logical keys [key_begin[i], key_end[i])
// (covers causal, prefix-LM and sliding windows). scores = (q·k) * scale; if softcap > 0:
// scores = softcap * tanh(scores / softcap); p = softmax(scores) in f32 (max-subtracted);
// out = p · v. Query head h reads KV head h / (Hq / Hkv). An empty key range gives a zero row.
// Under kBF16 the order is torch's bf16 eager attention (each step rounded to bf16); with 16
// or more queries on a CPU with AVX512_BF16 (and a plain KV layout, even d) both products use
// bf16 dot products: the same exact products of bf16 values, summed in another order.
// REQUIRES: Hq % Hkv == 0, 0 <= key_begin[i] <= key_end[i] <= Tk (and, with a ring,
// key_end[i] - key_begin[i] <= ring and key_begin[i] >= Tk - ring), out aliases none of q/k/v.
// Parallel over (query block, head).
void Attention(const Exec& ex, const float* q, int64_t Tq, int64_t Hq, int64_t ldq,
               const KvRows& kv, int64_t Hkv, int64_t d, float scale, float softcap,
               const int32_t* key_begin, const int32_t* key_end, float* out, int64_t ldo);

// out[i, 0:cols) = f32(row ids[i] of table), row stride ldo (embedding lookup, any format the
// backend can dequantize). REQUIRES: 0 <= ids[i] < table.rows.
void EmbedRows(const Exec& ex, const Matrix& table, const int32_t* ids, int64_t n, float* out,
               int64_t ldo);

// out[0, n) = f32(t.data[offset_elems, offset_elems + n)). t: F32, BF16 or F16.
// REQUIRES: offset_elems + n <= t.numel().
void ToF32(const Exec& ex, const TensorView& t, int64_t offset_elems, int64_t n, float* out);

// Arena floats the ops above take for one call (planning): MatMul of M rows by K columns,
// Attention with Tk keys of Hkv heads of size d, on `threads` threads; Rope with head_dim.
int64_t MatMulArenaFloats(int threads, int64_t M, int64_t K);
int64_t AttentionArenaFloats(int threads, int64_t Tk, int64_t Hkv, int64_t d);
int64_t RopeArenaFloats(int64_t head_dim);

}  // namespace ops

// Runtime ISA selection: "scalar", "avx2", "avx512", "amx" (avx512 with the bf16 GEMM on AMX
// tiles). The best one supported by the CPU and OS
// (Highway's CPUID + XGETBV checks) is chosen at first use; the environment variable
// OCULAR_ISA overrides it (tests force each path). Backends built afterwards use it.
const char* ActiveIsa();
// InvalidArgument for an unknown name, Unimplemented if this CPU/OS cannot run it.
Status SetIsa(std::string_view name);
// The ISAs this machine can run, "scalar" first.
std::vector<std::string> SupportedIsas();

}  // namespace ocular
