#include "tasks/mask_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/half.h"
#include "io/npz.h"
#include "io/safetensors.h"

namespace ocular {
namespace {

constexpr int kCodesPerMask = 16;  // a 4×4 grid
constexpr int kGrid = 4;
constexpr int kUpsampleLayers = 4;  // Decoder.num_upsample_layers
constexpr int kResBlocks = 2;       // Decoder.num_res_blocks

// Reads a float tensor of any float dtype into f32.
std::vector<float> ToF32(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (v.dtype) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, static_cast<const char*>(v.data) + 4 * i, 4);
        out[i] = f;
        break;
      }
      case DType::kF64: {
        double d;
        std::memcpy(&d, static_cast<const char*>(v.data) + 8 * i, 8);
        out[i] = static_cast<float>(d);
        break;
      }
      case DType::kF16:
      case DType::kBF16: {
        uint16_t h;
        std::memcpy(&h, static_cast<const char*>(v.data) + 2 * i, 2);
        out[i] = v.dtype == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
        break;
      }
      default:
        break;  // refused by the binder
    }
  }
  return out;
}

// Binds tensors by name, checking shapes; remembers what was used.
class Binder {
 public:
  Binder(const std::map<std::string, TensorView>& tensors, const std::string& source)
      : tensors_(tensors), source_(source) {}

  // The tensor `name` with exactly `shape`, as f32.
  Status Take(const std::string& name, const Shape& shape, std::vector<float>* out) {
    OCULAR_ASSIGN_OR_RETURN(const TensorView* v, Find(name));
    if (v->shape != shape) {
      return Error(StatusCode::kDataLoss, "seg", source_, ": tensor '", name, "' has shape ",
                   ShapeString(v->shape), ", the mask decoder expects ", ShapeString(shape));
    }
    *out = ToF32(*v);
    return Status::Ok();
  }

  // The tensor `name` with `rank` dims, each in [1, max_dim]; returns its shape.
  StatusOr<Shape> Peek(const std::string& name, size_t rank, int64_t max_dim) {
    OCULAR_ASSIGN_OR_RETURN(const TensorView* v, Find(name));
    bool ok = v->shape.size() == rank;
    for (int64_t d : v->shape) ok = ok && d >= 1 && d <= max_dim;
    if (!ok) {
      return Error(StatusCode::kDataLoss, "seg", source_, ": tensor '", name, "' has shape ",
                   ShapeString(v->shape), "; expected ", rank, " dimensions of 1..", max_dim);
    }
    return v->shape;
  }

  // A convolution: weight [out, in, k, k] (Conv2d) or [in, out, k, k] (transposed), bias [out].
  Status Conv(const std::string& name, int in, int out, int k, bool transposed, MaskConv* c) {
    std::vector<float> w;
    const Shape shape = transposed ? Shape{in, out, k, k} : Shape{out, in, k, k};
    OCULAR_RETURN_IF_ERROR(Take(name + ".weight", shape, &w));
    OCULAR_RETURN_IF_ERROR(Take(name + ".bias", {out}, &c->b));
    c->in = in;
    c->out = out;
    c->k = k;
    c->w.resize(w.size());
    for (int o = 0; o < out; ++o) {
      for (int i = 0; i < in; ++i) {
        for (int ky = 0; ky < k; ++ky) {
          for (int kx = 0; kx < k; ++kx) {
            const size_t src = transposed ? ((static_cast<size_t>(i) * out + o) * k + ky) * k + kx
                                          : ((static_cast<size_t>(o) * in + i) * k + ky) * k + kx;
            c->w[((static_cast<size_t>(ky) * k + kx) * out + o) * in + i] = w[src];
          }
        }
      }
    }
    return Status::Ok();
  }

  // Every "decoder." tensor must be used: another one means a decoder ocular does not
  // implement. The rest of the VAE (the encoder half, the VQ layer's state besides the codebook,
  // whatever else the file holds) is not needed to decode and is ignored.
  Status CheckAllUsed() const {
    for (const auto& [name, v] : tensors_) {
      if (used_.count(name) || name.rfind("decoder.", 0) != 0) continue;
      return Error(StatusCode::kUnimplemented, "seg", source_, ": tensor '", name,
                   "' is not part of big_vision's mask decoder (a different VQ-VAE?)");
    }
    return Status::Ok();
  }

 private:
  StatusOr<const TensorView*> Find(const std::string& name) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      return Error(StatusCode::kDataLoss, "seg", source_, ": tensor '", name,
                   "' is missing (not a PaliGemma mask VAE like vae-oid.npz?)");
    }
    const DType t = it->second.dtype;
    if (t != DType::kF32 && t != DType::kF64 && t != DType::kF16 && t != DType::kBF16) {
      return Error(StatusCode::kUnimplemented, "seg", source_, ": tensor '", name, "' is ",
                   DTypeName(t), "; the mask decoder reads F32, F64, F16 or BF16");
    }
    used_.insert(name);
    return &it->second;
  }

  const std::map<std::string, TensorView>& tensors_;
  const std::string& source_;
  std::set<std::string> used_;
};

// y[H, W, out] = conv(x[H, W, in]) with a k×k kernel, stride 1, zero padding k/2 (flax
// nn.Conv(kernel_size=(k, k), padding=k // 2) ≡ torch Conv2d(padding=k // 2)).
// Sums in double: the reference is the exact math (docs/segmentation.md).
std::vector<float> Conv2d(const std::vector<float>& x, int h, int w, const MaskConv& c) {
  std::vector<float> y(static_cast<size_t>(h) * w * c.out);
  const int pad = c.k / 2;
  for (int oy = 0; oy < h; ++oy) {
    for (int ox = 0; ox < w; ++ox) {
      float* dst = &y[(static_cast<size_t>(oy) * w + ox) * c.out];
      for (int o = 0; o < c.out; ++o) {
        double acc = c.b[o];
        for (int ky = 0; ky < c.k; ++ky) {
          const int iy = oy + ky - pad;
          if (iy < 0 || iy >= h) continue;
          for (int kx = 0; kx < c.k; ++kx) {
            const int ix = ox + kx - pad;
            if (ix < 0 || ix >= w) continue;
            const float* xi = &x[(static_cast<size_t>(iy) * w + ix) * c.in];
            const float* wk = &c.w[((static_cast<size_t>(ky) * c.k + kx) * c.out + o) * c.in];
            for (int i = 0; i < c.in; ++i) acc += static_cast<double>(xi[i]) * wk[i];
          }
        }
        dst[o] = static_cast<float>(acc);
      }
    }
  }
  return y;
}

// y[2H, 2W, out] = ConvTranspose2d(x[H, W, in], 4×4, stride 2, padding 1) — torch's definition:
// input pixel (iy, ix) adds x · W[i, o, ky, kx] to output (2·iy − 1 + ky, 2·ix − 1 + kx). We
// gather: output oy takes the taps ky with oy + 1 − ky even, from iy = (oy + 1 − ky) / 2.
std::vector<float> ConvTranspose2x(const std::vector<float>& x, int h, int w, const MaskConv& c) {
  const int oh = 2 * h, ow = 2 * w;
  std::vector<float> y(static_cast<size_t>(oh) * ow * c.out);
  for (int oy = 0; oy < oh; ++oy) {
    for (int ox = 0; ox < ow; ++ox) {
      float* dst = &y[(static_cast<size_t>(oy) * ow + ox) * c.out];
      for (int o = 0; o < c.out; ++o) {
        double acc = c.b[o];
        for (int ky = (oy + 1) % 2; ky < c.k; ky += 2) {
          const int iy = (oy + 1 - ky) / 2;
          if (oy + 1 - ky < 0 || iy >= h) continue;
          for (int kx = (ox + 1) % 2; kx < c.k; kx += 2) {
            const int ix = (ox + 1 - kx) / 2;
            if (ox + 1 - kx < 0 || ix >= w) continue;
            const float* xi = &x[(static_cast<size_t>(iy) * w + ix) * c.in];
            const float* wk = &c.w[((static_cast<size_t>(ky) * c.k + kx) * c.out + o) * c.in];
            for (int i = 0; i < c.in; ++i) acc += static_cast<double>(xi[i]) * wk[i];
          }
        }
        dst[o] = static_cast<float>(acc);
      }
    }
  }
  return y;
}

void Relu(std::vector<float>* x) {
  for (float& v : *x) v = std::max(v, 0.0f);
}

// Pillow's precompute_coeffs for a whole-image box (in0 = 0, in1 = in_size), BILINEAR filter
// (support 1, triangle weight); weights normalised by their sum, kept in double.
struct Coeffs {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<double> k;  // [out_size, ksize]
};

Coeffs BilinearCoeffs(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0.0);
  const double inv_filterscale = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double* k = &c.k[static_cast<size_t>(xx) * c.ksize];
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      double t = (x + xmin - center + 0.5) * inv_filterscale;
      if (t < 0.0) t = -t;
      const double wgt = t < 1.0 ? 1.0 - t : 0.0;
      k[x] = wgt;
      ww += wgt;
    }
    if (ww != 0.0) {
      for (int x = 0; x < xmax; ++x) k[x] /= ww;
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

bool ValidCodes(const std::vector<int>& codes, int num_codes) {
  if (codes.size() != kCodesPerMask) return false;
  return std::all_of(codes.begin(), codes.end(), [&](int c) { return c >= 0 && c < num_codes; });
}

}  // namespace

StatusOr<std::unique_ptr<MaskDecoder::Weights>> BindMaskDecoder(
    const std::map<std::string, TensorView>& tensors, const std::string& source) {
  Binder b(tensors, source);
  auto w = std::make_unique<MaskDecoder::Weights>();
  // Shapes follow from the codebook and the first conv; every later shape is then implied
  // (flax Decoder: dim = 128, halved after each transposed conv but the first keeps it).
  OCULAR_ASSIGN_OR_RETURN(const Shape cb, b.Peek("_vq_vae._embedding", 2, kMaxMaskEmbedDim));
  if (cb[0] > kMaxMaskCodebook) {
    return Error(StatusCode::kDataLoss, "seg", source, ": codebook has ", cb[0],
                 " entries; <segNNN> tokens address at most ", kMaxMaskCodebook);
  }
  w->num_codes = static_cast<int>(cb[0]);
  w->embed_dim = static_cast<int>(cb[1]);
  OCULAR_RETURN_IF_ERROR(b.Take("_vq_vae._embedding", cb, &w->codebook));
  OCULAR_ASSIGN_OR_RETURN(const Shape c0, b.Peek("decoder.0.weight", 4, kMaxMaskEmbedDim));
  const int dim = static_cast<int>(c0[0]);
  if (dim > kMaxMaskChannels) {
    return Error(StatusCode::kDataLoss, "seg", source, ": decoder.0.weight has ", dim,
                 " output channels (limit ", kMaxMaskChannels, ")");
  }
  OCULAR_RETURN_IF_ERROR(b.Conv("decoder.0", w->embed_dim, dim, 1, false, &w->conv_in));
  for (int r = 0; r < kResBlocks; ++r) {
    const std::string p = "decoder." + std::to_string(2 + r) + ".net.";
    OCULAR_RETURN_IF_ERROR(b.Conv(p + "0", dim, dim, 3, false, &w->res[r][0]));
    OCULAR_RETURN_IF_ERROR(b.Conv(p + "2", dim, dim, 3, false, &w->res[r][1]));
    OCULAR_RETURN_IF_ERROR(b.Conv(p + "4", dim, dim, 1, false, &w->res[r][2]));
  }
  // Transposed convs: channels dim → dim, dim/2, dim/4, dim/8 (the `dim //= 2` of the loop).
  int in = dim;
  for (int u = 0; u < kUpsampleLayers; ++u) {
    const int out = dim >> u;
    if (out < 1) {
      return Error(StatusCode::kDataLoss, "seg", source, ": decoder width ", dim,
                   " is too small to halve ", kUpsampleLayers - 1, " times");
    }
    OCULAR_RETURN_IF_ERROR(
        b.Conv("decoder." + std::to_string(4 + 2 * u), in, out, 4, true, &w->up[u]));
    in = out;
  }
  OCULAR_RETURN_IF_ERROR(b.Conv("decoder.12", in, 1, 1, false, &w->conv_out));
  OCULAR_RETURN_IF_ERROR(b.CheckAllUsed());
  for (float v : w->codebook) {
    if (!std::isfinite(v)) {
      return Error(StatusCode::kDataLoss, "seg", source, ": the codebook holds NaN or Inf");
    }
  }
  w->mask_size = kGrid << kUpsampleLayers;
  return w;
}

std::vector<float> DecodeMaskLogits(const MaskDecoder::Weights& w, const int* codes) {
  // quantized = take(embeddings, codes).reshape(4, 4, D): code k at row k / 4, column k % 4.
  std::vector<float> x(static_cast<size_t>(kCodesPerMask) * w.embed_dim);
  for (int k = 0; k < kCodesPerMask; ++k) {
    std::copy_n(&w.codebook[static_cast<size_t>(codes[k]) * w.embed_dim], w.embed_dim,
                &x[static_cast<size_t>(k) * w.embed_dim]);
  }
  int s = kGrid;
  x = Conv2d(x, s, s, w.conv_in);                        // x = Conv(dim, 1×1)(x)
  Relu(&x);                                              // x = relu(x)
  for (const auto& rb : w.res) {                         // x = ResBlock(dim)(x), twice:
    std::vector<float> h = Conv2d(x, s, s, rb[0]);       //   h = Conv(3×3)(x)
    Relu(&h);                                            //   h = relu(h)
    h = Conv2d(h, s, s, rb[1]);                          //   h = Conv(3×3)(h)
    Relu(&h);                                            //   h = relu(h)
    h = Conv2d(h, s, s, rb[2]);                          //   h = Conv(1×1)(h)
    for (size_t i = 0; i < x.size(); ++i) x[i] += h[i];  // x = h + x
  }
  for (const MaskConv& up : w.up) {  // 4×: x = relu(ConvTranspose(4×4, stride 2)(x))
    x = ConvTranspose2x(x, s, s, up);
    s *= 2;
    Relu(&x);
  }
  return Conv2d(x, s, s, w.conv_out);  // x = Conv(1, 1×1)(x) → [64, 64, 1]
}

std::vector<float> ResizeBilinearF32(const float* in, int in_w, int in_h, int out_w, int out_h) {
  // ImagingResampleInner: horizontal pass (if the width changes), then vertical (if the height
  // does); the intermediate image is float32.
  std::vector<float> cur(in, in + static_cast<size_t>(in_w) * in_h);
  int w = in_w;
  if (out_w != in_w) {
    const Coeffs c = BilinearCoeffs(in_w, out_w);
    std::vector<float> next(static_cast<size_t>(out_w) * in_h);
    for (int y = 0; y < in_h; ++y) {
      for (int xx = 0; xx < out_w; ++xx) {
        const double* k = &c.k[static_cast<size_t>(xx) * c.ksize];
        double ss = 0.0;
        for (int x = 0; x < c.count[xx]; ++x) {
          ss += cur[static_cast<size_t>(y) * w + c.first[xx] + x] * k[x];
        }
        next[static_cast<size_t>(y) * out_w + xx] = static_cast<float>(ss);
      }
    }
    cur.swap(next);
    w = out_w;
  }
  if (out_h != in_h) {
    const Coeffs c = BilinearCoeffs(in_h, out_h);
    std::vector<float> next(static_cast<size_t>(w) * out_h);
    for (int yy = 0; yy < out_h; ++yy) {
      const double* k = &c.k[static_cast<size_t>(yy) * c.ksize];
      for (int x = 0; x < w; ++x) {
        double ss = 0.0;
        for (int y = 0; y < c.count[yy]; ++y) {
          ss += cur[static_cast<size_t>(c.first[yy] + y) * w + x] * k[y];
        }
        next[static_cast<size_t>(yy) * w + x] = static_cast<float>(ss);
      }
    }
    cur.swap(next);
  }
  return cur;
}

std::optional<InstanceMask> PlaceMaskInBox(const float* logits, int size,
                                           const std::array<int, 4>& loc, int image_w,
                                           int image_h) {
  for (int v : loc) {
    if (v < 0 || v > 1023) return std::nullopt;
  }
  if (image_w <= 0 || image_h <= 0) return std::nullopt;
  // bbox = tokens / 1023; y1, x1, y2, x2 = map(int, (y1 * h, x1 * w, y2 * h, x2 * w)).
  auto edge = [](int l, int extent) { return static_cast<int>(l / 1023.0 * extent); };
  const int y0 = edge(loc[0], image_h), x0 = edge(loc[1], image_w);
  const int y1 = edge(loc[2], image_h), x1 = edge(loc[3], image_w);
  if (x1 <= x0 || y1 <= y0) return std::nullopt;
  InstanceMask m;
  m.image_width = image_w;
  m.image_height = image_h;
  m.x0 = x0;
  m.y0 = y0;
  m.width = x1 - x0;
  m.height = y1 - y0;
  const std::vector<float> r = ResizeBilinearF32(logits, size, size, m.width, m.height);
  m.bits.resize(r.size());
  for (size_t i = 0; i < r.size(); ++i) m.bits[i] = r[i] > 0.0f ? 1 : 0;  // mi > 0.0
  return m;
}

// ---- MaskDecoder (include/ocular/tasks.h) ----

MaskDecoder::MaskDecoder(std::unique_ptr<Weights> weights) : weights_(std::move(weights)) {}
MaskDecoder::~MaskDecoder() = default;

StatusOr<std::unique_ptr<MaskDecoder>> MaskDecoder::Load(const std::string& path) {
  std::unique_ptr<Weights> w;
  const bool safetensors =
      path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
  if (safetensors) {
    OCULAR_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
    OCULAR_ASSIGN_OR_RETURN(w, BindMaskDecoder(f.tensors(), path));
  } else {
    OCULAR_ASSIGN_OR_RETURN(NpzFile f, NpzFile::Open(path));
    std::map<std::string, TensorView> views;
    for (const auto& [name, a] : f.arrays()) views.emplace(name, a.view());
    OCULAR_ASSIGN_OR_RETURN(w, BindMaskDecoder(views, path));
  }
  return std::unique_ptr<MaskDecoder>(new MaskDecoder(std::move(w)));
}

int MaskDecoder::codebook_size() const { return weights_->num_codes; }
int MaskDecoder::mask_size() const { return weights_->mask_size; }

StatusOr<std::vector<float>> MaskDecoder::DecodeLogits(const std::vector<int>& codes) const {
  if (!ValidCodes(codes, weights_->num_codes)) {
    return Error(StatusCode::kInvalidArgument, "seg", "a mask needs ", kCodesPerMask,
                 " codes in [0, ", weights_->num_codes, "); got ", codes.size(), " codes");
  }
  return DecodeMaskLogits(*weights_, codes.data());
}

int MaskDecoder::AddMasks(std::vector<Detection>* detections, int image_w, int image_h) const {
  int skipped = 0;
  for (Detection& d : *detections) {
    if (d.seg.empty()) continue;
    if (!ValidCodes(d.seg, weights_->num_codes)) {
      ++skipped;
      continue;
    }
    const std::vector<float> logits = DecodeMaskLogits(*weights_, d.seg.data());
    d.mask = PlaceMaskInBox(logits.data(), weights_->mask_size, d.loc, image_w, image_h);
  }
  return skipped;
}

std::string FindMaskModel(const std::string& model_dir) {
  std::error_code ec;
  for (const char* name : {"vae-oid.npz", "vae.safetensors"}) {
    const std::filesystem::path p = std::filesystem::path(model_dir) / name;
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return "";
}

StatusOr<std::string> AttachMasks(std::vector<Detection>* detections, const std::string& seg_model,
                                  const std::string& model_dir, int image_w, int image_h) {
  if (!HasSegCodes(*detections)) return std::string();
  const std::string path = seg_model.empty() ? FindMaskModel(model_dir) : seg_model;
  if (path.empty()) {
    return StrCat("warning: the answer has <seg> codes but no mask model was found (", model_dir,
                  "/vae-oid.npz or vae.safetensors); masks are not decoded. Pass --seg-model "
                  "PATH (docs/segmentation.md says where to get vae-oid.npz).");
  }
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<MaskDecoder> decoder, MaskDecoder::Load(path));
  const int skipped = decoder->AddMasks(detections, image_w, image_h);
  if (skipped > 0) {
    return StrCat("warning: ", skipped, " object(s) have <seg> codes outside the mask model's ",
                  decoder->codebook_size(), "-entry codebook (", path, "); no mask for them.");
  }
  return std::string();
}

}  // namespace ocular
