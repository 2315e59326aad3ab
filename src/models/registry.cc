#include "models/registry.h"

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "io/model_files.h"
#include "models/gemma3/gemma3.h"
#include "models/gemma3/llamacpp_gguf.h"
#include "models/gemma3/processor.h"
#include "models/mllama/mllama.h"
#include "models/mllama/processor.h"
#include "models/paligemma/paligemma.h"
#include "models/paligemma/processor.h"
#include "models/qwen2vl/llamacpp_gguf.h"
#include "models/qwen2vl/processor.h"
#include "models/qwen2vl/qwen2vl.h"
#include "models/qwen2vl/qwen3vl.h"

namespace ocular {

namespace {

// A family's model and its processor (built from the model's config). `resize` must be
// empty: the processor's CheckResize refuses it otherwise.
template <typename Model, typename Processor>
StatusOr<LoadedModel> LoadFamily(const ModelFiles& files, const ImageResize& resize) {
  LoadedModel out;
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(files));
  OCULAR_ASSIGN_OR_RETURN(out.processor, Processor::Load(*files.files, model->config()));
  OCULAR_RETURN_IF_ERROR(out.processor->CheckResize(resize));
  out.model = std::move(model);
  return out;
}

constexpr auto LoadPaliGemma = LoadFamily<paligemma::PaliGemma, paligemma::PaliGemmaProcessor>;
constexpr auto LoadGemma3 = LoadFamily<gemma3::Gemma3, gemma3::Gemma3Processor>;
constexpr auto LoadMllama = LoadFamily<mllama::Mllama, mllama::MllamaProcessor>;

const qwen2vl::Qwen2VLConfig& ProcessorConfig(const qwen2vl::Qwen2VLConfig& c) { return c; }
qwen2vl::Qwen2VLConfig ProcessorConfig(const qwen2vl::Qwen3VLConfig& c) {
  return c.ProcessorConfig();
}

// A Qwen-VL model and Qwen2VLProcessor, both from preprocessor_config.json WithResize(resize):
// the workspace is planned for the images the processor makes.
template <typename Model>
StatusOr<LoadedModel> LoadQwen(const ModelFiles& files, const ImageResize& resize) {
  LoadedModel out;
  OCULAR_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(files, resize));
  OCULAR_ASSIGN_OR_RETURN(
      out.processor,
      qwen2vl::Qwen2VLProcessor::Load(*files.files, ProcessorConfig(model->config()), resize));
  out.model = std::move(model);
  return out;
}

constexpr auto LoadQwen2VL = LoadQwen<qwen2vl::Qwen2VL>;
constexpr auto LoadQwen3VL = LoadQwen<qwen2vl::Qwen3VL>;

// A GGUF file converted by llama.cpp (and its mmproj file, if given): the side files of the
// family its architecture names.
StatusOr<std::unique_ptr<FileSet>> AdaptLlamaCppGguf(const GgufFile& gguf, const GgufFile* mmproj) {
  StatusOr<std::string_view> arch = gguf.GetString("general.architecture");
  if (arch.ok() && *arch == "gemma3") return gemma3::LlamaCppFiles(gguf, mmproj);
  if (arch.ok() && (*arch == "qwen2vl" || *arch == "qwen3vl")) {
    return qwen2vl::LlamaCppFiles(gguf, mmproj);
  }
  return Error(StatusCode::kUnimplemented, "gguf", gguf.origin(),
               ": a GGUF model of architecture '",
               arch.ok() ? std::string(*arch) : std::string("?"),
               "' without ocular's embedded configuration (", kGgufFilePrefix,
               "config.json); ocular runs GGUF files written by `ocular quantize` and llama.cpp's ",
               "Gemma 3, Qwen2-VL / Qwen2.5-VL and Qwen3-VL files (architectures 'gemma3', ",
               "'qwen2vl', 'qwen3vl')");
}

struct Family {
  const char* model_type;
  StatusOr<LoadedModel> (*load)(const ModelFiles& files, const ImageResize& resize);
};

constexpr Family kFamilies[] = {
    {"paligemma", LoadPaliGemma}, {"gemma3", LoadGemma3},  // Gemma3ForConditionalGeneration
    {"gemma3_text", LoadGemma3},                           // Gemma3ForCausalLM
    {"mllama", LoadMllama},       // MllamaForConditionalGeneration (Llama 3.2 Vision)
    {"qwen2_vl", LoadQwen2VL},    // Qwen2VLForConditionalGeneration
    {"qwen2_5_vl", LoadQwen2VL},  // Qwen2_5_VLForConditionalGeneration
    {"qwen3_vl", LoadQwen3VL},    // Qwen3VLForConditionalGeneration (dense)
};

}  // namespace

std::vector<std::string> RegisteredModelTypes() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) out.emplace_back(f.model_type);
  return out;
}

StatusOr<LoadedModel> LoadModel(const std::string& model_path, const std::string& mmproj,
                                const ImageResize& resize) {
  OCULAR_ASSIGN_OR_RETURN(ModelFiles files,
                          ModelFiles::Open(model_path, AdaptLlamaCppGguf, mmproj));
  const std::string path = files.files->Where("config.json");
  OCULAR_ASSIGN_OR_RETURN(std::string text,
                          files.files->Read("config.json", kMaxConfigFileBytes, "config"));
  StatusOr<nlohmann::json> parsed = ParseJson(text, path, "config");
  if (!parsed
           .ok()) {  // "[config] path: invalid JSON at ..." -> "... not a JSON object: invalid ..."
    std::string message = parsed.status().message();
    const size_t at = message.find("invalid JSON");
    if (at != std::string::npos) message.insert(at, "not a JSON object: ");
    return Status(parsed.status().code(), message);
  }
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Error(StatusCode::kDataLoss, "config", path, ": not a JSON object");
  const auto it = j.find("model_type");
  if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) {
    return Error(StatusCode::kDataLoss, "config", path, ": no model_type (a string naming the ",
                 "architecture, e.g. \"paligemma\")");
  }
  const std::string type = it->get<std::string>();
  for (const Family& f : kFamilies) {
    if (type == f.model_type) return f.load(files, resize);
  }
  std::string known;
  for (const Family& f : kFamilies) known += std::string(known.empty() ? "" : ", ") + f.model_type;
  return Error(StatusCode::kUnimplemented, "config", path, ": model_type '", type,
               "' is not supported (supported: ", known, ")");
}

}  // namespace ocular
