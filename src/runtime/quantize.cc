// QuantizeModel: an HF model directory -> one GGUF file (weights + config, tokenizer and
// preprocessor files), with llama.cpp's quantization recipes for the text decoder.
#include "ocular/quantize.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/check.h"
#include "core/file_io.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "io/model_files.h"
#include "kernels/quant/blocks.h"
#include "models/registry.h"

namespace ocular {

namespace {

// The side files a model directory may hold, embedded as ocular.file.<name>. Binary files
// (tokenizer.model) become u8 arrays, the rest strings.
constexpr const char* kSideFiles[] = {
    "config.json",
    "generation_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.json",
    "chat_template.jinja",
    "tokenizer.model",
};

bool ParseFormat(const std::string& name, WFormat* out) {
  for (int i = 0; i < kNumWFormats; ++i) {
    if (name == WFormatName(static_cast<WFormat>(i))) {
      *out = static_cast<WFormat>(i);
      return true;
    }
  }
  return false;
}

bool StartsWith(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

// "blk.12.attn_v.weight" -> 12; -1 for a name outside the decoder layers.
int LayerOf(const std::string& name) {
  if (!StartsWith(name, "blk.")) return -1;
  return std::atoi(name.c_str() + 4);
}

// llama.cpp's use_more_bits (llama-quant.cpp): the first and last eighth of the layers, and
// every third layer in between, get the higher-precision type in the _M recipes.
bool UseMoreBits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// The image path: the vision tower, the projector, and mllama's cross-attention K/V
// projections, which run once per image (at the prefill) and feed every later token.
bool IsImagePath(const std::string& name) {
  return StartsWith(name, "v.") || StartsWith(name, "mm.") ||
         name.find(".cross_attn_k_proj.") != std::string::npos ||
         name.find(".cross_attn_v_proj.") != std::string::npos;
}

struct Recipe {
  std::string type, vision;
  int n_layers = 0;
  bool tied = true;  // no separate output.weight: the embedding is the output projection

  // The format the recipe asks for (before any block-size fallback).
  WFormat Want(const std::string& name, bool matrix, WFormat stored) const {
    const bool vision_part = IsImagePath(name);
    WFormat f = stored;
    if (vision_part) {
      if (vision != "keep" && matrix) ParseFormat(vision, &f);
      return f;
    }
    if (!matrix) return stored;           // norms stay as stored
    if (ParseFormat(type, &f)) return f;  // f32 / bf16 / f16 / q8_0
    // The output projection (the embedding, when tied) keeps more bits: Q6_K (llama.cpp's
    // llama_tensor_get_type for every Q4 file type); an untied embedding takes the base type.
    if (name == "output.weight" || (tied && name == "token_embd.weight")) return WFormat::kQ6_K;
    if (type == "q4_0") return WFormat::kQ4_0;
    const bool more = (name.find(".attn_v.") != std::string::npos ||
                       name.find(".ffn_down.") != std::string::npos) &&
                      UseMoreBits(LayerOf(name), n_layers);
    return more ? WFormat::kQ6_K : WFormat::kQ4_K;
  }
};

// A format whose block fits rows of `cols` values: `want`, else llama.cpp's fallback for it
// (llama-quant.cpp: Q4_K -> Q5_0, Q6_K -> Q8_0; the K formats need rows of a multiple of 256
// values, the others of 32), else f16.
WFormat Fit(WFormat want, int64_t cols) {
  if (WFormatRowBytes(want, cols) >= 0) return want;
  const WFormat next = want == WFormat::kQ4_K   ? WFormat::kQ5_0
                       : want == WFormat::kQ6_K ? WFormat::kQ8_0
                                                : WFormat::kF16;
  return WFormatRowBytes(next, cols) >= 0 ? next : WFormat::kF16;
}

struct Planned {
  std::string name;
  Shape shape;
  Matrix source;  // rows of the stored tensor (vectors too, as a [rows, last dim] matrix)
  WFormat format, wanted;
};

bool IsFloat(WFormat f) { return f == WFormat::kF32 || f == WFormat::kBF16 || f == WFormat::kF16; }

// The options a run can take: a known --type and --vision, a thread count in range.
Status CheckOptions(const QuantizeOptions& o) {
  static constexpr const char* kTypes[] = {"q8_0", "q4_0", "q4_k_m", "f32", "bf16", "f16"};
  static constexpr const char* kVision[] = {"keep", "f32", "bf16", "f16", "q8_0"};
  if (std::find(std::begin(kTypes), std::end(kTypes), o.type) == std::end(kTypes)) {
    return Error(StatusCode::kInvalidArgument, "quantize", "unknown --type '", o.type,
                 "' (q8_0, q4_0, q4_k_m, f32, bf16, f16)");
  }
  if (std::find(std::begin(kVision), std::end(kVision), o.vision) == std::end(kVision)) {
    return Error(StatusCode::kInvalidArgument, "quantize", "unknown --vision '", o.vision,
                 "' (keep, f32, bf16, f16, q8_0)");
  }
  if (o.threads < 0 || o.threads > 1024) {
    return Error(StatusCode::kInvalidArgument, "quantize", "threads must be in [0, 1024]");
  }
  return Status::Ok();
}

// Every weight of the model with the format the recipe gives it (fitted to its rows).
StatusOr<std::vector<Planned>> PlanTensors(const VlModel& model, const Recipe& recipe,
                                           const std::string& input) {
  std::vector<Planned> plan;
  OCULAR_RETURN_IF_ERROR(model.ForEachWeight([&](const std::string& name, const Shape& shape,
                                                 const Matrix* m, const TensorView* v) -> Status {
    Planned p;
    p.name = name;
    p.shape = shape;
    if (m != nullptr) {
      p.source = *m;
    } else {
      const int64_t cols = shape.empty() ? 1 : shape.back();
      p.source = MatrixFromView(*v, v->numel() / cols, cols);
    }
    if (!IsFloat(p.source.format)) {
      return Error(StatusCode::kInvalidArgument, "quantize", input, ": tensor '", name,
                   "' is already quantized");
    }
    // A tensor's GGUF rows are its last dimension (a conv [D, C, P, P] has rows of P).
    const int64_t ne0 = shape.empty() ? 1 : shape.back();
    p.wanted = recipe.Want(name, m != nullptr, p.source.format);
    p.format = Fit(p.wanted, ne0);
    plan.push_back(std::move(p));
    return Status::Ok();
  }));
  return plan;
}

// The file's metadata: architecture, name, the recipe, and the model's side files
// (config.json, tokenizer files) under ocular's prefix.
Status AddMetadata(const QuantizeOptions& o, const ModelSpec& spec, const FileSet& side,
                   GgufWriter* w) {
  w->SetString("general.architecture", spec.family);
  w->SetString("general.name",
               std::filesystem::path(o.input).lexically_normal().filename().string());
  w->SetU32("general.quantization_version", 2);
  w->SetString("ocular.quantize.type", o.type);
  w->SetString("ocular.quantize.vision", o.vision);
  for (const char* name : kSideFiles) {
    if (!side.Has(name)) continue;
    OCULAR_ASSIGN_OR_RETURN(std::string bytes, side.Read(name, kMaxTokenizerFileBytes, "quantize"));
    if (std::string_view(name) == "tokenizer.model") {
      w->SetBytes(kGgufFilePrefix + std::string(name), bytes);
    } else {
      w->SetString(kGgufFilePrefix + std::string(name), bytes);
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<QuantizeReport> QuantizeModel(const QuantizeOptions& o) {
  OCULAR_RETURN_IF_ERROR(CheckOptions(o));
  OCULAR_ASSIGN_OR_RETURN(ModelFiles files, ModelFiles::Open(o.input));
  {  // Writing over a file the model is read from (through the rename) would destroy it.
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(o.output, ec)) {
      for (const auto& entry : fs::directory_iterator(o.input, ec)) {
        if (fs::equivalent(entry.path(), o.output, ec)) {
          return Error(StatusCode::kInvalidArgument, "quantize", o.output,
                       ": is a file of the input model; choose another output path");
        }
      }
    }
  }
  if (files.gguf != nullptr) {
    return Error(StatusCode::kInvalidArgument, "quantize", o.input,
                 ": is a GGUF file; quantize from the model's HF directory");
  }
  // Loading validates the whole model (config, every tensor's presence and shape).
  OCULAR_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(o.input));
  const ModelSpec& spec = loaded.model->spec();

  Recipe recipe{o.type, o.vision, static_cast<int>(spec.layers.size())};
  OCULAR_RETURN_IF_ERROR(loaded.model->ForEachWeight(
      [&](const std::string& name, const Shape&, const Matrix*, const TensorView*) -> Status {
        if (name == "output.weight") recipe.tied = false;
        return Status::Ok();
      }));
  OCULAR_ASSIGN_OR_RETURN(std::vector<Planned> plan, PlanTensors(*loaded.model, recipe, o.input));
  QuantizeReport report;
  GgufWriter w;
  OCULAR_RETURN_IF_ERROR(AddMetadata(o, spec, *files.files, &w));
  for (const Planned& p : plan) w.AddTensor(p.name, p.shape, p.format);

  ThreadPool pool(o.threads > 0 ? o.threads : ThreadPool::DefaultThreadCount());
  int done = 0;
  Status written = w.Write(o.output, [&](size_t i, std::byte* out, size_t nbytes) -> Status {
    const Planned& p = plan[i];
    const Matrix& src = p.source;
    const size_t out_row = static_cast<size_t>(WFormatRowBytes(p.format, src.cols));
    OCULAR_CHECK(out_row * static_cast<size_t>(src.rows) == nbytes);
    pool.ParallelFor(src.rows, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(src.cols));
      for (int64_t r = r0; r < r1; ++r) {
        quant::DequantizeRow(src.format, src.row(r), src.cols, row.data());
        quant::QuantizeRow(p.format, row.data(), src.cols, out + r * out_row);
      }
    });
    QuantizedTensor t;
    t.name = p.name;
    t.shape = p.shape;
    t.format = WFormatName(p.format);
    if (p.format != p.wanted) {
      t.wanted = WFormatName(p.wanted);
      ++report.fallbacks;
    }
    t.bytes = nbytes;
    report.input_bytes += src.bytes();
    report.output_bytes += nbytes;
    report.tensors.push_back(std::move(t));
    if (o.progress) o.progress(++done, static_cast<int>(plan.size()));
    return Status::Ok();
  });
  OCULAR_RETURN_IF_ERROR(written);
  return report;
}

}  // namespace ocular
