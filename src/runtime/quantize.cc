// QuantizeModel: an HF model directory -> one GGUF file (weights + config, tokenizer and
// preprocessor files), or llama.cpp's text GGUF + mmproj (Gemma 3), with llama.cpp's
// quantization recipes for the text decoder; or llama.cpp's text GGUF re-quantized.
#include "ocular/quantize.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/check.h"
#include "core/file_io.h"
#include "core/thread_pool.h"
#include "core/weight_memory.h"
#include "io/gguf.h"
#include "io/model_files.h"
#include "kernels/quant/blocks.h"
#include "models/gemma3/llamacpp_write.h"
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
  bool matrix = false;    // a weight matrix (not a norm, bias or embedding table vector)
  bool plus_one = false;  // written as 1 + w (llama.cpp's Gemma 3 norms)
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
    p.matrix = m != nullptr;
    p.wanted = recipe.Want(name, p.matrix, p.source.format);
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

// llama.cpp's general.file_type (llama_ftype) of a --type.
uint32_t LlamaFileType(const std::string& type) {
  if (type == "f32") return 0;
  if (type == "f16") return 1;
  if (type == "q4_0") return 2;
  if (type == "q8_0") return 7;
  if (type == "q4_k_m") return 15;
  return 32;  // bf16
}

// Writes `plan` (tensor i of `w` is plan[i]) to `path`, adding each tensor to `report`.
Status WritePlanned(const std::string& path, const GgufWriter& w, const std::vector<Planned>& plan,
                    const QuantizeOptions& o, int total, QuantizeReport* report) {
  ThreadPool pool(o.threads > 0 ? o.threads : ThreadPool::DefaultThreadCount());
  return w.Write(path, [&](size_t i, std::byte* out, size_t nbytes) -> Status {
    const Planned& p = plan[i];
    const Matrix& src = p.source;
    const size_t out_row = static_cast<size_t>(WFormatRowBytes(p.format, src.cols));
    OCULAR_CHECK(out_row * static_cast<size_t>(src.rows) == nbytes);
    pool.ParallelFor(src.rows, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(src.cols));
      for (int64_t r = r0; r < r1; ++r) {
        quant::DequantizeRow(src.format, src.row(r), src.cols, row.data());
        if (p.plus_one) {
          for (float& x : row) x += 1.0f;
        }
        quant::QuantizeRow(p.format, row.data(), src.cols, out + r * out_row);
      }
    });
    QuantizedTensor t;
    t.name = p.name;
    t.shape = p.shape;
    t.format = WFormatName(p.format);
    if (p.format != p.wanted) {
      t.wanted = WFormatName(p.wanted);
      ++report->fallbacks;
    }
    t.bytes = nbytes;
    report->input_bytes += src.bytes();
    report->output_bytes += nbytes;
    report->tensors.push_back(std::move(t));
    if (o.progress) o.progress(static_cast<int>(report->tensors.size()), total);
    return Status::Ok();
  });
}

// Writing over a file the model is read from (through the rename) would destroy it.
Status CheckOutputsAreNotInputs(const QuantizeOptions& o) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs = {o.input};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(o.input, ec)) inputs.push_back(entry.path());
  if (!o.mmproj.empty()) inputs.push_back(o.mmproj);
  for (const std::string& out : {o.output, o.mmproj_output}) {
    if (out.empty() || !fs::exists(out, ec)) continue;
    for (const fs::path& in : inputs) {
      if (fs::equivalent(in, out, ec)) {
        return Error(StatusCode::kInvalidArgument, "quantize", out,
                     ": is a file of the input model; choose another output path");
      }
    }
  }
  if (!o.mmproj_output.empty() && o.mmproj_output == o.output) {
    return Error(StatusCode::kInvalidArgument, "quantize", o.output,
                 ": the text file and the mmproj need two paths");
  }
  return Status::Ok();
}

// ocular's layout: one GGUF with the side files.
StatusOr<QuantizeReport> QuantizeOcular(const QuantizeOptions& o, const ModelSpec& spec,
                                        const FileSet& side, const std::vector<Planned>& plan) {
  QuantizeReport report;
  GgufWriter w;
  OCULAR_RETURN_IF_ERROR(AddMetadata(o, spec, side, &w));
  for (const Planned& p : plan) w.AddTensor(p.name, p.shape, p.format);
  OCULAR_RETURN_IF_ERROR(
      WritePlanned(o.output, w, plan, o, static_cast<int>(plan.size()), &report));
  return report;
}

// The mmproj's matrix format: f16 as the converter's --outtype f16 (and any quantized text
// type), f32 with --type f32 or --vision f32.
StatusOr<WFormat> PairVisionFormat(const QuantizeOptions& o) {
  if (o.vision == "f32" || (o.vision == "keep" && o.type == "f32")) return WFormat::kF32;
  if (o.vision == "keep" || o.vision == "f16") return WFormat::kF16;
  return Error(StatusCode::kUnimplemented, "quantize", "--vision ", o.vision,
               " with --mmproj-out: llama.cpp's mmproj files hold the vision tower in f16 or ",
               "f32 (keep: f16, or f32 with --type f32)");
}

void AddGeneral(const QuantizeOptions& o, const char* arch, const char* type, uint32_t file_type,
                GgufWriter* w) {
  w->SetString("general.architecture", arch);
  w->SetString("general.type", type);
  w->SetString("general.name",
               std::filesystem::path(o.input).lexically_normal().filename().string());
  w->SetU32("general.file_type", file_type);
  w->SetU32("general.quantization_version", 2);
}

// llama.cpp's two files (models/gemma3/llamacpp_write.h) from an HF directory.
StatusOr<QuantizeReport> QuantizeLlamaCppPair(const QuantizeOptions& o, const ModelSpec& spec,
                                              const FileSet& side, std::vector<Planned> plan) {
  if (spec.family != "gemma3") {
    return Error(StatusCode::kUnimplemented, "quantize", o.input,
                 ": writing llama.cpp's text + mmproj files (--mmproj-out) is implemented for ",
                 "Gemma 3, not for ", spec.architecture,
                 " (convert it with llama.cpp's converter, then re-quantize its text file here)");
  }
  OCULAR_ASSIGN_OR_RETURN(const WFormat vision, PairVisionFormat(o));
  GgufWriter text, mmproj;
  AddGeneral(o, "gemma3", "model", LlamaFileType(o.type), &text);
  AddGeneral(o, "clip", "mmproj", vision == WFormat::kF32 ? 0 : 1, &mmproj);
  OCULAR_RETURN_IF_ERROR(gemma3::AddLlamaCppMetadata(side, &text, &mmproj));
  std::vector<Planned> parts[2];
  for (Planned& p : plan) {
    const gemma3::LlamaCppTensorRule rule = gemma3::LlamaCppTensor(p.name);
    if (p.name == "output.weight") {
      return Error(StatusCode::kUnimplemented, "quantize", o.input,
                   ": llama.cpp's Gemma 3 files cannot express an untied output projection");
    }
    p.plus_one = rule.plus_one;
    if (rule.forced) {
      p.wanted = p.format = *rule.forced;
    } else if (rule.mmproj || !p.matrix) {
      p.wanted = p.format = rule.mmproj && p.matrix ? vision : WFormat::kF32;
    }
    parts[rule.mmproj ? 1 : 0].push_back(std::move(p));
  }
  QuantizeReport report;
  const int total = static_cast<int>(parts[0].size() + parts[1].size());
  for (int f = 0; f < 2; ++f) {
    GgufWriter& w = f == 0 ? text : mmproj;
    for (const Planned& p : parts[f]) w.AddTensor(p.name, p.shape, p.format);
    OCULAR_RETURN_IF_ERROR(
        WritePlanned(f == 0 ? o.output : o.mmproj_output, w, parts[f], o, total, &report));
  }
  return report;
}

// The text file of a llama.cpp pair, re-quantized: its metadata as they are (the file type
// aside), every matrix in the recipe's format, the rest as stored.
StatusOr<QuantizeReport> RequantizeLlamaCpp(const QuantizeOptions& o) {
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> g, GgufFile::Open(o.input));
  if (g->Find(std::string(kGgufFilePrefix) + "config.json") != nullptr) {
    return Error(StatusCode::kInvalidArgument, "quantize", o.input,
                 ": is a GGUF file written by ocular; quantize from the model's HF directory");
  }
  StatusOr<std::string_view> arch_key = g->GetString("general.architecture");
  const std::string arch = arch_key.ok() ? std::string(*arch_key) : "";
  if (arch == "clip") {
    return Error(StatusCode::kInvalidArgument, "quantize", o.input,
                 ": is an mmproj file; its vision tower is used as it is (f16 or f32, as in ",
                 "llama.cpp): re-quantize the text file");
  }
  if (arch != "gemma3" && arch != "qwen2vl" && arch != "qwen3vl") {
    return Error(StatusCode::kUnimplemented, "quantize", o.input, ": re-quantizing llama.cpp's '",
                 arch, "' files is not implemented (gemma3, qwen2vl, qwen3vl)");
  }
  if (!o.mmproj_output.empty()) {
    return Error(StatusCode::kInvalidArgument, "quantize", o.input,
                 ": --mmproj-out with a llama.cpp text file: the pair's mmproj is used as it is");
  }
  StatusOr<uint64_t> layers = g->GetUint(arch + ".block_count");
  Recipe recipe{o.type, o.vision, layers.ok() ? static_cast<int>(*layers) : 0,
                g->FindTensor("output.weight") == nullptr};
  std::vector<Planned> plan;
  for (const GgufTensor& t : g->tensors()) {
    WFormat f;
    if (!WFormatFromGgml(t.type, &f) || !IsFloat(f)) {
      return Error(StatusCode::kInvalidArgument, "quantize", o.input, ": tensor '", t.name,
                   "' is already quantized (", FindGgmlType(t.type)->name,
                   "): re-quantize from the f32 / f16 file");
    }
    Planned p;
    p.name = t.name;
    p.shape = t.shape();
    p.matrix = t.ne.size() >= 2;
    const int64_t cols = t.ne[0];
    p.source = MatrixFromBlocks(t.data, f,
                                static_cast<int64_t>(t.nbytes) / WFormatRowBytes(f, cols), cols);
    p.wanted = recipe.Want(t.name, p.matrix, f);
    p.format = Fit(p.wanted, cols);
    plan.push_back(std::move(p));
  }
  // Loading checks the pair is one ocular runs (Qwen2-VL's text file loads with its mmproj).
  const NoWeightCopies read_once;
  OCULAR_RETURN_IF_ERROR(LoadModel(o.input, o.mmproj).status());
  GgufWriter w;
  for (const auto& [key, value] : g->metadata()) {
    if (key != "general.file_type" && key != "general.quantization_version") w.SetValue(key, value);
  }
  w.SetU32("general.file_type", LlamaFileType(o.type));
  w.SetU32("general.quantization_version", 2);
  for (const Planned& p : plan) w.AddTensor(p.name, p.shape, p.format);
  QuantizeReport report;
  OCULAR_RETURN_IF_ERROR(
      WritePlanned(o.output, w, plan, o, static_cast<int>(plan.size()), &report));
  return report;
}

}  // namespace

StatusOr<QuantizeReport> QuantizeModel(const QuantizeOptions& o) {
  OCULAR_RETURN_IF_ERROR(CheckOptions(o));
  OCULAR_RETURN_IF_ERROR(CheckOutputsAreNotInputs(o));
  if (GgufFile::HasMagic(o.input)) return RequantizeLlamaCpp(o);
  if (!o.mmproj.empty()) {
    return Error(StatusCode::kInvalidArgument, "quantize", o.input,
                 ": --mmproj goes with a llama.cpp text GGUF, not a model directory");
  }
  OCULAR_ASSIGN_OR_RETURN(ModelFiles files, ModelFiles::Open(o.input));
  // Loading validates the whole model (config, every tensor's presence and shape); the
  // weights are read once, from the mapping.
  const NoWeightCopies read_once;
  OCULAR_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(o.input));
  const ModelSpec& spec = loaded.model->spec();

  Recipe recipe{o.type, o.vision, static_cast<int>(spec.layers.size())};
  OCULAR_RETURN_IF_ERROR(loaded.model->ForEachWeight(
      [&](const std::string& name, const Shape&, const Matrix*, const TensorView*) -> Status {
        if (name == "output.weight") recipe.tied = false;
        return Status::Ok();
      }));
  OCULAR_ASSIGN_OR_RETURN(std::vector<Planned> plan, PlanTensors(*loaded.model, recipe, o.input));
  if (!o.mmproj_output.empty()) {
    return QuantizeLlamaCppPair(o, spec, *files.files, std::move(plan));
  }
  return QuantizeOcular(o, spec, *files.files, plan);
}

}  // namespace ocular
